"""The app's state, in one real class every part of the app builds on (app_analysis, app_paint, and
the app itself): its reactives, what UnspecificApp.__init__ sets (declared here), the store's narrow
writer and how an error is shown."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.reactive import reactive
from textual.timer import Timer

from pipeline.store.view import Writer
from unspecific_tui.data import Analysis, AppView

if TYPE_CHECKING:
    from pipeline.store.app_writer import AppWriter
    from unspecific_tui.demo_child import DemoChild


class AppState(App[None]):
    """What every part of the app reads and sets; UnspecificApp.__init__ gives each its value."""

    run_id: reactive[str | None] = reactive(None)
    analysis: reactive[Analysis | None] = reactive(None, always_update=True)
    # The models compared on the report's paired tests (a ModelDuel), once the tests ran; None before.
    models_compared: reactive[Any] = reactive(None, always_update=True)
    # The response the screens start on: (model under test, response mode).
    writer: reactive[Writer | None] = reactive(None)

    store_path: Path
    readonly: bool
    ratio: float | None
    sample_seed: int
    view: AppView
    demo: DemoChild | None
    _store_writer: AppWriter | None
    _writer_lock: threading.Lock
    _marks: dict[tuple[int, int], str] | None
    _collection_held: bool
    _hold_limit: Timer | None
    _after_paint: list[tuple[Callable[[], object], float]]

    @property
    def store_writer(self) -> AppWriter:
        """The store's narrow writer of people's labels, answers and marks, and of the score totals
        the analysis refreshes (the app writes nothing else itself), opened at the first write.
        Made under a lock: the analysis worker may ask for it while the UI writes a mark."""
        with self._writer_lock:
            if self._store_writer is None:
                from pipeline.store.app_writer import AppWriter

                self._store_writer = AppWriter(self.store_path)
            return self._store_writer

    def show_error(self, title: str, msg: str) -> None:
        from unspecific_tui.screens.help import ErrorScreen

        self.push_screen(ErrorScreen(title, msg))
