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


# Keys that do different things on different screens, each with its reason (tests/test_app_truth.py:
# a key bound to two actions must be here, and nothing here is stale). A key that starts costly work
# or writes stays off the letters another screen uses for a lighter thing unless said here: the demo
# is shift-d on Build, as `d` dismisses in Audit.
KEY_REASONS: dict[str, str] = {
    "a": "to Audit: from Build (what a step wrote) and Compare (its row); Annotate's label 'ambiguous'"
         " (its labels are their initials)",
    "c": "Build continues its stage (as s); Instructions opens Compare; Audit's copy mode; the queue's"
         " reason 'copied' (each reason by its initial)",
    "d": "Audit dismisses a suspect; Compare shows the rows that differ; the queue's reason 'split'"
         " (judges disagree); the demo is D on Build",
    "e": "Annotate's note (explain); the queue's reason 'echo'",
    "enter": "the highlighted row: Build runs its stage, Instructions and the queue audit it",
    "escape": "leaves what the screen is in: Instructions' filters, Audit's following, the queue",
    "g": "Audit's next copied span (go); Report's chart (graph)",
    "i": "Annotate's label 'integrated'; Report's intervals",
    "l": "Audit's list; the queue's reason 'lost'",
    "m": "the response shown (model and mode): Audit's, Compare's side A",
    "n": "next in Audit and Annotate (in Annotate's judge check: No); Build's new run, asked first",
    "o": "Audit's source view; the queue's copy-only view (only the copy reasons)",
    "p": "previous: Audit's stop of what it follows, Annotate's item",
    "pagedown": "scrolls the text: Audit's current pane, Compare's two responses",
    "pageup": "scrolls the text: Audit's current pane, Compare's two responses",
    "plus": "more rows: Instructions' next page, the items filed under a queue's leader",
    "r": "Build reads its counts again; Audit and Compare switch the summary ratio",
    "s": "Build starts the stage (its verb from the first version); Instructions and Audit sort;"
         " Annotate's label 'superficial'; the queue's reason 'similar'",
    "slash": "the filters: Instructions' fields, Audit's list",
    "t": "Audit's next pane (text); the queue's reason 'uncertain'",
    "u": "Annotate's next unlabelled; the queue's reason 'unquoted'",
    "y": "yes: Audit confirms a suspect, Annotate answers the judge check Yes",
}
