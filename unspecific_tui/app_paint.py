"""What waits for the app's paint: callbacks run once a key's change is on the terminal
(``after_paint``), and garbage collection held until then (``collect_after_paint``)."""

from __future__ import annotations

import gc
from collections.abc import Callable

from rich.console import RenderableType
from textual.screen import Screen

from unspecific_tui.app_state import AppState
from unspecific_tui.textual_check import private_api_ok

AFTER_PAINT_S = 0.02  # after_paint's wait: the terminal is written, a key already typed goes first
HOLD_AT_MOST_S = 1.0  # collect_after_paint's longest hold


class PaintPart(AppState):
    """Textual's paint hooked (``_display``, behind textual_check) for what waits for it."""

    def after_paint(self, callback: Callable[[], object], delay: float = AFTER_PAINT_S) -> None:
        """Run ``callback`` ``delay`` seconds after the next paint, once what a key changed is on the
        terminal: Textual's call_after_refresh can run before that paint (the widgets tell the
        screen what they changed after it has gone idle). With a Textual whose paint hook is not
        known: after the refresh call_after_refresh waits for."""
        if private_api_ok():
            self._after_paint.append((callback, delay))
        else:
            self.call_after_refresh(self.set_timer, delay, callback)

    def _display(self, screen: Screen, renderable: RenderableType | None) -> None:
        """Textual's paint; then what waits for it (``after_paint``), each on a timer, so the
        terminal's writer thread writes the paint before they take the interpreter."""
        super()._display(screen, renderable)
        waiting, self._after_paint = self._after_paint, []
        for callback, delay in waiting:
            self.set_timer(delay, callback)

    def collect_after_paint(self) -> None:
        """No automatic garbage collection until the screen has painted what a key changed. A full
        collection walks what the app keeps since the last freeze (rows, texts, drawn lines: 30-180 ms
        on the 2,000-instruction bench store, on a busy machine) and one fell between the key and
        the paint in about one move of seven following the queue in Audit: its slowest moves. One that is due
        runs after the paint instead, while the auditor reads; at the latest after HOLD_AT_MOST_S (a key that
        changed nothing paints nothing)."""
        if self._collection_held or not gc.isenabled() or not private_api_ok():
            return
        gc.disable()
        self._collection_held = True
        self.after_paint(self._release_collection)
        self._hold_limit = self.set_timer(HOLD_AT_MOST_S, self._release_collection)

    def _release_collection(self) -> None:
        if self._hold_limit is not None:  # this hold's: a later hold has its own
            self._hold_limit.stop()
            self._hold_limit = None
        if self._collection_held:
            self._collection_held = False
            gc.enable()
