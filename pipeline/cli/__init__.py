"""The command line: `unspecific` opens the app; subcommands run the stages headless.

Each subcommand lives in its own module here with ``register(subparsers)``; modules import
only argparse at load time so that ``unspecific --help`` stays fast (heavy libraries load
inside the command that needs them).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Module names, in the order the help lists them.
COMMANDS = ["init", "config", "corpus", "pair", "build", "evaluate", "report", "export", "local", "cache", "tui", "demo"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unspecific",
        description="Build and audit instruction-following writing benchmarks (the UNSPECIFIC method). "
        "With no command, opens the app on the store.",
    )
    parser.add_argument("--store", default=None, help="store file (default: store.sqlite, or $UNSPECIFIC_STORE)")
    parser.add_argument("--config", default=None, help="config file (default: unspecific.toml if present)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"pipeline.cli.{name}_cmd")
        except ModuleNotFoundError as exc:
            if exc.name == f"pipeline.cli.{name}_cmd":
                continue  # a command not built yet
            raise
        module.register(sub)
    return parser


def store_path(args: argparse.Namespace) -> str:
    return args.store or os.environ.get("UNSPECIFIC_STORE") or "store.sqlite"


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args.command = "tui"
        from . import tui_cmd

        args.func = tui_cmd.run
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted; finished work is stored, run the same command again to resume", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - users see their errors as panels, bugs as tracebacks
        from ..errors import UnspecificError

        if isinstance(exc, UnspecificError):
            from .common import print_error

            print_error(exc)
            return 2
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
