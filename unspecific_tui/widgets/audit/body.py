"""Audit's body: the constraint list (listing.py) beside the detail (detail.py). It owns which of
them is in sight: wide, `l` hides the list (more room for the texts); at 80 columns one of the two
fills the body and `l` swaps them. Enter on a row of the list at 80 columns brings the text back and
posts ``AuditBody.Swapped`` (over the list the head holds the whole constraint: it is drawn again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message

from unspecific_tui.widgets.audit.detail import AuditDetail
from unspecific_tui.widgets.audit.listing import AuditList
from unspecific_tui.widgets.audit.state import NARROW

if TYPE_CHECKING:
    from unspecific_tui.app import UnspecificApp


class AuditBody(Horizontal):
    """The list and the detail, and which of them is in sight."""

    if TYPE_CHECKING:  # at run time Textual's own ``app``: the one running, an UnspecificApp
        app: UnspecificApp

    class Swapped(Message):
        """At 80 columns the text came back in place of the list."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.listing = AuditList(id="audit-side")
        self.detail = AuditDetail(id="audit-detail")

    def compose(self) -> ComposeResult:
        yield self.listing
        yield self.detail

    def _narrow(self) -> bool:
        return self.app.size.width < NARROW

    @property
    def over_list(self) -> bool:
        """At 80 columns, the list in place of the text."""
        return self.has_class("-list")

    def list_visible(self) -> bool:
        return self.over_list if self._narrow() else not self.listing.has_class("-hidden")

    def toggle_list(self) -> bool:
        """`l`: wide, hide (show) the list; at 80 columns, the list in place of the text, and back.
        True when the head is to be drawn again (at 80 columns it holds the whole constraint over the
        list, one line of it over the text)."""
        if self._narrow():
            self.toggle_class("-list")
            if self.over_list:
                self.listing.sync()
                self.listing.table.focus()
            return True
        self.listing.toggle_class("-hidden")
        if self.list_visible():
            self.listing.sync()
        return False

    def to_text(self) -> bool:
        """At 80 columns over the list: back to the text (for the keys that act on a pane, which would
        change a pane out of sight, and escape); False when the text was in sight."""
        if self._narrow() and self.over_list:
            return self.toggle_list()
        return False

    @on(AuditList.Chosen)
    def _chosen(self, event: AuditList.Chosen) -> None:
        """Enter on the list: at 80 columns, back to the text of the row chosen."""
        event.stop()
        if self.over_list:
            self.remove_class("-list")
            self.post_message(self.Swapped())
        elif self._narrow():  # the list is out of sight (it keeps the focus): enter has no row to pick
            self.notify("enter picks a row of the list: l shows it", timeout=3)
