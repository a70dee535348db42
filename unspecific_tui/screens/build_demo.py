"""Build's demo: `unspecific demo` (or `make demo`) runs the demo build as a child process of the app,
whose events drive the Build screen: each stage's row, the overall bar, and a notice for each
instruction ready to audit while the rest is written."""

from __future__ import annotations

from typing import Any

from textual import work
from textual.widgets import ProgressBar, Static

from unspecific_tui.messages import DemoFinished, InstructionAuditable, StageProgress, StoreChanged
from unspecific_tui.screens.build_state import DEMO, BuildState


class DemoPart(BuildState):
    """The demo child: started, followed, stopped with the pause key (build_run's action_pause)."""

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
