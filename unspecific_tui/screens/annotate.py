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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Header, Input, Static

from pipeline.core.definitions import same_ratio
from pipeline.store.annotations import Label
from pipeline.store.view import StoreView, Writer
from unspecific_tui.app import Context
from unspecific_tui.data import Analysis
from unspecific_tui.messages import AnnotationSaved
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.widgets.footer import KeyFooter
from unspecific_tui.widgets.text_pane import TextPane

if TYPE_CHECKING:
    from pipeline.analysis.validation import Basis, ValidationReport

LABELS = {"i": "integrated", "s": "superficial", "a": "ambiguous"}
SAMPLE_SHARE = 0.25  # pass-both items mixed in, relative to the flipped ones
SAMPLE_MIN = 10


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


def _f(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


class AnnotateScreen(AppScreen):
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

    # -- context -------------------------------------------------------------------------
    def context(self) -> Context | None:
        """The item shown: its instruction, response, summary ratio and constraint (the judge
        check's items carry none)."""
        if self.judge_check or not self.items:
            return None
        item = self.items[self.index]
        summary = self.app.view.instruction(item.instruction_id).generations.get(item.summary_id)
        ratio = summary.ratio if summary is not None and summary.ratio is not None else self._ratio
        return Context(item.instruction_id, item.writer, ratio, item.constraint_id)

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

    # -- labels --------------------------------------------------------------------------
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
        ratio = summ.ratio if summ is not None and summ.ratio is not None else self.app.view_ratio(self._ratio)
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

    def action_label(self, key: str) -> None:
        if self.judge_check:
            self.notify("the judge check asks Yes or No: y / n (v leaves it)")
            return
        self.save(LABELS[key])
        self.action_move(1)

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

    def action_move(self, step: int) -> None:
        if self.judge_check:
            if self.judge_items:
                self.judge_index = max(0, min(len(self.judge_items) - 1, self.judge_index + step))
                self.show_judge_item()
            return
        if self.items:
            self.index = max(0, min(len(self.items) - 1, self.index + step))
            self.show()

    def action_next_unlabelled(self) -> None:
        if self.judge_check:
            answered = self._answers()
            for k in range(1, len(self.judge_items) + 1):
                i = (self.judge_index + k) % len(self.judge_items)
                it = self.judge_items[i]
                if self.app.annotator not in answered.get((it.constraint_id, it.generation_id), {}):
                    self.judge_index = i
                    self.show_judge_item()
                    return
            self.notify("every item has your answer")
            return
        labels = self._labels()
        for k in range(1, len(self.items) + 1):
            i = (self.index + k) % len(self.items)
            it = self.items[i]
            if self.app.annotator not in labels.get((it.constraint_id, it.generation_id), {}):
                self.index = i
                self.show()
                return
        self.notify("every item has your label")


    # -- the judge check ---------------------------------------------------------------------
    def action_toggle_judge_check(self) -> None:
        from pipeline.analysis.judge_validation import load_judge_plan

        if self.judge_check:
            self.judge_check = False
            self.query_one("#ann-response", TextPane).border_title = "Response"
            self.query_one("#ann-summary", TextPane).border_title = "Summary"
            self.refresh_stats()
            self.show()
            return
        plan = load_judge_plan(self.app.view)
        if plan is None or not plan.items:
            self.notify("no judge plan yet: draw one with `unspecific validate judge-plan`", severity="warning")
            return
        self.judge_check, self.judge_plan = True, plan.name
        if [i.position for i in self.judge_items] != [i.position for i in plan.items]:
            self.judge_items, self.judge_index = list(plan.items), 0
        self.query_one("#ann-summary", TextPane).border_title = "What the judges said"
        self.refresh_judge_stats()
        self.show_judge_item()

    def _answers(self) -> dict[tuple[int, int], dict[str, int]]:
        return self.app.view.text_labels()

    def show_judge_item(self) -> None:
        if not self.judge_items:
            return
        item = self.judge_items[self.judge_index]
        data = self.app.view.instruction(item.instruction_id)
        con = data.constraints[item.constraint_id]
        text = data.generations.get(item.generation_id)
        mine = self._answers().get((item.constraint_id, item.generation_id), {}).get(self.app.annotator)
        answer = "[dim]unanswered[/]" if mine is None else f"[b]{'Yes' if mine else 'No'}[/]"
        self.query_one("#ann-head", Static).update(
            f"judge check · plan {_esc(self.judge_plan or '')} · item {self.judge_index + 1}/{len(self.judge_items)}"
            f" · #{data.id} {data.domain} · {item.text_kind} #{item.generation_id} · your answer: {answer}\n"
            f"[b]{_esc(con.text)}[/]\n[dim]Does this {item.text_kind} satisfy this constraint? Partial, implied or "
            "uncertain is No. y yes · n no · j/k move · v back to labelling[/]")
        self.query_one("#ann-response", TextPane).border_title = item.text_kind.capitalize()
        self.query_one("#ann-response", TextPane).show(Text(text.text if text else "(missing)"),
                                                        key=("judge", item.generation_id))
        self.query_one("#ann-summary", TextPane).show(self._verdicts_text(item, revealed=mine is not None),
                                                       key=("judge", item.generation_id, item.constraint_id))

    def _verdicts_text(self, item: Any, *, revealed: bool) -> Text:
        """The judges' verdicts and quotes on the item: only once this person has answered."""
        if not revealed:
            return Text("Hidden until you answer, so that your answer is your own.", style="dim")
        found = [v for v in self.app.view.latest_verdicts([item.generation_id])
                 if v.constraint_id == item.constraint_id]
        if not found:
            return Text("No judge has a verdict on this item.", style="dim")
        out = Text()
        for v in found:
            out.append(f"{v.judge} [{v.judging_mode}]: ", style="bold")
            out.append("Yes" if v.verdict else "No", style="green" if v.verdict else "red")
            out.append(f"  {v.quote}\n" if v.quote else "\n")
        return out

    def action_answer(self, yes: int) -> None:
        if not self.judge_check:
            return
        if not self.judge_items:
            return
        if self.app.readonly:
            self.app.show_error("Read-only", "The store is open read-only; answers cannot be saved.")
            return
        item = self.judge_items[self.judge_index]
        self.app.store_writer.text_label(item.constraint_id, item.generation_id, self.app.annotator, bool(yes))
        # Stay on the item: the judges' verdicts now show beside the answer; j moves on.
        self.refresh_judge_stats()
        self.show_judge_item()

    def action_n_key(self) -> None:
        if self.judge_check:
            self.action_answer(0)
        else:
            self.action_move(1)

    def refresh_judge_stats(self) -> None:
        """Each judge against this store's answers on the judge plan (all annotators' consensus)."""
        from pipeline.analysis.judge_validation import judge_scores

        scores = [s for s in judge_scores(self.app.view, n_resamples=200) if s.by == "all"]
        table = Table(box=None, pad_edge=False, header_style="bold", title="judges vs people", title_justify="left")
        for col in ("judge", "n", "acc.", "κ", "Yes bias"):
            table.add_column(col, no_wrap=True)
        for sc in scores:
            table.add_row(sc.judge, str(sc.n), _f(sc.accuracy.value), _f(sc.kappa.value), _f(sc.yes_bias))
        answered = self._answers()
        mine = sum(1 for it in self.judge_items
                   if self.app.annotator in answered.get((it.constraint_id, it.generation_id), {}))
        stats = Table.grid()
        stats.add_row(table)
        stats.add_row(Text(f"{self.app.annotator}: {mine}/{len(self.judge_items)} answered", style="dim"))
        self.query_one("#ann-stats", Static).update(stats)


def _esc(text: str) -> str:
    return text.replace("[", r"\[")
