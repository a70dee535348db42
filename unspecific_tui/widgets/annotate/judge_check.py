"""Annotate's judge check (pipeline.analysis.judge_validation): the newest judge plan's items, one
constraint and one text at a time, and the judge's own question; `y` / `n` answer it, and only then
does the other pane show what each judge said, so the answer is never anchored on a verdict.
``JudgeCheck`` owns whether it is on, the plan's items and the one shown; ``verdicts_text`` is what
the other pane shows of the judges.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from pipeline.store.view import StoreView
from unspecific_tui.widgets.annotate.items import Stepper

if TYPE_CHECKING:
    from pipeline.analysis.judge_validation import JudgeItem, JudgePlan


class JudgeCheck(Stepper["JudgeItem"]):
    """The judge check, on and off with `v`: the judge plan's items and the one shown."""

    def __init__(self) -> None:
        super().__init__()
        self.on = False
        self.plan: str | None = None

    def open(self, plan: JudgePlan) -> None:
        """On, on ``plan``'s items: where it was when they are the same, else at the first."""
        self.on, self.plan = True, plan.name
        if [i.position for i in self.items] != [i.position for i in plan.items]:
            self.items, self.index = list(plan.items), 0

    def close(self) -> None:
        """Off: back to labelling; its items and place are kept for the next time."""
        self.on = False


def verdicts_text(view: StoreView, item: JudgeItem, *, revealed: bool) -> Text:
    """The judges' verdicts and quotes on the item: only once this person has answered."""
    if not revealed:
        return Text("Hidden until you answer, so that your answer is your own.", style="dim")
    found = [v for v in view.latest_verdicts([item.generation_id]) if v.constraint_id == item.constraint_id]
    if not found:
        return Text("No judge has a verdict on this item.", style="dim")
    out = Text()
    for v in found:
        out.append(f"{v.judge} [{v.judging_mode}]: ", style="bold")
        out.append("Yes" if v.verdict else "No", style="green" if v.verdict else "red")
        out.append(f"  {v.quote}\n" if v.quote else "\n")
    return out

