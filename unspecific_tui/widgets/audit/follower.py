"""What Audit's n / p follow, and the audit loop's marks: a plain object the screen owns (it draws
nothing but the head's line about it). It keeps the flagged constraints it read, and reads and sets
``app.following`` (unspecific_tui/following.py: a flag, or the suspicion queue the queue screen or
the flag picker chose). Each method answers the screen: the stop to show, what to say.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.text import Text

from pipeline.analysis.suspicion import suspicion_queue
from pipeline.core.definitions import same_ratio
from pipeline.store.view import StoreView, Writer
from unspecific_tui.following import Following, Stop
from unspecific_tui.widgets.flag_picker import QUEUE

if TYPE_CHECKING:
    from pathlib import Path

    from unspecific_tui.app import UnspecificApp

MARK_KEYS = {"confirmed": "y", "dismissed": "d"}


class AuditFollower:
    """n / p through what is followed, the flags to pick from, and the marks."""

    def __init__(self, app: UnspecificApp) -> None:
        self.app = app
        self._flagged: dict[int, set[str]] | None = None  # constraint -> its flags, read once

    @property
    def following(self) -> Following | None:
        return self.app.following

    def forget(self) -> None:
        """The store changed: the flags are read again."""
        self._flagged = None

    def sync(self, cid: int, iid: int, writer: Writer | None) -> None:
        """Opened on a stop of what is followed (the queue screen's enter): follow from there."""
        following = self.app.following
        if following is None:
            return
        for i, stop in enumerate(following.stops):
            if stop.constraint_id == cid and stop.instruction_id == iid and (writer is None or stop.writer == writer):
                following.index = i
                return

    def track(self, cid: int, iid: int, writer: Writer | None) -> None:
        """The view shows this item: what is followed knows whether it is one of its stops."""
        if self.app.following is not None:
            self.app.following.track(cid, iid, writer)

    def step(self, step: int) -> tuple[Stop | None, str | None]:
        """n / p while following: the stop to show (None: nothing to follow), and what to say."""
        following = self.app.following
        assert following is not None
        before, back = following.index, following.left
        stop = following.step(step)
        if stop is None:
            return None, f"nothing to follow in {following.label}"
        if back:
            return stop, f"back to {following.label} item {following.index + 1:,}"
        if following.index == before:
            return stop, f"{following.label}: the {'last' if step > 0 else 'first'} one"
        return stop, None

    def stop(self) -> bool:
        """Stop following; False when nothing was followed."""
        if self.app.following is None:
            return False
        self.app.following = None
        return True

    def flagged_ids(self) -> dict[int, set[str]]:
        if self._flagged is None:
            self._flagged = self.app.view.flagged_ids()
        return self._flagged

    def flag_counts(self, order: list[tuple[int, int]]) -> dict[str, int]:
        flagged = self.flagged_ids()
        counts: dict[str, int] = {}
        for cid, _ in order:
            for flag in flagged.get(cid, ()):
                counts[flag] = counts.get(flag, 0) + 1
        return counts

    def follow_flag(self, flag: str, order: list[tuple[int, int]], pos: dict[int, int], here: int) -> Stop | None:
        """Follow the constraints carrying ``flag`` (in ``order``; ``pos``: a constraint's place in
        it), from the first at or after ``here`` (the shown one's place): the stop to show, or None
        when no constraint carries the flag."""
        flagged = self.flagged_ids()
        stops = [Stop(cid, iid, None) for cid, iid in order if flag in flagged.get(cid, ())]
        if not stops:
            return None
        start = next((i for i, s in enumerate(stops) if pos.get(s.constraint_id, -1) >= here), 0)
        self.app.following = Following(f"flag {flag}", stops, index=start)
        return stops[start]

    def follow_queue(self, stops: list[Stop]) -> Stop | None:
        """Follow the ranked suspicion queue; its first stop, None when it is empty."""
        if not stops:
            return None
        self.app.following = Following(QUEUE, stops)
        return stops[0]

    @staticmethod
    def rank_queue(path: Path, ratio: float) -> list[Stop]:
        """The suspicion queue on a view of its own (run in a worker: the UI thread's connection stays
        the UI's)."""
        view = StoreView.open(path)
        try:
            ranked = suspicion_queue(view, ratio=ratio)
        finally:
            view.close()
        return [Stop(e.constraint_id, e.instruction_id, e.writer) for e in ranked]

    def is_flagged(self) -> Callable[[int, int], bool]:
        flagged = self.flagged_ids()
        return lambda cid, _: cid in flagged

    def is_flipped(self, writer: Writer | None, ratio: float) -> Callable[[int, int], bool]:
        """Whether a constraint flips on ``writer``'s response at ``ratio``: asks the store per
        constraint (indexed); once the analysis is ready at that ratio, only about the instructions
        it counted a flip in."""
        def flipped(cid: int, iid: int) -> bool:  # pipeline.analysis.metrics' call on the constraint
            if writer is None:
                return False
            item = self.app.view.outcomes(iid, writer, ratio).get(cid)
            return item is not None and item.flipped

        analysis = self.app.analysis
        if analysis is not None and same_ratio(analysis.ratio, ratio):
            candidates = analysis.flipped_instructions(writer)
            return lambda cid, iid: iid in candidates and flipped(cid, iid)
        return flipped

    def mark(self, response_id: int, constraint_id: int, mark: str) -> tuple[str | None, bool] | None:
        """y / d on the item shown: its mark set (the same key again clears it) through the app;
        None when it was not stored, else the mark now and whether to go on to the queue's next
        item (on the suspicion queue's current item, not its last). Off the queue (a key moved the
        view away) the mark still goes on the item shown, and the queue waits where it was."""
        key = (response_id, constraint_id)
        new = None if self.app.marks.get(key) == mark else mark
        if not self.app.mark(*key, new):
            return None
        following = self.app.following
        on_queue = following is not None and following.label == QUEUE and not following.left
        go_on = new is not None and on_queue and following is not None and following.index < len(following.stops) - 1
        return new, go_on

    @property
    def left(self) -> bool:
        """Whether the view shows an item off what is followed."""
        return self.app.following is not None and self.app.following.left

    def done(self) -> str:
        marks = list(self.app.marks.values())
        return f"{len(marks)} done ({marks.count('confirmed')} confirmed, {marks.count('dismissed')} dismissed)"

    def line(self, response_id: int | None, constraint_id: int | None) -> Text | None:
        """The head's line while n/p follow a list: "suspicion queue item k of N", the item's mark, the
        count done; after a key left the list, that the item shown is not in it (and which item n/p
        go back to). None while nothing is followed."""
        following = self.app.following
        if following is None:
            return None
        line = Text(no_wrap=True, overflow="ellipsis")
        position = f"item {following.index + 1:,} of {len(following.stops):,}"
        if following.left:
            line.append(f"not in the {following.label}", style="bold yellow")
            line.append(f" · n/p back to {position}", style="dim")
        else:
            line.append(f"{following.label} {position}", style="bold magenta")
        if following.label == QUEUE:
            mark = self.app.marks.get((response_id or 0, constraint_id or 0))
            line.append(f" · {mark}" if mark else " · not marked",
                        style="bold green" if mark == "confirmed" else "dim")
            line.append(" · y confirm · d dismiss", style="magenta")
            line.append(f" · {self.done()}")
        if not following.left:
            line.append(" · n/p next/prev", style="dim")
        line.append(" · esc stops", style="dim")
        return line
