"""What Build runs: a stage (whole, or one unit at a time) or the demo, one at a time. A plain object
the screen owns: it keeps what runs, its stop flag and the stage functions, and runs each in a thread
worker of the screen's, which reports through messages (StageProgress / StageFinished / StageFailed;
the demo's child: StageProgress / InstructionAuditable / DemoFinished) posted to the screen. It reaches
the screen only through ``RunnerHost``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from textual.message import Message

from pipeline.core.progress import ProgressEvent, StopFlag
from unspecific_tui.messages import (
    DemoFinished,
    InstructionAuditable,
    StageFailed,
    StageFinished,
    StageProgress,
)
from unspecific_tui.stages import Registry, StageFn, StageSpec
from unspecific_tui.widgets.build.stage_table import DEMO

if TYPE_CHECKING:
    from pipeline.core.config import Config
    from unspecific_tui.app import UnspecificApp
    from unspecific_tui.demo_child import DemoChild


@dataclass(frozen=True)
class Ready:
    """What a stage runs with: its function, the config and the run it writes into."""

    fn: StageFn
    config: Config
    run_id: str


class RunnerHost(Protocol):
    """The screen as the runner sees it."""

    def post_message(self, message: Message) -> bool:
        """Hand ``message`` to the screen (thread-safe)."""

    def run_worker(self, work: Callable[[], Any], *, thread: bool, exclusive: bool, group: str,
                   exit_on_error: bool) -> Any:
        """Run ``work`` in a worker of the screen's."""

    def create_run(self) -> None:
        """Create a new, empty run and make it the current one (``app.run_id``; None if it failed)."""


class StageRunner:
    """Starts a stage or the demo, pauses it, and knows what runs."""

    def __init__(self, app: UnspecificApp, host: RunnerHost, registry: Registry | None) -> None:
        self.app = app
        self.host = host
        self.registry = registry  # tests inject stage callables; else each module loads when it first runs
        self.running: str | None = None  # a stage's name, or DEMO
        self.stop_flag: StopFlag | None = None

    def busy(self) -> bool:
        """Something runs: says so (one run at a time)."""
        if self.running:
            self.app.notify(f"{self.running} is running; pause it first (space)", severity="warning")
        return bool(self.running)

    def prepare(self, spec: StageSpec) -> Ready | None:
        """What ``spec`` runs with, creating the run it needs; None (after saying why) when it cannot run."""
        if self.busy():
            return None
        try:
            fn = self.registry.get(spec.name) if self.registry is not None else spec.load()
        except Exception as exc:  # noqa: BLE001 - a broken stage module must not take the app down
            self.app.show_error(f"{spec.label}: cannot load", f"{spec.module}: {type(exc).__name__}: {exc}")
            return None
        if fn is None:
            self.app.show_error("Stage not available", spec.hint or f"The {spec.label} stage ({spec.module}."
                                f"{spec.function}) is not installed in this version.")
            return None
        if self.app.readonly:
            self.app.show_error("Read-only",
                                "The store is open read-only; running a stage needs write access.")
            return None
        run_id = self.app.run_id
        if not run_id:  # starting a stage with no run at all: the run it needs
            self.host.create_run()
            run_id = self.app.run_id
            if not run_id:
                return None
        from pipeline.core.errors import UnspecificError

        try:
            return Ready(fn, self.app.get_config(), run_id)
        except UnspecificError as exc:
            self.app.show_error(exc.title, exc.msg)
            return None

    def run_stage(self, spec: StageSpec, ready: Ready, max_units: int | None) -> None:
        """Run ``spec`` (``max_units``: None for all) in a thread worker with a stop flag of its own."""
        self.running = spec.name
        stop = self.stop_flag = StopFlag()
        self.host.run_worker(partial(self._stage_work, spec, ready, stop, max_units), thread=True,
                             exclusive=True, group="stage", exit_on_error=False)

    def _stage_work(self, spec: StageSpec, ready: Ready, stop: StopFlag, max_units: int | None) -> None:
        run_id = ready.run_id

        def progress(event: ProgressEvent) -> None:
            self.host.post_message(StageProgress(event.stage or spec.name, event.done, event.total,
                                                 event.message, event.kind))

        from pipeline.stages.step import run_stage_blocking

        try:
            summary = run_stage_blocking(ready.fn, store_path=self.app.store_path, config=ready.config,
                                         run_id=run_id, progress=progress, stop=stop, max_units=max_units,
                                         needs_client=spec.needs_client, stage=spec.name)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a message, never a crash
            from pipeline.core.errors import UnspecificError

            bug = not isinstance(exc, UnspecificError)
            title = getattr(exc, "title", None) if not bug else f"{spec.label} failed ({type(exc).__name__})"
            self.host.post_message(StageFailed(spec.name, run_id, title or "Error",
                                               getattr(exc, "msg", None) or str(exc), bug))
            return
        self.host.post_message(StageFinished(spec.name, run_id, summary, bool(stop), max_units is not None))

    def demo_ready(self) -> list[str] | None:
        """The demo's command when it can start (or resume) now; None after saying why not."""
        command = self.app.demo_command
        if not command:
            self.app.notify("the demo runs from `unspecific demo` (or `make demo`)")
            return None
        return None if self.busy() else command

    def run_demo(self, command: list[str]) -> None:
        """The demo in a child process running ``command``; a thread worker follows its events."""
        from pipeline.llm.model_file import cache_root
        from unspecific_tui.demo_child import DemoChild

        child = self.app.demo = DemoChild(command, cache_root() / "logs" / "demo.log")
        self.running = DEMO
        self.host.run_worker(partial(self._demo_work, child), thread=True, exclusive=True, group="stage",
                             exit_on_error=False)

    def _demo_work(self, child: DemoChild) -> None:
        summary: dict[str, Any] | None = None
        try:
            child.start()
            for event in child.events():
                if "auditable" in event:
                    self.host.post_message(InstructionAuditable(int(event["auditable"])))
                elif "finished" in event:
                    summary = event["finished"]
                else:
                    self.host.post_message(StageProgress(
                        str(event.get("stage", "")), int(event.get("done", 0)), int(event.get("total", 0)),
                        str(event.get("message", "")), str(event.get("kind", "progress"))))
            code = child.wait()
        except OSError as exc:
            code, summary = 2, None
            self.host.post_message(DemoFinished(code, summary, str(child.log_path),
                                                f"could not start the demo: {exc}"))
            return
        self.host.post_message(DemoFinished(code, summary, str(child.log_path), child.log_tail()))

    def pause(self) -> str | None:
        """space: ask what runs to stop after its current unit; the line to log, None if nothing runs."""
        if self.running == DEMO and self.app.demo is not None:
            self.host.run_worker(self.app.demo.stop, thread=True, exclusive=False, group="demo-stop",
                                 exit_on_error=True)
            return "stopping the demo; finished units are stored (D resumes)…"
        if self.running and self.stop_flag is not None:
            self.stop_flag.stop("paused from the app")
            return f"pausing {self.running} after the current unit…"
        return None

    def ended(self) -> None:
        """What ran ended (finished, paused, failed): nothing runs."""
        self.running = None


def describe(summary: Any) -> str:
    """A stage's summary on one line: its dataclass's plain fields."""
    if summary is None:
        return ""
    if hasattr(summary, "__dataclass_fields__"):
        return ", ".join(f"{k}={getattr(summary, k)}" for k in summary.__dataclass_fields__
                         if isinstance(getattr(summary, k), (int, float, str)))[:200]
    return str(summary)[:200]


def demo_outcome(message: DemoFinished) -> tuple[str, bool]:
    """The log line for the demo's end, and whether it failed (an error to show)."""
    ready = len((message.summary or {}).get("auditable") or [])
    if message.code == 0:
        return f"[green]demo finished: {ready} instruction(s) ready to audit[/]", False
    if message.code == 1:
        return (f"[yellow]demo finished with failed units ({ready} instruction(s) ready); they are recorded, "
                "d retries them[/]"), False
    if message.code in (-15, 130, -9):
        return "[cyan]demo stopped; everything finished is stored: D resumes[/]", False
    return f"[b red]demo stopped (exit {message.code})[/]; its log: {message.log}", True
