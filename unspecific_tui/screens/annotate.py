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

The screen composes its parts (unspecific_tui/widgets/annotate/), each owning its state: the items to
label (``LabelQueue``), the judge check (``JudgeCheck``) and the side panel (``AnnotateStats``); it
keeps the keys, each acting in labelling or in the judge check, and draws the item shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Header, Input, Static

from pipeline.store.annotations import Label
from pipeline.store.view import Generation, StoreView
from unspecific_tui.context import Context
from unspecific_tui.data import Analysis
from unspecific_tui.messages import AnnotationSaved
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.widgets.annotate.head import judge_head, label_head
from unspecific_tui.widgets.annotate.items import LABELS, Item, LabelQueue, load_items
from unspecific_tui.widgets.annotate.judge_check import JudgeCheck, verdicts_text
from unspecific_tui.widgets.annotate.stats import AnnotateStats
from unspecific_tui.widgets.footer import KeyFooter
from unspecific_tui.widgets.text_pane import TextPane

if TYPE_CHECKING:
    from pipeline.analysis.validation import Basis

KEYS: list[BindingType] = [
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


class AnnotateScreen(AppScreen):
    """Annotate: the head, the side panel, the two text panes and the note, composed here; the items
    to label and the judge check are its parts (widgets/annotate/)."""

    BINDINGS: ClassVar[list[BindingType]] = KEYS

    def __init__(self) -> None:
        super().__init__()
        self.queue = LabelQueue()
        self.judges = JudgeCheck()
        self.stats = AnnotateStats(id="ann-stats")
        self.shown: tuple[int, int] | None = None  # (response id, summary id) in the panes now

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="ann-top"):
            yield Static(id="ann-head")
            yield self.stats
        with Horizontal(id="ann-panes"):
            yield TextPane("Response", id="ann-response")
            yield TextPane("Summary", id="ann-summary")
        yield Input(placeholder="note (enter saves it with the current label)", id="ann-note", compact=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        self.watch(self.app, "analysis", self._on_analysis)

    def _head(self, text: str) -> None:
        self.query_one("#ann-head", Static).update(text)

    def _panes(self) -> tuple[TextPane, TextPane]:
        return self.query_one("#ann-response", TextPane), self.query_one("#ann-summary", TextPane)

    # -- the items (widgets/annotate/items.py) ---------------------------------------------------
    def _on_analysis(self, analysis: Analysis | None) -> None:
        if analysis is None:
            self._head("computing the flipped constraints…")
        elif self.queue.stale(analysis.ratio):
            self._head("collecting the items to label…")
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
        self.queue.replace(items, plan, basis)
        self.refresh_stats()
        self._follow()
        self.show()

    def context(self) -> Context | None:
        """The item shown: its instruction, response, summary ratio and constraint (the judge
        check's items carry none)."""
        item = self.queue.current
        if self.judges.on or item is None:
            return None
        summary = self.app.view.instruction(item.instruction_id).generations.get(item.summary_id)
        return Context(item.instruction_id, item.writer, self._item_ratio(summary), item.constraint_id)

    def on_screen_resume(self) -> None:
        if self._follow():
            self.show()

    def _follow(self) -> bool:
        """Open on the context's item (items.py's ``LabelQueue.follow``); True when the item changed."""
        moved, note = self.queue.follow(self.app.nav.context)
        if note is not None:
            self.notify(note)
        return moved

    def _item_ratio(self, summary: Generation | None) -> float:
        """The ratio an item is shown at: app.view_ratio (the rule every view follows) of the ratio of
        the summary the item names (a plan's items are at the plan's), else of the items' ratio."""
        return self.app.view_ratio(summary.ratio if summary is not None and summary.ratio is not None
                                   else self.queue.ratio)

    # -- labelling -----------------------------------------------------------------------------
    def _mine(self, item: Item) -> Label | None:
        """This annotator's label of ``item``."""
        labels = self.app.view.labels().get((item.constraint_id, item.generation_id), {})
        return labels.get(self.app.annotator)

    def refresh_stats(self) -> None:
        """The side panel's metric against people (stats.py); the judges' scores while the judge
        check is on, until it is left."""
        if not self.judges.on:
            self.stats.show_labels(self.queue.basis, self.queue.items, self.app.view.labels())

    def show(self) -> None:
        if self.judges.on:
            return  # items arriving in the background must not replace the judge check's item
        item = self.queue.current
        if item is None:
            self._head("Nothing to annotate: no flipped constraints yet.")
            return
        data = self.app.view.instruction(item.instruction_id)
        # Exactly the two texts the item names, by id: the label is stored against this response.
        resp = data.generations.get(item.generation_id)
        summ = data.generations.get(item.summary_id)
        ratio = self._item_ratio(summ)
        mine = self._mine(item)
        self.shown = (item.generation_id, item.summary_id)
        self._head(label_head(self.queue, item, data, mine))
        response, summary = self._panes()
        response.show(Text(resp.text if resp else "(missing)"), key=(item.generation_id,))
        summary.show(Text(summ.text if summ else "(no summary)"), key=(item.generation_id, ratio))
        self.query_one("#ann-note", Input).value = mine.note if mine else ""

    def save(self, label: str, note: str | None = None) -> None:
        item = self.queue.current
        if item is None:
            return
        if self.app.readonly:
            self.app.show_error("Read-only", "The store is open read-only; labels cannot be saved.")
            return
        if note is None:
            note = self.query_one("#ann-note", Input).value
        self.app.store_writer.label(item.constraint_id, item.generation_id, self.app.annotator, label, note)
        self.post_message(AnnotationSaved(item.constraint_id, item.generation_id, self.app.annotator, label))
        self.refresh_stats()

    def action_note(self) -> None:
        self.query_one("#ann-note", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        item = self.queue.current if not self.judges.on else None
        if item is None:
            return
        mine = self._mine(item)
        self.save(mine.label if mine else "ambiguous", event.value)
        self.set_focus(None)
        self.show()

    def action_label(self, key: str) -> None:
        if self.judges.on:
            self.notify("the judge check asks Yes or No: y / n (v leaves it)")
            return
        self.save(LABELS[key])
        self.action_move(1)

    # -- the judge check (widgets/annotate/judge_check.py) ---------------------------------------
    def action_toggle_judge_check(self) -> None:
        from pipeline.analysis.judge_validation import load_judge_plan

        response, summary = self._panes()
        if self.judges.on:
            self.judges.close()
            response.border_title = "Response"
            summary.border_title = "Summary"
            self.refresh_stats()
            self.show()
            return
        plan = load_judge_plan(self.app.view)
        if plan is None or not plan.items:
            self.notify("no judge plan yet: draw one with `unspecific validate judge-plan`",
                        severity="warning")
            return
        self.judges.open(plan)
        summary.border_title = "What the judges said"
        self.refresh_judge_stats()
        self.show_judge_item()

    def _answers(self) -> dict[tuple[int, int], dict[str, int]]:
        return self.app.view.text_labels()

    def show_judge_item(self) -> None:
        item = self.judges.current
        if item is None:
            return
        data = self.app.view.instruction(item.instruction_id)
        text = data.generations.get(item.generation_id)
        mine = self._answers().get((item.constraint_id, item.generation_id), {}).get(self.app.annotator)
        self._head(judge_head(self.judges, item, data, mine))
        response, summary = self._panes()
        response.border_title = item.text_kind.capitalize()
        response.show(Text(text.text if text else "(missing)"), key=("judge", item.generation_id))
        summary.show(verdicts_text(self.app.view, item, revealed=mine is not None),
                     key=("judge", item.generation_id, item.constraint_id))

    def refresh_judge_stats(self) -> None:
        self.stats.show_judges(self.judges.items, self._answers())

    def action_answer(self, yes: int) -> None:
        if not self.judges.on:
            self.notify("y answers the judge check (v switches to it); here: i, s or a labels the item")
            return
        item = self.judges.current
        if item is None:
            self.notify("no item to answer in the judge plan")
            return
        if self.app.readonly:
            self.app.show_error("Read-only", "The store is open read-only; answers cannot be saved.")
            return
        who = self.app.annotator
        self.app.store_writer.text_label(item.constraint_id, item.generation_id, who, bool(yes))
        # Stay on the item: the judges' verdicts now show beside the answer; j moves on.
        self.refresh_judge_stats()
        self.show_judge_item()

    def action_n_key(self) -> None:
        if self.judges.on:
            self.action_answer(0)
        else:
            self.action_move(1)

    # -- moving, in either ---------------------------------------------------------------------
    def action_move(self, step: int) -> None:
        if self.judges.on:
            if self.judges.move(step):
                self.show_judge_item()
        elif self.queue.move(step):
            self.show()

    def action_next_unlabelled(self) -> None:
        """u: the next item without this annotator's label (in the judge check: answer)."""
        who = self.app.annotator
        if self.judges.on:
            if self.judges.to_next_undone(self._answers(), who):
                self.show_judge_item()
            else:
                self.notify("every item has your answer")
        elif self.queue.to_next_undone(self.app.view.labels(), who):
            self.show()
        else:
            self.notify("every item has your label")
