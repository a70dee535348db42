"""Build's state and what it shows of the store: the runs, the stages' counts and states, the log,
and what the last step wrote. The screen's parts (build_run: starting, stepping and pausing stages;
build_demo: the demo child) share this one class, so their state is declared and set up here, in
code that runs, not only for the type checker."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from textual import work
from textual.widgets import DataTable, RichLog, Static

from pipeline.core.progress import StopFlag
from pipeline.store.view import STAGE_UNITS, WRITTEN_TABLES, StoreView
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.stages import STAGES, available

WATCHED = WRITTEN_TABLES
# Steps that report under their own name but belong to a row of the stage table.
SUBSTAGES = {"embed": "corpus", "dedupe": "corpus"}
DEMO = "demo"  # the demo's running name and the stage of its own progress events (pipeline.stages.demo)
BAR = 12


def text_bar(done: int, total: int) -> str:
    if total <= 0:
        return "·" * BAR
    filled = round(BAR * min(done, total) / total)
    return "█" * filled + "░" * (BAR - filled)


def run_rows(view: StoreView) -> list[tuple]:
    """The runs table's rows: every run, newest first, as plain tuples (RunRow's fields)."""
    return [tuple(vars(r).values()) for r in view.runs()]


class BuildState(AppScreen):
    """What every part of the Build screen reads and sets, and the drawing they share."""

    def __init__(self) -> None:
        super().__init__()
        self.states: dict[str, str] = {s.name: "idle" for s in STAGES}
        self.progress: dict[str, tuple[int, int]] = {}
        self.counts: dict[str, int] = {}
        self.running: str | None = None
        self.stop_flag: StopFlag | None = None
        self._before: dict[str, int] = {}
        self.last_instruction: int | None = None  # the newest instruction the last step touched
        self._last_refresh = 0.0
        self._runs_shown: tuple[list[tuple], str | None] | None = None  # the runs listed, the run selected
        # Tests inject stage callables; otherwise each stage's module is imported when it first runs.
        self.registry = self.app.stage_registry
        for spec in STAGES:
            present = self.registry.get(spec.name) is not None if self.registry is not None else available(spec)
            if not present:
                self.states[spec.name] = "cli only" if spec.hint else "missing"

    @work(thread=True, exclusive=True, group="build-counts", exit_on_error=False)
    def load_runs(self) -> None:
        """Runs first, then per-stage counts (big stores take a moment), on a view of its own."""
        view = StoreView.open(self.app.store_path)
        try:
            self.app.call_from_thread(self._show_runs, run_rows(view))
            run_id = self.app.run_id
            counts = {spec.name: view.stage_units(spec.name, run_id) for spec in STAGES if spec.name in STAGE_UNITS}
            per_run = view.instructions_per_run()
        finally:
            view.close()
        self.app.call_from_thread(self._show_counts, counts, per_run)

    def _show_runs(self, runs: list[tuple]) -> None:
        shown = (runs, self.app.run_id)
        if shown == self._runs_shown:  # unchanged (the first fill, then the worker's): no repaint
            return
        self._runs_shown = shown
        table = self.query_one("#runs", DataTable)
        table.clear()
        for r in runs:
            table.add_row(r[0], r[1], r[2], "", (r[3] or "")[:16].replace("T", " "), key=r[0])
        current = next((r for r in runs if r[0] == self.app.run_id), None)
        if current:
            table.move_cursor(row=table.get_row_index(current[0]), animate=False)
            tokens = (current[6] or 0) + (current[7] or 0)
            error = f"\n[red]last error: {escape(current[9])}[/]" if current[9] else ""
            self.query_one("#run-totals", Static).update(
                f"[b]{current[0]}[/] {current[2]}\ncalls {current[4] or 0}  cache hits {current[5] or 0}\n"
                f"tokens {tokens:,}  cost ${current[8] or 0:.4f}{error}")
        elif runs:  # no build run: the stage counts are the whole store's
            self.query_one("#run-totals", Static).update(
                "[b]store totals[/] [dim](no build run: the stages count every run's rows; n creates one)[/]")
        else:
            self.query_one("#run-totals", Static).update("[dim]no run yet: n creates one[/]")

    def _show_counts(self, counts: dict[str, int], per_run: dict[str, int]) -> None:
        table = self.query_one("#runs", DataTable)
        for key in list(table.rows):
            if key.value is None:  # never: _show_runs keys every row by its run id
                continue
            table.update_cell(key, "instr", f"{per_run.get(key.value, 0):,}", update_width=True)
        self.counts = counts
        self._render_stages()

    def _render_stages(self) -> None:
        table = self.query_one("#stages", DataTable)
        for spec in STAGES:
            state = self.states[spec.name]
            done, total = self.progress.get(spec.name, (0, 0))
            style = {"running": "[b yellow]", "failed": "[b red]", "done": "[green]", "paused": "[cyan]",
                     "missing": "[dim]", "cli only": "[dim]"}.get(state, "")
            table.update_cell(spec.name, "state", f"{style}{state}[/]" if style else state, update_width=True)
            table.update_cell(spec.name, "store", f"{self.counts.get(spec.name, 0):,}", update_width=True)
            table.update_cell(spec.name, "bar", text_bar(done, total))
            table.update_cell(spec.name, "count", f"{done}/{total}" if total else (str(done) if done else ""),
                              update_width=True)

    def log_line(self, text: str) -> None:
        self.query_one("#build-log", RichLog).write(text)

    def _high_water(self) -> dict[str, int]:
        return self.app.view.high_water(WATCHED)

    def _show_written(self) -> None:
        after = self._high_water()
        lines: list[str] = []
        self.last_instruction = self.app.view.instruction_written(self._before)
        for table in WATCHED:
            before = self._before.get(table, 0)
            added = after[table] - before
            if added <= 0:
                continue
            lines.append(f"[b]{table}[/] +{added}")
            for row in self.app.view.newest_rows(table, before):
                lines.append("  " + _row_line(table, row, self.app.view))
        if self.last_instruction is not None:
            lines.append(f"[dim]a: audit instruction #{self.last_instruction}[/]")
        self.query_one("#step-view", Static).update("\n".join(lines) or "[dim]the step wrote nothing new[/]")

    def action_audit_written(self) -> None:
        """a: Audit on what was written: the instruction the last step (or the demo) wrote; with no step
        this session (a finished run, the demo done), the selected run's first judged instruction."""
        self.app.view.forget()  # the Audit must see what was just written
        if self.last_instruction is not None:
            self.app.open_audit(self.last_instruction)
            return
        found, note = self._first_to_audit()
        if found is None:
            self.notify(note, severity="warning")
            return
        if note:
            self.notify(note)
        self.app.open_audit(found)

    def _first_to_audit(self) -> tuple[int | None, str]:
        """The instruction `a` opens when no step ran this session, and what to say about it."""
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
    from rich.markup import escape

    if table == "generations":
        text = view.text(str(row.get("text_hash") or ""))
        return escape(f"#{row['id']} {row['kind']} {row.get('model') or ''} {row.get('words') or 0} words: "
                      f"{text[:160]}…")
    if table == "constraints":
        return escape(f"#{row['id']} [{row.get('origin')}] {row['text'][:160]}")
    if table == "verdicts":
        return escape(f"gen {row['generation_id']} c{row['constraint_id']} {row['judge']}: "
                      f"{'yes' if row['verdict'] else 'no'} {(row.get('quote') or row.get('reason') or '')[:100]}")
    if table == "instructions":
        return escape(f"#{row['id']} {row['condition']}: {row['main_task'][:160]}")
    return escape(", ".join(f"{k}={v}" for k, v in row.items() if k in ("id", "domain", "title", "cosine", "status")))
