"""The app as the snapshot tests see it: a fixed synthetic store, a fixed title, no stages.

Like Posting's dedicated entry app: nothing from the developer's environment (store path,
$USER, config, stage modules) reaches the picture. ``textual run tests/snapshots/snapshot_app.py``
shows the same app by hand.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from pipeline.synthetic import SyntheticSpec, build_synthetic_store
from unspecific_tui.app import UnspecificApp

SPEC = SyntheticSpec(n_instructions=8, seed=7)


def make_app(folder: Path) -> UnspecificApp:
    path = Path(folder) / "store.sqlite"
    if not path.exists():
        build_synthetic_store(path, SPEC)
    return UnspecificApp(path, stages={}, display_path="store.sqlite", annotator="snapshot", config_path=None)


if __name__ == "__main__":  # pragma: no cover
    make_app(Path(tempfile.mkdtemp())).run()
