"""Where the Audit screen is in the benchmark: the order of its constraints (constraint, instruction),
by instruction, and the index of the one shown. A plain object the screen owns; its moves answer
whether they moved, or what to say when they could not (the first or last instruction).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from pipeline.analysis.overview import Analysis
from pipeline.core.definitions import next_ratio
from pipeline.store.view import InstructionData, Writer


class AuditPlace:
    """The order and the index in it; ``pos`` finds a constraint's index."""

    def __init__(self) -> None:
        self.order: list[tuple[int, int]] = []
        self.pos: dict[int, int] = {}  # constraint id -> index in order
        self.index = 0

    def set_order(self, order: list[tuple[int, int]]) -> bool:
        """A new order (the store changed), on the constraint shown before when it is still there;
        False when ``order`` is the one held."""
        if order is self.order:
            return False
        current = self.order[self.index][0] if self.order else None
        self.order, self.pos = order, {cid: i for i, (cid, _) in enumerate(order)}
        if current is not None:
            self.index = self.pos.get(current, 0)
        return True

    @property
    def instruction(self) -> int:
        return self.order[self.index][1]

    def go(self, constraint_id: int) -> None:
        """On ``constraint_id`` (where it is in the order; else stay)."""
        self.index = self.pos.get(constraint_id, self.index)

    def go_instruction(self, instruction_id: int) -> None:
        """On the first constraint of ``instruction_id`` (else the first of all)."""
        at = bisect.bisect_left(self.order, instruction_id, key=_instruction)
        self.index = at if at < len(self.order) else 0

    def step_row(self, shown: list[int], step: int) -> bool:
        """The next (previous) of the constraints ``shown`` (the list's, in its order) from the one
        shown, or its first (last) when that one is not among them; False past their end."""
        cid = self.order[self.index][0]
        at = shown.index(cid) if cid in shown else -1
        if at >= 0 and 0 <= at + step < len(shown):
            self.go(shown[at + step])
        elif at < 0 and shown:
            self.go(shown[0 if step > 0 else -1])
        else:
            return False
        return True

    def step_instruction(self, step: int, answered: Callable[[int], bool] = lambda _: True) -> str | None:
        """On the first constraint of the next (previous) instruction that ``answered`` (one with a
        response: a common condition's list shares its synthesis and may have none); what to say when
        there is none."""
        order = self.order
        current = at = order[self.index][1]
        while True:
            if step > 0:
                start = bisect.bisect_right(order, at, key=_instruction)
                if start >= len(order):
                    return f"#{current} is the last instruction with a response"  # it stays
            else:
                first = bisect.bisect_left(order, at, key=_instruction)
                if first == 0:
                    return f"#{current} is the first instruction with a response"
                start = bisect.bisect_left(order, order[first - 1][1], key=_instruction)
            at = order[start][1]
            if answered(at):
                self.index = start
                return None

    def seek(self, test: Callable[[int, int], bool]) -> bool:
        """On the next constraint (round the end) that passes ``test(constraint, instruction)``."""
        n = len(self.order)
        for k in range(1, n):
            i = (self.index + k) % n
            if test(*self.order[i]):
                self.index = i
                return True
        return False


def answered(analysis: Analysis | None) -> Callable[[int], bool]:
    """Whether an instruction has a response ([ ] pass over those without: nothing to audit there);
    before the analysis is read, every instruction."""
    if analysis is None:
        return lambda _: True
    return {r.instruction_id for r in analysis.rows}.__contains__


def writer_for(data: InstructionData, wanted: Writer | None, app_writer: Writer | None) -> Writer | None:
    """The response shown for ``data``: ``wanted`` when the instruction has it, else the app's, else its
    first."""
    if wanted in data.responses:
        return wanted
    return app_writer if app_writer in data.responses else (data.writers[0] if data.writers else None)


def other_writer(writers: list[Writer], current: Writer | None) -> tuple[Writer | None, str]:
    """`m`: the response after ``current`` among ``writers`` (every model and mode in turn), or None and
    why there is no other."""
    if len(writers) < 2:
        shown = f"one response ({writers[0].label})" if writers else "no response"
        other = "direct" if writers and writers[0].mode == "edit" else "edit"
        return None, (f"{shown} to this instruction: no other model or mode to switch to; a second model "
                      f"(`unspecific evaluate --models NAME`) or mode (`--mode {other}`) adds one")
    i = writers.index(current) if current in writers else -1
    return writers[(i + 1) % len(writers)], ""


def other_ratio(ratios: list[float], current: float) -> tuple[float | None, str]:
    """`r`: the summary ratio after ``current`` (pipeline.core.definitions.next_ratio), or None and why
    there is no other."""
    if len(ratios) < 2:
        shown = f"summaries at one ratio only ({ratios[0]:g})" if ratios else "no summary"
        return None, (f"{shown} for this instruction: no other ratio to switch to; "
                      "`unspecific evaluate --ratios 0.5,0.25` adds more")
    return next_ratio(ratios, current), ""


def _instruction(entry: tuple[int, int]) -> int:
    return entry[1]
