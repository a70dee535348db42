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
COMMANDS = ["init", "config", "corpus", "import", "pair", "build", "evidence", "evaluate", "report",
            "export", "validate",
            "local", "cache", "batch", "tui", "serve", "demo"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unspecific",
        description="Build and audit instruction-following writing benchmarks (the UNSPECIFIC method). "
        "With no command, opens the app on the store.",
    )
    parser.add_argument("--store", default=None,
                        help="store file (default: store.sqlite, or $UNSPECIFIC_STORE)")
    parser.add_argument("--config", default=None, help="config file (default: unspecific.toml if present)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        # Every listed command is required: a module that fails to import is a bug, never a
        # command quietly missing from the help.
        module = importlib.import_module(f"pipeline.cli.{name}_cmd")
        module.register(sub)
    for path in CREATE_ON_REQUEST:
        _subparser(sub, path).add_argument(
            "--create", action="store_true",
            help="create the store if it is missing (without it, a missing store is "
            "an error: a mistyped --store creates nothing)")
    return parser


# Commands that write a store but never create one unless given --create (init, corpus add and
# import create theirs; commands that only read never do).
CREATE_ON_REQUEST = [("pair",), ("build",), ("evaluate",), ("naturalness",), ("batch",), ("validate", "plan"),
                     ("validate", "import"), ("validate", "judge-plan")]


def _subparser(sub: argparse._SubParsersAction, path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = sub.choices[path[0]]
    for name in path[1:]:
        actions = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = actions.choices[name]
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
        from pipeline.cli import tui_cmd

        args.func = tui_cmd.run
    import shlex

    from pipeline.cli.common import claims_mark, release_claims

    args.command_line = shlex.join(["unspecific", *(sys.argv[1:] if argv is None else argv)])
    mark = claims_mark()
    try:
        return _run(args)
    finally:
        release_claims(mark)


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted; finished work is stored, run the same command again to resume", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - users see their errors as panels, bugs as tracebacks
        from pipeline.core.errors import UnspecificError

        if isinstance(exc, UnspecificError):
            from pipeline.cli.common import print_error

            print_error(exc)
            return 2
        store_exc = _store_failure(exc, args)
        if store_exc is not None:
            from pipeline.cli.common import print_error

            print_error(store_exc)
            return 2
        raise


# SQLite errors a user's file or disk causes (damage found past opening, a read-only or full
# disk, another writer): shown as a store error naming the file. Any other is a bug: traceback.
_STORE_TROUBLE = ("malformed", "not a database", "readonly", "read-only", "disk i/o",
                  "disk is full", "locked",
                  "unable to open")


def _store_failure(exc: BaseException, args: argparse.Namespace):  # noqa: ANN202 - StoreError | None
    import sqlite3

    if not isinstance(exc, sqlite3.DatabaseError) or not any(t in str(exc).lower() for t in _STORE_TROUBLE):
        return None
    from pipeline.core.errors import StoreError

    hint = "the file is damaged: restore it from a copy" if "malformed" in str(exc).lower() else \
        "check the file's permissions, the free disk space, and that no other program " \
        "holds it; work finished " \
        "before this is stored"
    return StoreError(f"{store_path(args)}: {exc} ({hint})")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
