"""Annotate's state and its labelling: the items served, the one shown, the labels given (saved at
once through the app's writer) and the side panel's precision, recall and kappa. The judge check
(annotate_judges) and the screen (annotate) build on this one class, where their state is set up."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text
from textual.widgets import Input, Static

from pipeline.store.annotations import Label
from pipeline.store.view import Generation, Writer
from unspecific_tui.context import Context
from unspecific_tui.messages import AnnotationSaved
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.widgets.text_pane import TextPane

if TYPE_CHECKING:
    from pipeline.analysis.validation import Basis, ValidationReport

LABELS = {"i": "integrated", "s": "superficial", "a": "ambiguous"}


@dataclass(frozen=True)
class Item:
    constraint_id: int
    generation_id: int  # the response
    summary_id: int  # the summary the metric compared it with
    instruction_id: int
    model: str
    mode: str
    flipped: bool  # the metric's call: superficial
    full_score: float

    @property
    def writer(self) -> Writer:
        return Writer(self.model, self.mode)


class AnnotateState(AppScreen):
    """The state every part of the Annotate screen reads and sets, and labelling."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[Item] = []
        self.index = 0
        self.scores: dict[str, ValidationReport] = {}
        # The metric's side of the validation (pipeline.analysis.validation.Basis), read with the items.
        self._basis: Basis | None = None
        self._ratio: float | None = None
        self.shown: tuple[int, int] | None = None  # (response id, summary id) in the panes now
        self.kappas: dict[tuple[str, str], tuple[float, int]] = {}
        self.plan: str | None = None  # the validation plan served, if any
        # The judge check: the judge plan's items, where we are, and its name.
        self.judge_check = False
        self.judge_items: list[Any] = []
        self.judge_index = 0
        self.judge_plan: str | None = None
        self._followed: Context | None = None  # the app's context last opened on (once each)

    def _item_ratio(self, summary: Generation | None) -> float:
        """The ratio an item is shown at: app.view_ratio (the rule every view follows) of the ratio of
        the summary the item names (a plan's items are at the plan's), else of the items' ratio."""
        return self.app.view_ratio(summary.ratio if summary is not None and summary.ratio is not None
                                   else self._ratio)

    def _labels(self) -> dict[tuple[int, int], dict[str, Label]]:
        return self.app.view.labels()

    def refresh_stats(self) -> None:
        """Precision/recall per annotator (pipeline.analysis.validation.annotate_scores: the rule of
        `validate report` and the report, weighted by stratum), and kappa between annotators."""
        from pipeline.analysis.validation import annotate_scores

        if self.judge_check:
            return  # the panel shows the judges' scores until the judge check is left
        labels = self._labels()
        if self._basis is None:
            self.scores, self.kappas = {}, {}
        else:
            scores = annotate_scores(self.app.view, basis=self._basis)
            self.scores = scores.by_annotator
            self.kappas = {(a.annotator_a, a.annotator_b): (a.kappa.value, a.kappa.n) for a in scores.kappas
                           if a.kappa.n}
        table = Table(box=None, pad_edge=False, header_style="bold", title="metric vs people", title_justify="left")
        for col in ("annotator", "n", "prec.", "recall"):
            table.add_column(col, no_wrap=True)
        for who, sc in self.scores.items():
            table.add_row(who, str(sc.n), _f(sc.precision.value), _f(sc.recall.value))
        lines = Text.assemble(("κ ", "bold"), *(f"{x}/{y} {_f(k)} (n={n})  " for (x, y), (k, n) in self.kappas.items()))
        mine = sum(1 for it in self.items if self.app.annotator in labels.get((it.constraint_id, it.generation_id), {}))
        stats = Table.grid()
        stats.add_row(table)
        stats.add_row(lines if self.kappas else Text("κ needs two annotators", style="dim"))
        stats.add_row(Text(f"{self.app.annotator}: {mine}/{len(self.items)} labelled", style="dim"))
        self.query_one("#ann-stats", Static).update(stats)

    def show(self) -> None:
        if self.judge_check:
            return  # items arriving in the background must not replace the judge check's item
        if not self.items:
            self.query_one("#ann-head", Static).update("Nothing to annotate: no flipped constraints yet.")
            return
        item = self.items[self.index]
        data = self.app.view.instruction(item.instruction_id)
        con = data.constraints[item.constraint_id]
        # Exactly the two texts the item names, by id: the label is stored against this response.
        resp = data.generations.get(item.generation_id)
        summ = data.generations.get(item.summary_id)
        ratio = self._item_ratio(summ)
        mine = self._labels().get((item.constraint_id, item.generation_id), {}).get(self.app.annotator)
        label = f"[b]{mine.label}[/]" + (f" — {_esc(mine.note)}" if mine.note else "") if mine else "[dim]unlabelled[/]"
        self.shown = (item.generation_id, item.summary_id)
        where = f"plan {_esc(self.plan)} · " if self.plan else ""
        self.query_one("#ann-head", Static).update(
            f"{where}item {self.index + 1}/{len(self.items)} · #{data.id} {data.domain} · {data.condition}"
            f" · {_esc(item.writer.label)} · response #{item.generation_id}"
            f" · your label: {label}\n[b]{con.text.replace('[', chr(92) + '[')}[/]\n"
            "[dim]Integrated in the response's spine, or only in its details? (keys below)[/]")
        self.query_one("#ann-response", TextPane).show(Text(resp.text if resp else "(missing)"),
                                                        key=(item.generation_id,))
        self.query_one("#ann-summary", TextPane).show(Text(summ.text if summ else "(no summary)"),
                                                       key=(item.generation_id, ratio))
        self.query_one("#ann-note", Input).value = mine.note if mine else ""

    def save(self, label: str, note: str | None = None) -> None:
        if not self.items:
            return
        if self.app.readonly:
            self.app.show_error("Read-only", "The store is open read-only; labels cannot be saved.")
            return
        item = self.items[self.index]
        if note is None:
            note = self.query_one("#ann-note", Input).value
        self.app.store_writer.label(item.constraint_id, item.generation_id, self.app.annotator, label, note)
        self.post_message(AnnotationSaved(item.constraint_id, item.generation_id, self.app.annotator, label))
        self.refresh_stats()


    def action_note(self) -> None:
        self.query_one("#ann-note", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        item = self.items[self.index] if self.items and not self.judge_check else None
        if item is None:
            return
        mine = self._labels().get((item.constraint_id, item.generation_id), {}).get(self.app.annotator)
        self.save(mine.label if mine else "ambiguous", event.value)
        self.set_focus(None)
        self.show()




def _f(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


def _esc(text: str) -> str:
    return text.replace("[", r"\[")
