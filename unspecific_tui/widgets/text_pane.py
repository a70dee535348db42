"""A titled, scrollable pane of highlighted text, updated in place (never rebuilt)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static


class TextPane(VerticalScroll, can_focus=True):
    DEFAULT_CSS = """
    TextPane { border: round $panel-lighten-2; padding: 0 1; }
    TextPane:focus { border: round $accent; }
    TextPane > Static { width: 1fr; }
    """

    def __init__(self, title: str, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = title
        self._key: object = None
        self._signature: object = None
        self.spans: list[tuple[int, int]] = []  # what is highlighted now (for tests and the footer)

    def compose(self) -> ComposeResult:
        yield Static("", classes="pane-body")

    def reveal(self, offset: int | None, length: int) -> None:
        """Scroll so that character ``offset`` is in view (estimated from its share of the text)."""
        if offset is None or length <= 0:
            return

        def go() -> None:
            height, view = self.virtual_size.height, self.size.height
            line = int(height * offset / length)
            if height > view and not self.scroll_y + 1 <= line < self.scroll_y + view - 2:  # already in view: stay
                self.scroll_to(y=max(0, line - view // 3), animate=False)

        self.call_after_refresh(go)

    def show(self, text: Text, *, key: object = None, subtitle: str = "") -> None:
        """Replace the content; scroll to the top only when a different text arrives.

        Identical content (same text, same highlights) is not re-rendered: a long wrapped text
        is the costliest thing on screen.
        """
        signature = (text.plain, tuple((s.start, s.end, str(s.style)) for s in text.spans))
        if signature != self._signature:
            # Same words, new highlights: the height cannot change, so no layout pass.
            same_text = self._signature is not None and self._signature[0] == signature[0]
            self._signature = signature
            self.query_one(".pane-body", Static).update(text, layout=not same_text)
            self.spans = [(s.start, s.end) for s in text.spans]
        if subtitle != self.border_subtitle:
            self.border_subtitle = subtitle
        if key != self._key:
            self._key = key
            self.scroll_home(animate=False)
