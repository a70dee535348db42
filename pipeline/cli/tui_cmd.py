"""`unspecific tui [--store PATH]` (or plain `unspecific`): open the app on a store."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tui", help="open the app on the store (the default with no command)")
    p.add_argument("--store", dest="tui_store", default=None, help="store file (same as the global --store)")
    p.add_argument("--run", default=None, help="select this run at start")
    p.add_argument("--annotator", default=None, help="name saved with your labels (default: $USER)")
    p.add_argument("--read-only", action="store_true",
                   help="open the store read-only (view while a build writes)")
    p.set_defaults(func=run)


def make_app(args: argparse.Namespace) -> Any:
    """The UnspecificApp the command opens (bench/first_screen.py times this one, headless).
    Typed Any: the CLI names nothing of the app's at load time (tests/test_layers.py)."""
    from pathlib import Path

    from pipeline.cli import store_path
    from pipeline.core.errors import StoreError

    path = getattr(args, "tui_store", None) or store_path(args)
    if not Path(path).exists():
        raise StoreError(f"{path}: no store here (run `unspecific init`, `make demo`, or pass --store)")
    from unspecific_tui.app import UnspecificApp

    return UnspecificApp(path, config_path=getattr(args, "config", None), run_id=getattr(args, "run", None),
                         annotator=getattr(args, "annotator", None),
                         readonly=getattr(args, "read_only", False))


def run(args: argparse.Namespace) -> int:
    make_app(args).run()
    return 0
