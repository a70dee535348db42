"""Build's progress line under the stages: what runs (or last ran) and its bar. The bar shows only
while a stage or the demo runs: an idle indeterminate bar would animate forever.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import ProgressBar, Static

from unspecific_tui.messages import StageProgress
from unspecific_tui.widgets.build.stage_table import DEMO


class StageBar(Horizontal):
    """The status of the stage run (``#stage-status``) beside its bar (``#stage-bar``)."""

    def compose(self) -> ComposeResult:
        yield Static("idle", id="stage-status")
        yield ProgressBar(id="stage-bar", show_eta=False)

    def on_mount(self) -> None:
        self.bar.display = False

    @property
    def bar(self) -> ProgressBar:
        return self.query_one("#stage-bar", ProgressBar)

    def say(self, status: str) -> None:
        self.query_one("#stage-status", Static).update(status)

    def start(self, status: str) -> None:
        """A run began: its status, and the bar with no total yet."""
        self.say(status)
        self.bar.update(total=None, progress=0)
        self.bar.display = True

    def stop(self, status: str) -> None:
        """The run ended: its last status; the bar hides."""
        self.bar.display = False
        self.say(status)

    def show(self, message: StageProgress, *, demo: bool) -> None:
        """A stage's own progress; during the ``demo``, the demo's overall progress only (instructions
        ready of all it writes): each stage's progress within one pair is in its row, and sent here it
        reset the bar to 0% at every stage of every pair."""
        overall = message.stage == DEMO
        if demo != overall:
            return
        self.bar.update(total=message.total or None, progress=message.done)
        if overall and message.total:
            self.say(f"[b yellow]demo[/] {message.done} of {message.total} instruction(s) ready to audit")
