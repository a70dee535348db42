"""The app: one store, six screens (Textual modes), work in workers, errors as modals.

Screens live in ``screens/``, named in ``screens/registry.py``; what they share with the app (the
``Context``) in ``context.py``; the events they exchange in ``messages.py``; they read the store
through its read-only view (pipeline.store.view, with the app's caches in ``data.py``) and
never hold a connection; the stages the Build screen runs are in ``stages.py``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import SystemCommand
from textual.binding import Binding
from textual.notifications import Notify, SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.timer import Timer
from textual.widget import AwaitMount

from pipeline.store.view import Writer
from unspecific_tui.app_analysis import AnalysisPart
from unspecific_tui.app_paint import PaintPart
from unspecific_tui.context import Context, context_of
from unspecific_tui.data import AppView
from unspecific_tui.following import Following
from unspecific_tui.screens.registry import MODES, make_screen, screen_class
from unspecific_tui.stages import Registry
from unspecific_tui.textual_check import app_names_ok, private_api_problem
from unspecific_tui.widgets.footer import SCREENS_GROUP

if TYPE_CHECKING:
    from pipeline.core.config import Config
    from pipeline.store.app_writer import AppWriter
    from unspecific_tui.demo_child import DemoChild

SCREENS_ORDER = MODES  # the six screens, named in screens/registry.py
# The screens that open on the context as a target (app.target: instruction, writer, constraint).
# Instructions and Annotate follow ``app.context`` themselves when they are shown again (a row,
# an item); Build and Report keep their own place.
OPEN_ON_CONTEXT = ("audit", "compare")
HERE = Path(__file__).parent


def help_name(screen: Screen, stack: list[Screen], mode: str) -> str:
    """Which help/*.md ``?`` shows on ``screen``: its own (``HELP_NAME``: Suspects), the mode's for
    the mode's own screen, else none (only the keys): never the help of the screen underneath."""
    own = getattr(screen, "HELP_NAME", None)
    if own:
        return str(own)
    return mode if not stack or screen is stack[0] else ""


def shown_runs(per_run: Mapping[str, int], build_run: str | None) -> str:
    """The title's words for what the screens show: the runs holding instructions ("run: demo",
    "runs: a, b", "5 runs"), and Build's run when it holds none yet ("· Build: build-2, empty")."""
    runs = sorted(str(r) for r, n in per_run.items() if n and r is not None)
    if not runs:
        shown = "no instructions yet"
    elif len(runs) == 1:
        shown = f"run: {runs[0]}"
    elif len(runs) <= 3:
        shown = "runs: " + ", ".join(runs)
    else:
        shown = f"{len(runs)} runs"
    if build_run and build_run not in runs:
        shown += f" · Build: {build_run}, empty"
    return shown


class UnspecificApp(AnalysisPart, PaintPart):
    CSS_PATH = "app.tcss"
    TITLE = "unspecific"
    MODES = {name: make_screen(name) for name in SCREENS_ORDER}
    DEFAULT_MODE = "build"
    # Screens get -narrow / -medium / -wide classes; app.tcss lays them out per width.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-medium"), (200, "-wide")]
    BINDINGS = [
        # One footer item, "1-6 screens" (widgets/footer.py); `?` lists them one by one.
        Binding("1", "switch_mode('build')", "Build", show=True, group=SCREENS_GROUP),
        Binding("2", "switch_mode('instructions')", "Instructions", show=True, group=SCREENS_GROUP),
        Binding("3", "switch_mode('audit')", "Audit", show=True, group=SCREENS_GROUP),
        Binding("4", "switch_mode('compare')", "Compare", show=True, group=SCREENS_GROUP),
        Binding("5", "switch_mode('annotate')", "Annotate", show=True, group=SCREENS_GROUP),
        Binding("6", "switch_mode('report')", "Report", show=True, group=SCREENS_GROUP),
        Binding("question_mark", "help", "keys", show=True, key_display="?"),
        Binding("f1", "help", "keys (as ?)", show=False, key_display="F1"),
        Binding("ctrl+p", "command_palette", "Command palette", show=False, key_display="^p"),
        Binding("ctrl+r", "refresh_store", "Reload", show=False),
        Binding("q", "quit", "Quit", show=False),
    ]


    def __init__(
        self,
        store_path: str | Path,
        *,
        config_path: str | None = None,
        config: Config | None = None,
        run_id: str | None = None,
        annotator: str | None = None,
        stages: Registry | None = None,
        display_path: str | None = None,
        readonly: bool = False,
        sample_seed: int = 0,
        demo_command: list[str] | None = None,
    ) -> None:
        super().__init__()
        # `unspecific demo`: the Build screen runs this command as a child and shows its events.
        self.demo_command = demo_command
        self.demo: DemoChild | None = None  # while the demo runs
        self.store_path = Path(store_path)
        self.readonly = readonly
        self._store_writer: AppWriter | None = None
        self._writer_lock = threading.Lock()
        self.view = self._open_view()
        self.config_path = config_path
        self._config = config
        self.annotator = annotator or os.environ.get("USER") or "annotator"
        self.stage_registry = stages
        self.sample_seed = sample_seed
        self.display_path = display_path or str(self.store_path)
        self.title = f"unspecific — {self.display_path}"
        # Where Audit/Compare open next: (instruction id, writer, constraint id or None).
        self.target: tuple[int, Writer | None, int | None] | None = None
        # Where the auditor was last: carried from screen to screen by switch_mode.
        self.context = Context()
        # What Audit's next/prev follow when set: the suspicion queue or one flag (following.py).
        self.following: Following | None = None
        # The auditor's marks on suspects (confirmed / dismissed) by (response, constraint): read
        # once from the view, kept current by ``mark``; written through the store's narrow writer.
        self._marks: dict[tuple[int, int], str] | None = None
        self._collection_held = False  # collect_after_paint's, with its time limit
        self._hold_limit: Timer | None = None
        self._after_paint: list[tuple[Callable[[], object],
                                      float]] = []  # after_paint's, until the next paint
        # A build run's stages, not an evaluate run's zeros; no such run: the store's totals.
        self.set_reactive(UnspecificApp.run_id, run_id or self.view.latest_build_run_id())

    def _open_view(self) -> AppView:
        """The UI thread's read-only view, so the first screen does not wait for sqlite-utils.

        A new or empty file is prepared at once (``prepare_store`` creates the schema), and so is
        a file that is not a store (it says why); an existing store is validated (and migrated)
        by ``prepare_store`` right after the first paint.
        """
        new = not self.store_path.exists() or self.store_path.stat().st_size == 0
        view = None if new else AppView.open_if_store(self.store_path)
        if view is None:
            self._prepare_store()  # creates the schema, or raises StoreError with the reason
            view = AppView.open(self.store_path)
        return view

    def _prepare_store(self) -> None:
        from pipeline.store.view import prepare_store

        prepare_store(self.store_path, readonly=self.readonly)

    def view_ratio(self, asked: float | None = None) -> float:
        """The summary ratio a screen shows (pipeline.core.definitions.view_ratio: the store's summaries
        and the screen's choice ``asked``, None for none): the rule `report`, export and the ranking
        follow, with no fallback of a screen's own."""
        from pipeline.core.definitions import view_ratio

        # The store-wide ratios the analysis read (no query on every Audit move), else the store's own.
        stored = self.analysis.ratios if self.analysis is not None else self.view.summary_ratios()
        return view_ratio(stored, asked)


    # -- lifecycle ---------------------------------------------------------------------
    def on_mount(self) -> None:
        self._update_subtitle()
        # The first screen paints before the store-wide pass starts competing for the CPU.
        self.call_after_refresh(self._after_first_paint)

    def _after_first_paint(self) -> None:
        self._validate_store()
        # After the first paint: reading Textual's version costs some 50 ms the first screen need not wait.
        problem = private_api_problem()
        if problem is not None:  # said once, at start: the app works on, with Textual's stock widgets
            self.log.warning(problem)
            self.notify(problem, title="Textual version", severity="warning", timeout=20)

    @work(thread=True, exclusive=True, group="open-store", exit_on_error=False)
    def _validate_store(self) -> None:
        """Open the store properly (schema checks, migrations) off the UI thread; then the
        store-wide pass, which reads tables a migration may have to add."""
        from pipeline.core.errors import UnspecificError

        try:
            self._prepare_store()
        except UnspecificError as exc:
            self.call_from_thread(self.show_error, exc.title, exc.msg)
            return
        self.call_from_thread(self.refresh_analysis)

    # -- the auditor's marks ---------------------------------------------------------------
    @property
    def marks(self) -> dict[tuple[int, int], str]:
        """(response id, constraint id) -> confirmed | dismissed."""
        if self._marks is None:
            self._marks = {key: m.mark for key, m in self.view.suspicion_marks().items()}
        return self._marks

    def mark(self, response_id: int, constraint_id: int, mark: str | None) -> bool:
        """Store the auditor's mark on a suspect (None clears it); False (and why, shown) when it
        cannot be stored."""
        if self.readonly:
            self.show_error("Read-only", "The store is open read-only; marks cannot be saved.")
            return False
        from pipeline.core.errors import UnspecificError

        try:
            if mark is None:
                self.store_writer.clear_mark(response_id, constraint_id)
            else:
                self.store_writer.put_mark(response_id, constraint_id, mark, self.annotator)
        except UnspecificError as exc:
            self.show_error(exc.title, exc.msg)
            return False
        if mark is None:
            self.marks.pop((response_id, constraint_id), None)
        else:
            self.marks[(response_id, constraint_id)] = mark
        return True





    def on_unmount(self) -> None:
        self._unmounting = True  # a worker's message handled after this finds the view closed
        self._release_collection()  # never left off: a paint it waited for may not come
        if self.demo is not None:
            self.demo.stop()  # quitting keeps everything: each unit was committed as it finished
        if self._store_writer is not None:
            self._store_writer.close()
        self.view.close()

    def watch_run_id(self) -> None:
        self._update_subtitle()

    def watch_analysis(self) -> None:
        self._update_subtitle()  # a build wrote instructions into a run the title did not name yet

    def _update_subtitle(self) -> None:
        """The runs whose instructions the screens show (every run's: the screens read the whole
        store), and Build's run when it is another one (a new run, empty until a stage writes)."""
        if getattr(self, "_unmounting", False):  # the analysis arrived as the app quit: the view is closed
            return
        self.sub_title = shown_runs(self.view.instructions_per_run(), self.run_id) + \
            ("  [read-only]" if self.readonly else "")

    # -- config ------------------------------------------------------------------------
    def get_config(self) -> Config:
        """The config for stages; raises ConfigError (shown as a modal by the caller)."""
        if self._config is None:
            from pipeline.core.config import load_config

            self._config = load_config(self.config_path)
        return self._config








    # -- notices ---------------------------------------------------------------------------
    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Textual's notice, in one line (app.tcss puts notices in the header's row, where they cover
        no pane, table or caption): a title goes in front of the message."""
        if title:
            from textual.markup import escape

            message = f"[b]{escape(title)}[/b]: {message}" if markup else f"{title}: {message}"
        super().notify(message, severity=severity, timeout=timeout, markup=markup)

    def on_notify(self, event: Notify) -> None:
        """One notice at a time: a new one replaces the one shown (the header's row holds one). Runs
        before Textual's own handler adds the new notice."""
        self.clear_notifications()

    # -- navigation ----------------------------------------------------------------------
    async def action_switch_mode(self, mode: str) -> None:
        """1-6: the screen of that number. Its own number on a screen pushed over it (the queue over
        Instructions) goes back to it; on the screen itself, says so."""
        if mode != self.current_mode:
            self.switch_mode(mode)
            return
        pushed = [s for s in self.screen_stack[1:] if not isinstance(s, ModalScreen)]
        if not pushed:
            self.notify(f"this is the {mode.capitalize()} screen")
            return
        found = context_of(self.screen)
        if found is not None:
            self.context = found
        while len(self.screen_stack) > 1 and not isinstance(self.screen, ModalScreen):
            self.pop_screen()

    def switch_mode(self, mode: str) -> AwaitMount:
        """Every screen change carries the context: what the screen left shows (its instruction,
        response, ratio, constraint) is where Audit and Compare open, unless a target was set."""
        found = context_of(self.screen)
        if found is not None:
            self.context = found
        arriving = mode in OPEN_ON_CONTEXT and mode != self.current_mode
        if self.target is not None:  # open_audit / open_compare: that place, with the context's ratio
            iid, writer, cid = self.target
            self.context = replace(self.context, instruction_id=iid, writer=writer or self.context.writer,
                                   constraint_id=cid)
        elif arriving:
            self.target = self.context.target()
        return super().switch_mode(mode)

    def open_audit(self, instruction_id: int, writer: Writer | None = None, constraint_id: int
                   | None = None) -> None:
        self.target = (instruction_id, writer, constraint_id)
        self.switch_mode("audit")

    def open_compare(self, instruction_id: int, writer: Writer | None = None) -> None:
        self.target = (instruction_id, writer, None)
        self.switch_mode("compare")

    async def action_quit(self) -> None:
        """Quitting asks a running stage to stop after its current unit (finished work is kept)."""
        from unspecific_tui.screens.build import BuildScreen

        # Every mode's screens (a private name, guarded: else the current mode's, textual_check.py).
        stacks = self._screen_stacks.values() if app_names_ok(self) else [self.screen_stack]
        for stack in stacks:
            for screen in stack:
                if isinstance(screen, BuildScreen) and screen.runner.stop_flag is not None:
                    screen.runner.stop_flag.stop("app closed")
        self.exit()

    def action_help(self) -> None:
        from unspecific_tui.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            self.pop_screen()
            return
        self.push_screen(HelpScreen(self.screen,
                                    help_name(self.screen, self.screen_stack, self.current_mode)))


    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for name in SCREENS_ORDER:
            yield SystemCommand(f"Screen: {name.capitalize()}", f"switch to the {name} screen",
                                lambda name=name: self.switch_mode(name))
        yield SystemCommand("Reload store", "re-read the store (after a build wrote to it)",
                            self.action_refresh_store)
        yield SystemCommand("Suspects", "the suspicion queue: constraints ranked by copy-paste evidence",
                            lambda: self.push_screen(screen_class("queue")()))
        yield SystemCommand("Keys of this screen", "show the keys of the current screen", self.action_help)
        for binding in getattr(screen, "BINDINGS", []):
            if isinstance(binding, Binding) and binding.description:
                yield SystemCommand(f"{self.current_mode.capitalize()}: {binding.description}",
                                    f"key {binding.key_display or binding.key}",
                                    lambda b=binding: self.run_action(b.action, screen))

