"""A constraint's outcome as the app draws it (pipeline.core.definitions.Outcome: its one vocabulary),
in Audit's list and in the suspicion queue alike."""

from __future__ import annotations

from rich.text import Text

from pipeline.core.definitions import Outcome

STYLES = {Outcome.FLIPPED: "bold red", Outcome.PASSED_BOTH: "green", Outcome.PASSES_RESPONSE: "green",
          Outcome.FAILS_RESPONSE: "yellow", Outcome.NOT_JUDGED: "dim"}


def outcome_text(outcome: Outcome, doubtful: bool = False) -> Text:
    """The outcome's short label; a doubtful one (split judges, an unquoted Yes) ends in '?' and is
    never plain green."""
    if doubtful and outcome is not Outcome.NOT_JUDGED:
        return Text(outcome.short + "?", style="bold yellow")
    return Text(outcome.short, style=STYLES[outcome])
