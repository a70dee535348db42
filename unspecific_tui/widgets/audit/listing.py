"""Audit's constraint list beside the detail: an instruction's rows read once per (instruction,
response, ratio) and cached, sorted and filtered, shown in the list (widgets/constraint_list.py)
under its head line. It owns its rows, their sort and filter; when its cursor moves (up/down, a
click) it posts ``AuditList.Picked``, and enter on a row posts ``AuditList.Chosen``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from pipeline.analysis.similarity import Similarity, lexical_similarity
from pipeline.analysis.specificity import after_prefix, shared_prefix
from pipeline.analysis.suspicion import instruction_evidence
from pipeline.core.definitions import Outcome
from pipeline.store.verdicts import Verdict
from pipeline.store.view import Constraint, InstructionData, Writer
from unspecific_tui.widgets.audit.pane_text import pane_texts
from unspecific_tui.widgets.audit.state import Item, Rows
from unspecific_tui.widgets.constraint_list import (
    FILTERS,
    SORTS,
    ConstraintList,
    ListRow,
    filter_rows,
    similarity_label,
    sort_rows,
)

if TYPE_CHECKING:
    from unspecific_tui.app import UnspecificApp

CACHE = 64  # instructions' rows kept (as the store view keeps their texts)


class AuditList(Vertical):
    """The list's head line over the list of the shown instruction's constraints."""

    if TYPE_CHECKING:  # at run time Textual's own ``app``: the one running, an UnspecificApp
        app: UnspecificApp

    class Picked(Message):
        """The list's cursor is on another constraint's row: show that constraint."""

        def __init__(self, constraint_id: int) -> None:
            super().__init__()
            self.constraint_id = constraint_id

    class Chosen(Message):
        """Enter on the list's row."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.sort = SORTS[0]
        self.filter = FILTERS[0]
        self._rows: OrderedDict[tuple[int, Writer | None, float], Rows] = OrderedDict()
        self._stamp = 0  # counts the store's changes: rows read before one are never shown again
        # The rows as sorted and filtered, what they show and the constraint the cursor is to be on
        # (the table holds the rows only while it is in sight).
        self.rows_shown: list[ListRow] = []
        self._key: object = None
        self._constraint: int | None = None
        # The constraint shown although the filter hides it (its row stays in the list), or None.
        self.lifted: int | None = None
        self._head: Text | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="audit-list-head")
        yield ConstraintList(id="audit-list")

    @property
    def table(self) -> ConstraintList:
        return self.query_one(ConstraintList)

    def forget(self) -> None:
        """The store changed: rows are read again."""
        self._rows.clear()
        self._stamp += 1

    def cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]

    def cycle_filter(self) -> None:
        self.filter = FILTERS[(FILTERS.index(self.filter) + 1) % len(FILTERS)]

    def arranged(self, rows: list[ListRow], keep: int | None = None) -> list[ListRow]:
        """The rows sorted and filtered; ``keep``'s row stays where the sort puts it although the
        filter hides it (the constraint the head names: a mark lands on the row the list shows)."""
        passing = {r.constraint_id for r in filter_rows(rows, self.filter)}
        return [r for r in sort_rows(rows, self.sort)
                if r.constraint_id in passing or r.constraint_id == keep]

    def first_passing(self) -> int | None:
        """While the filter is lifted for the shown row, the first row it lets through (None: none)."""
        if self.lifted is None:
            return None
        return next((r.constraint_id for r in self.rows_shown if r.constraint_id != self.lifted), None)

    def rows(self, data: InstructionData, writer: Writer | None, ratio: float) -> Rows:
        """The rows on ``writer``'s response at ``ratio``, read once."""
        key = (data.id, writer, ratio)
        hit = self._rows.get(key)
        if hit is None:
            hit = self._rows[key] = self._read_rows(data, writer, ratio)
            if len(self._rows) > CACHE:
                self._rows.popitem(last=False)
        self._rows.move_to_end(key)
        return hit

    def item(self, data: InstructionData, constraint_id: int, writer: Writer | None,
             ratio: float) -> tuple[Item, list[ListRow]]:
        """Constraint ``constraint_id`` of ``data`` on ``writer``'s response at ``ratio`` with its row,
        verdicts and flags, and its instruction's rows."""
        rows = self.rows(data, writer, ratio)
        row = next((r for r in rows.rows if r.constraint_id == constraint_id), None)
        item = Item(data, data.constraints[constraint_id], writer, ratio, pane_texts(data, writer, ratio),
                    row, rows.verdicts.get(constraint_id, []), rows.flags.get(constraint_id, {}))
        return item, rows.rows

    def show(self, data: InstructionData, rows: list[ListRow], writer: Writer | None, ratio: float,
             constraint_id: int, *, draw: bool) -> None:
        """The list of ``data``'s rows, its cursor on ``constraint_id``: drawn when ``draw`` (the
        list in sight), else kept until ``sync``; the head line always."""
        passing = filter_rows(rows, self.filter)
        ids = {r.constraint_id for r in passing}
        lifted = next((r for r in rows if r.constraint_id == constraint_id and r.constraint_id not in ids),
                      None)
        self.lifted = lifted.constraint_id if lifted is not None else None
        self.rows_shown = self.arranged(rows, keep=constraint_id)
        self._key = (data.id, writer, ratio, self.sort, self.filter, self.lifted, self._stamp)
        self._constraint = constraint_id
        if draw:
            self.sync()
        label = similarity_label(rows)
        shown = f"{len(passing)}/{len(rows)}" if len(passing) != len(rows) else f"{len(rows)}"
        line = Text.assemble(
            (f"{shown} constraints", "bold"),
            (f" + #{lifted.position}: filter lifted for the item shown", "bold yellow") if lifted else "",
            f" · sort: {self.sort} (s) · show: {self.filter} (/) · sim: {label}",
            (" · resp/summ: judges yes-no, * a Yes whose quote is MISSING", "dim"),
            no_wrap=True, overflow="ellipsis")
        if line != self._head:  # an update repaints: most moves leave the head line as it was
            self._head = line
            self.query_one("#audit-list-head", Static).update(line)

    def sync(self) -> None:
        """The table shows the rows of the shown instruction (replaced only when they changed)."""
        table = self.table
        table.show_rows(self.rows_shown, self._key)
        table.select(self._constraint)

    def draw_ahead(self, rows: list[ListRow], constraint_id: int) -> None:
        self.table.draw_ahead(self.arranged(rows), constraint_id)

    def cursor_constraint(self) -> int | None:
        table = self.table
        return table.constraint_at(table.cursor_row)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The cursor moved (up/down, a click): its constraint is to be shown."""
        event.stop()
        # The cursor as it is now: a highlight posted while the rows were replaced is stale.
        cid = self.cursor_constraint()
        if cid is not None and cid != self._constraint:
            self.post_message(self.Picked(cid))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(self.Chosen())

    def _read_rows(self, data: InstructionData, writer: Writer | None, ratio: float) -> Rows:
        view = self.app.view
        response = data.responses.get(writer) if writer else None
        summary = data.summary(writer, ratio) if writer else None
        ids = [g.id for g in (response, summary) if g is not None]
        verdicts: dict[int, list[Verdict]] = {}
        for v in view.shown_verdicts(ids) if ids else []:
            verdicts.setdefault(v.constraint_id, []).append(v)
        for vs in verdicts.values():
            vs.sort(key=lambda v: (v.kind != "response", v.judge))
        flags = view.instruction_flags(data.id)
        evidence = instruction_evidence(view, data.id, writer, ratio) if writer else {}
        active = sorted((c for c in data.constraints.values() if c.active), key=lambda c: c.position or 0)
        prefix = shared_prefix([c.text for c in active])
        rows = []
        for con in active:
            e = evidence.get(con.id)
            shown = after_prefix(con.text, prefix)
            if e is None:  # no response by this writer: nothing judged, nothing copied
                rows.append(ListRow(con.id, con.position or 0, con.text, Outcome.NOT_JUDGED, None, None,
                                    _lexical_similarity(con, data), False, (), (),
                                    tuple(sorted(flags.get(con.id, {}))), 0.0, shown_text=shown))
                continue
            sim = e.similarity or _lexical_similarity(con, data)
            rows.append(ListRow(con.id, con.position or 0, con.text, e.outcome, e.response_trust,
                                e.summary_trust, sim, e.similarity is not None, tuple(e.copied),
                                tuple(e.copied_from), tuple(e.flags), e.score(), e.copy_count, shown, e.echo,
                                e.summary_echo))
        return Rows(rows, verdicts, flags)


def _lexical_similarity(con: Constraint, data: InstructionData) -> Similarity | None:
    """The stand-in while no similarity is stored: share of the constraint's words in each reference."""
    if not data.article_a:
        return None
    return lexical_similarity(con.id, con.text, data.article_a, data.article_b or None)
