"""Every stored screen snapshot belongs to a test that still exists.

syrupy fails a serial run on an unused snapshot, but under pytest-xdist (`make test` runs
`-n 2`) it skips that check: no worker sees every test. This restores it for the suite's
snapshot folders: a test renamed or deleted must take its .svg with it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SNAPSHOTS = Path(__file__).parent / "__snapshots__"


def defined_tests(module: Path) -> set[str]:
    """The test functions a module defines once imported (some are made in a loop)."""
    spec = importlib.util.spec_from_file_location(f"_snapshot_owner_{module.stem}", module)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return {name for name, value in vars(loaded).items() if name.startswith("test_") and callable(value)}


def stale_snapshots(snapshots: Path) -> list[str]:
    """Snapshot files whose test module or test function is gone (a parametrised test's files
    are named `test_name[id].svg`)."""
    stale = []
    for folder in sorted(p for p in snapshots.iterdir() if p.is_dir()):
        module = snapshots.parent / f"{folder.name}.py"
        names = defined_tests(module) if module.exists() else set()
        for svg in sorted(folder.glob("*.svg")):
            if svg.stem.split("[", 1)[0] not in names:
                stale.append(f"{folder.name}/{svg.name}")
    return stale


def test_every_snapshot_has_its_test():
    assert any(SNAPSHOTS.glob("*/*.svg"))
    assert stale_snapshots(SNAPSHOTS) == []


def test_a_leftover_snapshot_is_found(tmp_path):
    (tmp_path / "test_screens.py").write_text(
        "def test_kept(snap_compare):\n    pass\n\nglobals()['test_made'] = test_kept\n", encoding="utf-8")
    folder = tmp_path / "__snapshots__" / "test_screens"
    folder.mkdir(parents=True)
    for name in ("test_kept.svg", "test_kept[wide].svg", "test_made.svg", "test_renamed.svg"):
        (folder / name).write_text("<svg/>", encoding="utf-8")
    (tmp_path / "__snapshots__" / "test_gone").mkdir()
    (tmp_path / "__snapshots__" / "test_gone" / "test_x.svg").write_text("<svg/>", encoding="utf-8")
    assert stale_snapshots(tmp_path / "__snapshots__") == ["test_gone/test_x.svg",
                                                           "test_screens/test_renamed.svg"]
