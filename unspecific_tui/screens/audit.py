"""Audit: an instruction's constraints listed beside one constraint's detail (reference A,
reference B, the response, its summary, and the judges' verdicts).

The list (widgets/constraint_list.py) shows, for the shown model and mode, each constraint's
outcome, the judges' agreement on both texts, the copy evidence and the flags; selecting a row
shows its detail. Its rows are pipeline.analysis.suspicion's Evidence (one definition for the
list, the suspicion queue and the reports: pipeline.analysis.trust's "split" and "unquoted",
the stored similarity, the copied phrases) with the outcome pipeline.analysis.metrics counts.

Auditing the suspicion queue is a loop: the head says "suspicion queue item k of N" and how many
are done; `y` / `d` mark the item confirmed / dismissed (through the app, stored by the store's
narrow writer) and go on to the next; `o` shows the copied span of the response beside the same span
in its source (reference A, reference B, or the constraint itself). What a key changed is said in
the pane-tabs line, never in a notice over the screen. At 80x24 one pane fills the detail, and `l`
swaps it for the list.

Moving between constraints of one instruction costs no query: an instruction's rows, verdicts
and flags are read once per (instruction, response, ratio) and cached; the widgets are built once
and updated in place; the list's rows are replaced only when the instruction, response, sort or
filter changes.
"""

from __future__ import annotations

import bisect
import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical
from textual.widgets import DataTable, Header, Static

from pipeline.analysis.copy_count import CONSTRAINT, CopyCount, copy_count, source_name
from pipeline.analysis.copy_count import NONE as NO_COPY
from pipeline.analysis.similarity import LEXICAL, Similarity, lexical_similarity
from pipeline.analysis.support import LOCATED
from pipeline.analysis.suspicion import Evidence, instruction_evidence, suspicion_queue
from pipeline.analysis.trust import Trust
from pipeline.core.definitions import COPY_EVIDENCE_NGRAM, DEFAULT_RATIO, DEFAULT_YES_THRESHOLD, shown_ratio, uncertain
from pipeline.core.text import count_words
from pipeline.store.verdicts import Verdict
from pipeline.store.view import Constraint, InstructionData, StoreView, Writer
from unspecific_tui.app import Context
from unspecific_tui.following import Following, Stop
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.widgets.bar import bar
from unspecific_tui.widgets.constraint_list import (
    FILTERS,
    SORTS,
    ConstraintList,
    ListRow,
    filter_rows,
    outcome_cell,
    similarity_label,
    sort_rows,
)
from unspecific_tui.widgets.flag_picker import QUEUE, STOP, FlagPicker
from unspecific_tui.widgets.footer import KeyFooter
from unspecific_tui.widgets.highlight import (
    QUOTE_FUZZY_STYLE,
    QUOTE_STYLE,
    SOURCE_STYLES,
    Span,
    copied_spans,
    intersect,
    merge,
    quote_span,
    render,
    render_sources,
)
from unspecific_tui.widgets.text_pane import TextLines, TextPane

PANES = ("ref-a", "ref-b", "response", "summary")
PANE_TITLES = {"ref-a": "Reference A", "ref-b": "Reference B", "response": "Response", "summary": "Summary"}
SOURCE_PANE = "source"  # the source view's right pane: the copied words' source
MARK_KEYS = {"confirmed": "y", "dismissed": "d"}
CONSTRAINT_N = COPY_EVIDENCE_NGRAM  # a constraint is short: a few shared words in a row already say "copied"
REFERENCE_N = 5  # between long texts, the paper's 5-gram
HEAD, NARROW_HEAD = 7, 4  # the head's lines (audit.tcss gives it this height)
NARROW = 120  # below this width (the -narrow breakpoint) the head shows the constraint on one line
CACHE = 64  # instructions' rows kept (as the store view keeps their texts)


@dataclass
class Shown:
    """What the screen shows now: tests read it instead of parsing the SVG."""

    constraint_id: int | None = None
    instruction_id: int | None = None
    writer: Writer | None = None
    response_id: int | None = None  # the texts in the panes, by id
    summary_id: int | None = None
    state: str = ""  # FLIPPED | pass both | fails full | not judged (pipeline.analysis.metrics.Item)
    copies: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    # References mode: the response's and summary's copied spans by source ("A", "B").
    sources: dict[str, dict[str, tuple[tuple[int, int], ...]]] = field(default_factory=dict)
    quotes: dict[str, list[tuple[str, tuple[int, int] | None]]] = field(default_factory=dict)
    similarities: dict[str, tuple[str, float | None]] = field(default_factory=dict)  # ref pane -> (method, value)
    row: ListRow | None = None
    counts: dict[str, CopyCount] = field(default_factory=dict)  # response / summary -> copied words and source
    subtitles: dict[str, str] = field(default_factory=dict)  # pane -> its subtitle (words, similarity, copied)
    # The source view: (source, spans in the response, the same words' spans in the source).
    source: tuple[str, tuple[Span, ...], tuple[Span, ...]] | None = None


@dataclass
class Rows:
    """One instruction's list on one response at one ratio, and the verdicts behind it."""

    rows: list[ListRow]
    verdicts: dict[int, list[Verdict]]  # constraint -> the shown verdicts on the response and summary
    flags: dict[int, dict[str, str]]  # constraint -> flag -> detail


class AuditScreen(AppScreen):
    CSS_PATH = "audit.tcss"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW, "-medium"), (200, "-wide")]
    BINDINGS = [
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("n", "follow(1)", "Next"),
        Binding("p", "follow(-1)", "Prev"),
        # The audit loop's keys, early: the footer shows keys in this order while they fit.
        Binding("y", "mark('confirmed')", "Confirm"),
        Binding("d", "mark('dismissed')", "Dismiss"),
        Binding("o", "toggle_source", "Source"),
        Binding("right_square_bracket", "instruction(1)", "Next instr.", key_display="]"),
        Binding("left_square_bracket", "instruction(-1)", "Prev instr.", key_display="[", show=False),
        Binding("f", "pick_follow", "Flagged…"),
        Binding("escape", "stop_following", "Stop following", show=False),
        Binding("x", "next_flipped", "Flipped"),
        Binding("s", "cycle_sort", "Sort"),
        Binding("slash", "cycle_filter", "Filter", key_display="/"),
        Binding("m", "cycle_model", "Model/mode"),
        Binding("c", "toggle_copy", "Copy mode"),
        Binding("t", "next_pane", "Pane (PgUp/PgDn scroll it)"),
        Binding("pageup", "scroll_pane(-1)", "Scroll pane up", show=False),
        Binding("pagedown", "scroll_pane(1)", "Scroll pane down", show=False),
        Binding("l", "toggle_list", "List"),
        Binding("r", "cycle_ratio", "Ratio", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.order: list[tuple[int, int]] = []
        self._pos: dict[int, int] = {}  # constraint id -> index in order
        self.index = 0
        self.copy_mode = "constraint"  # constraint | references
        self.pane = 0
        self.sort = SORTS[0]
        self.filter = FILTERS[0]
        self.ratio: float | None = None
        self.writer: Writer | None = None
        self.shown = Shown()
        self._flagged: dict[int, set[str]] | None = None
        self._judge_thresholds: dict[tuple[str, str], float] | None = None
        self._rows: OrderedDict[tuple[int, Writer | None, float], Rows] = OrderedDict()
        self._verdict_lines = 0
        self._last: dict[str, Any] = {}  # what each Static shows (``_put``)
        self.source_view = False  # `o`: the response beside the copied words' source
        # The list's rows as sorted and filtered (the list widget holds them only while shown).
        self._rows_shown: list[ListRow] = []
        self._list_key: object = None
        self._said = ""  # what the last key changed, said in the tabs/legend line until the next move

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="audit-task")
        yield TextLines(id="audit-head")
        with Horizontal(id="audit-body"):
            with Vertical(id="audit-side"):
                yield Static(id="audit-list-head")
                yield ConstraintList(id="audit-list")
            with Vertical(id="audit-detail"):
                yield Static(id="audit-tabs")
                yield Static(id="audit-legend")
                with Container(id="panes"):
                    for i, pane in enumerate(PANES):
                        yield TextPane(PANE_TITLES[pane], id=pane, classes="-current" if i == 0 else "")
                    yield TextPane("Source", id=SOURCE_PANE)
                yield TextLines(id="audit-verdicts")
        yield KeyFooter()

    def on_mount(self) -> None:
        if self.ratio is None:
            self.ratio = self.app.ratio
        self.query_one(ConstraintList).focus()

    def on_screen_resume(self) -> None:
        self._show_target()

    def context(self) -> Context | None:
        """Where the auditor is (app.switch_mode carries it to the other screens)."""
        shown = self.shown
        if shown.instruction_id is None:
            return None
        return Context(shown.instruction_id, shown.writer, self._ratio(None), shown.constraint_id)

    def _set_order(self, order: list[tuple[int, int]]) -> None:
        self.order = order
        self._pos = {cid: i for i, (cid, _) in enumerate(order)}
        self._rows.clear()  # the store changed: rows are read again
        self._flagged = None

    def _show_target(self) -> None:
        """Show the constraint another screen asked for, or stay where we were."""
        order = self.app.view.constraint_order()  # cached; re-read after a stage wrote
        target = self.app.target
        if target is None and order is self.order and self.shown.constraint_id is not None:
            return  # nothing changed while we were away
        current = self.order[self.index][0] if self.order else None
        if order is not self.order:
            self._set_order(order)
            if current is not None:
                self.index = self._pos.get(current, 0)
        if target is not None:
            self.app.target = None
            if self.app.context.ratio is not None:
                self.ratio = self.app.context.ratio
            iid, writer, cid = target
            if writer:
                self.writer = writer
            if cid is None:
                pos = bisect.bisect_left(order, iid, key=_instruction)
                self.index = pos if pos < len(order) else 0
            else:
                self.index = self._pos.get(cid, 0)
                self._sync_following(cid, iid, writer)
        self.refresh_constraint()

    def _sync_following(self, cid: int, iid: int, writer: Writer | None) -> None:
        """Opened on a stop of what is followed (the queue screen's enter): follow from there."""
        following = self.app.following
        if following is None:
            return
        for i, stop in enumerate(following.stops):
            if stop.constraint_id == cid and stop.instruction_id == iid and (writer is None or stop.writer == writer):
                following.index = i
                return

    # -- actions -------------------------------------------------------------------------
    def action_move(self, step: int) -> None:
        """The next (previous) row of the list as sorted and filtered; past its end, the next
        (previous) instruction's first (last) row."""
        if not self.order:
            return
        rows = self._rows_shown
        cid, iid = self.order[self.index]
        ids = [r.constraint_id for r in rows]
        at = ids.index(cid) if cid in ids else -1
        if at >= 0 and 0 <= at + step < len(ids):
            self.index = self._pos.get(ids[at + step], self.index)
        elif at < 0 and ids:
            self.index = self._pos.get(ids[0 if step > 0 else -1], self.index)
        else:
            self._instruction_step(step, last=step < 0)
            return
        self.refresh_constraint()

    def action_instruction(self, step: int) -> None:
        """First constraint of the next (or previous) instruction."""
        self._instruction_step(step, last=False)

    def _instruction_step(self, step: int, *, last: bool) -> None:
        if not self.order:
            return
        order = self.order
        current = order[self.index][1]
        if step > 0:
            start = bisect.bisect_right(order, current, key=_instruction)
            if start >= len(order):
                return  # stays on the last instruction
        else:
            first = bisect.bisect_left(order, current, key=_instruction)
            if first == 0:
                return
            start = bisect.bisect_left(order, order[first - 1][1], key=_instruction)
        self.index = start
        iid = order[start][1]
        # The row the list shows first (or last) there, as sorted and filtered.
        rows = self._visible(self._instruction_rows(self.app.view.instruction(iid)).rows)
        if rows:
            self.index = self._pos.get(rows[-1 if last else 0].constraint_id, start)
        self.refresh_constraint()

    def action_follow(self, step: int) -> None:
        """n / p: the next stop of what is followed (a flag, the suspicion queue), else the next row."""
        following = self.app.following
        if following is None:
            self.action_move(step)
            return
        before = following.index
        stop = following.step(step)
        if stop is None:
            self._say(f"nothing to follow in {following.label}")
            return
        self._go(stop)
        if following.index == before:
            self._say(f"{following.label}: the {'last' if step > 0 else 'first'} one")

    def _go(self, stop: Stop) -> None:
        if stop.writer is not None:
            self.writer = stop.writer
        self.index = self._pos.get(stop.constraint_id, self.index)
        self.refresh_constraint()

    def action_stop_following(self) -> None:
        if self.app.following is not None:
            self.app.following = None
            self._render_head_only()
            self._say("stopped following: n/p move through the list")

    def action_pick_follow(self) -> None:
        """f: choose a flag (or the suspicion queue) to follow with n / p."""
        counts = self._flag_counts()
        picker = FlagPicker(sorted(counts.items()), queue=True,
                            following=self.app.following is not None)
        self.app.push_screen(picker, self._picked)

    def _flag_counts(self) -> dict[str, int]:
        flagged = self._flagged_ids()
        counts: dict[str, int] = {}
        for cid, _ in self.order:
            for flag in flagged.get(cid, ()):
                counts[flag] = counts.get(flag, 0) + 1
        return counts

    def _flagged_ids(self) -> dict[int, set[str]]:
        if self._flagged is None:
            self._flagged = self.app.view.flagged_ids()
        return self._flagged

    def _picked(self, choice: str | None) -> None:
        if choice is None:
            return
        if choice == STOP:
            self.action_stop_following()
            return
        if choice == QUEUE:
            self._say("ranking the suspicion queue…")
            self._load_queue(self._ratio(None))
            return
        self.follow_flag(choice)

    def follow_flag(self, flag: str) -> None:
        """Follow the constraints carrying ``flag``, from the first at or after the shown one."""
        flagged = self._flagged_ids()
        stops = [Stop(cid, iid, None) for cid, iid in self.order if flag in flagged.get(cid, ())]
        if not stops:
            self._say(f"no constraint carries the flag {flag}")
            return
        here = self.index
        start = next((i for i, s in enumerate(stops) if self._pos.get(s.constraint_id, -1) >= here), 0)
        self.app.following = Following(f"flag {flag}", stops, index=start)
        self._go(stops[start])

    @work(thread=True, exclusive=True, group="audit-queue", exit_on_error=False)
    def _load_queue(self, ratio: float) -> None:
        """The suspicion queue on a view of its own (the UI thread's connection stays the UI's)."""
        view = StoreView.open(self.app.view.path)
        try:
            ranked = suspicion_queue(view.analysis_store, ratio=ratio)
        finally:
            view.close()
        stops = [Stop(e.constraint_id, e.instruction_id, e.writer) for e in ranked]
        self.app.call_from_thread(self._follow_queue, stops)

    def _follow_queue(self, stops: list[Stop]) -> None:
        if not stops:
            self._say("the suspicion queue is empty")
            return
        self.app.following = Following(QUEUE, stops)
        self._go(stops[0])

    def action_next_flagged(self) -> None:
        """The next constraint with any flag, in the benchmark's order (no key: `f` picks a flag)."""
        flagged = self._flagged_ids()
        self._seek(lambda cid, _: cid in flagged, "flagged")

    def _seek(self, test: Callable[[int, int], bool], what: str) -> None:
        n = len(self.order)
        for k in range(1, n):
            i = (self.index + k) % n
            if test(*self.order[i]):
                self.index = i
                self.refresh_constraint()
                return
        self._say(f"no {what} constraint")

    def action_next_flipped(self) -> None:
        """Asks the store per constraint (indexed); once the analysis is ready, only about the
        instructions it counted a flip in."""
        analysis = self.app.analysis
        if analysis is not None and analysis.ratio == self._ratio(None):
            candidates = analysis.flipped_instructions(self.writer)
            self._seek(lambda cid, iid: iid in candidates and self._flipped_now(cid, iid), "flipped")
            return
        self._seek(self._flipped_now, "flipped")

    def _flipped_now(self, cid: int, iid: int) -> bool:
        """pipeline.analysis.metrics' call on this constraint of the current writer's response."""
        if self.writer is None:
            return False
        item = self.app.view.outcomes(iid, self.writer, self._ratio(None)).get(cid)
        return item is not None and item.flipped

    def action_cycle_model(self) -> None:
        """The next response of this instruction: every (model, mode) in turn."""
        if not self.order:
            return
        writers = self.app.view.instruction(self.order[self.index][1]).writers
        if writers:
            i = writers.index(self.writer) if self.writer in writers else -1
            self.writer = writers[(i + 1) % len(writers)]
            self.refresh_constraint()

    def action_cycle_ratio(self) -> None:
        if not self.order:
            return
        ratios = self.app.view.instruction(self.order[self.index][1]).ratios
        if ratios:
            cur = self._ratio(None)
            self.ratio = ratios[(ratios.index(cur) + 1) % len(ratios)] if cur in ratios else ratios[0]
            self.refresh_constraint()

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

    def action_toggle_copy(self) -> None:
        self.copy_mode = "references" if self.copy_mode == "constraint" else "constraint"
        what = "response vs references" if self.copy_mode == "references" else "constraint vs each text"
        self.refresh_constraint()
        self._say(f"copied n-grams: {what}")

    def action_next_pane(self) -> None:
        """Narrow: show the next pane. Wider: mark it current; PageUp/PageDown scroll it."""
        self.pane = (self.pane + 1) % len(PANES)
        for i, pane in enumerate(PANES):
            self.query_one(f"#{pane}", TextPane).set_class(i == self.pane, "-current")
        if self._narrow():
            self._render_head_only()  # the pane now shown was not drawn while hidden
        self._render_tabs()

    def _list_visible(self) -> bool:
        if self._narrow():
            return self.has_class("-list")
        return not self.query_one("#audit-side").has_class("-hidden")

    def _sync_list(self) -> None:
        """The list shows the rows of the shown instruction (replaced only when they changed)."""
        table = self.query_one(ConstraintList)
        table.show_rows(self._rows_shown, self._list_key)
        table.select(self.shown.constraint_id)

    def on_resize(self) -> None:
        # Across the 80-column breakpoint the list and the hidden panes come into view: draw them.
        if self.shown.constraint_id is not None:
            self._render_head_only()

    def action_scroll_pane(self, step: int) -> None:
        pane = self.query_one(f"#{PANES[self.pane]}", TextPane)
        if step > 0:
            pane.scroll_page_down(animate=False)
        else:
            pane.scroll_page_up(animate=False)

    def action_toggle_list(self) -> None:
        """Wide: hide (show) the list, more room for the texts. Narrow: the list in place of the
        text pane, and back (enter on a row comes back too)."""
        if self._narrow():
            self.toggle_class("-list")
            if self.has_class("-list"):
                self._sync_list()
                self.query_one(ConstraintList).focus()
            return
        self.query_one("#audit-side").toggle_class("-hidden")
        if self._list_visible():
            self._sync_list()

    def _narrow(self) -> bool:
        return self.app.size.width < NARROW

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on the list: at 80 columns, back to the text of the row chosen."""
        if event.data_table is self.query_one(ConstraintList) and self.has_class("-list"):
            self.remove_class("-list")

    def action_toggle_source(self) -> None:
        """o: the response's copied span beside the same span in its source, and back."""
        self.source_view = not self.source_view
        self.set_class(self.source_view, "-source")
        self.refresh_constraint()

    def action_mark(self, mark: str) -> None:
        """y / d: mark the shown item confirmed / dismissed (the same key again clears it); while the
        suspicion queue is followed, go on to its next item."""
        shown = self.shown
        if shown.response_id is None or shown.constraint_id is None:
            self._say("nothing to mark: no response shown")
            return
        key = (shown.response_id, shown.constraint_id)
        new = None if self.app.marks.get(key) == mark else mark
        if not self.app.mark(*key, new):
            return
        following = self.app.following
        if new is not None and following is not None and following.label == QUEUE \
                and following.index < len(following.stops) - 1:
            self.action_follow(1)
            self._say(f"{mark} the previous item · {self._done()}")
            return
        self.refresh_constraint()
        self._say(f"{new or 'mark cleared'} · {self._done()}")

    def _done(self) -> str:
        marks = list(self.app.marks.values())
        return f"{len(marks)} done ({marks.count('confirmed')} confirmed, {marks.count('dismissed')} dismissed)"

    def _say(self, message: str) -> None:
        """What the last key changed, in the tabs/legend line (a notice would cover the panes and
        the verdicts, which the key just changed); gone at the next move."""
        self._said = message
        self._render_tabs()
        self._render_legend(self.shown.row)

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

    # -- reading -------------------------------------------------------------------------
    def _ratio(self, data: InstructionData | None) -> float:
        if self.ratio is not None:
            return self.ratio
        analysis = self.app.analysis
        if analysis is not None:
            return analysis.ratio
        if data is not None and data.ratios:
            return shown_ratio(data.ratios) or DEFAULT_RATIO
        return DEFAULT_RATIO

    def _writer_of(self, data: InstructionData) -> Writer | None:
        if self.writer in data.responses:
            return self.writer
        return self.app.writer if self.app.writer in data.responses else (data.writers[0] if data.writers else None)

    def _visible(self, rows: list[ListRow]) -> list[ListRow]:
        return filter_rows(sort_rows(rows, self.sort), self.filter)

    def _instruction_rows(self, data: InstructionData) -> Rows:
        writer, ratio = self._writer_of(data), self._ratio(data)
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
        evidence = instruction_evidence(view.analysis_store, data.id, writer, ratio) if writer else {}
        rows = []
        for con in sorted((c for c in data.constraints.values() if c.active), key=lambda c: c.position or 0):
            e = evidence.get(con.id)
            if e is None:  # no response by this writer: nothing judged, nothing copied
                rows.append(ListRow(con.id, con.position or 0, con.text, "not judged", None, None,
                                    _lexical_similarity(con, data), False, (), (),
                                    tuple(sorted(flags.get(con.id, {}))), 0.0))
                continue
            sim = e.similarity or _lexical_similarity(con, data)
            rows.append(ListRow(con.id, con.position or 0, con.text, _outcome(e), e.response_trust, e.summary_trust,
                                sim, e.similarity is not None, tuple(e.copied), tuple(e.copied_from),
                                tuple(e.flags), e.score(), e.copy_count))
        return Rows(rows, verdicts, flags)

    # -- rendering -----------------------------------------------------------------------
    def _put(self, widget_id: str, content: Any, *, layout: bool = False) -> None:
        """Update a Static unless it already shows ``content``: an update repaints it, and most
        moves within an instruction leave the task, the list's head, the tabs and the legend as they were."""
        if self._last.get(widget_id) == content and not layout:
            return
        self._last[widget_id] = content
        self.query_one(f"#{widget_id}", Static).update(content, layout=layout)

    def _render_tabs(self) -> None:
        line = Text(no_wrap=True, overflow="ellipsis")
        if self._said:
            line.append(f" {self._said} ", style="bold reverse")
            line.append(" ")
        if self.source_view:
            line.append("response beside its source (o: back)", style="dim")
        else:
            # Narrow shows one pane, without its bottom border: its subtitle (words, copied) is here.
            pane = PANES[self.pane]
            line.append(f" {PANE_TITLES[pane]} ", style="reverse")
            line.append(f" {self.shown.subtitles.get(pane, '')}")
            line.append("  (t: next pane)", style="dim")
        self._put("audit-tabs", line)

    def refresh_constraint(self) -> None:
        self._said = ""  # said until the next move
        if not self.order:
            empty = Text("No constraints in this store yet. Build a run (1), then come back.")
            width = max(20, self.app.size.width - 2)
            self.query_one("#audit-head", TextLines).show(list(empty.wrap(self.app.console, width)))
            return
        view = self.app.view
        cid, iid = self.order[self.index]
        data = view.instruction(iid)
        con = data.constraints[cid]
        self.writer = self._writer_of(data)
        ratio = self._ratio(data)
        response = data.responses.get(self.writer) if self.writer else None
        summary = data.summary(self.writer, ratio) if self.writer else None
        rows = self._instruction_rows(data)
        row = next((r for r in rows.rows if r.constraint_id == cid), None)
        verdicts = rows.verdicts.get(cid, [])
        texts = {"ref-a": data.article_a, "ref-b": data.article_b,
                 "response": response.text if response else "", "summary": summary.text if summary else ""}
        shown = Shown(cid, iid, self.writer, response.id if response else None, summary.id if summary else None)
        shown.row = row
        self.shown = shown

        visible = self._visible(rows.rows)
        self._rows_shown = visible
        self._list_key = (iid, self.writer, ratio, self.sort, self.filter, id(self.order))
        if self._list_visible():
            self._sync_list()
        self._render_list_head(data, rows.rows, visible)
        # At 80 columns one pane shows: the others are drawn when `t` brings them (a third of a move's cost).
        for pane in (PANES[self.pane],) if self._narrow() else PANES:
            if not (self.source_view and pane == "response"):  # the source view draws it
                self._render_pane(pane, texts, con, data, verdicts, row, ratio)
        if self.source_view:
            self._render_source(texts, con, data, row, ratio)
        shown.state = row.outcome if row else "not judged"
        self._render_head(data, con, rows.flags.get(cid, {}), row, verdicts, ratio)
        self._render_legend(row)
        self._render_verdicts(verdicts)
        self._render_tabs()

    def _render_pane(self, pane: str, texts: dict[str, str], con: Constraint, data: InstructionData,
                     verdicts: list[Verdict], row: ListRow | None, ratio: float) -> None:
        shown, text = self.shown, texts[pane]
        sources: dict[str, tuple[tuple[int, int], ...]] = {}
        if self.copy_mode == "constraint":
            copies = copied_spans(con.text, text, CONSTRAINT_N) if text else ()
        elif pane in ("response", "summary"):
            sources = {"A": copied_spans(data.article_a, text, REFERENCE_N) if text and data.article_a else (),
                       "B": copied_spans(data.article_b, text, REFERENCE_N) if text and data.article_b else ()}
            copies = tuple(merge([*sources["A"], *sources["B"]]))
            shown.sources[pane] = sources
        else:
            copies = copied_spans(texts["response"], text, REFERENCE_N) if text and texts["response"] else ()
        quotes: list[tuple[tuple[int, int], str]] = []
        found: list[tuple[str, tuple[int, int] | None]] = []
        if pane in ("response", "summary"):
            for v in verdicts:
                if v.kind == pane and v.verdict and v.quote:
                    how, span = quote_span(v.quote, text)
                    found.append((v.judge, span))
                    if span:
                        quotes.append((span, QUOTE_STYLE if how == "exact" else QUOTE_FUZZY_STYLE))
        shown.copies[pane] = tuple(copies)
        shown.quotes[pane] = found
        if text:
            body = render_sources(text, sources, quotes) if sources else render(text, copies, quotes)
        elif pane == "ref-b" and data.condition == "single":
            body = Text("(single condition: one reference only)", style="dim")
        else:
            body = Text("(not generated yet)", style="dim")
        subtitle = f"{_words(text)} words"
        if pane in ("ref-a", "ref-b"):
            sim = row.similarity if row else None
            value = None if sim is None else sim.to_a if pane == "ref-a" else sim.to_b
            method = sim.method if sim else LEXICAL
            shown.similarities[pane] = (method, value)
            if value is not None:
                subtitle += f" · sim {value:.2f} ({method}{'' if row and row.similarity_stored else ', not stored'})"
        if sources:
            both = intersect(list(sources["A"]), list(sources["B"]))
            subtitle += (f" · from A {len(sources['A'])} · from B {len(sources['B'])}"
                         + (f" · both {len(both)}" if both else ""))
        elif pane in ("response", "summary"):
            # The one count of copied words, named by its source (pipeline.analysis.copy_count):
            # the response's is the list's; the summary's is counted the same way here.
            count = (row.copy if row else NO_COPY) if pane == "response" else \
                _copy_count(con.text, text, data.article_a, data.article_b or None)
            shown.counts[pane] = count
            subtitle += f" · {count.sentence(pane) or 'nothing copied'}"
        else:
            subtitle += f" · {len(copies)} span{'' if len(copies) == 1 else 's'} of the constraint"
        shown.subtitles[pane] = subtitle
        widget = self.query_one(f"#{pane}", TextPane)
        widget.show(body, key=(data.id, pane, self.writer, ratio), subtitle=subtitle)
        first = min([s[0] for s, _ in quotes] + [s[0] for s in copies], default=None)
        if first is not None:
            widget.reveal(first)

    def _render_source(self, texts: dict[str, str], con: Constraint, data: InstructionData, row: ListRow | None,
                       ratio: float) -> None:
        """The source view: the response's copied words (the list's count) beside the same words in
        their source (reference A, else B, or the constraint itself), highlighted in both and each
        scrolled to the first."""
        count = row.copy if row else NO_COPY
        source = "A" if "A" in count.source else "B" if "B" in count.source else CONSTRAINT
        body = {"A": data.article_a, "B": data.article_b, CONSTRAINT: con.text}[source]
        response = texts["response"]
        style = SOURCE_STYLES["A" if source == CONSTRAINT else source]
        in_response = _phrase_spans(count.phrases, response)
        in_source = _phrase_spans(count.phrases, body)
        self.shown.source = (source, in_response, in_source)
        title = source_name(source) if count.words else "source (nothing copied)"
        pane = self.query_one(f"#{SOURCE_PANE}", TextPane)
        pane.border_title = title[0].upper() + title[1:]
        pane.show(render_sources(body, {source if source != CONSTRAINT else "A": in_source}) if body
                  else Text("(no text)", style="dim"), key=(data.id, SOURCE_PANE, con.id, source),
                  subtitle=f"{len(in_source)} copied spans")
        left = self.query_one("#response", TextPane)
        left.show(_styled(response, in_response, style), key=(data.id, "response-source", self.writer, con.id),
                  subtitle=count.sentence() or "nothing copied")
        for widget, spans in ((left, in_response), (pane, in_source)):
            if spans:
                widget.reveal(spans[0][0])

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

    def _render_head_only(self) -> None:
        if self.order and self.shown.constraint_id is not None:
            self.refresh_constraint()

    def _render_head(self, data: InstructionData, con: Constraint, flags: dict[str, str], row: ListRow | None,
                     verdicts: list[Verdict], ratio: float) -> None:
        active = sum(1 for c in data.constraints.values() if c.active)
        where = Text.assemble(
            (f"#{data.id}", "bold"), f" {data.domain} · {data.condition} · constraint {con.position}/{active} · ",
            (self.writer.label if self.writer else "-", "bold"), f" · summary {ratio:g} · copy: {self.copy_mode}",
            f" ({self.index + 1}/{len(self.order)})", no_wrap=True, overflow="ellipsis")
        narrow = self.app.size.width < NARROW  # the breakpoint class may not be set yet on the first show
        text = Text(con.text, style="bold", no_wrap=narrow, overflow="ellipsis")
        console, width = self.app.console, max(20, self.app.size.width - 2)
        # The head's height is fixed (a move never lays the screen out again): the lines that fit,
        # by importance; the list shows each row's similarity and copies when the last lines go.
        height = NARROW_HEAD if narrow else HEAD
        budget = height - 1 - (1 if narrow else len(text.wrap(console, width)))
        rest = [self._outcome_line(row, verdicts), self._lineage(data, con), self._duplicates(data, flags),
                self._evidence_line(row, flags)]
        follow = self._following_line()
        if follow is not None:
            budget -= 1
        lines = ([follow] if follow is not None else []) + [where, text] + \
            [line for line in rest if line is not None][:max(0, budget)]
        # Wrapped here as a Static would wrap them, padded to the fixed height (never a layout).
        # A one-line no_wrap line is its own row: TextLines cuts it at the width as wrap would.
        rows = [piece for line in lines
                for piece in ([line] if _one_row(line) else line.wrap(console, width))][:height]
        self.query_one("#audit-head", TextLines).show(rows + [Text()] * (height - len(rows)))

    def _following_line(self) -> Text | None:
        """While n/p follow a list: "suspicion queue item k of N", the item's mark, the count done."""
        following = self.app.following
        if following is None:
            return None
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{following.label} item {following.index + 1:,} of {len(following.stops):,}",
                    style="bold magenta")
        if following.label == QUEUE:
            shown = self.shown
            mark = self.app.marks.get((shown.response_id or 0, shown.constraint_id or 0))
            line.append(f" · {mark}" if mark else " · not marked",
                        style="bold green" if mark == "confirmed" else "dim")
            line.append(" · y confirm · d dismiss", style="magenta")
            line.append(f" · {self._done()}")
        line.append(" · n/p next/prev · esc stops", style="dim")
        return line

    def _outcome_line(self, row: ListRow | None, verdicts: list[Verdict]) -> Text:
        """The outcome and how far it can be trusted: agreement and missing quotes on each text."""
        line = Text(no_wrap=True, overflow="ellipsis")
        if row is None:
            return line.append("not judged", style="dim")
        line.append_text(outcome_cell(row))
        for name, trust in (("response", row.response_trust), ("summary", row.summary_trust)):
            line.append(f" · {name}: ")
            line.append_text(_trust_phrase(trust, [v for v in verdicts if v.kind == name]))
        if row.outcome == "FLIPPED" and row.response_trust is not None and row.response_trust.unquoted:
            line.append(" · rests on a Yes whose quote is MISSING", style="bold red")
        elif row.outcome in ("pass both", "FLIPPED") and row.split:
            line.append(" · the judges split: not a clear call", style="bold yellow")
        return line

    def _evidence_line(self, row: ListRow | None, flags: dict[str, str]) -> Text:
        line = Text(no_wrap=True, overflow="ellipsis")
        if row is not None:
            sim = row.similarity
            method = sim.method if sim else LEXICAL
            line.append(f"similarity ({method}{'' if row.similarity_stored else ', none stored'}): ", style="dim")
            line.append("A ")
            line.append_text(bar(sim.to_a if sim else None))
            line.append(" B ")
            line.append_text(bar(sim.to_b if sim else None))
            line.append(" · ")
            count = row.copy  # the one count (pipeline.analysis.copy_count), named by its source
            if count.words:
                phrases = ", ".join(f"'{p}'" for p in count.phrases)
                line.append(f"{count.sentence()}: {phrases}",
                            style="bold #e5c07b" if count.from_reference else "#e5c07b")
            else:
                line.append("nothing copied", style="dim")
            line.append(" · ")
        for flag in sorted(flags):
            line.append(f" {flag} ", style="black on yellow")
            line.append(" ")
        if not flags:
            line.append("no flags", style="dim")
        return line

    def _duplicates(self, data: InstructionData, flags: dict[str, str]) -> Text | None:
        """What a duplicate flag duplicates: each other constraint's position, text and score, on one line."""
        raw = flags.get("duplicate")
        if not raw:
            return None
        try:
            near = json.loads(raw).get("with", [])
        except (ValueError, AttributeError):
            return None
        line = Text("duplicates ", style="dim", no_wrap=True, overflow="ellipsis")
        for i, d in enumerate(near):
            other = data.constraints.get(d.get("constraint_id"))
            if other is None:
                continue
            if i:
                line.append(" · ")
            line.append(f"#{other.position} ", style="bold")
            line.append(other.text)
            line.append(f"  (score {d.get('score', 0):g})", style="dim")
        return line

    @staticmethod
    def _lineage(data: InstructionData, con: Constraint) -> Text | None:
        if con.replaces_id and con.replaces_id in data.constraints:
            old = data.constraints[con.replaces_id]
            # pipeline.stages.revision keeps the reason on the new row (older stores: on the old one).
            reason = con.replaced_reason or old.replaced_reason or "?"
            return Text.assemble((f"replaced #{old.id}: ", "dim"), old.text, ("  because ", "dim"), reason,
                                 no_wrap=True, overflow="ellipsis")
        if con.origin:
            base = "-" if con.base_verdict is None else "yes" if con.base_verdict else "no"
            return Text(f"{con.origin}; base article verdict: {base}", style="dim", no_wrap=True, overflow="ellipsis")
        return None

    def _render_legend(self, row: ListRow | None) -> None:
        legend = Text(no_wrap=True, overflow="ellipsis")
        if self._said:
            legend.append(f" {self._said} ", style="bold reverse")
            legend.append(" ")
        if self.source_view:
            count = row.copy if row else None
            legend.append(" copied words ", style=SOURCE_STYLES["A"])
            legend.append(f" {count.sentence() if count and count.words else 'nothing copied'}"
                          " · the same words in the source on the right (o: back)")
        elif self.copy_mode == "references":
            legend.append("copied 5-grams in response/summary, from ")
            for name, label in (("A", "A"), ("B", "B"), ("both", "both")):
                legend.append(f" {label} ", style=SOURCE_STYLES[name])
                legend.append(" ")
            legend.append("· in references: from the response", style="dim")
        else:
            legend.append(" constraint 3-grams ", style=SOURCE_STYLES["A"])
            where = " and ".join(row.copied_from) if row and row.copied_from else ""
            legend.append(f" in each text · copied into the response from {where}" if where
                          else " in each text · none both in a reference and the response")
        legend.append("  ")
        legend.append(" quote ", style=QUOTE_STYLE)
        self._put("audit-legend", legend)

    def _thresholds(self) -> dict[tuple[str, str], float]:
        """Each yes_no judge's calibrated threshold, read once a screen (a calibration is rare)."""
        if self._judge_thresholds is None:
            self._judge_thresholds = self.app.view.judge_thresholds()
        return self._judge_thresholds

    def _render_verdicts(self, verdicts: list[Verdict]) -> None:
        """Plain aligned lines, not a Rich Table: a table re-measures itself on every move. A yes_no
        judge's verdict shows its P(Yes) against its threshold, 'yes?' / 'no?' when near it; its Yes
        rests on a located sentence, not a quote."""
        lines = [Text("judge        text          verdict quote found? quote / reason", style="bold",
                      no_wrap=True, overflow="ellipsis")]
        thresholds = self._thresholds()
        for v in verdicts:
            found, style = {"exact": ("found", "green"), "fuzzy": ("fuzzy", "magenta"), LOCATED: ("located", "cyan"),
                            "missing": ("MISSING", "bold red")}.get(v.quote_found or "", ("-", "dim"))
            if not v.verdict:
                found, style = "-", "dim"  # a No has no quote to find
            where = "full" if v.kind == "response" else f"summary {v.ratio:g}"
            said = ("missing", "yellow") if v.verdict is None else ("yes    ", "green") if v.verdict else ("no     ", "red")
            detail = (v.quote if v.verdict else v.reason).replace("\n", " ")
            if v.p_yes is not None and v.verdict is not None:
                threshold = thresholds.get((v.judge, v.judging_mode), DEFAULT_YES_THRESHOLD)
                doubt = uncertain(v.p_yes, threshold)
                said = (f"{'yes' if v.verdict else 'no'}{'?' if doubt else ''}".ljust(7), "bold yellow" if doubt else said[1])
                detail = f"P(Yes) {v.p_yes:.2f} vs {threshold:.2f}{', uncertain' if doubt else ''}" + (
                    f" · {detail}" if v.verdict and detail else "")
            lines.append(Text.assemble(
                f"{v.judge[:12]:<12} {where:<13} ", said,
                " ", (f"{found:<12}", style), " ", detail,
                no_wrap=True, overflow="ellipsis"))
        # Padded to the most lines shown so far: a move that shows fewer verdicts keeps the height,
        # so it does not lay out (and re-wrap) the panes again, and the panes do not jump.
        self._verdict_lines = max(self._verdict_lines, len(lines))
        self.query_one("#audit-verdicts", TextLines).show(lines + [Text()] * (self._verdict_lines - len(lines)))


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


def _trust_phrase(trust: Trust | None, verdicts: list[Verdict]) -> Text:
    if trust is None:
        return Text("not judged", style="dim")
    out = Text()
    if trust.split:
        out.append(f"judges split {trust.yes}-{trust.no}", style="bold yellow")
    elif trust.judged:
        out.append(f"{trust.yes or trust.no} {'yes' if trust.yes else 'no'}, agreed",
                   style="green" if trust.yes else "yellow")
    if trust.missing:
        out.append(f" ({trust.missing} gave none)", style="dim")
    unquoted = [v.judge for v in verdicts if v.verdict and v.quote_found == "missing"]
    if unquoted:
        out.append(f"; quote MISSING ({', '.join(unquoted)})", style="bold red")
    return out


def _lexical_similarity(con: Constraint, data: InstructionData) -> Similarity | None:
    """The stand-in while no similarity is stored: share of the constraint's words in each reference."""
    if not data.article_a:
        return None
    return lexical_similarity(con.id, con.text, data.article_a, data.article_b or None)


@lru_cache(maxsize=1024)
def _copy_count(constraint: str, text: str, reference_a: str, reference_b: str | None) -> CopyCount:
    """pipeline.analysis.copy_count, cached: moving back to a constraint costs nothing."""
    return copy_count(constraint, text, reference_a, reference_b)


def _phrase_spans(phrases: tuple[str, ...], text: str) -> tuple[Span, ...]:
    """Where the copied phrases' words (runs of CONSTRAINT_N or more) sit in ``text``."""
    if not text:
        return ()
    return tuple(merge([span for phrase in phrases for span in copied_spans(phrase, text, CONSTRAINT_N)]))


def _styled(text: str, spans: tuple[Span, ...], style: str) -> Text:
    out = Text(text)
    for start, end in spans:
        out.stylize(style, start, end)
    return out


@lru_cache(maxsize=64)
def _words(text: str) -> int:
    """The pane subtitles' word count: the same four texts on every move within an instruction."""
    return count_words(text)


def _one_row(line: Text) -> bool:
    return line.no_wrap is True and "\n" not in line.plain and "\t" not in line.plain


def _instruction(entry: tuple[int, int]) -> int:
    return entry[1]
