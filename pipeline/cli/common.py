"""Helpers shared by the subcommands: opening the store and config, printing errors."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from pipeline.core.config import Config
    from pipeline.core.errors import UnspecificError
    from pipeline.store.database import Store, WriterClaim

N = TypeVar("N", int, float)


def open_store_from(args: argparse.Namespace, *, create: bool = False, readonly: bool = False,
                    reading: bool = False) -> Store:
    """The command's store. A missing one is created only by commands made for it (``create``:
    init, corpus add, import) or when the user asks (``--create``); otherwise "no store here",
    so a mistyped --store records nothing anywhere.

    ``reading``: the command only reads, so a store in a read-only place is opened read-only
    rather than refused (the kept score totals are then computed in memory). A command that
    writes (neither ``reading`` nor ``readonly``) becomes the store's one writer until it ends:
    a second one is refused at once, naming the first."""
    from pathlib import Path

    from pipeline.cli import store_path
    from pipeline.store.database import open_store, writable_place

    path = Path(store_path(args))
    create = create or bool(getattr(args, "create", False))
    if reading and path.exists() and not writable_place(path):
        readonly = True
    writer = None if reading or readonly else command_line(args)
    store = open_store(path, create=create, readonly=readonly, writer=writer)
    if store.writer_claim is not None:
        _claims.append(store.writer_claim)
    return store


def claim_writer_from(args: argparse.Namespace, path: str) -> None:
    """Become the store's one writer for the rest of the command, for commands that open their
    store further down (the demo)."""
    from pipeline.store.database import claim_writer

    _claims.append(claim_writer(path, command_line(args)))


def command_line(args: argparse.Namespace) -> str:
    """How a second writer names this one: the command as it was typed."""
    return getattr(args, "command_line", None) or f"unspecific {args.command}"


# The writer claims a command made: ``pipeline.cli.main`` gives them up when the command ends,
# so a command run in-process (a test, the demo's closing report) leaves no lock behind.
_claims: list[WriterClaim] = []


def claims_mark() -> int:
    return len(_claims)


def release_claims(mark: int) -> None:
    while len(_claims) > mark:
        _claims.pop().release()


def load_config_from(args: argparse.Namespace) -> Config:
    from pipeline.core.config import load_config

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


# Piped (not a terminal) with no COLUMNS set, the CLI writes lines no wider than this.
PIPED_WIDTH = 100


def console(*, stderr: bool = False):
    """The CLI's console; piped, as wide as COLUMNS when set, else PIPED_WIDTH (Rich's default is 80)."""
    from rich.console import Console

    out = Console(stderr=stderr)
    if not out.is_terminal:
        out.width = piped_width()
    return out


def piped_width() -> int:
    """The width of piped output: COLUMNS when it is a positive number, else PIPED_WIDTH."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    return columns if columns > 0 else PIPED_WIDTH


def parse_csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def nonempty_csv(value: str) -> list[str]:
    """A comma-separated list that must name something: `--conditions ,` is a mistake, not
    "every condition" (and "none" is a real condition, so never say "got none")."""
    names = parse_csv(value)
    if not names:
        raise argparse.ArgumentTypeError(f"the list is empty ({value!r}): give one or more "
                                         "names, comma-separated")
    return names


def checked_number(value: str, read: Callable[[str], N], what: str, fits: Callable[[N], bool],
                   fitting: str) -> N:
    """``value`` read as a number (``read``: int or float), refused the way argparse shows it:
    "expected ``what``" when it is none, "expected ``fitting``" when it does not ``fit``."""
    try:
        number = read(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {value!r}") from None
    if not fits(number):
        raise argparse.ArgumentTypeError(f"expected {fitting}, got {number}")
    return number


def positive_int(value: str) -> int:
    return checked_number(value, int, "a whole number", lambda n: n > 0, "a positive number")


def count(value: str) -> int:
    return checked_number(value, int, "a whole number", lambda n: n >= 0, "zero or more")


def ratio(value: str) -> float:
    return checked_number(value, float, "a number between 0 and 1", lambda n: 0 < n < 1,
                          "a number between 0 and 1 (exclusive)")


def share(value: str) -> float:
    return checked_number(value, float, "a share between 0 and 1", lambda n: 0 <= n <= 1,
                          "a share between 0 and 1")


def add_bootstrap_arguments(p: argparse.ArgumentParser) -> None:
    """--resamples and --seed of the bootstrap intervals, alike in every command that reports them."""
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")


DRY_RUN_HELP = ("print what the command would send (calls, prompt and completion tokens, "
                "cache hits, cost online "
                "and in batch, wall time when a rate is measured) and send nothing; the run "
                "made afterwards prints this estimate beside what it spent")


def print_estimate(out, est) -> None:  # noqa: ANN001 - a pipeline.stages.estimate.Estimate
    from pipeline.outputs.tables import Block, Sheet, render_sheet

    sheet = Sheet(f"dry run: what `{est.command}` would send (nothing was sent)", ("endpoint",),
                  (Block("calls", ("calls", "prompt tokens", "completion tokens", "in cache")),
                   Block("cost and time", ("online $", "batch $", "wall time"))))

    def wall(s):  # noqa: ANN001, ANN202
        return "unknown" if s is None else f"{s / 60:.1f} min" if s >= 60 else f"{s:.0f} s"

    for e in est.endpoints.values():
        sheet.add(e.endpoint, f"{e.calls:,}", f"{e.prompt_tokens:,}", f"{e.completion_tokens:,}",
                  f"{e.cache_hits:,}",
                  f"{e.cost:.4f}", f"{e.batch_cost:.4f}", wall(e.wall_s) if e.calls else "-")
    sheet.rule()
    sheet.add("total", f"{est.calls:,}", f"{est.total('prompt_tokens'):,}",
              f"{est.total('completion_tokens'):,}",
              f"{est.total('cache_hits'):,}", f"{est.cost:.4f}", f"{est.batch_cost:.4f}", wall(est.wall_s))
    render_sheet(out, sheet)
    out.print(f"[dim]estimated: {est.method}. Wall time: calls x the endpoint's mean measured latency / its "
              "concurrency (unknown without measured calls).[/]")
    if est.unparsed:
        out.print(f"[yellow]{est.unparsed} unit(s) stopped at a call with no placeholder "
                  "answer[/]: the calls they would make after it are not counted")
