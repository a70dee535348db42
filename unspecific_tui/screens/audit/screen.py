"""The Audit screen: it composes its parts (unspecific_tui/widgets/audit/), keeps where the auditor
is (the benchmark's order, the shown constraint, response and ratio), moves through the constraints
(up/down, [ ], model, ratio, n / p) and draws the shown one through the parts (``refresh_constraint``).
The parts own their state; the list tells the screen by a message when its cursor moved or enter
picked a row; the keys' bindings are the screen's, each handing the key to the part it acts on."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Header

from pipeline.core.definitions import Outcome
from pipeline.store.view import Writer
from unspecific_tui.context import Context
from unspecific_tui.following import Stop
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.widgets.audit.body import AuditBody
from unspecific_tui.widgets.audit.follower import AuditFollower
from unspecific_tui.widgets.audit.head import AuditHead, TaskLine, gate_line
from unspecific_tui.widgets.audit.listing import AuditList
from unspecific_tui.widgets.audit.place import AuditPlace, answered, other_ratio, other_writer, writer_for
from unspecific_tui.widgets.audit.state import NARROW, Shown
from unspecific_tui.widgets.footer import KeyFooter

NOTHING_TO_SWITCH = "no constraints in this store yet: nothing to switch"
READ_AHEAD_S = 0.03  # after the paint, before the next stop is read ahead (an auditor reads for seconds)

# The screen's keys; each hands its key to the part it acts on.
KEYS: list[BindingType] = [
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


class AuditScreen(AppScreen):
    """Audit: the head, the constraint list, the detail and the follower, composed and wired here."""

    CSS_PATH = "audit.tcss"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW, "-medium"), (200, "-wide")]
    BINDINGS: ClassVar[list[BindingType]] = KEYS

    def __init__(self) -> None:
        super().__init__()
        self.place = AuditPlace()
        self.ratio: float | None = None  # the ratio `r` chose (None: the app's)
        self.writer: Writer | None = None
        self.shown = Shown()
        self.task_line, self.head = TaskLine(id="audit-task"), AuditHead(id="audit-head")
        self.body = AuditBody(id="audit-body")
        self.listing, self.detail = self.body.listing, self.body.detail

    @cached_property
    def follower(self) -> AuditFollower:
        return AuditFollower(self.app, self)

    def compose(self) -> ComposeResult:
        yield Header()
        yield self.task_line
        yield self.head
        yield self.body
        yield KeyFooter()

    def on_mount(self) -> None:
        self.listing.table.focus()

    def on_screen_resume(self) -> None:
        self._show_target()

    def context(self) -> Context | None:
        """Where the auditor is (app.switch_mode carries it to the other screens)."""
        shown = self.shown
        if shown.instruction_id is None:
            return None
        return Context(shown.instruction_id, shown.writer, self._ratio(), shown.constraint_id)

    def say(self, message: str) -> None:
        """What the last key changed, as a notice: the app shows notices in the header's row
        (app.tcss), where they cover no pane, verdict or legend, at every width."""
        self.notify(message, timeout=3)

    def _show_target(self) -> None:
        """Show the constraint another screen asked for, or stay where we were."""
        order = self.app.view.constraint_order()  # cached; re-read after a stage wrote
        target = self.app.nav.take_target()
        if target is None and order is self.place.order and self.shown.constraint_id is not None:
            return  # nothing changed while we were away
        if self.place.set_order(order):  # the store changed: rows and flags are read again
            self.listing.forget()
            self.follower.forget()
        if target is not None:
            if self.app.nav.context.ratio is not None:
                self.ratio = self.app.nav.context.ratio
            iid, writer, cid = target
            if writer:
                self.writer = writer
            if cid is None:
                self.place.go_instruction(iid)
            else:
                self.place.index = self.place.pos.get(cid, 0)
                self.follower.sync(cid, iid, writer)
        self.refresh_constraint()

    # -- moving -------------------------------------------------------------------------------
    def action_move(self, step: int) -> None:
        """The next (previous) row of the list as sorted and filtered; past its end, the next
        (previous) instruction's first (last) row."""
        if not self.place.order:
            return
        if self.place.step_row([r.constraint_id for r in self.listing.rows_shown], step):
            self.refresh_constraint()
        else:
            self._instruction_step(step, last=step < 0)

    def action_instruction(self, step: int) -> None:
        """First constraint of the next (or previous) instruction."""
        self._instruction_step(step, last=False)

    def _instruction_step(self, step: int, *, last: bool) -> None:
        if not self.place.order:
            return
        say = self.place.step_instruction(step, answered(self.app.analysis))
        if say is not None:
            self.say(say)
            return
        data = self.app.view.instruction(self.place.instruction)
        # The row the list shows first (or last) there, as sorted and filtered.
        writer = writer_for(data, self.writer, self.app.writer)
        rows = self.listing.arranged(self.listing.rows(data, writer, self._ratio()).rows)
        if rows:
            self.place.go(rows[-1 if last else 0].constraint_id)
        self.refresh_constraint()

    def _seek(self, test: Callable[[int, int], bool], what: str) -> None:
        if self.place.seek(test):
            self.refresh_constraint()
        else:
            self.say(f"no {what} constraint")

    def action_next_flagged(self) -> None:
        """The next constraint with any flag, in the benchmark's order (no key: `f` picks a flag)."""
        self._seek(self.follower.is_flagged(), "flagged")

    def action_next_flipped(self) -> None:
        self._seek(self.follower.is_flipped(self.writer, self._ratio()), "flipped")

    def action_cycle_model(self) -> None:
        """The next response of this instruction: every (model, mode) in turn."""
        data = self.app.view.instruction(self.place.instruction) if self.place.order else None
        writer, say = other_writer(data.writers, self.writer) if data else (None, NOTHING_TO_SWITCH)
        if writer is None:
            self.say(say)
        else:
            self.writer = writer
            self.refresh_constraint()

    def action_cycle_ratio(self) -> None:
        data = self.app.view.instruction(self.place.instruction) if self.place.order else None
        ratio, say = other_ratio(data.ratios, self._ratio()) if data else (None, NOTHING_TO_SWITCH)
        if ratio is None:
            self.say(say)
        else:
            self.ratio = ratio
            self.refresh_constraint()

    # -- what is followed (widgets/audit/follower.py, which reaches the screen as its FollowerHost) --
    def action_follow(self, step: int) -> None:
        """n / p: the next stop of what is followed (a flag, the suspicion queue), else the next row."""
        if not self.follower.follow(step):
            self.action_move(step)

    def go(self, stop: Stop) -> None:
        if stop.writer is not None:
            self.writer = stop.writer
        self.place.go(stop.constraint_id)
        self.refresh_constraint()

    def action_stop_following(self) -> None:
        self.follower.stop()

    def action_pick_follow(self) -> None:
        self.follower.pick(self.place, self._ratio())

    def action_mark(self, mark: str) -> None:
        self._catch_up()  # a click's row, not yet shown, is the one the auditor marks
        self.follower.mark(self.shown, mark)

    # -- the list (widgets/audit/listing.py) ----------------------------------------------------
    def action_cycle_sort(self) -> None:
        self.listing.cycle_sort()
        self.refresh_constraint()
        self.say(f"list sorted by {self.listing.sort}")

    def action_cycle_filter(self) -> None:
        """The next filter; the list's first row when it hides the one shown, but a stop n/p follow."""
        self.listing.cycle_filter()
        self.refresh_constraint()
        following, first = self.follower.following, self.listing.first_passing()
        if first is not None and (following is None or following.left):
            self.place.go(first)
            self.refresh_constraint()
        self.say(f"list shows: {self.listing.filter}"
                 + (" (lifted for the item followed)" if self.listing.lifted is not None else ""))

    def action_toggle_list(self) -> None:
        if self.body.toggle_list():
            self.redraw()

    def action_escape(self) -> None:
        """escape: at 80 columns, from the list back to the text; else stop following (n / p then
        move through the list); with neither, says so."""
        if self.body.to_text():
            self.redraw()
        elif self.follower.following is not None:
            self.follower.stop()
        else:
            self.say("nothing followed to stop: f picks a flag or the suspicion queue")

    def action_enter(self) -> None:
        """enter with no row to pick (the list out of sight at 80 columns, or empty): says why."""
        self.say("enter picks a row of the list: l shows it" if not self.body.list_visible()
                 else "the list has no row to pick")

    @on(AuditList.Picked)
    def _catch_up(self) -> None:
        """The list's cursor moved (up/down, a click): its row is shown; also called by a key whose
        message may still be on its way (a mark right after a click marks the clicked row)."""
        cid = self.listing.cursor_constraint() if self.body.list_visible() else None
        if cid is not None and cid != self.shown.constraint_id and cid in self.place.pos:
            self.place.go(cid)
            self.refresh_constraint()

    @on(AuditBody.Swapped)
    def _swapped(self) -> None:
        self.redraw()

    # -- the detail (widgets/audit/detail.py) ---------------------------------------------------
    def _to_text(self) -> None:
        if self.body.to_text():
            self.redraw()

    def action_toggle_copy(self) -> None:
        say = self.detail.toggle_copy()
        self.refresh_constraint()
        self.say(say)

    def action_next_pane(self) -> None:
        """Narrow: show the next pane. Wider: mark it current; PageUp/PageDown scroll it. From the
        source view (o), back to the four texts."""
        self._to_text()
        if self.detail.source_view:
            self.action_toggle_source()
            self.say("back to the four texts (o: the source view again)")
            return
        self.detail.next_pane()
        if self._narrow():
            self.redraw()  # the pane now shown was not drawn while hidden

    def action_scroll_pane(self, step: int) -> None:
        self._to_text()
        say = self.detail.scroll(step)
        if say:
            self.say(say)

    def action_next_copy(self) -> None:
        self.say(self.detail.next_copy())

    def action_toggle_source(self) -> None:
        self._to_text()
        self.detail.toggle_source()
        self.refresh_constraint()

    # -- drawing -------------------------------------------------------------------------------
    def on_resize(self) -> None:
        # Across the 80-column breakpoint the list and the hidden panes come into view: draw them.
        self.redraw()

    def redraw(self) -> None:
        if self.place.order and self.shown.constraint_id is not None:
            self.refresh_constraint()

    def _narrow(self) -> bool:
        return self.app.size.width < NARROW

    def _ratio(self) -> float:
        """The ratio shown: app.view_ratio of the one `r` chose here (else the app's): the rule every
        view follows (pipeline.core.definitions.view_ratio)."""
        return self.app.view_ratio(self.ratio)

    def refresh_constraint(self) -> None:
        self.app.paint.collect_after_paint()
        if not self.place.order:
            self.head.show_empty("No constraints in this store yet. Build a run (1), then come back.")
            return
        cid, iid = self.place.order[self.place.index]
        data = self.app.view.instruction(iid)
        self.writer = writer = writer_for(data, self.writer, self.app.writer)
        item, rows = self.listing.item(data, cid, writer, self._ratio())
        response = data.responses.get(writer) if writer else None
        summary = data.summary(writer, item.ratio) if writer else None
        before = self.shown
        arrived = (before.constraint_id, before.instruction_id, before.writer) != (cid, iid, writer)
        self.shown = shown = Shown(cid, iid, writer, response.id if response else None,
                                   summary.id if summary else None, bool(response and response.refusal))
        shown.row = item.row
        shown.state = item.row.outcome if item.row else Outcome.NOT_JUDGED
        self.follower.track(cid, iid, writer)  # the head names the item shown, in what is followed or not
        if arrived and self.follower.following is not None:
            self.detail.open_on_copy(item.row)
        self.listing.show(data, rows, writer, item.ratio, cid, draw=self.body.list_visible())
        self.task_line.show_task(data.main_task, gate_line(data.gate))
        self.detail.draw(item, shown)
        self.set_class(self.follower.following is not None, "-following")  # narrow: the head a line more
        self.head.draw(item, refusal=shown.refusal, copy_mode=self.detail.copy_mode,
                       place=(self.place.index, len(self.place.order)), whole=self.body.over_list,
                       follow=self.follower.line(shown.response_id, cid))
        if self.follower.following is not None:
            self.app.paint.after_paint(self._read_ahead, READ_AHEAD_S)

    def _read_ahead(self) -> None:
        """Once this item is painted, as the auditor reads it: the next stop of what n / p follow read
        and drawn into the caches its move will find (its rows, list lines, panes' spans, quotes,
        counts and wraps; else most of a move at 160x48). Nothing is shown; another key draws as before."""
        stop = self.follower.next_stop()
        if stop is None or not self.is_current or stop.constraint_id not in self.place.pos:
            return
        data = self.app.view.instruction(stop.instruction_id)
        writer = writer_for(data, stop.writer, self.app.writer)
        if stop.constraint_id not in data.constraints or writer is None:
            return
        item, rows = self.listing.item(data, stop.constraint_id, writer, self._ratio())
        if self.body.list_visible():
            self.listing.draw_ahead(rows, stop.constraint_id)
        self.detail.read_ahead(item)

