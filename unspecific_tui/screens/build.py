"""Build: pick or create a run, run its stages (whole, or one unit at a time), pause, resume.

A stage runs in a thread worker with its own store connection and event loop; it reports
through messages (StageProgress / StageFinished / StageFailed), so the screen never blocks.
After a step the screen lists what the step wrote (rows added per table, newest first).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, Header, ProgressBar, RichLog, Static

from unspecific_tui.messages import RunSelected
from unspecific_tui.screens.build_demo import DemoPart
from unspecific_tui.screens.build_run import RunPart
from unspecific_tui.screens.build_state import BuildState, run_rows
from unspecific_tui.stages import STAGES
from unspecific_tui.widgets.footer import KeyFooter


class BuildScreen(DemoPart, RunPart, BuildState):
    """The screen: its keys, its widgets, and selection; the parts run stages and the demo, the state
    draws what the store holds (build_state, build_run, build_demo)."""

    BINDINGS = [
        Binding("enter,s", "start", "Start"),
        Binding("full_stop", "step", "Step 1 unit", key_display="."),
        Binding("space", "pause", "Pause"),
        Binding("c", "start", "Continue", show=False),
        Binding("n", "new_run", "New run"),
        Binding("d", "demo", "Demo", show=False),
        Binding("a", "audit_written", "Audit output"),
        Binding("tab", "switch_table", "Switch table", show=False),
        Binding("r", "reload", "Refresh", show=False),
        Binding("ctrl+r", "reload_store", "Reload", show=False),
    ]

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

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "runs":
            self.app.run_id = str(event.row_key.value)
            self.post_message(RunSelected(self.app.run_id))
            self.load_runs()
        else:
            self.action_start()

    def action_switch_table(self) -> None:
        """tab: the runs table or the stage table (Build's keys act on the one focused)."""
        runs, stages = self.query_one("#runs", DataTable), self.query_one("#stages", DataTable)
        (stages if runs.has_focus else runs).focus()

    def action_reload(self) -> None:
        self.load_runs()
        self.notify("reading the runs and each stage's count from the store again")

    def action_reload_store(self) -> None:
        """The app's ctrl+r (analysis) plus this screen's run list."""
        self.load_runs()
        self.app.action_refresh_store()

    def on_screen_resume(self) -> None:
        # Another process (a CLI build) may have added runs while another screen was shown. After
        # the paint: the counts' queries (some 70 ms on 2,000 instructions) then compete with nothing.
        self.call_after_refresh(self.load_runs)
