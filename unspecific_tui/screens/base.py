"""The base of the app's six mode screens: ``self.app`` typed as the UnspecificApp they run in.

Textual types ``Screen.app`` as a plain ``App``; the screens read the app's store view, analysis,
run and navigation, so they reach it through Textual's own typed getter instead of casts.
"""

from __future__ import annotations

from textual import getters
from textual.screen import Screen

from unspecific_tui.app import UnspecificApp


class AppScreen(Screen):
    """A screen of UnspecificApp (one of its modes)."""

    app = getters.app(UnspecificApp)
