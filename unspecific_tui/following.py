"""What Audit's "next" follows when the auditor came from a list: the suspicion queue, or the
constraints carrying one flag. The queue screen (or the flag picker) has the app's navigator follow
it (``app.nav.follow``);
Audit's next/prev keys step through it instead of the benchmark's order while it is set."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from pipeline.store.view import Writer

MarkKey = tuple[int, int]  # a mark's item: (response id, constraint id)


@dataclass(frozen=True)
class Stop:
    """One place to audit: a constraint of an instruction, on one response (model and mode)."""

    constraint_id: int
    instruction_id: int
    writer: Writer | None

    def is_at(self, constraint_id: int | None, instruction_id: int | None, writer: Writer | None) -> bool:
        """Whether the view showing this (constraint, instruction, writer) shows this stop; a stop
        with no writer (a flag's) is on every response of its constraint."""
        return (self.constraint_id, self.instruction_id) == (constraint_id, instruction_id) \
            and (self.writer is None or self.writer == writer)


@dataclass
class Following:
    label: str  # what is followed, shown in Audit's head: "suspicion queue", "flag: copied"
    stops: list[Stop]
    index: int = 0
    # True while the view shows an item that is not one of the stops (a key such as `x` or `]` moved
    # away): the head then says so, and a mark goes on the item shown, never on the stop left.
    left: bool = False
    # Every item of the list as (response id, constraint id): the suspicion queue's, its filed items
    # too, so Audit counts the marks the queue counts (``marks_line``).
    items: frozenset[MarkKey] = field(default_factory=frozenset)

    @property
    def current(self) -> Stop | None:
        return self.stops[self.index] if 0 <= self.index < len(self.stops) else None

    def step(self, by: int) -> Stop | None:
        """Move ``by`` stops (clamped to the ends); the stop moved to, or None when there are none.
        After the view left the stops, either direction goes back to the stop it left."""
        if not self.stops:
            return None
        if self.left:
            return self.current
        self.index = max(0, min(len(self.stops) - 1, self.index + by))
        return self.current

    def track(self, constraint_id: int | None, instruction_id: int | None, writer: Writer | None) -> None:
        """Follow the view: on the current stop, nothing changes; on another stop, that one becomes
        current; on no stop, ``left`` is set and ``index`` keeps the stop the view left."""
        current = self.current
        if current is not None and current.is_at(constraint_id, instruction_id, writer):
            self.left = False
            return
        for i, stop in enumerate(self.stops):
            if stop.is_at(constraint_id, instruction_id, writer):
                self.index, self.left = i, False
                return
        self.left = True


def marks_line(marks: Mapping[MarkKey, str], items: Collection[MarkKey] | None) -> str:
    """The one count of marks, said alike by the queue and Audit: on the queue's ``items``,
    "7 done (3 confirmed, 4 dismissed)", then the marks on items off the queue under a name of their
    own ("3 marked off the queue"); with no queue (``items`` None), every mark: "10 marked (...)"."""
    if items is None:
        return _counted("marked", list(marks.values()))
    done = _counted("done", [mark for key, mark in marks.items() if key in items])
    off = sum(1 for key in marks if key not in items)
    return f"{done} · {off:,} marked off the queue" if off else done


def _counted(word: str, marks: list[str]) -> str:
    confirmed, dismissed = marks.count("confirmed"), marks.count("dismissed")
    return f"{confirmed + dismissed:,} {word} ({confirmed:,} confirmed, {dismissed:,} dismissed)"
