"""What Annotate's head says over the item shown: where it is (plan, item, instruction, response),
the constraint, and the question asked, in labelling and in the judge check."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.store.view import InstructionData

if TYPE_CHECKING:
    from pipeline.analysis.judge_validation import JudgeItem
    from pipeline.store.annotations import Label
    from unspecific_tui.widgets.annotate.items import Item, LabelQueue
    from unspecific_tui.widgets.annotate.judge_check import JudgeCheck


def label_head(queue: LabelQueue, item: Item, data: InstructionData, mine: Label | None) -> str:
    """The head over an item to label: never the metric's call (the item is shown blind)."""
    con = data.constraints[item.constraint_id]
    note = f" — {esc(mine.note)}" if mine and mine.note else ""
    label = f"[b]{mine.label}[/]{note}" if mine else "[dim]unlabelled[/]"
    where = f"plan {esc(queue.plan)} · " if queue.plan else ""
    return (f"{where}item {queue.index + 1}/{len(queue.items)} · #{data.id} {data.domain}"
            f" · {data.condition}"
            f" · {esc(item.writer.label)} · response #{item.generation_id}"
            f" · your label: {label}\n[b]{esc(con.text)}[/]\n"
            "[dim]Integrated in the response's spine, or only in its details? (keys below)[/]")


def judge_head(check: JudgeCheck, item: JudgeItem, data: InstructionData, answer: int | None) -> str:
    """The head over a judge-check item: where it is, the constraint, and the judge's question."""
    said = "[dim]unanswered[/]" if answer is None else f"[b]{'Yes' if answer else 'No'}[/]"
    con = data.constraints[item.constraint_id]
    return (f"judge check · plan {esc(check.plan or '')} · item {check.index + 1}/{len(check.items)}"
            f" · #{data.id} {data.domain} · {item.text_kind} #{item.generation_id} · your answer: {said}\n"
            f"[b]{esc(con.text)}[/]\n[dim]Does this {item.text_kind} satisfy this constraint? Partial, "
            "implied or uncertain is No. y yes · n no · j/k move · v back to labelling[/]")


def esc(text: str) -> str:
    """``text`` as literal content markup (a ``[`` opens no tag)."""
    return text.replace("[", r"\[")
