"""The suspicion queue's table, owning what it shows: the ranked rows (the leaders, each group
``+`` opened followed by the items filed under it), the columns fitted to the width, and the rows
put in it so far (a page at a time: a DataTable's cost grows with its rows). The screen
(screens/queue.py) asks the store and hands the table the queue's head; what a row shows is
screens/queue_rows.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from pipeline.analysis.specificity import after_prefix, shared_prefix
from pipeline.analysis.suspicion import REASONS, Evidence
from unspecific_tui.screens.queue_rows import (
    SHORT_REASONS,
    Column,
    Key,
    Ranked,
    column_width,
    copied,
    key_of,
    label_width,
    layout,
    mark_cell,
    outcome,
    ranked,
    reason_tags,
    rows_of,
    same_phrase_tag,
    shorten,
    trust_marks,
    writer_cell,
)
from unspecific_tui.widgets.bar import bar
from unspecific_tui.widgets.constraint_list import echo_cell

PAGE = 300  # rows put in the table at a time (a DataTable's cost grows with its rows)


class QueueTable(DataTable):
    """The ranked rows; its enter (which selects the row, opening Audit) is named in the footer.
    ``mark`` gives an item's mark (confirmed, dismissed) when its row is drawn."""

    BINDINGS = [Binding("enter", "select_cursor", "Audit", show=True)]

    def __init__(self, mark: Callable[[Evidence], str | None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mark = mark
        self.enabled: tuple[str, ...] = REASONS  # the reasons the rows are ranked under
        self.leaders: list[Ranked] = []  # the queue's rows, each leading the items filed under it
        self.expanded: set[Key] = set()  # the leaders whose filed items are shown under them (``+``)
        self.ranked: list[Ranked] = []  # the table's rows: the leaders and the filed items shown
        # the words most loaded constraints open with: the constraint column shows what follows
        self.prefix = ""
        self.models: list[str] = []  # the models of the rows, clipped apart (writer_cell)
        self.layout_columns: list[Column] = []  # the columns shown (``columns`` is the DataTable's own)
        self.text_width = 0  # the constraint column's
        self.shown = 0  # rows put in the table

    def rank(self, evidence: Sequence[Evidence], enabled: tuple[str, ...]) -> None:
        """The rows of the queue's head ``evidence`` (in rank order) under the ``enabled`` reasons;
        the groups opened stay open. Shown by ``fill``."""
        self.enabled = enabled
        self.leaders = ranked(evidence, enabled)
        self.ranked = rows_of(self.leaders, self.expanded, enabled)
        self.prefix = shared_prefix([e.text for e in evidence])
        self.models = sorted({e.writer.model for e in evidence})

    def fit(self, width: int) -> tuple[list[Column], int]:
        """The columns ``width`` cells hold for these rows, and the constraint column's width."""
        return layout(width, label_width([r.evidence for r in self.leaders]), len(self.leaders))

    def fill(self, width: int) -> None:
        """The table again, its columns fitted to ``width`` cells, with the first page of rows."""
        self.layout_columns, self.text_width = self.fit(width)
        self.clear(columns=True)
        for column in self.layout_columns:
            self.add_column(column.label, key=column.key, width=column.width or self.text_width)
        self.shown = 0
        self.add_page()

    def add_page(self) -> None:
        """The next PAGE rows."""
        page = self.ranked[self.shown:self.shown + PAGE]
        self.add_rows([self._cells(r) for r in page])
        self.shown += len(page)

    def show_through(self, row: int) -> None:
        """Pages put in until ``row`` is (or every row is)."""
        while self.shown <= row and self.shown < len(self.ranked):
            self.add_page()

    def current(self) -> Ranked | None:
        """The highlighted row."""
        if not self.ranked or self.cursor_row < 0 or self.cursor_row >= len(self.ranked):
            return None
        return self.ranked[self.cursor_row]

    def toggle_group(self) -> bool:
        """+: the highlighted leader's filed items shown under it, or hidden (from a filed row too),
        the cursor on the leader. False when nothing changed (no row, or nothing filed under it: said)."""
        row = self.cursor_row
        if not (0 <= row < len(self.ranked)):
            self.notify("no suspects shown: no filed items to show")
            return False
        at = next(i for i in range(row, -1, -1) if self.ranked[i].rank)  # the row's leader
        leader = self.ranked[at].evidence
        if not leader.same_phrase:
            self.notify("no constraints are filed under this row")
            return False
        self.expanded ^= {key_of(leader)}
        self.ranked = rows_of(self.leaders, self.expanded, self.enabled)
        end = max(self.shown, at + 1) + (len(leader.same_phrase) if key_of(leader) in self.expanded else 0)
        self.clear()
        self.shown = 0
        while self.shown < min(end, len(self.ranked)):
            self.add_page()
        self.move_cursor(row=at)
        return True

    def _cells(self, r: Ranked) -> tuple[Text | str, ...]:
        e = r.evidence
        # A filed item: no rank of its own, under its leader.
        lead = same_phrase_tag(e, key_of(e) in self.expanded) if r.rank else "└ "
        columns = self.layout_columns
        cells: dict[str, Text | str] = {
            "mark": mark_cell(self.mark(e)),
            "rank": str(r.rank) if r.rank else "",
            "score": f"{r.score:.2f}",
            "instr": str(e.instruction_id),
            "constraint": Text(shorten(f"{lead}{e.position}. {after_prefix(e.text, self.prefix)}",
                                       self.text_width), style="" if r.rank else "dim"),
            "writer": Text(writer_cell(e.writer.model, e.writer.mode,
                                       column_width(columns, "writer"), self.models)),
            "reasons": reason_tags(e, self.enabled, short=any(c is SHORT_REASONS for c in columns)),
            "outcome": outcome(e),
            "similarity": bar(e.similarity.highest if e.similarity else None),
            "copied": Text(copied(e)),
            "echo": echo_cell(e.echo),
            "trust": Text(shorten(trust_marks(e), 18)),
            "flags": Text(shorten(", ".join(e.flags) or "-", 14)),
        }
        return tuple(cells[c.key] for c in columns)
