"""The Audit screen: it composes its parts (unspecific_tui/widgets/audit/), keeps where the auditor
is (the benchmark's order, the shown constraint, response and ratio), moves through the constraints
(up/down, [ ], model, ratio, n / p) and draws the shown one through the parts (``refresh_constraint``).
The parts own their state; the list tells the screen by a message when its cursor moved or enter
picked a row; the keys' bindings are the screen's, each handing the key to the part it acts on."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from functools import cached_property

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Header

from pipeline.core.definitions import next_ratio
from pipeline.store.view import InstructionData, Writer
from unspecific_tui.app import Context
from unspecific_tui.following import Stop
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.widgets.audit.detail import AuditDetail
from unspecific_tui.widgets.audit.follower import AuditFollower
from unspecific_tui.widgets.audit.head import AuditHead, TaskLine
from unspecific_tui.widgets.audit.listing import AuditList
from unspecific_tui.widgets.audit.state import NARROW, Item, Shown
from unspecific_tui.widgets.constraint_list import ListRow
from unspecific_tui.widgets.flag_picker import QUEUE, STOP, FlagPicker
from unspecific_tui.widgets.footer import KeyFooter

READ_AHEAD_S = 0.03  # after the paint, before the next stop is read ahead (an auditor reads for seconds)


class AuditScreen(AppScreen):
    """Audit: the head, the constraint list, the detail and the follower, composed and wired here."""

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
        self.ratio: float | None = None  # the ratio `r` chose (None: the app's)
        self.writer: Writer | None = None
        self.shown = Shown()
        self.head = AuditHead(id="audit-head")
        self.listing = AuditList(id="audit-side")
        self.detail = AuditDetail(id="audit-detail")

    @cached_property
    def follower(self) -> AuditFollower:
        return AuditFollower(self.app)

    @property
    def sort(self) -> str:
        return self.listing.sort

    @property
    def filter(self) -> str:
        return self.listing.filter

    def compose(self) -> ComposeResult:
        yield Header()
        yield TaskLine(id="audit-task")
        yield self.head
        with Horizontal(id="audit-body"):
            yield self.listing
            yield self.detail
        yield KeyFooter()

    def on_mount(self) -> None:
        if self.ratio is None:
            self.ratio = self.app.ratio
        self.listing.table.focus()

    def on_screen_resume(self) -> None:
        self._show_target()

    def context(self) -> Context | None:
        """Where the auditor is (app.switch_mode carries it to the other screens)."""
        shown = self.shown
        if shown.instruction_id is None:
            return None
        return Context(shown.instruction_id, shown.writer, self._ratio(), shown.constraint_id)

    def _say(self, message: str) -> None:
        """What the last key changed, as a notice: the app shows notices in the header's row
        (app.tcss), where they cover no pane, verdict or legend, at every width."""
        self.notify(message, timeout=3)

    def _show_target(self) -> None:
        """Show the constraint another screen asked for, or stay where we were."""
        order = self.app.view.constraint_order()  # cached; re-read after a stage wrote
        target = self.app.target
        if target is None and order is self.order and self.shown.constraint_id is not None:
            return  # nothing changed while we were away
        current = self.order[self.index][0] if self.order else None
        if order is not self.order:  # the store changed: rows and flags are read again
            self.order, self._pos = order, {cid: i for i, (cid, _) in enumerate(order)}
            self.listing.forget()
            self.follower.forget()
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
                self.follower.sync(cid, iid, writer)
        self.refresh_constraint()

    # -- moving -------------------------------------------------------------------------------
    def action_move(self, step: int) -> None:
        """The next (previous) row of the list as sorted and filtered; past its end, the next
        (previous) instruction's first (last) row."""
        if not self.order:
            return
        cid, _ = self.order[self.index]
        ids = [r.constraint_id for r in self.listing.rows_shown]
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
        data = self.app.view.instruction(order[start][1])
        # The row the list shows first (or last) there, as sorted and filtered.
        rows = self.listing.visible(self.listing.rows(data, self._writer_of(data), self._ratio()).rows)
        if rows:
            self.index = self._pos.get(rows[-1 if last else 0].constraint_id, start)
        self.refresh_constraint()

    def _seek(self, test: Callable[[int, int], bool], what: str) -> None:
        n = len(self.order)
        for k in range(1, n):
            i = (self.index + k) % n
            if test(*self.order[i]):
                self.index = i
                self.refresh_constraint()
                return
        self._say(f"no {what} constraint")

    def action_next_flagged(self) -> None:
        """The next constraint with any flag, in the benchmark's order (no key: `f` picks a flag)."""
        self._seek(self.follower.is_flagged(), "flagged")

    def action_next_flipped(self) -> None:
        self._seek(self.follower.is_flipped(self.writer, self._ratio()), "flipped")

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
        self.ratio = next_ratio(ratios, self._ratio())
        self.refresh_constraint()

    # -- what is followed (widgets/audit/follower.py) --------------------------------------------
    def action_follow(self, step: int) -> None:
        """n / p: the next stop of what is followed (a flag, the suspicion queue), else the next row."""
        if self.follower.following is None:
            self.action_move(step)
            return
        stop, say = self.follower.step(step)
        if stop is not None:
            self._go(stop)
        if say:
            self._say(say)

    def _go(self, stop: Stop) -> None:
        if stop.writer is not None:
            self.writer = stop.writer
        self.index = self._pos.get(stop.constraint_id, self.index)
        self.refresh_constraint()

    def action_stop_following(self) -> None:
        if self.follower.stop():
            self._redraw()
            self._say("stopped following: n/p move through the list")

    def action_pick_follow(self) -> None:
        """f: choose a flag (or the suspicion queue) to follow with n / p."""
        counts = self.follower.flag_counts(self.order)
        picker = FlagPicker(sorted(counts.items()), queue=True, following=self.follower.following is not None)
        self.app.push_screen(picker, self._picked)

    def _picked(self, choice: str | None) -> None:
        if choice is None:
            return
        if choice == STOP:
            self.action_stop_following()
        elif choice == QUEUE:
            self._say("ranking the suspicion queue…")
            self._load_queue(self._ratio())
        else:
            self.follow_flag(choice)

    def follow_flag(self, flag: str) -> None:
        """Follow the constraints carrying ``flag``, from the first at or after the shown one."""
        stop = self.follower.follow_flag(flag, self.order, self._pos, self.index)
        if stop is None:
            self._say(f"no constraint carries the flag {flag}")
        else:
            self._go(stop)

    @work(thread=True, exclusive=True, group="audit-queue", exit_on_error=False)
    def _load_queue(self, ratio: float) -> None:
        stops = AuditFollower.rank_queue(self.app.view.path, ratio)
        self.app.call_from_thread(self._follow_queue, stops)

    def _follow_queue(self, stops: list[Stop]) -> None:
        stop = self.follower.follow_queue(stops)
        if stop is None:
            self._say("the suspicion queue is empty")
        else:
            self._go(stop)

    def action_mark(self, mark: str) -> None:
        """y / d: mark the item shown, the one the head names (the same key again clears it); on the
        suspicion queue's current item, go on to its next (widgets/audit/follower.py)."""
        shown = self.shown
        if shown.response_id is None or shown.constraint_id is None:
            self._say("nothing to mark: no response shown")
            return
        marked = self.follower.mark(shown.response_id, shown.constraint_id, mark)
        if marked is None:
            return
        new, go_on = marked
        if go_on:
            self.action_follow(1)
            self._say(f"{mark} the previous item · {self.follower.done()}")
            return
        self.refresh_constraint()
        where = " (not in the queue)" if self.follower.left else ""
        self._say(f"{new or 'mark cleared'}{where} · {self.follower.done()}")

    # -- the list (widgets/audit/listing.py) ----------------------------------------------------
    def action_cycle_sort(self) -> None:
        self.listing.cycle_sort()
        self.refresh_constraint()
        self._say(f"list sorted by {self.sort}")

    def action_cycle_filter(self) -> None:
        """The next filter; when it hides the shown constraint, the list's first row is shown."""
        self.listing.cycle_filter()
        self.refresh_constraint()
        rows = self.listing.rows_shown
        if rows and all(r.constraint_id != self.shown.constraint_id for r in rows):
            self.index = self._pos.get(rows[0].constraint_id, self.index)
            self.refresh_constraint()
        self._say(f"list shows: {self.filter}")

    def _list_visible(self) -> bool:
        return self.has_class("-list") if self._narrow() else not self.listing.has_class("-hidden")

    def action_toggle_list(self) -> None:
        """Wide: hide (show) the list, more room for the texts. Narrow: the list in place of the
        text pane, and back (enter on a row comes back too)."""
        if self._narrow():
            self.toggle_class("-list")
            if self.has_class("-list"):
                self.listing.sync()
                self.listing.table.focus()
            self._redraw()  # over the list the head holds the whole constraint
            return
        self.listing.toggle_class("-hidden")
        if self._list_visible():
            self.listing.sync()

    def action_escape(self) -> None:
        """escape: at 80 columns, from the list back to the text; else stop following (n / p then
        move through the list); with neither, says so."""
        if self._narrow() and self.has_class("-list"):
            self.action_toggle_list()
        elif self.follower.following is not None:
            self.action_stop_following()
        else:
            self._say("nothing followed to stop: f picks a flag or the suspicion queue")

    def action_enter(self) -> None:
        """enter with no row to pick (the list out of sight at 80 columns, or empty): says why."""
        self._say("enter picks a row of the list: l shows it" if not self._list_visible()
                  else "the list has no row to pick")

    @on(AuditList.Picked)
    def _picked_row(self, event: AuditList.Picked) -> None:
        """The list's cursor moved (up/down, a click): its constraint's detail follows."""
        cid = event.constraint_id
        if cid == self.listing.cursor_constraint() and cid != self.shown.constraint_id and cid in self._pos:
            self.index = self._pos[cid]
            self.refresh_constraint()

    @on(AuditList.Chosen)
    def _chosen_row(self) -> None:
        """Enter on the list: at 80 columns, back to the text of the row chosen."""
        if self.has_class("-list"):
            self.remove_class("-list")
            self._redraw()
        elif self._narrow():  # the list is out of sight (it keeps the focus): enter has no row to pick
            self._say("enter picks a row of the list: l shows it")

    # -- the detail (widgets/audit/detail.py) ---------------------------------------------------
    def _to_text(self) -> None:
        """At 80 columns over the list (`l`): back to the text, for the keys that act on a pane (t,
        PgUp/PgDn, o), which would change a pane out of sight."""
        if self._narrow() and self.has_class("-list"):
            self.action_toggle_list()

    def action_toggle_copy(self) -> None:
        say = self.detail.toggle_copy()
        self.refresh_constraint()
        self._say(say)

    def action_next_pane(self) -> None:
        """Narrow: show the next pane. Wider: mark it current; PageUp/PageDown scroll it. From the
        source view (o), back to the four texts."""
        self._to_text()
        if self.detail.source_view:
            self.action_toggle_source()
            self._say("back to the four texts (o: the source view again)")
            return
        self.detail.next_pane()
        if self._narrow():
            self._redraw()  # the pane now shown was not drawn while hidden

    def action_scroll_pane(self, step: int) -> None:
        self._to_text()
        say = self.detail.scroll(step)
        if say:
            self._say(say)

    def action_next_copy(self) -> None:
        self._say(self.detail.next_copy())

    def action_toggle_source(self) -> None:
        self._to_text()
        self.detail.toggle_source()
        self.refresh_constraint()

    # -- drawing -------------------------------------------------------------------------------
    def on_resize(self) -> None:
        # Across the 80-column breakpoint the list and the hidden panes come into view: draw them.
        self._redraw()

    def _redraw(self) -> None:
        if self.order and self.shown.constraint_id is not None:
            self.refresh_constraint()

    def _narrow(self) -> bool:
        return self.app.size.width < NARROW

    def _ratio(self) -> float:
        """The ratio shown: app.view_ratio of the one `r` chose here (else the app's): the rule every
        view follows (pipeline.core.definitions.view_ratio)."""
        return self.app.view_ratio(self.ratio)

    def _writer_of(self, data: InstructionData, preferred: Writer | None = None) -> Writer | None:
        """The response shown for ``data``: ``preferred`` (by default the one shown now) when the
        instruction has it, else the app's, else its first."""
        wanted = self.writer if preferred is None else preferred
        if wanted in data.responses:
            return wanted
        return self.app.writer if self.app.writer in data.responses else (data.writers[0] if data.writers else None)

    def _item(self, cid: int, data: InstructionData, writer: Writer | None, ratio: float) -> tuple[Item, list[ListRow]]:
        """Constraint ``cid`` of ``data`` on ``writer``'s response at ``ratio``, and its instruction's rows."""
        rows = self.listing.rows(data, writer, ratio)
        response = data.responses.get(writer) if writer else None
        summary = data.summary(writer, ratio) if writer else None
        texts = {"ref-a": data.article_a, "ref-b": data.article_b,
                 "response": response.text if response else "", "summary": summary.text if summary else ""}
        row = next((r for r in rows.rows if r.constraint_id == cid), None)
        item = Item(data, data.constraints[cid], writer, ratio, texts, row, rows.verdicts.get(cid, []),
                    rows.flags.get(cid, {}))
        return item, rows.rows

    def refresh_constraint(self) -> None:
        self.app.collect_after_paint()
        if not self.order:
            self.head.show_empty("No constraints in this store yet. Build a run (1), then come back.")
            return
        cid, iid = self.order[self.index]
        data = self.app.view.instruction(iid)
        self.writer = writer = self._writer_of(data)
        item, rows = self._item(cid, data, writer, self._ratio())
        response = data.responses.get(writer) if writer else None
        summary = data.summary(writer, item.ratio) if writer else None
        arrived = (self.shown.constraint_id, self.shown.instruction_id, self.shown.writer) != (cid, iid, writer)
        self.shown = shown = Shown(cid, iid, writer, response.id if response else None,
                                   summary.id if summary else None, bool(response and response.refusal))
        shown.row = item.row
        shown.state = item.row.outcome if item.row else "not judged"
        self.follower.track(cid, iid, writer)  # the head names the item shown, in what is followed or not
        if arrived and self.follower.following is not None:
            self.detail.open_on_copy(item.row)
        self.listing.show(data, rows, writer, item.ratio, cid, draw=self._list_visible())
        self.query_one(TaskLine).show_task(data.main_task)
        self.detail.draw(item, shown)
        self.head.draw(item, refusal=shown.refusal, copy_mode=self.detail.copy_mode,
                       place=(self.index, len(self.order)), whole=self.has_class("-list"),
                       follow=self.follower.line(shown.response_id, cid))
        if self.follower.following is not None:
            self.app.after_paint(self._read_ahead, READ_AHEAD_S)

    def _read_ahead(self) -> None:
        """Run once this item is painted, as the auditor reads it: the next stop of what n / p
        follow is read (its rows, from the store), its list lines drawn and its panes' spans, quotes,
        counts and wraps computed, into the caches its move will find. Moving to another instruction
        otherwise reads and draws all of it between the key and the paint (at 160x48 the list's ~37
        rows and four panes: most of a move). Nothing here is shown; a stop it did not guess (`p`,
        another key) is drawn as before."""
        following = self.follower.following
        if following is None or following.left or following.index + 1 >= len(following.stops) \
                or not self.is_current:
            return
        stop = following.stops[following.index + 1]
        if stop.constraint_id not in self._pos:
            return
        data = self.app.view.instruction(stop.instruction_id)
        writer = self._writer_of(data, stop.writer)
        if stop.constraint_id not in data.constraints or writer is None:
            return
        item, rows = self._item(stop.constraint_id, data, writer, self._ratio())
        if self._list_visible():
            self.listing.draw_ahead(rows, stop.constraint_id)
        self.detail.read_ahead(item)


def _instruction(entry: tuple[int, int]) -> int:
    return entry[1]
