"""The base of the app's six mode screens: ``self.app`` typed as the UnspecificApp they run in.

Textual types ``Screen.app`` as a plain ``App``; the screens read the app's store view, analysis,
run and navigation, so ``app`` is typed here as the UnspecificApp. The app is imported for the
type checker only: the app imports the screens, so a runtime import back would be a cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.screen import Screen

if TYPE_CHECKING:
    from unspecific_tui.app import UnspecificApp


class AppScreen(Screen):
    """A screen of UnspecificApp (one of its modes)."""

    if TYPE_CHECKING:  # at run time Textual's own ``app``: the one running, an UnspecificApp
        app: UnspecificApp
