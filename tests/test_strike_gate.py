"""The unit runner's StrikeGate (pipeline.stages.units): a group whose work keeps coming back unusable
stops alone, at its limit, whatever ``parallel`` is; the other groups finish (issue 29, item 5)."""

from __future__ import annotations

import asyncio

import pytest

from pipeline.core.errors import UnusableEndpointError
from pipeline.stages.units import RECORD_AND_CONTINUE, StageSummary, StrikeGate, Unit, run_units

LIMIT = 3


def _units(gate: StrikeGate, plan: dict[str, list[bool]], started: list[str], *, wait: float = 0.01,
           slow_bad: float | None = None) -> list[Unit]:
    """Units interleaved by group, as run_judge makes them (text by text, a unit per judge).
    ``plan[group][i]``: whether that group's i-th unit comes back usable."""
    units = []
    for i in range(max(len(p) for p in plan.values())):
        for group, usable in plan.items():
            if i >= len(usable):
                continue

            async def work(group: str = group, i: int = i, ok: bool = usable[i]) -> str:
                started.append(f"{group}{i}")
                await asyncio.sleep(wait if ok or slow_bad is None else slow_bad)
                if ok:
                    gate.clean(group)
                elif gate.strike(group):
                    raise UnusableEndpointError(f"group {group} stopped at unit {i}")
                return f"{group}{i}"

            units.append(Unit(f"{group} {i}", work, group=group))
    return units


async def _run(units, gate: StrikeGate, parallel: int) -> tuple[StageSummary, BaseException | None]:
    summary = StageSummary("test")
    try:
        await run_units(summary, units, policy=RECORD_AND_CONTINUE, parallel=parallel, gate=gate)
    except UnusableEndpointError as exc:
        return summary, exc
    return summary, None


@pytest.mark.parametrize("parallel", [1, 2, 4, 16])
async def test_a_group_broken_from_the_start_starts_at_most_its_limit_and_the_others_finish(parallel):
    gate = StrikeGate(LIMIT)
    started: list[str] = []
    units = _units(gate, {"bad": [False] * 12, "good": [True] * 12}, started)
    summary, error = await _run(units, gate, parallel)
    assert error is not None and "group bad stopped" in str(error)  # raised once the others were done
    assert len([s for s in started if s.startswith("bad")]) == LIMIT
    assert len([s for s in started if s.startswith("good")]) == 12
    assert summary.failed == 1 and summary.done == 12 + LIMIT - 1
    assert summary.remaining == 12 - LIMIT and not summary.stopped


async def test_a_proven_group_gone_bad_has_its_units_in_flight_cancelled():
    """A group that has given usable work runs wide; when it turns bad, the units it has in flight
    at its stop are cancelled (neither done nor failed) and none of its others start."""
    gate = StrikeGate(LIMIT)
    started: list[str] = []
    cancelled: list[str] = []
    # bad0 is usable at once (the group is proven), so bad3 and bad4 start beside bad1 and bad2;
    # bad1..bad3 come back unusable, the last of them stops the group while bad4 is on its way.
    waits = {0: 0.0, 1: 0.1, 2: 0.2, 3: 0.3, 4: 5.0}  # wide apart: the order holds on a loaded machine

    async def bad(i: int) -> str:
        started.append(f"bad{i}")
        try:
            await asyncio.sleep(waits.get(i, 0.0))
        except asyncio.CancelledError:
            cancelled.append(f"bad{i}")
            raise
        if i == 0:
            gate.clean("bad")
        elif gate.strike("bad"):
            raise UnusableEndpointError(f"group bad stopped at unit {i}")
        return f"bad{i}"

    units = [Unit(f"bad {i}", lambda i=i: bad(i), group="bad") for i in range(8)]
    summary, error = await _run(units, gate, parallel=4)
    assert error is not None and "group bad stopped at unit 3" in str(error)
    assert cancelled == ["bad4"]
    assert started == ["bad0", "bad1", "bad2", "bad3", "bad4"]
    assert summary.failed == 1 and summary.done == 3 and summary.remaining == 4


async def test_no_unit_is_lost_when_a_group_stops():
    """At parallel 1 every unit of the other group still runs after the stop."""
    gate = StrikeGate(LIMIT)
    started: list[str] = []
    units = _units(gate, {"bad": [True, True, False, False, False, True, True], "good": [True] * 7}, started)
    summary, error = await _run(units, gate, parallel=1)
    assert error is not None
    assert [s for s in started if s.startswith("bad")] == ["bad0", "bad1", "bad2", "bad3", "bad4"]
    assert summary.done == 7 + 4 and summary.failed == 1 and summary.remaining == 2


async def test_one_usable_unit_clears_the_strikes():
    gate = StrikeGate(LIMIT)
    started: list[str] = []
    units = _units(gate, {"flaky": [False, False, True, False, False, True, False, False]}, started)
    summary, error = await _run(units, gate, parallel=4)
    assert error is None and summary.done == 8 and summary.failed == 0


def test_a_group_on_probation_has_no_more_in_flight_than_strikes_left():
    gate = StrikeGate(LIMIT)
    gate.running["j"] = 2
    assert gate.may_start("j")
    gate.strike("j")
    assert not gate.may_start("j")  # 2 in flight + 1 strike: the next could be the stopping one
    gate.clean("j")
    gate.running["j"] = 10
    assert gate.may_start("j")  # proven and clean: as wide as the runner allows
    assert gate.may_start(None)
