"""Build's stage table: a row per stage (unspecific_tui/stages.py) with its state, its count in the
store, and the progress of its last run. It owns the states, the progress and the counts; the screen
hands it the events of a run (``begin``, ``progressed``) and the counts the store holds.
"""

from __future__ import annotations

import time

from textual.widgets import DataTable

from unspecific_tui.messages import StageProgress
from unspecific_tui.stages import STAGES, Registry, StageSpec, available

# Steps that report under their own name but belong to a row of the stage table.
SUBSTAGES = {"embed": "corpus", "dedupe": "corpus"}
DEMO = "demo"  # the demo's running name and the stage of its own progress events (pipeline.stages.demo)
BAR = 12
REFRESH_S = 0.25  # a burst of progress events draws the table at most this often
STYLES = {"running": "[b yellow]", "failed": "[b red]", "done": "[green]", "paused": "[cyan]",
          "missing": "[dim]", "cli only": "[dim]"}
COLUMNS = (("stage", "stage"), ("state", "state"), ("in store", "store"), ("progress", "bar"), ("", "count"))


def text_bar(done: int, total: int) -> str:
    if total <= 0:
        return "·" * BAR
    filled = round(BAR * min(done, total) / total)
    return "█" * filled + "░" * (BAR - filled)


class StageTable(DataTable):
    """The stages: each one's state (idle, running, paused, done, failed; missing or cli only when it
    cannot run from the app), its units in the store and its last run's progress."""

    def __init__(self, registry: Registry | None, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row")
        self.states: dict[str, str] = {s.name: "idle" for s in STAGES}
        self.progress: dict[str, tuple[int, int]] = {}
        self.counts: dict[str, int] = {}
        # (done, to do) in the store by stage (pipeline.store.view.STAGE_COVERAGE): the bar of a stage
        # that has not run here; a stage with both equal is finished.
        self.coverage: dict[str, tuple[int, int] | None] = {}
        self._last_refresh = 0.0
        # Tests inject stage callables; otherwise each stage's module is imported when it first runs.
        for spec in STAGES:
            present = registry.get(spec.name) is not None if registry is not None else available(spec)
            if not present:
                self.states[spec.name] = "cli only" if spec.hint else "missing"

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            # The state column is as wide as its longest word ("cli only") from the start: widened
            # later by update_cell, a screen drawn before the widening cut its words.
            self.add_column(label, key=key, width=8 if key == "state" else None)
        for spec in STAGES:
            self.add_row(spec.label, "", "", "", "", key=spec.name)

    def selected(self) -> StageSpec:
        return STAGES[max(0, self.cursor_row)]

    def show_counts(self, counts: dict[str, int],
                    coverage: dict[str, tuple[int, int] | None] | None = None) -> None:
        """Each stage's units in the store (for the current run, else every run's), and how far each
        has come where the store knows."""
        self.counts = counts
        if coverage is not None:
            self.coverage = coverage
        self.draw()

    def finished(self) -> list[str]:
        """The stages whose every unit the store holds (none running here)."""
        return [spec.name for spec in STAGES if self.states[spec.name] != "running"
                and _complete(self.coverage.get(spec.name))]

    def begin(self, name: str) -> None:
        """Stage ``name`` started: running, from no progress."""
        self.states[name] = "running"
        self.progress[name] = (0, 0)
        self.draw()

    def set_state(self, name: str, state: str) -> None:
        """A run of stage ``name`` ended in ``state``: drawn with the counts read after it."""
        self.states[name] = state

    def progressed(self, message: StageProgress, running: str | None) -> bool:
        """Record a progress event of what is ``running``; True when the demo began another stage
        (its run and counts moved)."""
        stage = SUBSTAGES.get(message.stage, message.stage)
        name = stage if stage in self.states else (running or stage)
        began = running == DEMO and name in self.states and self.states[name] != "running"
        if began:
            # Depth-first: one stage at a time, over and over, one pair after another.
            for other, state in self.states.items():
                if state == "running":
                    self.states[other] = "done"
            self.states[name] = "running"
            self._last_refresh = 0.0  # shown at once, not at the next event's throttled refresh
        if message.kind == "progress":
            self.progress[name] = (message.done, message.total)
        return began

    def demo_ended(self, code: int) -> None:
        """The demo's child exited with ``code``: its running stage is done, or paused (D resumes)."""
        for name, state in self.states.items():
            if state == "running":
                self.states[name] = "done" if code in (0, 1) else "paused"
        self.draw()

    def draw_soon(self) -> None:
        """Draw, unless drawn within REFRESH_S (a burst of events must not flood the table)."""
        now = time.monotonic()
        if now - self._last_refresh > REFRESH_S:
            self._last_refresh = now
            self.draw()

    def draw(self) -> None:
        for spec in STAGES:
            state = self.states[spec.name]
            done, total = self.progress.get(spec.name, (0, 0))
            covered = self.coverage.get(spec.name)
            if not total and state not in ("running", "paused") and covered is not None and covered[1]:
                done, total = covered  # not run here: how far the store has it
                if state == "idle" and done >= total:
                    state = "done"
            style = STYLES.get(state, "")
            self.update_cell(spec.name, "state", f"{style}{state}[/]" if style else state, update_width=True)
            self.update_cell(spec.name, "store", f"{self.counts.get(spec.name, 0):,}", update_width=True)
            self.update_cell(spec.name, "bar", text_bar(done, total))
            self.update_cell(spec.name, "count", f"{done}/{total}" if total else (str(done) if done else ""),
                             update_width=True)


def _complete(covered: tuple[int, int] | None) -> bool:
    return covered is not None and covered[1] > 0 and covered[0] >= covered[1]
