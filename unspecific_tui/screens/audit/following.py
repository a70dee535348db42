"""The Audit screen's following: n / p through what is followed (a flag, the suspicion queue), the
flag picker (`f`), the next flagged or flipped constraint, and the audit loop's marks (`y` / `d`).
"""

from __future__ import annotations

from collections.abc import Callable

from textual import work

from pipeline.analysis.suspicion import suspicion_queue
from pipeline.store.view import StoreView, Writer
from unspecific_tui.following import Following, Stop
from unspecific_tui.screens.audit.state import AuditBase
from unspecific_tui.widgets.flag_picker import QUEUE, STOP, FlagPicker

MARK_KEYS = {"confirmed": "y", "dismissed": "d"}


class FollowingPart(AuditBase):
    """What n / p follow, and the marks on the suspicion queue's items."""

    def _sync_following(self, cid: int, iid: int, writer: Writer | None) -> None:
        """Opened on a stop of what is followed (the queue screen's enter): follow from there."""
        following = self.app.following
        if following is None:
            return
        for i, stop in enumerate(following.stops):
            if stop.constraint_id == cid and stop.instruction_id == iid and (writer is None or stop.writer == writer):
                following.index = i
                return

    def action_follow(self, step: int) -> None:
        """n / p: the next stop of what is followed (a flag, the suspicion queue), else the next row."""
        following = self.app.following
        if following is None:
            self.action_move(step)
            return
        before, back = following.index, following.left
        stop = following.step(step)
        if stop is None:
            self._say(f"nothing to follow in {following.label}")
            return
        self._go(stop)
        if back:
            self._say(f"back to {following.label} item {following.index + 1:,}")
        elif following.index == before:
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
            ranked = suspicion_queue(view, ratio=ratio)
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

    def action_mark(self, mark: str) -> None:
        """y / d: mark the item shown, the one the head names (the same key again clears it); on the
        suspicion queue's current item, go on to its next. Off the queue (a key moved the view away),
        the mark still goes on the item shown, and the queue waits where it was."""
        shown = self.shown
        if shown.response_id is None or shown.constraint_id is None:
            self._say("nothing to mark: no response shown")
            return
        key = (shown.response_id, shown.constraint_id)
        new = None if self.app.marks.get(key) == mark else mark
        if not self.app.mark(*key, new):
            return
        following = self.app.following
        on_queue = following is not None and following.label == QUEUE and not following.left
        if new is not None and on_queue and following is not None and following.index < len(following.stops) - 1:
            self.action_follow(1)
            self._say(f"{mark} the previous item · {self._done()}")
            return
        self.refresh_constraint()
        where = " (not in the queue)" if following is not None and following.left else ""
        self._say(f"{new or 'mark cleared'}{where} · {self._done()}")

    def _done(self) -> str:
        marks = list(self.app.marks.values())
        return f"{len(marks)} done ({marks.count('confirmed')} confirmed, {marks.count('dismissed')} dismissed)"
