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


@dataclass
class Following:
    label: str  # what is followed, shown in Audit's head: "suspicion queue", "flag: copied"
    stops: list[Stop]
    index: int = 0

    @property
    def current(self) -> Stop | None:
        return self.stops[self.index] if 0 <= self.index < len(self.stops) else None

    def step(self, by: int) -> Stop | None:
        """Move ``by`` stops (clamped to the ends); the stop moved to, or None when there are none."""
        if not self.stops:
            return None
        self.index = max(0, min(len(self.stops) - 1, self.index + by))
        return self.current

    def position(self) -> str:
        return f"{self.index + 1}/{len(self.stops)}" if self.stops else "0/0"
