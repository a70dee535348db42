"""Annotate's judge check (pipeline.analysis.judge_validation): the newest judge plan's items, one
constraint and one text at a time, the judge's own question; `y` / `n` answer it, and only then does
the other pane show what each judge said, so the answer is never anchored on a verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from unspecific_tui.screens.annotate_labels import LABELS, AnnotateState, _esc, _f
from unspecific_tui.widgets.text_pane import TextPane


class JudgeCheckPart(AnnotateState):
    """The judge check, on and off with `v`; and the keys that mean one thing in each mode (move,
    next unlabelled, a label: refused in the judge check)."""

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
            self.notify("y answers the judge check (v switches to it); here: i, s or a labels the item")
            return
        if not self.judge_items:
            self.notify("no item to answer in the judge plan")
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
        who = self.app.annotator
        if self.judge_check:
            at, what = _next_undone(self.judge_items, self.judge_index, self._answers(), who), "answer"
        else:
            at, what = _next_undone(self.items, self.index, self._labels(), who), "label"
        if at is None:
            self.notify(f"every item has your {what}")
        elif self.judge_check:
            self.judge_index = at
            self.show_judge_item()
        else:
            self.index = at
            self.show()

    def action_label(self, key: str) -> None:
        if self.judge_check:
            self.notify("the judge check asks Yes or No: y / n (v leaves it)")
            return
        self.save(LABELS[key])
        self.action_move(1)


def _next_undone(items: Sequence[Any], index: int, done: Mapping[tuple[int, int], Mapping[str, Any]],
                 annotator: str) -> int | None:
    """The first item after ``index``, round the list (``index`` last), that ``annotator`` has not
    labelled or answered in ``done`` ((constraint, text) -> annotator -> label); None when none."""
    for k in range(1, len(items) + 1):
        i = (index + k) % len(items)
        if annotator not in done.get((items[i].constraint_id, items[i].generation_id), {}):
            return i
    return None
