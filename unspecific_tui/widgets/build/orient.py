"""Build's first lines: what the store holds (instructions, how many answered and judged, the models,
modes and judges), which stages are finished, and the keys to press next. Drawn from what the
screen hands it: the app's analysis, the finished stages (the stage table's), the instructions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.widgets import Static

from unspecific_tui.stages import SPECS


def store_lines(analysis: Any, finished: Sequence[str], instructions: int) -> Text:
    """Three lines: the store, the finished stages, the next keys (pipeline.analysis.overview.Analysis
    gives the answers: a row per response)."""
    rows = analysis.rows if analysis is not None else []
    answered = len({r.instruction_id for r in rows})
    judged = len({r.instruction_id for r in rows if r.org is not None and not math.isnan(r.org)})
    metrics = analysis.metrics if analysis is not None else None
    out = Text()
    out.append("In the store: ", style="bold")
    if analysis is None:
        out.append(f"{instructions:,} instructions · reading the answers…")
    else:
        models = ", ".join(analysis.models) or "none yet"
        modes = ", ".join(analysis.modes) or "none yet"
        judges = ", ".join(metrics.raters) or "none yet" if metrics is not None else "…"
        out.append(f"{instructions:,} instructions, {answered:,} answered, {judged:,} judged · "
                   f"models: {models} · modes: {modes} · judges: {judges}")
    out.append("\nFinished: ", style="bold")
    out.append(", ".join(SPECS[name].label for name in finished) if finished else "no stage yet",
               style="green" if finished else "dim")
    out.append("\nNext: ", style="bold")
    if judged:
        out.append("3 Audit the judged answers · 2 Instructions, ! there the suspicion queue · 6 Report"
                   " · ? keys")
    elif instructions:
        out.append("enter on the first stage not finished runs it (. one unit at a time) · ? keys")
    else:
        out.append("n a new run, then enter on a stage · D the demo builds a small benchmark · ? keys")
    return out


class StoreSummary(Static):
    """The three lines; drawn again only when they change."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: str | None = None

    def show(self, analysis: Any, finished: Sequence[str], instructions: int) -> None:
        lines = store_lines(analysis, finished, instructions)
        if lines.plain != self._shown:
            self._shown = lines.plain
            self.update(lines)
