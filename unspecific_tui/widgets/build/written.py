"""What the last step wrote: the rows each watched table gained since the step began, newest first,
and the newest instruction it touched (the one `a` audits). It owns the tables' high water before the
step and that instruction; the demo tells it of each instruction ready to audit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape
from textual.widgets import Static

from pipeline.store.view import WRITTEN_TABLES, StoreView

if TYPE_CHECKING:
    from unspecific_tui.app import UnspecificApp

WATCHED = WRITTEN_TABLES
SHOWN_FIELDS = ("id", "domain", "title", "cosine", "status")  # of a row of the other tables
HINT = "[dim]step mode: `.` runs one unit of the selected stage; what it wrote shows here[/]"


class WrittenView(Static):
    """The rows the last step (or the demo) added, and the instruction to audit."""

    if TYPE_CHECKING:  # at run time Textual's own ``app``: the one running, an UnspecificApp
        app: UnspecificApp

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._before: dict[str, int] = {}
        self.last_instruction: int | None = None  # the newest instruction the last step touched

    def on_mount(self) -> None:
        self.border_title = "what the last step wrote"
        self.update(HINT)

    def mark(self) -> None:
        """A step begins: what each watched table holds now."""
        self._before = self.app.view.high_water(WATCHED)

    def auditable(self, instruction_id: int) -> None:
        """The demo judged this instruction: `a` audits it."""
        self.last_instruction = instruction_id

    def show_written(self) -> None:
        """The step ended: what each table gained since ``mark``."""
        view = self.app.view
        after = view.high_water(WATCHED)
        lines: list[str] = []
        self.last_instruction = view.instruction_written(self._before)
        for table in WATCHED:
            before = self._before.get(table, 0)
            added = after[table] - before
            if added <= 0:
                continue
            lines.append(f"[b]{table}[/] +{added}")
            for row in view.newest_rows(table, before):
                lines.append("  " + _row_line(table, row, view))
        if self.last_instruction is not None:
            lines.append(f"[dim]a: audit instruction #{self.last_instruction}[/]")
        self.update("\n".join(lines) or "[dim]the step wrote nothing new[/]")

    def to_audit(self) -> tuple[int | None, str]:
        """The instruction `a` opens, and what to say about it: the one the last step (or the demo)
        wrote; with no step this session (a finished run, the demo done), the current run's first
        judged instruction."""
        if self.last_instruction is not None:
            return self.last_instruction, ""
        run = self.app.run_id
        analysis = self.app.analysis
        rows = analysis.rows if analysis is not None else []
        judged_rows = [r for r in rows if r.org is not None]
        judged = sorted(r.instruction_id for r in judged_rows)
        mine = sorted(r.instruction_id for r in judged_rows if run is None or r.run_id == run)
        if mine:
            return mine[0], ""
        if judged:
            other = next(r.run_id for r in rows if r.instruction_id == judged[0])
            return judged[0], f"run {run} holds no judged instruction yet: Audit opens on run {other}'s first"
        order = self.app.view.constraint_order()
        if order:
            return order[0][1], "no response is judged yet: Audit shows the first instruction's constraints"
        return None, "nothing to audit yet: no instruction in the store (s runs the selected stage, . a unit)"


def _row_line(table: str, row: dict[str, Any], view: StoreView) -> str:
    if table == "generations":
        text = view.text(str(row.get("text_hash") or ""))
        return escape(f"#{row['id']} {row['kind']} {row.get('model') or ''} {row.get('words') or 0} words: "
                      f"{text[:160]}…")
    if table == "constraints":
        return escape(f"#{row['id']} [{row.get('origin')}] {row['text'][:160]}")
    if table == "verdicts":
        said = (row.get("quote") or row.get("reason") or "")[:100]
        return escape(f"gen {row['generation_id']} c{row['constraint_id']} {row['judge']}: "
                      f"{'yes' if row['verdict'] else 'no'} {said}")
    if table == "instructions":
        return escape(f"#{row['id']} {row['condition']}: {row['main_task'][:160]}")
    return escape(", ".join(f"{k}={v}" for k, v in row.items() if k in SHOWN_FIELDS))
