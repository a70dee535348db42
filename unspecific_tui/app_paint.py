"""What waits for the app's paint: callbacks run once a key's change is on the terminal
(``after_paint``), and garbage collection held until then (``collect_after_paint``). A part the app
composes (``app.paint``); the app's ``_display`` tells it each paint (``painted``)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import TYPE_CHECKING

from unspecific_tui.textual_check import private_api_ok

if TYPE_CHECKING:
    from textual.app import App
    from textual.timer import Timer

AFTER_PAINT_S = 0.02  # after_paint's wait: the terminal is written, a key already typed goes first
HOLD_AT_MOST_S = 1.0  # collect_after_paint's longest hold


class Painter:
    """What waits for the next paint, and the collection held until then."""

    def __init__(self, app: App[None]) -> None:
        self.app = app
        self._waiting: list[tuple[Callable[[], object], float]] = []  # after_paint's, until the next paint
        self._held = False  # collect_after_paint's, with its time limit
        self._hold_limit: Timer | None = None

    def after_paint(self, callback: Callable[[], object], delay: float = AFTER_PAINT_S) -> None:
        """Run ``callback`` ``delay`` seconds after the next paint, once what a key changed is on the
        terminal: Textual's call_after_refresh can run before that paint (the widgets tell the
        screen what they changed after it has gone idle). With a Textual whose paint hook is not
        known: after the refresh call_after_refresh waits for."""
        if private_api_ok():
            self._waiting.append((callback, delay))
        else:
            self.app.call_after_refresh(self.app.set_timer, delay, callback)

    def painted(self) -> None:
        """The app painted: what waits for it, each on a timer, so the terminal's writer thread
        writes the paint before they take the interpreter."""
        waiting, self._waiting = self._waiting, []
        for callback, delay in waiting:
            self.app.set_timer(delay, callback)

    def collect_after_paint(self) -> None:
        """No automatic garbage collection until the screen has painted what a key changed. A full
        collection walks what the app keeps since the last freeze (rows, texts, drawn lines: 30-180 ms
        on the 2,000-instruction bench store, on a busy machine) and one fell between the key and
        the paint in about one move of seven following the queue in Audit: its slowest moves. One that
        is due runs after the paint instead, while the auditor reads; at the latest after HOLD_AT_MOST_S
        (a key that changed nothing paints nothing)."""
        if self._held or not gc.isenabled() or not private_api_ok():
            return
        gc.disable()
        self._held = True
        self.after_paint(self.release)
        self._hold_limit = self.app.set_timer(HOLD_AT_MOST_S, self.release)

    def release(self) -> None:
        """Collection back on (also as the app unmounts: never left off)."""
        if self._hold_limit is not None:  # this hold's: a later hold has its own
            self._hold_limit.stop()
            self._hold_limit = None
        if self._held:
            self._held = False
            gc.enable()
