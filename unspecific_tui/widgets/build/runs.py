"""Build's runs: the runs table (every run, newest first) beside the current run's totals. It owns
what it last listed (an unchanged list is never drawn again); enter on a run posts ``RunSelected``
(unspecific_tui/messages.py), and the screen makes it the current run.
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import DataTable, Static

from pipeline.store.view import StoreView
from unspecific_tui.messages import RunSelected

# A RunRow's fields in order: id, kind, status, started, calls, cache hits, tokens in and out, cost, error.
RunTuple = tuple[Any, ...]
COLUMNS = (("run", "run"), ("kind", "kind"), ("status", "status"), ("instr.", "instr"),
           ("started", "started"))


def run_rows(view: StoreView) -> list[RunTuple]:
    """The runs table's rows: every run, newest first, as plain tuples (RunRow's fields)."""
    return [tuple(vars(r).values()) for r in view.runs()]


class RunsPanel(Horizontal):
    """The runs table and the totals of the current run (``app.run_id``)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: tuple[list[RunTuple], str | None] | None = None  # the runs listed, the run selected
        self.instructions = 0  # in the store, every run's (show_instructions)

    def compose(self) -> ComposeResult:
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Static(id="run-totals")

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            self.table.add_column(label, key=key)

    @property
    def table(self) -> DataTable:
        return self.query_one("#runs", DataTable)

    def show_runs(self, runs: list[RunTuple], current_run: str | None) -> None:
        """List ``runs`` with the cursor on ``current_run``, and that run's totals."""
        shown = (runs, current_run)
        if shown == self._shown:  # unchanged (the first fill, then the worker's): no repaint
            return
        self._shown = shown
        table = self.table
        table.clear()
        for r in runs:
            table.add_row(r[0], r[1], r[2], "", (r[3] or "")[:16].replace("T", " "), key=r[0])
        current = next((r for r in runs if r[0] == current_run), None)
        if current:
            table.move_cursor(row=table.get_row_index(current[0]), animate=False)
        self.query_one("#run-totals", Static).update(_totals(current, bool(runs)))

    def show_instructions(self, per_run: dict[str, int]) -> None:
        """Each run's count of instructions (read after the runs: whole tables on a big store)."""
        self.instructions = sum(per_run.values())
        table = self.table
        for key in list(table.rows):
            if key.value is None:  # never: show_runs keys every row by its run id
                continue
            table.update_cell(key, "instr", f"{per_run.get(key.value, 0):,}", update_width=True)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # the stage table's enter starts a stage; this one picks a run
        self.post_message(RunSelected(str(event.row_key.value)))


def _totals(current: RunTuple | None, any_run: bool) -> str:
    """The totals beside the table: the current run's, else why the stages count every run."""
    if current:
        tokens = (current[6] or 0) + (current[7] or 0)
        error = f"\n[red]last error: {escape(current[9])}[/]" if current[9] else ""
        return (f"[b]{current[0]}[/] {current[2]}\ncalls {current[4] or 0}  cache hits {current[5] or 0}\n"
                f"tokens {tokens:,}  cost ${current[8] or 0:.4f}{error}")
    if any_run:  # no build run: the stage counts are the whole store's
        return "[b]store totals[/] [dim](no build run: the stages count every run's rows; n creates one)[/]"
    return "[dim]no run yet: n creates one[/]"
