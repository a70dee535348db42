"""What Audit's "next" follows when the auditor came from a list: the suspicion queue, or the
constraints carrying one flag. The queue screen (or the flag picker) sets ``app.following``;
Audit's next/prev keys step through it instead of the benchmark's order while it is set."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.store.view import Writer


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
