"""Build: pick or create a run, run its stages (whole, or one unit at a time), pause, resume.

A stage runs in a thread worker with its own store connection and event loop; it reports
through messages (StageProgress / StageFinished / StageFailed), so the screen never blocks.
After a step the screen lists what the step wrote (rows added per table, newest first).
"""

from __future__ import annotations

import time
from typing import Any

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, Header, ProgressBar, RichLog, Static

from pipeline.core.progress import ProgressEvent, StopFlag
from pipeline.store.view import STAGE_UNITS, WRITTEN_TABLES, StoreView
from unspecific_tui.messages import (
    DemoFinished,
    InstructionAuditable,
    RunSelected,
    StageFailed,
    StageFinished,
    StageProgress,
    StageStarted,
    StoreChanged,
)
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.stages import STAGES, StageSpec, available
from unspecific_tui.widgets.footer import KeyFooter

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


class BuildScreen(AppScreen):
    BINDINGS = [
        Binding("enter,s", "start", "Start"),
        Binding("full_stop", "step", "Step 1 unit", key_display="."),
        Binding("space", "pause", "Pause"),
        Binding("c", "start", "Continue", show=False),
        Binding("n", "new_run", "New run"),
        Binding("d", "demo", "Demo", show=False),
        Binding("a", "audit_written", "Audit output"),
        Binding("tab", "focus_next", "Switch table", show=False),
        Binding("r", "reload", "Refresh", show=False),
        Binding("ctrl+r", "reload_store", "Reload", show=False),
    ]

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

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="build-top"):
            yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
            yield Static(id="run-totals")
        yield DataTable(id="stages", cursor_type="row")
        with Horizontal(id="build-progress"):
            yield Static("idle", id="stage-status")
            yield ProgressBar(id="stage-bar", show_eta=False)
        with Horizontal(id="build-bottom"):
            yield RichLog(id="build-log", markup=True, wrap=True, max_lines=500)
            yield Static(id="step-view")
        yield KeyFooter()

    def on_mount(self) -> None:
        runs = self.query_one("#runs", DataTable)
        for label, key in (("run", "run"), ("kind", "kind"), ("status", "status"), ("instr.", "instr"),
                           ("started", "started")):
            runs.add_column(label, key=key)
        stages = self.query_one("#stages", DataTable)
        for label, key in (("stage", "stage"), ("state", "state"), ("in store", "store"), ("progress", "bar"),
                           ("", "count")):
            # The state column is as wide as its longest word ("cli only") from the start: widened
            # later by update_cell, a screen drawn before the widening cut its words.
            stages.add_column(label, key=key, width=8 if key == "state" else None)
        for spec in STAGES:
            stages.add_row(spec.label, "", "", "", "", key=spec.name)
        self.query_one("#build-log", RichLog).border_title = "log"
        self.query_one("#step-view", Static).border_title = "what the last step wrote"
        self.query_one("#step-view", Static).update("[dim]step mode: `.` runs one unit of the selected stage; "
                                                    "what it wrote shows here[/]")
        # The bar shows only while a stage runs (an idle indeterminate bar would animate forever).
        self.query_one("#stage-bar", ProgressBar).display = False
        stages.focus()
        # The runs are a few rows of a small table: listed before the first paint, from the app's
        # view; the per-stage counts (whole tables on a big store) follow from load_runs' worker.
        self._show_runs(run_rows(self.app.view))
        if self.app.demo_command and self.app.demo is None:
            self.call_after_refresh(self.action_demo)  # the screen paints first, then the demo starts

    # -- data --------------------------------------------------------------------------
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

    # -- selection ---------------------------------------------------------------------
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "runs":
            self.app.run_id = str(event.row_key.value)
            self.post_message(RunSelected(self.app.run_id))
            self.load_runs()
        else:
            self.action_start()

    def _selected_stage(self) -> StageSpec:
        table = self.query_one("#stages", DataTable)
        return STAGES[max(0, table.cursor_row)]

    # -- actions -----------------------------------------------------------------------
    def action_reload(self) -> None:
        self.load_runs()

    def action_reload_store(self) -> None:
        """The app's ctrl+r (analysis) plus this screen's run list."""
        self.load_runs()
        self.app.action_refresh_store()

    def on_screen_resume(self) -> None:
        # Another process (a CLI build) may have added runs while another screen was shown. After
        # the paint: the counts' queries (some 70 ms on 2,000 instructions) then compete with nothing.
        self.call_after_refresh(self.load_runs)

    def action_new_run(self) -> None:
        if self.app.readonly:
            self.app.show_error("Read-only", "The store is open read-only; a new run needs write access.")
            return
        from pipeline.core.errors import UnspecificError
        from pipeline.stages.runs import new_paused_run

        try:
            run_id = new_paused_run(self.app.store_path, self.app.get_config())
        except UnspecificError as exc:
            self.app.show_error(exc.title, exc.msg)
            return
        self.app.run_id = run_id
        self.log_line(f"created run [b]{run_id}[/]")
        self.load_runs()

    def action_start(self) -> None:
        self._launch(self._selected_stage(), max_units=None)

    def action_step(self) -> None:
        self._launch(self._selected_stage(), max_units=1)

    def action_demo(self) -> None:
        """Run (or resume) the demo in a child process; its events drive this screen."""
        if not self.app.demo_command:
            self.notify("the demo runs from `unspecific demo` (or `make demo`)")
            return
        if self.running:
            self.notify(f"{self.running} is running; pause it first (space)", severity="warning")
            return
        from pipeline.llm.model_file import cache_root
        from unspecific_tui.demo_child import DemoChild

        self.app.demo = DemoChild(self.app.demo_command, cache_root() / "logs" / "demo.log")
        self.running = DEMO
        self._before = self._high_water()
        self.query_one("#stage-status", Static).update("[b yellow]demo[/] starting: articles, pairs, then one pair "
                                                       "at a time through every stage")
        bar = self.query_one("#stage-bar", ProgressBar)
        bar.update(total=None, progress=0)
        bar.display = True
        self.log_line("[b]demo[/]: depth-first, so the first instruction can be audited while the rest is written; "
                      "q quits and keeps everything, `make demo` again resumes")
        self._demo_worker(self.app.demo)

    @work(thread=True, exclusive=True, group="stage", exit_on_error=False)
    def _demo_worker(self, child: Any) -> None:
        summary: dict[str, Any] | None = None
        try:
            child.start()
            for event in child.events():
                if "auditable" in event:
                    self.post_message(InstructionAuditable(int(event["auditable"])))
                elif "finished" in event:
                    summary = event["finished"]
                else:
                    self.post_message(StageProgress(str(event.get("stage", "")), int(event.get("done", 0)),
                                                    int(event.get("total", 0)), str(event.get("message", "")),
                                                    str(event.get("kind", "progress"))))
            code = child.wait()
        except OSError as exc:
            code, summary = 2, None
            self.post_message(DemoFinished(code, summary, str(child.log_path), f"could not start the demo: {exc}"))
            return
        self.post_message(DemoFinished(code, summary, str(child.log_path), child.log_tail()))

    def on_instruction_auditable(self, message: InstructionAuditable) -> None:
        self.last_instruction = message.instruction_id
        self.app.view.forget()  # the Audit must see what was just written
        self.log_line(f"[b green]instruction #{message.instruction_id} is judged on its response and summary: "
                      "press a to audit it[/]")
        self.notify(f"Instruction #{message.instruction_id} can be audited now: press a", timeout=15)
        self.load_runs()
        self.app.post_message(StoreChanged())

    def on_demo_finished(self, message: DemoFinished) -> None:
        self.running = None
        self.query_one("#stage-bar", ProgressBar).display = False
        for name, state in self.states.items():
            if state == "running":
                self.states[name] = "done" if message.code in (0, 1) else "paused"
        self._render_stages()
        ready = len((message.summary or {}).get("auditable") or [])
        if message.code == 0:
            line = f"[green]demo finished: {ready} instruction(s) ready to audit[/]"
        elif message.code == 1:
            line = (f"[yellow]demo finished with failed units ({ready} instruction(s) ready); they are recorded, "
                    "d retries them[/]")
        elif message.code in (-15, 130, -9):
            line = "[cyan]demo stopped; everything finished is stored: d resumes[/]"
        else:
            line = f"[b red]demo stopped (exit {message.code})[/]; its log: {message.log}"
            self.app.show_error("Demo stopped", f"{message.tail}\n\n(log: {message.log}; d resumes)")
        self.log_line(line)
        self.query_one("#stage-status", Static).update(line)
        self.load_runs()
        self.app.post_message(StoreChanged())

    def action_pause(self) -> None:
        if self.running == "demo" and self.app.demo is not None:
            self.log_line("stopping the demo; finished units are stored (d resumes)…")
            self.run_worker(self.app.demo.stop, thread=True, group="demo-stop")
            return
        if self.running and self.stop_flag is not None:
            self.stop_flag.stop("paused from the app")
            self.log_line(f"pausing {self.running} after the current unit…")
        else:
            self.notify("nothing is running")

    def _launch(self, spec: StageSpec, *, max_units: int | None) -> None:
        if self.running:
            self.notify(f"{self.running} is running; pause it first (space)", severity="warning")
            return
        try:
            fn = self.registry.get(spec.name) if self.registry is not None else spec.load()
        except Exception as exc:  # noqa: BLE001 - a broken stage module must not take the app down
            self.app.show_error(f"{spec.label}: cannot load", f"{spec.module}: {type(exc).__name__}: {exc}")
            return
        if fn is None:
            self.app.show_error("Stage not available", spec.hint or f"The {spec.label} stage ({spec.module}."
                                f"{spec.function}) is not installed in this version.")
            return
        if self.app.readonly:
            self.app.show_error("Read-only", "The store is open read-only; running a stage needs write access.")
            return
        if not self.app.run_id:
            self.action_new_run()
            if not self.app.run_id:
                return
        from pipeline.core.errors import UnspecificError

        try:
            config = self.app.get_config()
        except UnspecificError as exc:
            self.app.show_error(exc.title, exc.msg)
            return
        self.running = spec.name
        self.stop_flag = StopFlag()
        self._before = self._high_water()
        self.states[spec.name] = "running"
        self.progress[spec.name] = (0, 0)
        self._render_stages()
        self.query_one("#stage-status", Static).update(f"[b yellow]{spec.label}[/] {'step' if max_units else 'running'}")
        bar = self.query_one("#stage-bar", ProgressBar)
        bar.update(total=None, progress=0)
        bar.display = True
        self.post_message(StageStarted(spec.name, self.app.run_id, max_units is not None))
        self._stage_worker(spec, fn, config, self.app.run_id, self.stop_flag, max_units)

    @work(thread=True, exclusive=True, group="stage", exit_on_error=False)
    def _stage_worker(self, spec: StageSpec, fn: Any, config: Any, run_id: str, stop: StopFlag,
                      max_units: int | None) -> None:
        def progress(event: ProgressEvent) -> None:
            self.post_message(StageProgress(event.stage or spec.name, event.done, event.total, event.message,
                                            event.kind))

        from pipeline.stages.step import run_stage_blocking

        try:
            summary = run_stage_blocking(fn, store_path=self.app.store_path, config=config, run_id=run_id,
                                         progress=progress, stop=stop, max_units=max_units,
                                         needs_client=spec.needs_client, stage=spec.name)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a message, never a crash
            from pipeline.core.errors import UnspecificError

            bug = not isinstance(exc, UnspecificError)
            title = getattr(exc, "title", None) if not bug else f"{spec.label} failed ({type(exc).__name__})"
            self.post_message(StageFailed(spec.name, run_id, title or "Error", getattr(exc, "msg", None) or str(exc),
                                          bug))
            return
        self.post_message(StageFinished(spec.name, run_id, summary, bool(stop), max_units is not None))

    # -- messages from the worker -------------------------------------------------------
    def on_stage_progress(self, message: StageProgress) -> None:
        stage = SUBSTAGES.get(message.stage, message.stage)
        name = stage if stage in self.states else (self.running or stage)
        if self.running == "demo" and name in self.states and self.states[name] != "running":
            # Depth-first: one stage at a time, over and over, one pair after another.
            for other, state in self.states.items():
                if state == "running":
                    self.states[other] = "done"
            self.states[name] = "running"
            self._last_refresh = 0.0  # shown at once, not at the next event's throttled refresh
            self.load_runs()  # a stage of the demo began: its run and counts moved
        if message.kind == "progress":
            self.progress[name] = (message.done, message.total)
            self._show_bar(message)
        if message.message:
            style = "red" if message.kind == "error" else "dim" if message.kind == "log" else ""
            self.log_line(f"[{style}]{message.message}[/]" if style else message.message)
        now = time.monotonic()
        if now - self._last_refresh > 0.25:  # a burst of events must not flood the table
            self._last_refresh = now
            self._render_stages()

    def _show_bar(self, message: StageProgress) -> None:
        """The bar under the stages: a stage's own progress; during the demo, the demo's overall
        progress only (instructions ready of all it writes): each stage's progress within one pair
        is in its row, and sent here it reset the bar to 0% at every stage of every pair."""
        overall = message.stage == DEMO
        if (self.running == DEMO) != overall:
            return
        self.query_one("#stage-bar", ProgressBar).update(total=message.total or None, progress=message.done)
        if overall and message.total:
            self.query_one("#stage-status", Static).update(
                f"[b yellow]demo[/] {message.done} of {message.total} instruction(s) ready to audit")

    def on_stage_finished(self, message: StageFinished) -> None:
        spec = next(s for s in STAGES if s.name == message.stage)
        self.running = None
        self.query_one("#stage-bar", ProgressBar).display = False
        self.states[spec.name] = "paused" if message.paused or message.step else "done"
        verb = "paused" if message.paused else "one step done" if message.step else "finished"
        self.log_line(f"[green]{spec.label}: {verb}[/] {_describe(message.summary)}")
        self.query_one("#stage-status", Static).update(f"{spec.label}: {verb}")
        self._show_written()
        self.load_runs()
        self.app.post_message(StoreChanged())

    def on_stage_failed(self, message: StageFailed) -> None:
        self.running = None
        self.query_one("#stage-bar", ProgressBar).display = False
        self.states[message.stage] = "failed"
        self.log_line(f"[b red]{message.title}[/]: {message.msg}")
        self.query_one("#stage-status", Static).update(f"[red]{message.stage} failed[/] (the run can go on: s)")
        self.app.show_error(message.title, message.msg)
        self._show_written()
        self.load_runs()
        self.app.post_message(StoreChanged())

    def log_line(self, text: str) -> None:
        self.query_one("#build-log", RichLog).write(text)

    # -- what a step wrote ---------------------------------------------------------------
    def _high_water(self) -> dict[str, int]:
        return self.app.view.high_water(WATCHED)

    def action_audit_written(self) -> None:
        if self.last_instruction is None:
            self.notify("run a step first (.)")
            return
        self.app.view.forget()  # the Audit must see what was just written
        self.app.open_audit(self.last_instruction)

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


def _describe(summary: Any) -> str:
    if summary is None:
        return ""
    if hasattr(summary, "__dataclass_fields__"):
        return ", ".join(f"{k}={getattr(summary, k)}" for k in summary.__dataclass_fields__
                         if isinstance(getattr(summary, k), (int, float, str)))[:200]
    return str(summary)[:200]


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
