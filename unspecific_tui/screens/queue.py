"""Suspects: every (constraint, model, mode) of the benchmark ranked by copy-paste evidence.

Pushed over the current screen (``!`` on Instructions, or "Suspects" in the command palette),
not a mode of its own: the keys 1-6 keep switching the six screens and escape comes back. The
queue's head (pipeline.analysis.suspicion.suspicion_queue with ``limit``: the store ranks every
item, only the top TOP become Evidence) is read in a worker on a view of its own; the status says
how long the queue is: "80 leaders, 27 more filed under them" (group_by_phrase files an item that
copied only a higher item's phrase under it). ``+`` shows the highlighted leader's filed items as
rows under it (again: hides them). Rows come a page at a time, the next page when the cursor
reaches the last row, read from the store once the loaded ones are shown. Switching a reason off
or on asks the store again (the table shows it is loading meanwhile). Enter opens Audit on the
row, and Audit's next/prev then follow the rows
(``app.nav``: what n / p follow); there `y` / `d` mark the item confirmed / dismissed and go on to the next.
The marks show here (the first column), with how many are done. `o` shows copy evidence only
(similar, copied), the reasons that lead the ranking.

The screen is split by concern: this module asks the store (a worker, the reasons switched on, the
head read further) and says what it found (the status, the reasons bar, the highlighted row);
``queue_table.py`` (QueueTable) owns the rows shown, their pages, their columns and the groups
``+`` opens; ``queue_rows.py`` is what a row shows (cells, the columns that fit, the detail).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Header, Static

from pipeline.analysis.suspicion import COPY_REASONS, EVIDENCE_COMMAND, REASONS, Evidence
from pipeline.store.view import StoreView
from unspecific_tui.context import Context
from unspecific_tui.following import Following, MarkKey, Stop, marks_line
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.screens.queue_rows import (
    REASON_KEYS,
    Ranked,
    detail_text,
    key_of,
    length_line,
    reasons_bar,
)
from unspecific_tui.screens.queue_table import QueueTable
from unspecific_tui.widgets.footer import KeyFooter

# Suspects read from the store at a time: the store ranks every item, but building each one's
# Evidence costs (about 40 µs an item: 100,000 suspects of a 2,000-instruction store take seconds).
TOP = 1000
LABEL = "suspicion queue"  # what Audit's head says it follows


@dataclass(frozen=True)
class Query:
    """What one ranking asked the store for: these reasons, the top ``limit`` suspects."""

    enabled: tuple[str, ...]
    limit: int


class QueueReady(Message):
    """The worker ranked the store's evidence for ``query`` (``seconds``: how long it took):
    the top suspects and how many there are in all; ``missing`` names the evidence never
    computed for this store (an older one), with what computes it."""

    def __init__(self, query: Query, evidence: list[Evidence], total: int, missing: tuple[str, ...],
                 seconds: float) -> None:
        super().__init__()
        self.query, self.evidence, self.total, self.missing, self.seconds = (query, evidence, total,
                                                                             missing, seconds)


class QueueScreen(AppScreen):
    CSS_PATH = "queue.tcss"
    HELP_NAME = "queue"  # `?` shows help/queue.md, not the screen under it
    BINDINGS = [
        Binding("enter", "audit", "Audit", show=True),
        Binding("escape", "back", "Back", show=True),
        Binding("o", "copy_only", "Copy only", show=True),
        *(Binding(key, f"reason('{reason}')", f"Reason: {reason}", show=False)
          for reason, key in REASON_KEYS.items()),
        Binding("plus", "expand", "Show filed", key_display="+"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.enabled: tuple[str, ...] = REASONS
        # the loaded head of the queue; None until the worker reports
        self.evidence: list[Evidence] | None = None
        self.total = 0  # suspects in all under ``enabled`` (the loaded ones are the first)
        self.limit = TOP  # how many the last query asked for
        self.missing: tuple[str, ...] = ()  # evidence never computed for this store, and how to
        self.seconds = 0.0
        self._keep_row: int | None = None  # where the cursor stays once more suspects are read

    @property
    def table(self) -> QueueTable:
        """The ranked rows (queue_table.py): what the table shows is its own."""
        return self.query_one("#queue-table", QueueTable)

    @property
    def leaders(self) -> list[Ranked]:
        """The queue's rows read, each leading the items filed under it."""
        return self.table.leaders

    @property
    def ranked(self) -> list[Ranked]:
        """The table's rows: the leaders and the filed items shown (what Audit follows)."""
        return self.table.ranked

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="queue-reasons")
        yield Static(id="queue-status")
        yield Static(id="queue-note")
        yield Static(id="queue-empty")
        yield QueueTable(self._mark, id="queue-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="queue-detail")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.sub_title = f"Suspects · {self.app.sub_title}"
        self.table.focus()
        self.query_one("#queue-empty", Static).display = False
        self.query_one("#queue-note", Static).display = False
        self._reasons_line()
        # The status line says it is ranking: the empty table's loading animation would take CPU
        # time from the ranking (a third of a second of 1 on a busy 2-core machine).
        self._ask(TOP, "ranking every constraint by its copy-paste evidence…", animate=False)

    def _ratio(self) -> float:
        """The ratio the queue ranks at: the one the auditor was looking at, by the rule every view
        follows (app.view_ratio)."""
        return self.app.view_ratio(self.app.nav.context.ratio)

    def _ask(self, limit: int, status: str, *, animate: bool = True) -> None:
        """Rank again in the worker under the reasons switched on; the table loads meanwhile."""
        self.table.loading = animate
        self.query_one("#queue-status", Static).update(status)
        self._load(self._ratio(), Query(self.enabled, limit))

    @work(thread=True, exclusive=True, group="suspicion-queue", exit_on_error=False)
    def _load(self, ratio: float | None, query: Query) -> None:
        from pipeline.analysis.similarity import constraint_similarities
        from pipeline.analysis.suspicion import suspicion_queue

        t = time.perf_counter()
        view = StoreView.open(self.app.store_path)
        try:
            queue = suspicion_queue(view, ratio=ratio, enabled=query.enabled, limit=query.limit)
            missing = []
            if queue.copy_evidence_missing:
                missing.append(f"copied n-grams were not computed for every response (`{EVIDENCE_COMMAND}`"
                               " computes them)")
            # No similarity anywhere (one cheap query, asked only when the queue shows none).
            if (not any(e.similarity is not None for e in queue) and view.instruction_ids()
                    and not constraint_similarities(view)):
                missing.append(f"constraint-reference similarity was never computed (`{EVIDENCE_COMMAND}`"
                               " computes it)")
        finally:
            view.close()
        self.post_message(QueueReady(query, list(queue), queue.total, tuple(missing),
                                     time.perf_counter() - t))

    def on_queue_ready(self, message: QueueReady) -> None:
        if message.query.enabled != self.enabled:
            return  # a reason was switched since it was asked: the newer query reports
        self.evidence, self.total, self.limit = message.evidence, message.total, message.query.limit
        self.missing, self.seconds = message.missing, message.seconds
        note = self.query_one("#queue-note", Static)
        note.update("This store predates some evidence: " + "; ".join(self.missing) + "."
                    if self.missing else "")
        note.display = bool(self.missing)
        self.rerank()
        self.table.loading = False
        self.table.focus()  # again: a loading table may not have taken it

    # -- ranking and the table --------------------------------------------------------------
    def rerank(self) -> None:
        """The table from the loaded rows; back to where the cursor was when more were read."""
        self.table.rank(self.evidence or [], self.enabled)
        self._reasons_line()
        self._fill()
        keep, self._keep_row = self._keep_row, None
        if keep is not None:
            self.table.show_through(keep)
            self.table.move_cursor(row=min(keep, len(self.ranked) - 1))

    def _fill(self) -> None:
        table = self.table
        table.fill(self.size.width or self.app.size.width)
        self._status()
        empty = self._empty_message()
        self.query_one("#queue-empty", Static).update(empty)
        self.query_one("#queue-empty", Static).display = bool(empty)
        table.display = not empty
        self._detail()

    def items(self) -> frozenset[MarkKey]:
        """Every item read, the leaders and the items filed under them, as marks are keyed."""
        return frozenset((e.response_id or 0, e.constraint_id)
                         for r in self.leaders for e in (r.evidence, *r.evidence.same_phrase))

    def _mark(self, e: Evidence) -> str | None:
        return self.app.marks.get((e.response_id or 0, e.constraint_id))

    def _empty_message(self) -> str:
        if self.evidence is None:
            return ""
        if not self.enabled:
            keys = " ".join(REASON_KEYS.get(r, "?") for r in REASONS)
            return f"Every reason is switched off: switch one on ({keys})."
        if not self.evidence and self.enabled == REASONS:
            return ("No suspects: no constraint on any response in this store shows one of the reasons"
                    + (" (with the evidence it holds: see above)." if self.missing else "."))
        if not self.ranked:
            return "No suspects with the reasons switched on: switch another one on."
        return ""

    def _reasons_line(self) -> None:
        width = (self.size.width or self.app.size.width) - 2  # the bar's padding
        self.query_one("#queue-reasons", Static).update(reasons_bar(self.enabled, width))

    def _status(self) -> None:
        if self.evidence is None:
            return
        ratio = self.evidence[0].ratio if self.evidence else self._ratio()
        view = "copy evidence only" if self.enabled == COPY_REASONS else ""
        done = marks_line(self.app.marks, self.items())
        wide = self.size.width >= 100
        head = length_line(self.leaders, self.total, wide=wide) + (f" · {view}" if view else "")
        if not wide and len(f"{head} · {done}") > self.size.width - 2:  # one line: the count done alone
            done = done.split(" (")[0]
        self.query_one("#queue-status", Static).update(
            f"{head} · {done}"
            + (f" · summary ratio {ratio if ratio is not None else '-'} · enter: Audit, following the queue"
               if wide else ""))

    def _detail(self) -> None:
        """The highlighted row in full: its constraint and what each of its reasons means."""
        row = self.table.current()
        e = row.evidence if row is not None else None
        self.query_one("#queue-detail", Static).update(
            "" if e is None
            else detail_text(e, self.enabled, self._mark(e), key_of(e) in self.table.expanded))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail()
        if event.cursor_row >= self.table.shown - 1:
            self._more()

    def on_resize(self) -> None:
        self._reasons_line()
        if self.evidence is not None and self.table.fit(self.size.width)[0] != self.table.layout_columns:
            row = self.table.cursor_row
            self._fill()
            self.table.move_cursor(row=row)
        self._status()

    def context(self) -> Context | None:
        row = self.table.current()
        if row is None:
            return None
        e = row.evidence
        return Context(e.instruction_id, e.writer, e.ratio, e.constraint_id)

    def on_screen_resume(self) -> None:
        """Back from Audit: the marks given there, and the cursor on the item Audit shows."""
        if self.evidence is None:
            return
        table = self.table
        following = self.app.nav.following
        row = following.index if following is not None and following.label == LABEL else table.cursor_row
        self._fill()
        if row < len(self.ranked):
            table.show_through(row)
        table.move_cursor(row=min(row, max(0, len(self.ranked) - 1)))
        table.focus()

    # -- actions ---------------------------------------------------------------------------
    def action_copy_only(self) -> None:
        """o: only the copy evidence (similar, copied); again: every reason."""
        self.enabled = REASONS if self.enabled == COPY_REASONS else COPY_REASONS
        self._reasons_line()
        self._ask(TOP, "ranking by copy evidence only…" if self.enabled == COPY_REASONS else "re-ranking…")

    def action_reason(self, reason: str) -> None:
        """Switch one reason off or on and re-rank what is loaded."""
        on = set(self.enabled) ^ {reason}
        self.enabled = tuple(r for r in REASONS if r in on)
        self._reasons_line()
        if self.enabled:
            self._ask(TOP, "re-ranking…")
            return
        # Nothing to ask the store: no reason, no suspect.
        self.evidence, self.total = [], 0
        self.table.loading = False
        self.rerank()

    def _more(self) -> None:
        """The cursor is on the last row: the next page, or the next suspects from the store."""
        table = self.table
        if table.shown < len(self.ranked):
            table.add_page()
            self._status()
        elif self.evidence is not None and self._read() < self.total and self._keep_row is None:
            self._keep_row = table.shown - 1
            self._ask(self.limit + TOP, f"reading suspects {self._read() + 1:,} to"
                                        f" {min(self.total, self._read() + TOP):,}…")

    def _read(self) -> int:
        """Suspects read from the store: the leaders and the items filed under them."""
        return sum(1 + len(r.evidence.same_phrase) for r in self.leaders)

    def action_expand(self) -> None:
        """+: show the highlighted leader's filed items under it, or hide them (from a filed row too)."""
        if self.table.toggle_group():
            self._status()
            self._detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_audit()

    def action_audit(self) -> None:
        row = self.table.current()
        if row is None:
            return
        index = self.table.cursor_row
        self.app.nav.follow(Following(LABEL, [Stop(r.evidence.constraint_id, r.evidence.instruction_id,
                                                   r.evidence.writer) for r in self.ranked], index=index,
                                      items=self.items()))
        e = row.evidence
        self.app.open_audit(e.instruction_id, e.writer, e.constraint_id)

    def action_back(self) -> None:
        self.dismiss()
