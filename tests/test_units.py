"""The one unit runner (pipeline.stages.units), on its own: concurrency, each failure policy, the stop
flag, the unit budget, the order of progress events, and usage added to the run as units finish."""

from __future__ import annotations

import asyncio

import pytest

from pipeline.core.config import parse_config
from pipeline.core.errors import BatchPending, EndpointError, ParseError, StageError, UnusableEndpointError
from pipeline.core.progress import ProgressEvent, StopFlag
from pipeline.llm.client import Usage
from pipeline.stages.runs import create_run, run_usage
from pipeline.stages.units import (
    FAIL_FAST,
    MAX_FAILURES_IN_A_ROW,
    RECORD_AND_CONTINUE,
    Budget,
    RunUsage,
    StageSummary,
    Unit,
    run_units,
)


def _unit(label: str, started: list[str] | None = None, *, error: BaseException | None = None,
          usage: Usage | None = None, calls: int = 0, wait: float = 0.0) -> Unit:
    async def work() -> str:
        if started is not None:
            started.append(label)
        if usage is not None:
            usage.calls += calls
        await asyncio.sleep(wait)
        if error is not None:
            raise error
        return f"{label} done"

    return Unit(label, work)


async def _run(units, policy=RECORD_AND_CONTINUE, parallel=1,
               **kwargs) -> tuple[StageSummary, list[ProgressEvent]]:
    events: list[ProgressEvent] = []
    summary = await run_units(StageSummary("test"), units, policy=policy, parallel=parallel,
                              progress=events.append,
                              **kwargs)
    return summary, events


async def test_no_more_units_in_flight_than_parallel():
    in_flight = peak = 0

    async def work() -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return ""

    summary, _ = await _run([Unit(f"u{i}", work) for i in range(10)], parallel=3)
    assert peak == 3 and summary.done == 10 and not summary.stopped
    peak = 0
    summary, _ = await _run([Unit(f"u{i}", work) for i in range(2)], parallel=8)
    assert peak == 2 and summary.done == 2


async def test_record_and_continue_records_a_failed_unit_and_goes_on():
    started: list[str] = []
    units = [_unit("a", started), _unit("b", started, error=ParseError("no usable list")),
             _unit("c", started, error=EndpointError("endpoint 'x': 500")), _unit("d", started)]
    summary, events = await _run(units, RECORD_AND_CONTINUE)
    assert started == ["a", "b", "c", "d"]
    assert (summary.done, summary.failed, summary.processed, summary.remaining) == (2, 2, 4, 0)
    assert [(f.stage, f.unit) for f in summary.failures] == [("test", "b"), ("test", "c")]
    assert "no usable list" in summary.failures[0].error
    assert [e.message for e in events if e.kind == "error"] == ["b: failed: no usable list",
                                                                "c: failed: endpoint 'x': 500"]


async def test_record_and_continue_stops_on_endpoint_failures_in_a_row():
    started: list[str] = []
    units = [_unit(f"u{i}", started, error=EndpointError("down")) for i in range(MAX_FAILURES_IN_A_ROW + 3)]
    with pytest.raises(StageError, match=f"{MAX_FAILURES_IN_A_ROW} units failed in a row"):
        await _run(units, RECORD_AND_CONTINUE)
    assert len(started) == MAX_FAILURES_IN_A_ROW  # then no unit starts


async def test_a_unit_of_its_own_breaks_a_string_of_endpoint_failures():
    started: list[str] = []
    n = MAX_FAILURES_IN_A_ROW - 1
    units = [*(_unit(f"e{i}", started, error=EndpointError("down")) for i in range(n)),
             _unit("ok", started),
             *(_unit(f"f{i}", started, error=EndpointError("down")) for i in range(n))]
    summary, _ = await _run(units, RECORD_AND_CONTINUE)
    assert len(started) == 2 * n + 1 and summary.failed == 2 * n and summary.done == 1


async def test_an_unusable_endpoint_stops_the_stage_at_once():
    started: list[str] = []
    units = [_unit("a", started, error=UnusableEndpointError("judge 'j': junk")), _unit("b", started)]
    with pytest.raises(UnusableEndpointError):
        await _run(units, RECORD_AND_CONTINUE)
    assert started == ["a"]


async def test_a_dead_local_server_stops_the_stage_at_once_under_either_policy():
    """It is a project error, so RECORD_AND_CONTINUE would record it and go on: every next unit would
    fail the same way (none counts as an endpoint failure in a row) and the run would end "finished"."""
    from pipeline.core.errors import LocalServerDied

    for policy in (RECORD_AND_CONTINUE, FAIL_FAST):
        started: list[str] = []
        units = [_unit(u, started, error=LocalServerDied("killed by SIGILL")) for u in "abcdefgh"]
        with pytest.raises(LocalServerDied):
            await _run(units, policy)
        assert started == ["a"]


async def test_an_unexpected_error_stops_the_stage_under_either_policy():
    for policy in (RECORD_AND_CONTINUE, FAIL_FAST):
        started: list[str] = []
        with pytest.raises(RuntimeError, match="bug"):
            await _run([_unit("a", started, error=RuntimeError("bug")), _unit("b", started)], policy)
        assert started == ["a"]


async def test_fail_fast_records_an_unusable_reply_and_stops_on_anything_else():
    started: list[str] = []
    summary, events = await _run([_unit("a", started, error=ParseError("no usable list")),
                                  _unit("b", started)],
                                 FAIL_FAST)
    assert started == ["a", "b"] and (summary.done, summary.failed) == (1, 1)
    assert summary.failures[0].unit == "a" and any(e.kind == "error" for e in events)

    started = []
    with pytest.raises(EndpointError, match="gave up"):  # raised as it is: the first endpoint failure stops
        await _run([_unit("a", started, error=EndpointError("gave up")), _unit("b", started)], FAIL_FAST)
    assert started == ["a"]


async def test_units_in_flight_finish_when_the_stage_stops():
    started: list[str] = []
    summary = StageSummary("test")
    units = [_unit("slow", started, wait=0.05), _unit("bad", started, error=EndpointError("gave up")),
             _unit("never", started)]
    with pytest.raises(EndpointError):
        await run_units(summary, units, policy=FAIL_FAST, parallel=2)
    assert started == ["slow", "bad"] and summary.done == 1  # the slow one was not abandoned


async def test_the_stop_flag_leaves_units_unstarted():
    stop = StopFlag()
    stop.stop("pause")
    summary, _ = await _run([_unit("a"), _unit("b")], stop=stop)
    assert summary.done == 0 and summary.stopped and summary.remaining == 2

    stop = StopFlag()

    async def pause() -> str:
        stop.stop("pause")  # set while a unit runs: that unit finishes, no other starts
        return "paused"

    started: list[str] = []
    summary, _ = await _run([_unit("a", started), Unit("pause", pause), _unit("c", started)], stop=stop)
    assert started == ["a"] and summary.done == 2 and summary.stopped and summary.remaining == 1


async def test_the_budget_is_shared_by_the_stages_of_one_call():
    budget = Budget(3)
    first, _ = await _run([_unit(f"a{i}") for i in range(2)], budget=budget)
    assert first.done == 2 and not first.stopped and not budget.exhausted
    second, _ = await _run([_unit(f"b{i}") for i in range(3)], budget=budget)
    assert second.done == 1 and second.stopped and second.remaining == 2 and budget.exhausted
    third, _ = await _run([_unit("c")], budget=budget)
    assert third.done == 0 and third.stopped


async def test_a_unit_waiting_on_a_batch_is_neither_done_nor_failed():
    summary, events = await _run([_unit("a"), _unit("b", error=BatchPending("e")),
                                  _unit("c", error=BatchPending("e", failed=True))])
    assert (summary.done, summary.failed, summary.deferred, summary.waiting_failed) == (1, 0, 2, 1)
    assert summary.remaining == 2 and not summary.stopped
    assert events[-1].message == "test: 2 unit(s) wait on a batch"


async def test_progress_events_in_order():
    summary = StageSummary("judge", skipped=2)
    events: list[ProgressEvent] = []
    await run_units(summary, [_unit("a"), _unit("b", error=ParseError("bad")), _unit("c")],
                    policy=RECORD_AND_CONTINUE, parallel=1, progress=events.append)
    assert [(e.stage, e.done, e.total, e.kind, e.message) for e in events] == [
        ("judge", 2, 5, "progress", "judge: 3 to do, 2 already stored"),
        ("judge", 3, 5, "progress", "a done"),
        ("judge", 4, 5, "error", "b: failed: bad"),
        ("judge", 5, 5, "progress", "c done"),
    ]


@pytest.fixture
def run(store):
    return create_run(store, "build", parse_config({}), run_id="units-test")


async def test_usage_reaches_the_run_as_each_unit_finishes(store, run):
    usage = Usage()
    seen: list[int] = []

    async def look() -> str:  # runs after the first unit finished, before the stage ends
        seen.append(run_usage(store, run)["calls"])
        return ""

    units = [_unit("a", usage=usage, calls=2), Unit("look", look), _unit("b", usage=usage, calls=3),
             _unit("bad", usage=usage, calls=1, error=EndpointError("gave up")),
             _unit("never", usage=usage, calls=9)]
    with pytest.raises(EndpointError):
        await _run(units, FAIL_FAST, usage=RunUsage(store, run, usage))
    assert seen == [2]
    assert run_usage(store, run)["calls"] == 6  # the failing unit's calls too; nothing after it


async def test_usage_of_finished_units_survives_a_cancelled_stage(store, run):
    usage = Usage()
    hang = asyncio.Event()

    async def stuck() -> str:
        usage.calls += 4  # a call answered, then the unit waits for ever
        await hang.wait()
        return ""

    units = [_unit("a", usage=usage, calls=1), _unit("b", usage=usage, calls=2), Unit("stuck", stuck)]
    task = asyncio.create_task(_run(units, RECORD_AND_CONTINUE, parallel=3,
                                    usage=RunUsage(store, run, usage)))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert run_usage(store, run)["calls"] == 7  # nothing answered is lost, the stuck unit's call included


async def test_no_run_no_usage_recorded(store):
    usage = Usage()
    summary, _ = await _run([_unit("a", usage=usage, calls=1)], usage=RunUsage(store, None, usage))
    assert summary.done == 1  # a stage called without a run (as tests do) records nothing, and does not fail
