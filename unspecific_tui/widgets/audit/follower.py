"""What Audit's n / p follow, and the audit loop's marks: a plain object the screen owns (it draws
nothing but the head's line about it). It keeps the flagged constraints it read, and reads and sets
what the app's navigator follows (``app.nav``; unspecific_tui/following.py: a flag, or the suspicion
queue the queue screen or the flag picker chose). It reaches the screen only through
``FollowerHost``: show a stop, say what a key changed, draw again, run the queue's ranking in a worker;
and the app only as ``Auditing``: the navigator, the view, the analysis, the marks, two calls.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from rich.text import Text

from pipeline.analysis.suspicion import suspicion_queue
from pipeline.core.definitions import same_ratio
from pipeline.store.view import StoreView, Writer
from unspecific_tui.following import Following, MarkKey, Stop, marks_line
from unspecific_tui.widgets.audit.place import AuditPlace
from unspecific_tui.widgets.audit.state import Shown
from unspecific_tui.widgets.flag_picker import QUEUE, STOP, FlagPicker

if TYPE_CHECKING:
    from pathlib import Path

    from unspecific_tui.data import Analysis, AppView
    from unspecific_tui.navigator import Navigator

MARK_KEYS = {"confirmed": "y", "dismissed": "d"}


class FollowerHost(Protocol):
    """The screen as the follower sees it."""

    def go(self, stop: Stop) -> None:
        """Show ``stop``."""

    def say(self, message: str) -> None:
        """Say what the last key changed."""

    def redraw(self) -> None:
        """Draw the item shown again (the head's line about what is followed changed)."""

    def run_worker(self, work: Callable[[], Any], *, thread: bool, exclusive: bool, group: str,
                   exit_on_error: bool) -> Any:
        """Run ``work`` in a worker of the screen's."""


class Auditing(Protocol):
    """What the follower is handed (the app, seen only so): the navigator, the store's view and the
    analysis it reads, the marks it keeps, and the two calls it makes (a picker over the screen, a
    worker's result back on the UI thread)."""

    nav: Navigator
    view: AppView
    analysis: Analysis | None

    @property
    def marks(self) -> dict[tuple[int, int], str]: ...

    def mark(self, response_id: int, constraint_id: int, mark: str | None) -> bool: ...

    def push_screen(self, screen: Any, callback: Callable[[Any], None]) -> Any: ...

    def call_from_thread(self, callback: Callable[..., Any], *args: Any) -> Any: ...


class AuditFollower:
    """n / p through what is followed, the flags to pick from, and the marks."""

    def __init__(self, auditing: Auditing, host: FollowerHost) -> None:
        self.auditing = auditing  # only what Auditing declares: never the app as a whole
        self.host = host
        self._flagged: dict[int, set[str]] | None = None  # constraint -> its flags, read once

    @property
    def following(self) -> Following | None:
        return self.auditing.nav.following

    def forget(self) -> None:
        """The store changed: the flags are read again."""
        self._flagged = None

    def sync(self, cid: int, iid: int, writer: Writer | None) -> None:
        """Opened on a stop of what is followed (the queue screen's enter): follow from there."""
        following = self.auditing.nav.following
        if following is None:
            return
        for i, stop in enumerate(following.stops):
            if (stop.constraint_id, stop.instruction_id) == (cid, iid) and writer in (None, stop.writer):
                following.index = i
                return

    def track(self, cid: int, iid: int, writer: Writer | None) -> None:
        """The view shows this item: what is followed knows whether it is one of its stops."""
        if self.auditing.nav.following is not None:
            self.auditing.nav.following.track(cid, iid, writer)

    def follow(self, step: int) -> bool:
        """n / p: the next stop of what is followed (a flag, the suspicion queue); False while
        nothing is followed (the screen then moves through the list)."""
        following = self.auditing.nav.following
        if following is None:
            return False
        before, back = following.index, following.left
        stop = following.step(step)
        if stop is None:
            self.host.say(f"nothing to follow in {following.label}")
            return True
        self.host.go(stop)
        if back:
            self.host.say(f"back to {following.label} item {following.index + 1:,}")
        elif following.index == before:
            self.host.say(f"{following.label}: the {'last' if step > 0 else 'first'} one")
        return True

    def next_stop(self) -> Stop | None:
        """The stop after the current one, while the view is on it (the one to read ahead)."""
        following = self.auditing.nav.following
        if following is None or following.left or following.index + 1 >= len(following.stops):
            return None
        return following.stops[following.index + 1]

    def stop(self) -> None:
        if self.auditing.nav.following is not None:
            self.auditing.nav.stop_following()
            self.host.redraw()
            self.host.say("stopped following: n/p move through the list")

    def pick(self, place: AuditPlace, ratio: float) -> None:
        """f: choose a flag (or the suspicion queue, ranked at ``ratio``) to follow with n / p."""
        counts = self.flag_counts(place.order)
        picker = FlagPicker(sorted(counts.items()), queue=True, following=self.following is not None)
        self.auditing.push_screen(picker, partial(self._picked, place, ratio))

    def _picked(self, place: AuditPlace, ratio: float, choice: str | None) -> None:
        if choice is None:
            return
        if choice == STOP:
            self.stop()
        elif choice == QUEUE:
            self.host.say("ranking the suspicion queue…")
            self.host.run_worker(partial(self._load_queue, self.auditing.view.path, ratio), thread=True,
                                 exclusive=True, group="audit-queue", exit_on_error=False)
        else:
            self.follow_flag(choice, place)

    def flagged_ids(self) -> dict[int, set[str]]:
        if self._flagged is None:
            self._flagged = self.auditing.view.flagged_ids()
        return self._flagged

    def flag_counts(self, order: list[tuple[int, int]]) -> dict[str, int]:
        flagged = self.flagged_ids()
        counts: dict[str, int] = {}
        for cid, _ in order:
            for flag in flagged.get(cid, ()):
                counts[flag] = counts.get(flag, 0) + 1
        return counts

    def follow_flag(self, flag: str, place: AuditPlace) -> None:
        """Follow the constraints carrying ``flag``, from the first at or after the shown one."""
        flagged = self.flagged_ids()
        stops = [Stop(cid, iid, None) for cid, iid in place.order if flag in flagged.get(cid, ())]
        if not stops:
            self.host.say(f"no constraint carries the flag {flag}")
            return
        start = next((i for i, s in enumerate(stops) if place.pos.get(s.constraint_id, -1) >= place.index), 0)
        self.auditing.nav.follow(Following(f"flag {flag}", stops, index=start))
        self.host.go(stops[start])

    def _load_queue(self, path: Path, ratio: float) -> None:
        """The suspicion queue on a view of its own (in a worker: the UI thread's connection stays
        the UI's), followed once ranked."""
        view = StoreView.open(path)
        try:
            ranked = suspicion_queue(view, ratio=ratio)
        finally:
            view.close()
        stops = [Stop(e.constraint_id, e.instruction_id, e.writer) for e in ranked]
        items = frozenset((f.response_id or 0, f.constraint_id) for e in ranked for f in (e, *e.same_phrase))
        self.auditing.call_from_thread(self._follow_queue, stops, items)

    def _follow_queue(self, stops: list[Stop], items: frozenset[MarkKey]) -> None:
        if not stops:
            self.host.say("the suspicion queue is empty")
            return
        self.auditing.nav.follow(Following(QUEUE, stops, items=items))
        self.host.go(stops[0])

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
            item = self.auditing.view.outcomes(iid, writer, ratio).get(cid)
            return item is not None and item.flipped

        analysis = self.auditing.analysis
        if analysis is not None and same_ratio(analysis.ratio, ratio):
            candidates = analysis.flipped_instructions(writer)
            return lambda cid, iid: iid in candidates and flipped(cid, iid)
        return flipped

    def mark(self, shown: Shown, mark: str) -> None:
        """y / d: mark the item shown, the one the head names (the same key again clears it), through
        the app; on the suspicion queue's current item, go on to its next. Off the queue (a key moved
        the view away), the mark still goes on the item shown, and the queue waits where it was."""
        if shown.response_id is None or shown.constraint_id is None:
            self.host.say("nothing to mark: no response shown")
            return
        key = (shown.response_id, shown.constraint_id)
        old = self.auditing.marks.get(key)
        new = None if old == mark else mark
        if not self.auditing.mark(*key, new):
            return
        following = self.auditing.nav.following
        on_queue = following is not None and following.label == QUEUE and not following.left
        if new is not None and on_queue and following is not None \
                and following.index < len(following.stops) - 1:
            self.follow(1)
            self.host.say(f"{mark} the previous item · {self.done()}")
            return
        self.host.redraw()
        where = " (not in the queue)" if following is not None and following.left else ""
        said = new or f"{old} mark cleared ({MARK_KEYS[mark]} again marks it {mark})"
        self.host.say(f"{said}{where} · {self.done()}")

    def done(self) -> str:
        """The marks counted as the queue screen counts them (following.marks_line): on the queue's
        items while it is followed, else every mark, under another name."""
        following = self.auditing.nav.following
        on_queue = following is not None and following.label == QUEUE
        return marks_line(self.auditing.marks, following.items if on_queue and following else None)

    def line(self, response_id: int | None, constraint_id: int | None) -> Text | None:
        """The head's line while n/p follow a list: "suspicion queue item k of N", the item's mark, the
        count done; after a key left the list, that the item shown is not in it (and which item n/p
        go back to). None while nothing is followed."""
        following = self.auditing.nav.following
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
            mark = self.auditing.marks.get((response_id or 0, constraint_id or 0))
            line.append(f" · {mark}" if mark else " · not marked",
                        style="bold green" if mark == "confirmed" else "dim")
            line.append(" · y confirm · d dismiss", style="magenta")
            line.append(f" · {self.done()}")
        if not following.left:
            line.append(" · n/p next/prev", style="dim")
        line.append(" · esc stops", style="dim")
        return line
