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
(``app.following``); there `y` / `d` mark the item confirmed / dismissed and go on to the next.
The marks show here (the first column), with how many are done. `o` shows copy evidence only
(similar, copied), the reasons that lead the ranking.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Header, Static

from pipeline.analysis.specificity import after_prefix, shared_prefix
from pipeline.analysis.suspicion import (
    COPY_REASONS,
    EVIDENCE_COMMAND,
    REASONS,
    Evidence,
    reason_sentences,
    same_phrase_sentence,
)
from pipeline.core.definitions import ECHO_HIGH
from pipeline.store.view import StoreView, Writer
from unspecific_tui.app import Context
from unspecific_tui.following import Following, Stop
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.widgets.bar import bar
from unspecific_tui.widgets.constraint_list import echo_cell
from unspecific_tui.widgets.fit import distinct_clip
from unspecific_tui.widgets.footer import KeyFooter

PAGE = 300  # rows put in the table at a time (a DataTable's cost grows with its rows)
# Suspects read from the store at a time: the store ranks every item, but building each one's
# Evidence costs (about 40 µs an item: 100,000 suspects of a 2,000-instruction store take seconds).
TOP = 1000
LABEL = "suspicion queue"  # what Audit's head says it follows
# One key per reason (digits switch screens); its short tag in the table.
REASON_KEYS = {"similar": "s", "copied": "c", "echo": "e", "lost": "l", "split": "d", "unquoted": "u",
               "uncertain": "t"}
REASON_TAGS = {"similar": "sim", "copied": "copy", "echo": "echo", "lost": "lost", "split": "split", "unquoted": "unq",
               "uncertain": "unsure"}
REASON_STYLES = {"similar": "cyan", "copied": "magenta", "echo": "magenta", "lost": "yellow", "split": "red",
                 "unquoted": "red", "uncertain": "red"}
# What computes each kind of evidence an older store lacks.
# Optional columns give way before the constraint gets narrower than this (or a fifth of the width).
MIN_CONSTRAINT_WIDTH = 20
ROOMY_CONSTRAINT = 30  # the model/mode column widens to its labels only while the constraint keeps this


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
        self.query, self.evidence, self.total, self.missing, self.seconds = query, evidence, total, missing, seconds


@dataclass(frozen=True)
class Ranked:
    score: float
    evidence: Evidence
    rank: int = 0  # the leader's place in the queue; 0: an item filed under the leader above it


Key = tuple[int, Writer]  # a row's item: its constraint and response


def key_of(e: Evidence) -> Key:
    return e.constraint_id, e.writer


def ranked(evidence: Sequence[Evidence], enabled: tuple[str, ...]) -> list[Ranked]:
    """The queue's leaders (already in rank order), their ranks and scores under the ``enabled`` reasons."""
    return [Ranked(e.score(enabled), e, i) for i, e in enumerate(evidence, 1)]


def rows_of(leaders: Sequence[Ranked], expanded: set[Key], enabled: tuple[str, ...]) -> list[Ranked]:
    """The table's rows: the leaders, each ``expanded`` one followed by the items filed under it."""
    out: list[Ranked] = []
    for r in leaders:
        out.append(r)
        if r.evidence.same_phrase and key_of(r.evidence) in expanded:
            out += [Ranked(f.score(enabled), f) for f in r.evidence.same_phrase]
    return out


def length_line(leaders: Sequence[Ranked], total: int, *, wide: bool) -> str:
    """How long the queue is, one way: "80 leaders, 27 more filed under them" (the items
    group_by_phrase filed under a leader), "80 suspects" when nothing is filed; when the store
    holds more than the head read, how many of its ``total`` were read."""
    filed = sum(len(r.evidence.same_phrase) for r in leaders)
    n, read = len(leaders), len(leaders) + filed
    rows = (f"{n:,} leader{'' if n == 1 else 's'}, {filed:,} more filed under them" if filed
            else f"{n:,} suspect{'' if n == 1 else 's'}")
    if read >= total:
        return rows
    if not wide:
        return f"{rows} · {read:,} of {total:,} read"
    head = f"the top {read:,} of {total:,} suspects"
    return f"{head}: {rows} (more as you scroll)" if filed else f"{head} (more as you scroll)"


def shorten(text: str, width: int) -> str:
    """``text`` in ``width`` cells: cut at a word boundary with an ellipsis, never mid-word
    (unless one word alone is wider than the cell)."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = text[: max(1, width - 1)]
    if " " in cut and text[len(cut)] != " ":
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "…"


def writer_cell(model: str, mode: str, width: int, models: Sequence[str] = ()) -> str:
    """"model [mode]" in ``width`` cells: the model's name is cut where it does not tell it from the
    other ``models`` shown, never the mode (two responses of one model differ only there)."""
    if not mode:
        return distinct_clip(model, models, width)
    tail = f" [{mode}]"
    return distinct_clip(model, models, max(1, width - len(tail))) + tail


def _verdict(passed: bool | None) -> Text:
    if passed is None:
        return Text("-", style="dim")
    return Text("Y", style="green") if passed else Text("N", style="red")


def outcome(e: Evidence) -> Text:
    """Response then summary: "Y→N" is satisfied in the response and lost in the summary."""
    return Text.assemble(_verdict(e.response_passed), "→", _verdict(e.summary_passed))


def same_phrase_tag(e: Evidence, expanded: bool = False) -> str:
    """'[+15] ' before an item with 15 more constraints of its instruction filed under it (on its
    phrase alone); '[-15] ' while they are shown under it."""
    return f"[{'-' if expanded else '+'}{len(e.same_phrase)}] " if e.same_phrase else ""


def copied(e: Evidence) -> str:
    """pipeline.analysis.copy_count's count: "12w A" (words of the constraint, and their source)."""
    return e.copy_count.short()


MARK_CELLS = {"confirmed": Text("✓", style="bold green"), "dismissed": Text("✗", style="dim")}


def mark_cell(mark: str | None) -> Text:
    return MARK_CELLS.get(mark or "", Text(" "))


def done_line(marks: Sequence[str | None]) -> str:
    """How many of the loaded items are marked: "3 done (2 confirmed, 1 dismissed)"."""
    confirmed, dismissed = marks.count("confirmed"), marks.count("dismissed")
    return f"{confirmed + dismissed} done ({confirmed} confirmed, {dismissed} dismissed)"


def trust_marks(e: Evidence) -> str:
    marks = [f"{name[0]}: {t.marks}" for name, t in (("resp", e.response_trust), ("sum", e.summary_trust))
             if t is not None and t.marks]
    return " · ".join(marks) or "-"


def reason_tags(e: Evidence, enabled: tuple[str, ...], *, short: bool = False) -> Text:
    """The row's reasons as tags; the ones switched off are dim (they count for nothing)."""
    text = Text()
    for reason in e.reasons():
        tag = REASON_KEYS.get(reason, reason[0]) if short else REASON_TAGS.get(reason, reason)
        style = REASON_STYLES.get(reason, "bold") if reason in enabled else "dim strike"
        text.append(tag, style=style)
        text.append("" if short else " ")
    text.rstrip()
    return text


REASON_ON, REASON_OFF = "●", "○"  # a reason switched on / off: a symbol as well as a colour


def reasons_bar(enabled: tuple[str, ...], width: int) -> Text:
    """Each reason with its key and whether it counts ("● s similar", "○ e echo") after a legend of the
    symbols, in ``width`` cells: where one line is too narrow, the reasons go on a second line, broken
    between two reasons, never inside one."""
    parts = [Text.assemble(("reasons", "bold"), (f" {REASON_ON} on {REASON_OFF} off:", "dim"))]
    for reason in REASONS:
        on = reason in enabled
        parts.append(Text.assemble((f"{REASON_ON if on else REASON_OFF} ", "bold" if on else "dim"),
                                   (REASON_KEYS.get(reason, "?"), "reverse" if on else "dim"),
                                   (f" {reason}", REASON_STYLES.get(reason, "bold") if on else "dim strike")))
    line = Text()
    used = 0
    for part in parts:
        if used and used + 1 + part.cell_len > width:
            line.append("\n")
            used = 0
        elif used:
            line.append(" ")
            used += 1
        line.append_text(part)
        used += part.cell_len
    return line


class QueueTable(DataTable):
    """The ranked rows; its enter (which selects the row, opening Audit) is named in the footer."""

    BINDINGS = [Binding("enter", "select_cursor", "Audit", show=True)]


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int  # 0: the constraint column, which takes what is left


# Always shown, then the optional ones in the order they give way (last first) as width shrinks:
# the copied count before the instruction's number (the row's detail names its instruction).
WRITER = Column("writer", "model/mode", 15)
CORE = (Column("mark", "✓", 1), Column("rank", "#", 6), Column("score", "score", 5),
        Column("constraint", "constraint", 0), WRITER)
OPTIONAL = (Column("reasons", "reasons", 22), Column("copied", "copied", 8), Column("instr", "instr.", 6),
            Column("outcome", "resp→sum", 8), Column("similarity", "similarity", 11), Column("trust", "trust", 18),
            Column("echo", "echo", 4), Column("flags", "flags", 14))
# Left to right, whichever are shown.
ORDER = ("mark", "rank", "score", "instr", "constraint", "writer", "reasons", "outcome", "similarity", "copied",
         "echo", "trust", "flags")
SHORT_REASONS = Column("reasons", "why", len(REASON_KEYS))  # when the full tags do not fit: the toggle keys
CELL_PADDING = 2  # a DataTable cell's padding, left and right
CHROME = 2  # the vertical scrollbar


def layout(width: int, writer: int = 0, ranks: int = 0) -> tuple[list[Column], int]:
    """The columns that fit ``width`` cells, left to right, and the constraint column's width. The
    model/mode column grows towards ``writer`` cells (the longest label) while the constraint keeps
    ROOMY_CONSTRAINT; the rank column is as wide as the highest of ``ranks`` rows' numbers."""

    def used(cols: list[Column]) -> int:
        return sum(c.width + CELL_PADDING for c in cols) + CHROME

    least = max(MIN_CONSTRAINT_WIDTH, width // 5)
    # Six cells held "300" in three: at 80 columns the constraint gets them.
    columns = [Column("rank", "#", len(str(ranks))) if c.key == "rank" and ranks else c for c in CORE]
    copied = next(c for c in OPTIONAL if c.key == "copied")
    for column in OPTIONAL:
        # The reasons' words only where the copy count fits beside them: the count is what the
        # queue is read for, the toggle keys say the same reasons in fewer cells.
        after = [copied] if column.key == "reasons" else []
        if width - used([*columns, column, *after]) >= least:
            columns.append(column)
        elif column.key == "reasons" and width - used([*columns, SHORT_REASONS]) >= least:
            columns.append(SHORT_REASONS)
    columns.sort(key=lambda c: ORDER.index(c.key))
    left = width - used(columns)
    grow = min(max(0, writer - WRITER.width), left - ROOMY_CONSTRAINT)
    if grow > 0:
        columns = [Column(c.key, c.label, c.width + grow) if c.key == "writer" else c for c in columns]
        left -= grow
    return columns, max(12, left)


def label_width(evidence: Sequence[Evidence] | None) -> int:
    """The longest "model [mode]" label of the rows."""
    return max((len(f"{e.writer.model} [{e.writer.mode}]" if e.writer.mode else e.writer.model)
                for e in evidence or []), default=0)


def column_width(columns: Sequence[Column], key: str) -> int:
    return next(c.width for c in columns if c.key == key)


class QueueScreen(AppScreen):
    CSS_PATH = "queue.tcss"
    HELP_NAME = "queue"  # `?` shows help/queue.md, not the screen under it
    BINDINGS = [
        Binding("enter", "audit", "Audit", show=True),
        Binding("escape", "back", "Back", show=True),
        Binding("o", "copy_only", "Copy only", show=True),
        *(Binding(key, f"reason('{reason}')", f"Reason: {reason}", show=False) for reason, key in REASON_KEYS.items()),
        Binding("plus", "expand", "Show filed", key_display="+"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.enabled: tuple[str, ...] = REASONS
        self.evidence: list[Evidence] | None = None  # the loaded head of the queue; None until the worker reports
        self.total = 0  # suspects in all under ``enabled`` (the loaded ones are the first)
        self.limit = TOP  # how many the last query asked for
        self.missing: tuple[str, ...] = ()  # evidence never computed for this store, and how to
        self.leaders: list[Ranked] = []  # the queue's rows, each leading the items filed under it
        self.expanded: set[Key] = set()  # the leaders whose filed items are shown under them (``+``)
        self.ranked: list[Ranked] = []  # the table's rows: the leaders and the filed items shown
        self.models: list[str] = []
        self.shown = 0
        self.seconds = 0.0
        self.columns: list[Column] = []
        self.text_width = 0
        self._keep_row: int | None = None  # where the cursor stays once more suspects are read
        self.prefix = ""  # the words most loaded constraints open with: the constraint column shows what follows

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="queue-reasons")
        yield Static(id="queue-status")
        yield Static(id="queue-note")
        yield Static(id="queue-empty")
        yield QueueTable(id="queue-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="queue-detail")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.sub_title = f"Suspects · {self.app.sub_title}"
        table = self.query_one("#queue-table", DataTable)
        table.focus()
        self.query_one("#queue-empty", Static).display = False
        self.query_one("#queue-note", Static).display = False
        self._reasons_line()
        # The status line says it is ranking: the empty table's loading animation would take CPU
        # time from the ranking (a third of a second of 1 on a busy 2-core machine).
        self._ask(TOP, "ranking every constraint by its copy-paste evidence…", animate=False)

    def _ratio(self) -> float:
        """The ratio the queue ranks at: the one the auditor was looking at, by the rule every view
        follows (app.view_ratio)."""
        return self.app.view_ratio(self.app.context.ratio)

    def _ask(self, limit: int, status: str, *, animate: bool = True) -> None:
        """Rank again in the worker under the reasons switched on; the table loads meanwhile."""
        self.query_one("#queue-table", DataTable).loading = animate
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
        self.post_message(QueueReady(query, list(queue), queue.total, tuple(missing), time.perf_counter() - t))

    def on_queue_ready(self, message: QueueReady) -> None:
        if message.query.enabled != self.enabled:
            return  # a reason was switched since it was asked: the newer query reports
        self.evidence, self.total, self.limit = message.evidence, message.total, message.query.limit
        self.missing, self.seconds = message.missing, message.seconds
        note = self.query_one("#queue-note", Static)
        note.update("This store predates some evidence: " + "; ".join(self.missing) + "." if self.missing else "")
        note.display = bool(self.missing)
        self.rerank()
        table = self.query_one("#queue-table", DataTable)
        table.loading = False
        table.focus()  # again: a loading table may not have taken it

    # -- ranking and the table --------------------------------------------------------------
    def rerank(self) -> None:
        """The table from the loaded rows; back to where the cursor was when more were read."""
        self.leaders = ranked(self.evidence or [], self.enabled)
        self.ranked = rows_of(self.leaders, self.expanded, self.enabled)
        self.prefix = shared_prefix([e.text for e in self.evidence or []])
        self.models = sorted({e.writer.model for e in self.evidence or []})  # clipped apart (writer_cell)
        self._reasons_line()
        self._fill()
        keep, self._keep_row = self._keep_row, None
        if keep is not None:
            while self.shown <= keep and self.shown < len(self.ranked):
                self._add_page()
            self.query_one("#queue-table", DataTable).move_cursor(row=min(keep, len(self.ranked) - 1))

    def _fill(self) -> None:
        table = self.query_one("#queue-table", DataTable)
        self.columns, self.text_width = self._layout(self.size.width or self.app.size.width)
        table.clear(columns=True)
        for column in self.columns:
            table.add_column(column.label, key=column.key, width=column.width or self.text_width)
        self.shown = 0
        self._add_page()
        empty = self._empty_message()
        self.query_one("#queue-empty", Static).update(empty)
        self.query_one("#queue-empty", Static).display = bool(empty)
        table.display = not empty
        self._detail()

    def _layout(self, width: int) -> tuple[list[Column], int]:
        return layout(width, label_width(self.evidence), len(self.leaders))

    def _add_page(self) -> None:
        table = self.query_one("#queue-table", DataTable)
        page = self.ranked[self.shown:self.shown + PAGE]
        table.add_rows([self._cells(r) for r in page])
        self.shown += len(page)
        self._status()

    def _cells(self, r: Ranked) -> tuple[Text | str, ...]:
        e = r.evidence
        # A filed item: no rank of its own, under its leader.
        lead = same_phrase_tag(e, key_of(e) in self.expanded) if r.rank else "└ "
        cells: dict[str, Text | str] = {
            "mark": mark_cell(self._mark(e)),
            "rank": str(r.rank) if r.rank else "",
            "score": f"{r.score:.2f}",
            "instr": str(e.instruction_id),
            "constraint": Text(shorten(f"{lead}{e.position}. {after_prefix(e.text, self.prefix)}",
                                       self.text_width), style="" if r.rank else "dim"),
            "writer": Text(writer_cell(e.writer.model, e.writer.mode, column_width(self.columns, "writer"), self.models)),
            "reasons": reason_tags(e, self.enabled, short=any(c is SHORT_REASONS for c in self.columns)),
            "outcome": outcome(e),
            "similarity": bar(e.similarity.highest if e.similarity else None),
            "copied": Text(copied(e)),
            "echo": echo_cell(e.echo),
            "trust": Text(shorten(trust_marks(e), 18)),
            "flags": Text(shorten(", ".join(e.flags) or "-", 14)),
        }
        return tuple(cells[c.key] for c in self.columns)

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
        done = done_line([self._mark(e) for r in self.leaders for e in (r.evidence, *r.evidence.same_phrase)])
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
        row = self._current()
        detail = self.query_one("#queue-detail", Static)
        if row is None:
            detail.update("")
            return
        e = row.evidence
        # "instruction 1", not "#1": beside a ranked list a bare number reads as the rank.
        text = Text.assemble((f"instruction {e.instruction_id} · {e.writer.label} · ", "bold"),
                             f"{e.position}. {e.text}")
        mark = self._mark(e)
        if mark:
            text.append(f"  [{mark}]", style="bold green" if mark == "confirmed" else "dim")
        # Each reason in words (pipeline.analysis.suspicion.reason_sentences); switched off: dim.
        for reason in e.reasons():
            on = reason in self.enabled
            sentence = next(iter(reason_sentences(e, (reason,))), reason)
            text.append("\n• ", style=REASON_STYLES.get(reason, "bold") if on else "dim")
            text.append(sentence, style="" if on else "dim strike")
        if e.echo is not None:
            text.append(f"\necho {e.echo:.2f}", style="bold" if e.echo >= ECHO_HIGH else "dim")
            text.append(" (the constraint's highest cosine with a sentence of the response)", style="dim")
        if e.same_phrase:
            text.append("\n• ", style="magenta")
            text.append(same_phrase_sentence(e) + ": " + ", ".join(f"#{f.position}" for f in e.same_phrase))
            shown = key_of(e) in self.expanded
            text.append(f" ({'shown below: + hides them' if shown else '+ shows them'})", style="dim")
        if e.flags:
            text.append("\nflags: ", style="bold")
            text.append(", ".join(e.flags))
        detail.update(text)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail()
        if event.cursor_row >= self.shown - 1:
            self._more()

    def on_resize(self) -> None:
        self._reasons_line()
        if self.evidence is not None and self._layout(self.size.width)[0] != self.columns:
            row = self.query_one("#queue-table", DataTable).cursor_row
            self._fill()
            self.query_one("#queue-table", DataTable).move_cursor(row=row)
        self._status()

    def _current(self) -> Ranked | None:
        table = self.query_one("#queue-table", DataTable)
        if not self.ranked or table.cursor_row < 0 or table.cursor_row >= len(self.ranked):
            return None
        return self.ranked[table.cursor_row]

    def context(self) -> Context | None:
        row = self._current()
        if row is None:
            return None
        e = row.evidence
        return Context(e.instruction_id, e.writer, e.ratio, e.constraint_id)

    def on_screen_resume(self) -> None:
        """Back from Audit: the marks given there, and the cursor on the item Audit shows."""
        if self.evidence is None:
            return
        table = self.query_one("#queue-table", DataTable)
        following = self.app.following
        row = following.index if following is not None and following.label == LABEL else table.cursor_row
        self._fill()
        while self.shown <= row < len(self.ranked):
            self._add_page()
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
        self.query_one("#queue-table", DataTable).loading = False
        self.rerank()

    def _more(self) -> None:
        """The cursor is on the last row: the next page, or the next suspects from the store."""
        if self.shown < len(self.ranked):
            self._add_page()
        elif self.evidence is not None and self._read() < self.total and self._keep_row is None:
            self._keep_row = self.shown - 1
            self._ask(self.limit + TOP, f"reading suspects {self._read() + 1:,} to"
                                        f" {min(self.total, self._read() + TOP):,}…")

    def _read(self) -> int:
        """Suspects read from the store: the leaders and the items filed under them."""
        return sum(1 + len(r.evidence.same_phrase) for r in self.leaders)

    def action_expand(self) -> None:
        """+: show the highlighted leader's filed items under it, or hide them (from a filed row too)."""
        table = self.query_one("#queue-table", DataTable)
        row = table.cursor_row
        if not (0 <= row < len(self.ranked)):
            return
        at = next(i for i in range(row, -1, -1) if self.ranked[i].rank)  # the row's leader
        leader = self.ranked[at].evidence
        if not leader.same_phrase:
            self.notify("no constraints are filed under this row")
            return
        self.expanded ^= {key_of(leader)}
        self.ranked = rows_of(self.leaders, self.expanded, self.enabled)
        end = max(self.shown, at + 1) + (len(leader.same_phrase) if key_of(leader) in self.expanded else 0)
        table.clear()
        self.shown = 0
        while self.shown < min(end, len(self.ranked)):
            self._add_page()
        table.move_cursor(row=at)
        self._detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_audit()

    def action_audit(self) -> None:
        row = self._current()
        if row is None:
            return
        index = self.query_one("#queue-table", DataTable).cursor_row
        self.app.following = Following(LABEL, [Stop(r.evidence.constraint_id, r.evidence.instruction_id,
                                                    r.evidence.writer) for r in self.ranked], index=index)
        e = row.evidence
        self.app.open_audit(e.instruction_id, e.writer, e.constraint_id)

    def action_back(self) -> None:
        self.dismiss()
