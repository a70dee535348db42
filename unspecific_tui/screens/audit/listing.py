"""The Audit screen's constraint list: an instruction's rows read once per (instruction, response,
ratio) and cached, sorted and filtered, shown in the list (widgets/constraint_list.py) and its head;
the list's cursor and keys (s, /, l, enter, escape).
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from pipeline.analysis.similarity import Similarity, lexical_similarity
from pipeline.analysis.specificity import after_prefix, shared_prefix
from pipeline.analysis.suspicion import Evidence, instruction_evidence
from pipeline.store.verdicts import Verdict
from pipeline.store.view import Constraint, InstructionData, Writer
from unspecific_tui.screens.audit.state import AuditBase, Rows
from unspecific_tui.widgets.constraint_list import (
    FILTERS,
    SORTS,
    ConstraintList,
    ListRow,
    filter_rows,
    similarity_label,
    sort_rows,
)

CACHE = 64  # instructions' rows kept (as the store view keeps their texts)


class ListPart(AuditBase):
    """The list beside the detail, and the rows it shows."""

    def action_cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.refresh_constraint()
        self._say(f"list sorted by {self.sort}")

    def action_cycle_filter(self) -> None:
        """The next filter; when it hides the shown constraint, the list's first row is shown."""
        self.filter = FILTERS[(FILTERS.index(self.filter) + 1) % len(FILTERS)]
        self.refresh_constraint()
        rows = self._rows_shown
        if rows and all(r.constraint_id != self.shown.constraint_id for r in rows):
            self.index = self._pos.get(rows[0].constraint_id, self.index)
            self.refresh_constraint()
        self._say(f"list shows: {self.filter}")

    def _list_visible(self) -> bool:
        if self._narrow():
            return self.has_class("-list")
        return not self.query_one("#audit-side").has_class("-hidden")

    def _sync_list(self) -> None:
        """The list shows the rows of the shown instruction (replaced only when they changed)."""
        table = self.query_one(ConstraintList)
        table.show_rows(self._rows_shown, self._list_key)
        table.select(self.shown.constraint_id)

    def action_toggle_list(self) -> None:
        """Wide: hide (show) the list, more room for the texts. Narrow: the list in place of the
        text pane, and back (enter on a row comes back too)."""
        if self._narrow():
            self.toggle_class("-list")
            if self.has_class("-list"):
                self._sync_list()
                self.query_one(ConstraintList).focus()
            self._render_head_only()  # over the list the head holds the whole constraint
            return
        self.query_one("#audit-side").toggle_class("-hidden")
        if self._list_visible():
            self._sync_list()

    def action_escape(self) -> None:
        """escape: at 80 columns, from the list back to the text; else stop following (n / p then
        move through the list); with neither, says so."""
        if self._narrow() and self.has_class("-list"):
            self.action_toggle_list()
        elif self.app.following is not None:
            self.action_stop_following()
        else:
            self._say("nothing followed to stop: f picks a flag or the suspicion queue")

    def action_enter(self) -> None:
        """enter with no row to pick (the list out of sight at 80 columns, or empty): says why."""
        self._say("enter picks a row of the list: l shows it" if not self._list_visible()
                  else "the list has no row to pick")

    def _to_text(self) -> None:
        """At 80 columns over the list (`l`): back to the text, for the keys that act on a pane (t,
        PgUp/PgDn, o), which would change a pane out of sight."""
        if self._narrow() and self.has_class("-list"):
            self.action_toggle_list()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on the list: at 80 columns, back to the text of the row chosen."""
        if event.data_table is not self.query_one(ConstraintList):
            return
        if self.has_class("-list"):
            self.remove_class("-list")
            self._render_head_only()
        elif self._narrow():  # the list is out of sight (it keeps the focus): enter has no row to pick
            self._say("enter picks a row of the list: l shows it")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The list's cursor moved (up/down, a click): its constraint's detail follows."""
        table = self.query_one(ConstraintList)
        if event.data_table is not table:
            return
        # The cursor as it is now: a highlight posted while the rows were replaced is stale.
        cid = table.constraint_at(table.cursor_row)
        if cid is not None and cid != self.shown.constraint_id and cid in self._pos:
            self.index = self._pos[cid]
            self.refresh_constraint()

    def _visible(self, rows: list[ListRow]) -> list[ListRow]:
        return filter_rows(sort_rows(rows, self.sort), self.filter)

    def _instruction_rows(self, data: InstructionData, writer: Writer | None = None) -> Rows:
        """The rows on ``writer``'s response (by default the one shown: ``_writer_of``), read once."""
        writer, ratio = self._writer_of(data, writer), self._ratio(data)
        key = (data.id, writer, ratio)
        hit = self._rows.get(key)
        if hit is None:
            hit = self._rows[key] = self._read_rows(data, writer, ratio)
            if len(self._rows) > CACHE:
                self._rows.popitem(last=False)
        self._rows.move_to_end(key)
        return hit

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
                rows.append(ListRow(con.id, con.position or 0, con.text, "not judged", None, None,
                                    _lexical_similarity(con, data), False, (), (),
                                    tuple(sorted(flags.get(con.id, {}))), 0.0, shown_text=shown))
                continue
            sim = e.similarity or _lexical_similarity(con, data)
            rows.append(ListRow(con.id, con.position or 0, con.text, _outcome(e), e.response_trust, e.summary_trust,
                                sim, e.similarity is not None, tuple(e.copied), tuple(e.copied_from),
                                tuple(e.flags), e.score(), e.copy_count, shown, e.echo, e.summary_echo))
        return Rows(rows, verdicts, flags)

    def _render_list_head(self, data: InstructionData, rows: list[ListRow], visible: list[ListRow]) -> None:
        self._put("audit-task", Text.assemble(("task: ", "bold"),
                                              data.main_task.replace("\n", " ") or "(no task stored)"))
        label = similarity_label(rows)
        shown = f"{len(visible)}/{len(rows)}" if len(visible) != len(rows) else f"{len(rows)}"
        line = Text.assemble(
            (f"{shown} constraints", "bold"), f" · sort: {self.sort} (s) · show: {self.filter} (/) · sim: {label}",
            (" · resp/summ: judges yes-no, * a Yes whose quote is MISSING", "dim"),
            no_wrap=True, overflow="ellipsis")
        self._put("audit-list-head", line)


def _outcome(e: Evidence) -> str:
    """The constraint's outcome on the shown response, as pipeline.analysis.metrics counts it (the
    item outcome of the raters who judged both texts; without a judged summary, the response's own)."""
    if e.response_passed is None:
        return "not judged"
    if e.summary_passed is None:
        return "passes full" if e.response_passed else "fails full"
    if e.response_passed:
        return "pass both" if e.summary_passed else "FLIPPED"
    return "fails full"


def _lexical_similarity(con: Constraint, data: InstructionData) -> Similarity | None:
    """The stand-in while no similarity is stored: share of the constraint's words in each reference."""
    if not data.article_a:
        return None
    return lexical_similarity(con.id, con.text, data.article_a, data.article_b or None)
