"""Audit's ``f``: which list to follow (one flag, with how many constraints carry it and what it
means, or the suspicion queue). Dismisses with the chosen name, or None. The flag copied_ngram
counts constraints holding a reference's n-grams, whatever the response did: its line says so, as
the queue's count of words pasted into the response is another number."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from pipeline.core.definitions import FLAG_KINDS

QUEUE = "suspicion queue"
STOP = "stop following"


def flag_prompt(name: str, count: int) -> Text:
    """"flag copied_ngram   33 constraints" and, under it, what the flag means."""
    prompt = Text(f"flag {name:<18} {count:>7,} constraint{'' if count == 1 else 's'}")
    if name in FLAG_KINDS:
        prompt.append(f"\n  {FLAG_KINDS[name].meaning}", style="dim")
    return prompt


class FlagPicker(ModalScreen[str | None]):
    DEFAULT_CSS = """
    FlagPicker { align: center middle; background: $background 60%; }
    #picker-box { width: 60; max-width: 90%; height: auto; max-height: 80%; border: thick $accent;
                  background: $surface; padding: 0 1; }
    #picker-box OptionList { height: auto; max-height: 16; }
    """
    BINDINGS = [Binding("escape,q", "dismiss_none", "Close")]

    def __init__(self, counts: Sequence[tuple[str, int]], *, queue: bool, following: bool) -> None:
        super().__init__()
        self.counts = list(counts)
        self.queue = queue
        self.following = following

    def compose(self) -> ComposeResult:
        options = [Option(flag_prompt(name, count), id=name) for name, count in self.counts]
        if self.queue:
            options.append(Option(f"{QUEUE:<23} ranked by suspicion", id=QUEUE))
        if self.following:
            options.append(Option(f"{STOP} (back to the benchmark's order)", id=STOP))
        with Vertical(id="picker-box") as box:
            box.border_title = "follow which constraints? (n/p step, esc stops)"
            if options:
                yield OptionList(*options, id="picker-options")
            else:
                yield Static("no flags stored in this benchmark", id="picker-empty")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
