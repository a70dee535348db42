"""Modal screens: the keys of the current screen (``?`` or F1), a user-facing error, and a question
asked before an action that writes to the store (``ConfirmScreen``)."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Markdown, Static

HELP_DIR = Path(__file__).resolve().parent.parent / "help"


def bindings_table(screen: Screen) -> Table:
    """Every key active on ``screen``: its own bindings first, then the app's."""
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
    table.add_column("key", style="bold cyan", no_wrap=True)
    table.add_column("does")
    seen: set[str] = set()
    for source in (screen, screen.app):
        for b in getattr(source, "BINDINGS", []):
            if not isinstance(b, Binding) or not b.description:
                continue
            key = b.key_display or b.key
            if key in seen:
                continue
            seen.add(key)
            table.add_row(key, b.description)
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q,f1", "dismiss", "Close")]

    def __init__(self, screen: Screen, mode: str) -> None:
        super().__init__()
        self._target = screen
        self._mode = mode

    def compose(self) -> ComposeResult:
        path = HELP_DIR / f"{self._mode}.md"
        text = path.read_text(encoding="utf-8") if self._mode and path.exists() else \
            f"# {self._mode.capitalize() or 'Keys'}\n"
        with Vertical(id="help-box"):
            with VerticalScroll(id="help-scroll"):
                yield Markdown(text, id="help-text")
                yield Static(bindings_table(self._target), id="help-keys")
            yield Static("[dim]↑/↓ PgUp/PgDn scroll · esc, ? or F1 to close[/]", id="help-close")

    def on_mount(self) -> None:
        # Focused, so the arrow and page keys scroll the help (at 80x24 it is longer than the box).
        self.query_one("#help-scroll", VerticalScroll).focus()


class ErrorScreen(ModalScreen[None]):
    """One way every failure reads in the app: UnspecificError's title and message."""

    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close")]

    def __init__(self, title: str, msg: str) -> None:
        super().__init__()
        self._title = title
        self._msg = msg

    def compose(self) -> ComposeResult:
        with Vertical(id="error-box") as box:
            box.border_title = self._title
            yield Static(self._msg, id="error-msg", markup=False)
            yield Static("[dim]esc or enter to close; the app keeps running[/]", id="error-close")


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question before an action that writes to the store: y or enter says yes, n or escape
    no (dismissed with True / False)."""

    BINDINGS = [Binding("y,enter", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, title: str, msg: str, yes: str, no: str) -> None:
        super().__init__()
        self._title = title
        self._msg = msg
        self._keys = f"[b]y[/]: {yes} · [b]n[/] or esc: {no}"

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box") as box:
            box.border_title = self._title
            yield Static(self._msg, id="confirm-msg", markup=False)
            yield Static(self._keys, id="confirm-keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
