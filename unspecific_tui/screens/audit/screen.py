"""The Audit screen: its layout, its state, moving through the constraints (up/down, [ ], model,
ratio) and ``refresh_constraint``, which draws the shown constraint through the parts."""

from __future__ import annotations

import bisect
from collections import OrderedDict
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical
from textual.widgets import Header, Static

from pipeline.core.definitions import next_ratio
from pipeline.store.view import InstructionData, Writer
from unspecific_tui.context import Context
from unspecific_tui.screens.audit.following import FollowingPart
from unspecific_tui.screens.audit.head import HeadPart
from unspecific_tui.screens.audit.listing import ListPart
from unspecific_tui.screens.audit.panes import PanesPart
from unspecific_tui.screens.audit.state import NARROW, PANE_TITLES, PANES, SOURCE_PANE, Rows, Shown
from unspecific_tui.widgets.constraint_list import FILTERS, SORTS, ConstraintList, ListRow
from unspecific_tui.widgets.footer import KeyFooter
from unspecific_tui.widgets.text_pane import TextLines, TextPane

READ_AHEAD_S = 0.03  # after the paint, before the next stop is read ahead (an auditor reads for seconds)


class AuditScreen(ListPart, PanesPart, HeadPart, FollowingPart):
    """Audit: the list (listing.py), the detail panes (panes.py), the head (head.py) and what n / p
    follow (following.py), composed here with the screen's state, its moves and its one refresh."""

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
        Binding("g", "next_copy", "Next copy"),
        Binding("right_square_bracket", "instruction(1)", "Next instr.", key_display="]"),
        Binding("left_square_bracket", "instruction(-1)", "Prev instr.", key_display="[", show=False),
        Binding("f", "pick_follow", "Flagged…"),
        Binding("escape", "escape", "Stop following", show=False),
        Binding("enter", "enter", show=False),  # the list's own enter picks its row while it has the focus
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

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="audit-task")
        yield TextLines(id="audit-head")
        with Horizontal(id="audit-body"):
            with Vertical(id="audit-side"):
                yield Static(id="audit-list-head")
                yield ConstraintList(id="audit-list")
            with Vertical(id="audit-detail"):
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
                self._say(f"#{current} is the last instruction")  # it stays
                return
        else:
            first = bisect.bisect_left(order, current, key=_instruction)
            if first == 0:
                self._say(f"#{current} is the first instruction")
                return
            start = bisect.bisect_left(order, order[first - 1][1], key=_instruction)
        self.index = start
        iid = order[start][1]
        # The row the list shows first (or last) there, as sorted and filtered.
        rows = self._visible(self._instruction_rows(self.app.view.instruction(iid)).rows)
        if rows:
            self.index = self._pos.get(rows[-1 if last else 0].constraint_id, start)
        self.refresh_constraint()

    def action_cycle_model(self) -> None:
        """The next response of this instruction: every (model, mode) in turn."""
        if not self.order:
            self._say("no constraints in this store yet: nothing to switch")
            return
        writers = self.app.view.instruction(self.order[self.index][1]).writers
        if len(writers) < 2:
            shown = f"one response ({writers[0].label})" if writers else "no response"
            other = "direct" if writers and writers[0].mode == "edit" else "edit"
            self._say(f"{shown} to this instruction: no other model or mode to switch to; a second model "
                      f"(`unspecific evaluate --models NAME`) or mode (`--mode {other}`) adds one")
            return
        i = writers.index(self.writer) if self.writer in writers else -1
        self.writer = writers[(i + 1) % len(writers)]
        self.refresh_constraint()

    def action_cycle_ratio(self) -> None:
        if not self.order:
            self._say("no constraints in this store yet: nothing to switch")
            return
        ratios = self.app.view.instruction(self.order[self.index][1]).ratios
        if len(ratios) < 2:
            shown = f"summaries at one ratio only ({ratios[0]:g})" if ratios else "no summary"
            self._say(f"{shown} for this instruction: no other ratio to switch to; "
                      "`unspecific evaluate --ratios 0.5,0.25` adds more")
            return
        self.ratio = next_ratio(ratios, self._ratio(None))
        self.refresh_constraint()

    def on_resize(self) -> None:
        # Across the 80-column breakpoint the list and the hidden panes come into view: draw them.
        if self.shown.constraint_id is not None:
            self._render_head_only()

    def _narrow(self) -> bool:
        return self.app.size.width < NARROW

    def _ratio(self, data: InstructionData | None) -> float:
        """The ratio `r` chose here, else the app's (app.view_ratio: the rule every view follows)."""
        return self.ratio if self.ratio is not None else self.app.view_ratio()

    def _writer_of(self, data: InstructionData, preferred: Writer | None = None) -> Writer | None:
        """The response shown for ``data``: ``preferred`` (by default the one shown now) when the
        instruction has it, else the app's, else its first."""
        wanted = self.writer if preferred is None else preferred
        if wanted in data.responses:
            return wanted
        return self.app.writer if self.app.writer in data.responses else (data.writers[0] if data.writers else None)

    def _texts(self, data: InstructionData, writer: Writer | None, ratio: float) -> dict[str, str]:
        """Each pane's text: the two references, the writer's response and its summary at ``ratio``."""
        response = data.responses.get(writer) if writer else None
        summary = data.summary(writer, ratio) if writer else None
        return {"ref-a": data.article_a, "ref-b": data.article_b,
                "response": response.text if response else "", "summary": summary.text if summary else ""}

    def refresh_constraint(self) -> None:
        self.app.collect_after_paint()
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
        texts = self._texts(data, self.writer, ratio)
        arrived = (self.shown.constraint_id, self.shown.instruction_id, self.shown.writer) != (cid, iid, self.writer)
        shown = Shown(cid, iid, self.writer, response.id if response else None,
                      summary.id if summary else None, bool(response and response.refusal))
        shown.row = row
        self.shown = shown
        if self.app.following is not None:  # the head names the item shown, in what is followed or not
            self.app.following.track(cid, iid, self.writer)
        self._open_on_copy(arrived, row)

        visible = self._visible(rows.rows)
        self._rows_shown = visible
        self._list_key = (iid, self.writer, ratio, self.sort, self.filter, id(self.order))
        if self._list_visible():
            self._sync_list()
        self._render_list_head(data, rows.rows, visible)
        for pane in self._drawn_panes():
            self._render_pane(pane, texts, con, data, verdicts, row, ratio)
        if self.source_view:  # it draws the response
            self._render_source(texts, con, data, row, ratio)
        shown.state = row.outcome if row else "not judged"
        self._render_head(data, con, rows.flags.get(cid, {}), row, verdicts, ratio)
        self._render_legend(row)
        self._render_verdicts(verdicts)
        self._render_titles()
        if self.app.following is not None:
            self.app.after_paint(self._read_ahead, READ_AHEAD_S)

    def _read_ahead(self) -> None:
        """Run once this item is painted, as the auditor reads it: the next stop of what n / p
        follow is read (its rows, from the store), its list lines drawn and its panes' spans, quotes,
        counts and wraps computed, into the caches its move will find. Moving to another instruction
        otherwise reads and draws all of it between the key and the paint (at 160x48 the list's ~37
        rows and four panes: most of a move). Nothing here is shown; a stop it did not guess (`p`,
        another key) is drawn as before."""
        following = self.app.following
        if following is None or following.left or following.index + 1 >= len(following.stops) \
                or not self.is_current:
            return
        stop = following.stops[following.index + 1]
        if stop.constraint_id not in self._pos:
            return
        data = self.app.view.instruction(stop.instruction_id)
        con = data.constraints.get(stop.constraint_id)
        writer = self._writer_of(data, stop.writer)
        if con is None or writer is None:
            return
        rows = self._instruction_rows(data, writer)
        if self._list_visible():
            self.query_one(ConstraintList).draw_ahead(self._visible(rows.rows), con.id)
        texts = self._texts(data, writer, self._ratio(data))
        row = next((r for r in rows.rows if r.constraint_id == con.id), None)
        scratch = Shown()  # what the panes found: recorded again when the move shows them
        for pane in self._drawn_panes():
            self._pane_content(pane, texts, con, data, rows.verdicts.get(con.id, []), row, scratch)
            self.query_one(f"#{pane}", TextPane).wrap_ahead(texts[pane])


def _instruction(entry: tuple[int, int]) -> int:
    return entry[1]
