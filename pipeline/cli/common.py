"""Helpers shared by the subcommands: opening the store and config, printing errors."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import Config
    from ..errors import UnspecificError
    from ..store import Store


def open_store_from(args: argparse.Namespace, *, create: bool = True, readonly: bool = False,
                    reading: bool = False) -> Store:
    """``reading``: the command only reads, so a store in a read-only place is opened read-only
    rather than refused (the kept score totals are then computed in memory)."""
    from pathlib import Path

    from ..store import open_store, writable_place
    from . import store_path

    path = Path(store_path(args))
    if reading and path.exists() and not writable_place(path):
        readonly = True
    return open_store(path, create=create, readonly=readonly)


def load_config_from(args: argparse.Namespace) -> Config:
    from ..config import load_config

    return load_config(args.config)


def print_error(exc: UnspecificError) -> None:
    from rich.console import Console
    from rich.panel import Panel
    from rich.text import Text

    err = Console(stderr=True)
    if not err.is_terminal:
        # Piped or logged: one plain, unwrapped block, so a path or URL stays whole for grep
        # and for whoever reads the log (a panel wraps at the console's width).
        err.print(f"{exc.title}: {exc.msg}", markup=False, highlight=False, soft_wrap=True)
        return
    # Text, not markup: messages hold brackets ("[endpoints.gpt]", "'.[local]'") rich would eat.
    err.print(Panel(Text(exc.msg), title=exc.title, border_style="red", expand=False))


def console():
    from rich.console import Console

    return Console()


def parse_csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def nonempty_csv(value: str) -> list[str]:
    """A comma-separated list that must name something: `--conditions ,` is a mistake, not
    "every condition" (and "none" is a real condition, so never say "got none")."""
    names = parse_csv(value)
    if not names:
        raise argparse.ArgumentTypeError(f"the list is empty ({value!r}): give one or more names, comma-separated")
    return names


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {number}")
    return number


def ratio(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {value!r}") from None
    if not 0 < number < 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1 (exclusive), got {number}")
    return number
