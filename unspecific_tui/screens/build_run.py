"""Build's stages: start one, step it one unit, pause it; its worker runs the stage in a thread with
a store connection of its own and reports through messages (StageProgress / StageFinished /
StageFailed), which this part turns into the stage table's states, the bar and the log."""

from __future__ import annotations

import time
from typing import Any

from textual import work
from textual.widgets import DataTable, ProgressBar, Static

from pipeline.core.progress import ProgressEvent, StopFlag
from unspecific_tui.messages import StageFailed, StageFinished, StageProgress, StageStarted, StoreChanged
from unspecific_tui.screens.build_state import DEMO, SUBSTAGES, BuildState
from unspecific_tui.stages import STAGES, StageSpec


class RunPart(BuildState):
    """Starting, stepping and pausing a stage, and its worker's messages."""

    def _selected_stage(self) -> StageSpec:
        table = self.query_one("#stages", DataTable)
        return STAGES[max(0, table.cursor_row)]

    def action_new_run(self) -> None:
        """n: a new, empty run, once the auditor said yes (a run is kept in the store for good)."""
        if self.app.readonly:
            self.app.show_error("Read-only", "The store is open read-only; a new run needs write access.")
            return
        from unspecific_tui.screens.help import ConfirmScreen

        shown = self.app.sub_title.split("  [")[0]
        msg = ("A new run starts empty and stays in the store. Build's stages then write into it "
               f"(s runs the selected stage, . one unit); the other screens go on showing every run's "
               f"instructions ({shown}).")
        question = ConfirmScreen("Create a new run?", msg, "create it", "keep the runs as they are")
        self.app.push_screen(question, self._new_run_answered)

    def _new_run_answered(self, yes: bool | None) -> None:
        if yes:
            self._create_run()
        else:
            self.log_line("no run created")

    def _create_run(self) -> None:
        from pipeline.core.errors import UnspecificError
        from pipeline.stages.runs import new_paused_run

        try:
            run_id = new_paused_run(self.app.store_path, self.app.get_config())
        except UnspecificError as exc:
            self.app.show_error(exc.title, exc.msg)
            return
        self.app.run_id = run_id
        self.log_line(f"created run [b]{run_id}[/]: empty until a stage writes into it")
        self.load_runs()

    def action_start(self) -> None:
        self._launch(self._selected_stage(), max_units=None)

    def action_step(self) -> None:
        self._launch(self._selected_stage(), max_units=1)

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
        if not self.app.run_id:  # starting a stage with no run at all: the run it needs
            self._create_run()
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


def _describe(summary: Any) -> str:
    if summary is None:
        return ""
    if hasattr(summary, "__dataclass_fields__"):
        return ", ".join(f"{k}={getattr(summary, k)}" for k in summary.__dataclass_fields__
                         if isinstance(getattr(summary, k), (int, float, str)))[:200]
    return str(summary)[:200]
