"""The app's state, the one class the app builds on (its parts, app_analysis and app_paint, are
composed, not inherited): its reactives, what UnspecificApp.__init__ sets (declared here), the
store's narrow writer and how an error is shown."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.reactive import reactive

from pipeline.store.view import Writer
from unspecific_tui.data import Analysis, AppView

if TYPE_CHECKING:
    from pipeline.store.app_writer import AppWriter
    from unspecific_tui.demo_child import DemoChild


class AppState(App[None]):
    """What the app's screens and parts read and set; UnspecificApp.__init__ gives each its value."""

    run_id: reactive[str | None] = reactive(None)
    analysis: reactive[Analysis | None] = reactive(None, always_update=True)
    # The models compared on the report's paired tests (a ModelDuel), once the tests ran; None before.
    models_compared: reactive[Any] = reactive(None, always_update=True)
    # The response the screens start on: (model under test, response mode).
    writer: reactive[Writer | None] = reactive(None)

    store_path: Path
    readonly: bool
    sample_seed: int
    view: AppView
    demo: DemoChild | None
    _store_writer: AppWriter | None
    _writer_lock: threading.Lock
    annotator: str
    _marks: dict[tuple[int, int], str] | None

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
