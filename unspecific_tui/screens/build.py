"""Build: pick or create a run, run its stages (whole, or one unit at a time), pause, resume.

The screen composes its parts (unspecific_tui/widgets/build/), each owning its state: the runs
(runs.py, which posts ``RunSelected``), the stage table (stage_table.py: states, progress, counts),
the progress line (stage_bar.py), the log, what the last step wrote (written.py) and the runner
(runner.py: what runs, a stage or the demo, in a thread worker). A run reports through messages
(StageProgress / StageFinished / StageFailed; the demo's InstructionAuditable / DemoFinished), so the
screen never blocks: it hands each to the parts it changes, and reads the store's counts in a worker.
"""

from __future__ import annotations

from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import DataTable, Header, RichLog

from pipeline.store.view import STAGE_UNITS, StoreView
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
from unspecific_tui.stages import SPECS, STAGES, StageSpec
from unspecific_tui.widgets.build.orient import StoreSummary
from unspecific_tui.widgets.build.runner import StageRunner, demo_outcome, describe
from unspecific_tui.widgets.build.runs import RunsPanel, run_rows
from unspecific_tui.widgets.build.stage_bar import StageBar
from unspecific_tui.widgets.build.stage_table import DEMO, StageTable
from unspecific_tui.widgets.build.written import WrittenView
from unspecific_tui.widgets.footer import KeyFooter

KEYS: list[BindingType] = [
    Binding("enter,s", "start", "Start"),
    Binding("full_stop", "step", "Step 1 unit", key_display="."),
    Binding("space", "pause", "Pause"),
    Binding("c", "start", "Continue", show=False),
    Binding("n", "new_run", "New run"),
    # Shift-d: `d` dismisses in Audit, and the demo is too heavy to start by a slip of habit.
    Binding("D", "demo", "Demo", show=False),
    Binding("a", "audit_written", "Audit output"),
    Binding("tab", "switch_table", "Switch table", show=False),
    Binding("r", "reload", "Refresh", show=False),
    Binding("ctrl+r", "reload_store", "Reload", show=False),
]
DEMO_START = "[b yellow]demo[/] starting: articles, pairs, then one pair at a time through every stage"
DEMO_LOG = ("[b]demo[/]: depth-first, so the first instruction can be audited while the rest is written; "
            "q quits and keeps everything, `make demo` again resumes")


class BuildScreen(AppScreen):
    """Build: the runs, the stages, the progress line, the log and what the last step wrote, composed
    and wired here; the runner (the screen's ``RunnerHost``) runs a stage or the demo."""

    BINDINGS: ClassVar[list[BindingType]] = KEYS

    def __init__(self) -> None:
        super().__init__()
        registry = self.app.stage_registry
        self.orient = StoreSummary(id="build-orient")
        self.runs = RunsPanel(id="build-top")
        self.stages = StageTable(registry, id="stages")
        self.bar = StageBar(id="build-progress")
        self.build_log = RichLog(id="build-log", markup=True, wrap=True, max_lines=500)
        self.written = WrittenView(id="step-view")
        self.runner = StageRunner(self.app, self, registry)

    def compose(self) -> ComposeResult:
        yield Header()
        yield self.orient
        yield self.runs
        yield self.stages
        yield self.bar
        with Horizontal(id="build-bottom"):
            yield self.build_log
            yield self.written
        yield KeyFooter()

    def on_mount(self) -> None:
        self.build_log.border_title = "log"
        self.stages.focus()
        # The runs are a few rows of a small table: listed before the first paint, from the app's
        # view; the per-stage counts (whole tables on a big store) follow from load_runs' worker.
        self.runs.show_runs(run_rows(self.app.view), self.app.run_id)
        self.watch(self.app, "analysis", self._analysis_changed)
        if self.app.demo_command and self.app.demo is None:
            self.call_after_refresh(self.action_demo)  # the screen paints first, then the demo starts

    def on_screen_resume(self) -> None:
        # Another process (a CLI build) may have added runs while another screen was shown. After
        # the paint: the counts' queries (some 70 ms on 2,000 instructions) then compete with nothing.
        self.call_after_refresh(self.load_runs)

    def log_line(self, text: str) -> None:
        self.build_log.write(text)

    # -- the runs and the counts (widgets/build/runs.py, stage_table.py) ------------------------
    @work(thread=True, exclusive=True, group="build-counts", exit_on_error=False)
    def load_runs(self) -> None:
        """Runs first, then per-stage counts (big stores take a moment), on a view of its own."""
        view = StoreView.open(self.app.store_path)
        try:
            self.app.call_from_thread(self.runs.show_runs, run_rows(view), self.app.run_id)
            run_id = self.app.run_id
            counts = {spec.name: view.stage_units(spec.name, run_id) for spec in STAGES
                      if spec.name in STAGE_UNITS}
            coverage = {spec.name: view.stage_coverage(spec.name, run_id) for spec in STAGES}
            per_run = view.instructions_per_run()
        finally:
            view.close()
        self.app.call_from_thread(self._show_counts, counts, coverage, per_run)

    def _analysis_changed(self, analysis: object) -> None:
        """The answers, models and judges the first lines say (the instructions: the runs table's)."""
        self.orient.show(analysis, self.stages.finished(), self.runs.instructions)

    def _show_counts(self, counts: dict[str, int], coverage: dict[str, tuple[int, int] | None],
                     per_run: dict[str, int]) -> None:
        self.runs.show_instructions(per_run)
        self.stages.show_counts(counts, coverage)
        self.orient.show(self.app.analysis, self.stages.finished(), self.runs.instructions)

    def on_run_selected(self, message: RunSelected) -> None:
        """Enter on a run (runs.py): the current run, its totals and counts."""
        self.app.run_id = message.run_id
        self.load_runs()

    def action_switch_table(self) -> None:
        """tab: the runs table or the stage table (Build's keys act on the one focused)."""
        runs = self.runs.table
        (self.stages if runs.has_focus else runs).focus()

    def action_reload(self) -> None:
        self.load_runs()
        self.notify("reading the runs and each stage's count from the store again")

    def action_reload_store(self) -> None:
        """The app's ctrl+r (analysis) plus this screen's run list."""
        self.load_runs()
        self.app.action_refresh_store()

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
            self.create_run()
        else:
            self.log_line("no run created")

    def create_run(self) -> None:
        """A new, empty run, made the current one (n, or a stage started with no run at all)."""
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

    # -- running a stage or the demo (widgets/build/runner.py) ----------------------------------
    @on(DataTable.RowSelected, "#stages")
    def _stage_chosen(self) -> None:
        """enter on a stage: run it."""
        self.action_start()

    def action_start(self) -> None:
        self._launch(self.stages.selected(), max_units=None)

    def action_step(self) -> None:
        self._launch(self.stages.selected(), max_units=1)

    def action_pause(self) -> None:
        line = self.runner.pause()
        if line is None:
            self.notify("nothing is running")
        else:
            self.log_line(line)

    def _launch(self, spec: StageSpec, *, max_units: int | None) -> None:
        ready = self.runner.prepare(spec)
        if ready is None:
            return
        self.written.mark()
        self.stages.begin(spec.name)
        self.bar.start(f"[b yellow]{spec.label}[/] {'step' if max_units else 'running'}")
        self.post_message(StageStarted(spec.name, ready.run_id, max_units is not None))
        self.runner.run_stage(spec, ready, max_units)

    def action_demo(self) -> None:
        """Run (or resume) the demo in a child process; its events drive this screen."""
        command = self.runner.demo_ready()
        if command is None:
            return
        self.written.mark()
        self.bar.start(DEMO_START)
        self.log_line(DEMO_LOG)
        self.runner.run_demo(command)

    def on_stage_progress(self, message: StageProgress) -> None:
        running = self.runner.running
        if self.stages.progressed(message, running):
            self.load_runs()  # a stage of the demo began: its run and counts moved
        if message.kind == "progress":
            self.bar.show(message, demo=running == DEMO)
        if message.message:
            style = "red" if message.kind == "error" else "dim" if message.kind == "log" else ""
            self.log_line(f"[{style}]{message.message}[/]" if style else message.message)
        self.stages.draw_soon()

    def on_stage_finished(self, message: StageFinished) -> None:
        spec = SPECS[message.stage]
        self.runner.ended()
        self.stages.set_state(spec.name, "paused" if message.paused or message.step else "done")
        verb = "paused" if message.paused else "one step done" if message.step else "finished"
        self.log_line(f"[green]{spec.label}: {verb}[/] {describe(message.summary)}")
        self.bar.stop(f"{spec.label}: {verb}")
        self._written()

    def on_stage_failed(self, message: StageFailed) -> None:
        self.runner.ended()
        self.stages.set_state(message.stage, "failed")
        self.log_line(f"[b red]{message.title}[/]: {message.msg}")
        self.bar.stop(f"[red]{message.stage} failed[/] (the run can go on: s)")
        self.app.show_error(message.title, message.msg)
        self._written()

    def _written(self) -> None:
        """A stage ended: what it wrote, the runs and counts read again, the app's caches stale."""
        self.written.show_written()
        self.load_runs()
        self.app.post_message(StoreChanged())

    def on_instruction_auditable(self, message: InstructionAuditable) -> None:
        self.written.auditable(message.instruction_id)
        self.app.view.forget()  # the Audit must see what was just written
        self.log_line(f"[b green]instruction #{message.instruction_id} is judged on its response and "
                      "summary: press a to audit it[/]")
        self.notify(f"Instruction #{message.instruction_id} can be audited now: press a", timeout=15)
        self.load_runs()
        self.app.post_message(StoreChanged())

    def on_demo_finished(self, message: DemoFinished) -> None:
        self.runner.ended()
        self.stages.demo_ended(message.code)
        line, failed = demo_outcome(message)
        if failed:
            self.app.show_error("Demo stopped", f"{message.tail}\n\n(log: {message.log}; D resumes)")
        self.log_line(line)
        self.bar.stop(line)
        self.load_runs()
        self.app.post_message(StoreChanged())

    # -- what was written (widgets/build/written.py) ---------------------------------------------
    def action_audit_written(self) -> None:
        """a: Audit on what was written: the instruction the last step (or the demo) wrote; with no step
        this session (a finished run, the demo done), the current run's first judged instruction."""
        self.app.view.forget()  # the Audit must see what was just written
        found, note = self.written.to_audit()
        if found is None:
            self.notify(note, severity="warning")
            return
        if note:
            self.notify(note)
        self.app.open_audit(found)
