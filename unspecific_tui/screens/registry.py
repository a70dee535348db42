"""The app's screens, named in one place: each name, the class it opens, and the order of the six
modes (the keys 1-6, the palette's "Screen: ..." commands).

A screen's module is imported the first time its screen opens, by a plain import in its loader
below (the app's start imports only Build's: importing all of them at start costs some 0.2 s and
loads tables the first screen never reads; tests/test_app_first_screen.py keeps it so).
A screen takes what it shares with the app (``Context``) from ``unspecific_tui/context.py``, never
from the app: the app imports this registry, so no screen imports the app back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from unspecific_tui.screens.base import AppScreen


def _build() -> type[AppScreen]:
    from unspecific_tui.screens.build import BuildScreen

    return BuildScreen


def _instructions() -> type[AppScreen]:
    from unspecific_tui.screens.instructions import InstructionsScreen

    return InstructionsScreen


def _audit() -> type[AppScreen]:
    from unspecific_tui.screens.audit import AuditScreen

    return AuditScreen


def _compare() -> type[AppScreen]:
    from unspecific_tui.screens.compare import CompareScreen

    return CompareScreen


def _annotate() -> type[AppScreen]:
    from unspecific_tui.screens.annotate import AnnotateScreen

    return AnnotateScreen


def _report() -> type[AppScreen]:
    from unspecific_tui.screens.report import ReportScreen

    return ReportScreen


def _queue() -> type[AppScreen]:
    from unspecific_tui.screens.queue import QueueScreen

    return QueueScreen


# name -> the loader of its screen's class. The six modes first, in their keys' order; then the
# suspicion queue ("Suspects"), a screen pushed over Instructions or opened from the palette.
SCREENS: dict[str, Callable[[], type[AppScreen]]] = {
    "build": _build,
    "instructions": _instructions,
    "audit": _audit,
    "compare": _compare,
    "annotate": _annotate,
    "report": _report,
    "queue": _queue,
}
MODES = ("build", "instructions", "audit", "compare", "annotate", "report")


def screen_class(name: str) -> type[AppScreen]:
    """The class of the screen named ``name`` (its module imported now if not yet)."""
    return SCREENS[name]()


def make_screen(name: str) -> Callable[[], AppScreen]:
    """A factory of the screen named ``name``, for Textual's ``App.MODES``: nothing is imported
    until the mode first opens."""

    def make() -> AppScreen:
        return screen_class(name)()

    return make
