"""Annotate: label flipped constraints (and a seeded sample of pass-both ones) by hand.

When the store holds a validation plan (`unspecific validate plan`, pipeline.analysis.validation), the
screen serves exactly the newest plan's items, in its order, at its ratio: the labels made here,
in exported sheets and in the report are then about the same items.

``v`` switches to the judge check (pipeline.analysis.judge_validation): the newest judge plan's items,
one constraint and one text (a response or a summary) at a time, and the judge's own question,
"does this text satisfy this constraint?". ``y`` / ``n`` answer it; only then does the other
pane show what each judge said and quoted, so the answer is never anchored on a verdict.

Items are shown blind (the metric's call is not on screen) in a seeded shuffled order. An item
names one response by id (a model answers in direct and in edit mode: two texts) and the summary
the metric compared it with; the panes show exactly those two texts, and the label is saved at
once to ``annotations`` for that response and this annotator. The side panel shows the
metric's precision and recall against the labels (the metric calls a constraint superficial
when it flipped; people say superficial / integrated; ambiguous is left out) and Cohen's
kappa between every pair of annotators on the items both labelled.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Header, Input, Static

from pipeline.core.definitions import same_ratio
from pipeline.store.view import StoreView
from unspecific_tui.context import Context
from unspecific_tui.data import Analysis
from unspecific_tui.screens.annotate_judges import JudgeCheckPart
from unspecific_tui.screens.annotate_labels import Item
from unspecific_tui.widgets.footer import KeyFooter
from unspecific_tui.widgets.text_pane import TextPane

if TYPE_CHECKING:
    from pipeline.analysis.validation import Basis

SAMPLE_SHARE = 0.25  # pass-both items mixed in, relative to the flipped ones
SAMPLE_MIN = 10


def load_items(view: StoreView, analysis: Analysis, seed: int) -> tuple[list[Item], str | None]:
    """The newest validation plan's items and its name; with no plan, pipeline.analysis.metrics' items:
    every flipped constraint plus a seeded sample of pass-both ones (and no name)."""
    from pipeline.analysis.metrics import items_to_annotate
    from pipeline.analysis.validation_plan import annotation_items, load_plan

    plan = load_plan(view)
    if plan is not None:
        chosen, name = annotation_items(view, plan), plan.name
    else:
        sample = max(SAMPLE_MIN, math.ceil(SAMPLE_SHARE * analysis.n_flipped))
        chosen, name = items_to_annotate(view, ratio=analysis.ratio, passed_sample=sample, seed=seed), None
    return [Item(i.constraint_id, i.response_id, i.summary_id, i.instruction_id, i.model, i.mode, i.flipped,
                 i.full_score) for i in chosen], name


def item_for(items: list[Item], context: Context) -> int | None:
    """The index of the item that best matches ``context``, or None when its instruction has none."""
    ranked = [(it.writer != context.writer, it.constraint_id != context.constraint_id, k)
              for k, it in enumerate(items) if it.instruction_id == context.instruction_id]
    return min(ranked)[2] if ranked else None


class AnnotateScreen(JudgeCheckPart):
    """The screen: its keys, its widgets, the items it serves and where it opens (the labelling and
    the judge check are its parts: annotate_labels, annotate_judges)."""

    BINDINGS = [
        Binding("i", "label('i')", "Integrated"),
        Binding("s", "label('s')", "Superficial"),
        Binding("a", "label('a')", "Ambiguous"),
        Binding("e", "note", "Note"),
        Binding("j", "move(1)", "Next"),
        # n: Next, as always; in the judge check it answers No (y answers Yes).
        Binding("n", "n_key", "Next (judge check: No)", show=False),
        Binding("y", "answer(1)", "Judge check: Yes", show=False),
        Binding("v", "toggle_judge_check", "Judge check on/off", show=False),
        Binding("k,p", "move(-1)", "Prev"),
        Binding("u", "next_unlabelled", "Unlabelled"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="ann-top"):
            yield Static(id="ann-head")
            yield Static(id="ann-stats")
        with Horizontal(id="ann-panes"):
            yield TextPane("Response", id="ann-response")
            yield TextPane("Summary", id="ann-summary")
        yield Input(placeholder="note (enter saves it with the current label)", id="ann-note", compact=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        self.watch(self.app, "analysis", self._on_analysis)

    def _on_analysis(self, analysis: Analysis | None) -> None:
        if analysis is None:
            self.query_one("#ann-head", Static).update("computing the flipped constraints…")
            return
        if self._ratio is None or not same_ratio(self._ratio, analysis.ratio) or not self.items:
            self._ratio = analysis.ratio
            self.query_one("#ann-head", Static).update("collecting the items to label…")
            self._load_items(analysis)

    @work(thread=True, exclusive=True, group="annotate-items", exit_on_error=False)
    def _load_items(self, analysis: Analysis) -> None:
        from pipeline.analysis.validation import validation_basis
        from pipeline.analysis.validation_plan import load_plan

        view = StoreView.open(self.app.store_path)  # this thread's own read-only view
        try:
            items, plan = load_items(view, analysis, self.app.sample_seed)
            basis = validation_basis(view, load_plan(view), ratio=analysis.ratio)
        finally:
            view.close()
        self.app.call_from_thread(self._set_items, items, plan, basis)

    def _set_items(self, items: list[Item], plan: str | None = None, basis: Basis | None = None) -> None:
        current = self.items[self.index] if self.items else None
        self.items = items
        self.plan = plan
        self._basis = basis
        self.index = self.items.index(current) if current in self.items else 0
        self.refresh_stats()
        self._follow()
        self.show()

    def context(self) -> Context | None:
        """The item shown: its instruction, response, summary ratio and constraint (the judge
        check's items carry none)."""
        if self.judge_check or not self.items:
            return None
        item = self.items[self.index]
        summary = self.app.view.instruction(item.instruction_id).generations.get(item.summary_id)
        return Context(item.instruction_id, item.writer, self._item_ratio(summary), item.constraint_id)

    def on_screen_resume(self) -> None:
        if self._follow():
            self.show()

    def _follow(self) -> bool:
        """Open on the context's item, once per context: the same constraint and response, else
        the instruction's first item for that response, else its first item; an instruction
        with no item here leaves the item as it was, and says so. True when the item changed."""
        context = self.app.context
        if context.instruction_id is None or context == self._followed or not self.items:
            return False
        self._followed = context
        index = item_for(self.items, context)
        if index is None:
            self.notify(f"instruction #{context.instruction_id} has no item to label here; "
                        f"still on item {self.index + 1} of {len(self.items)}")
            return False
        moved = index != self.index
        self.index = index
        return moved
