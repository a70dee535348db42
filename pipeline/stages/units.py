"""The one unit runner: build, evaluate and naturalness run their work through ``run_units``.

A unit is one piece of work that commits as it finishes (a pair's synthesis, an instruction's
revision, a response, a summary, one text judged by one judge, one naturalness comparison), so
a stage that stops, fails or is killed resumes where it was and pays for nothing twice. The
runner:

- runs at most ``parallel`` units at once, taking them in order;
- starts no unit once ``stop`` is set or the ``budget`` (units across the stages of one call,
  the app's step mode) is spent; the units in flight finish;
- applies a ``FailurePolicy`` to a unit that raises: the unit's failure is recorded and the
  others go on, or the stage stops (after the units in flight) and the error is raised;
- adds the LLM usage to the run's totals as each unit finishes (``RunUsage``), so a stage that
  raises or is cancelled keeps the usage of everything it did;
- reports progress: one event when the stage starts, then one per unit finished or failed, and
  one at the end when units wait on a batch;
- with a ``StrikeGate``, stops one group of units alone (one judge of several) when its work keeps
  coming back unusable: its queued units never start, those in flight are cancelled, the other
  groups finish, and the error that stopped it is raised at the end.

A unit whose call went to a batch (``BatchPending``) is neither done nor failed: it is counted
as ``deferred`` and taken up again when the batch is collected.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from pipeline.analysis.coverage import Coverage, GroupKey
from pipeline.core.errors import (
    BatchPending,
    EndpointError,
    LocalServerDied,
    ParseError,
    StageError,
    UnspecificError,
    UnusableEndpointError,
)
from pipeline.core.progress import ProgressEvent, ProgressHook, StopFlag, no_progress
from pipeline.core.redact import redact
from pipeline.llm.client import Usage
from pipeline.stages.runs import add_usage
from pipeline.store.database import Store

MAX_FAILURES_IN_A_ROW = 5  # endpoint failures in a row: then the endpoint is taken to be down


@dataclass
class Failure:
    stage: str
    unit: str  # "instruction 12, model gpt" ...
    error: str


@dataclass
class StageSummary:
    stage: str
    total: int = 0  # units this call had to do when it started (those already stored included)
    done: int = 0
    skipped: int = 0  # already stored
    failed: int = 0
    failures: list[Failure] = field(default_factory=list)
    stopped: bool = False  # the stop flag or the unit budget left units unstarted
    deferred: int = 0  # batch mode: units waiting on a batch (not failed, not done)
    waiting_failed: int = 0  # of those, units whose batch item failed (collect --failed chooses)
    usage: dict[str,
                Usage] = field(default_factory=dict)  # build: by condition ("common" = the shared synthesis)
    coverage: dict[GroupKey, Coverage] = field(default_factory=dict)  # judge: per group judged

    @property
    def processed(self) -> int:
        """Units finished in this call, done or failed."""
        return self.done + self.failed

    @property
    def remaining(self) -> int:
        """Units still to do after this call (those waiting on a batch included)."""
        return self.total - self.skipped - self.done - self.failed


class Budget:
    """At most ``limit`` units across the stages of one call (the app's step mode); None: no limit."""

    def __init__(self, limit: int | None) -> None:
        self.left = limit

    def take(self) -> bool:
        if self.left is None:
            return True
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    @property
    def exhausted(self) -> bool:
        return self.left is not None and self.left <= 0


@dataclass(frozen=True)
class Unit:
    label: str  # names the unit in a failure: "instruction 12, model gpt (direct)"
    work: Callable[[], Awaitable[str | None]]  # returns a one-line log message (or None)
    group: str | None = None  # units a StrikeGate may stop together, apart from the rest (a judge's)


class StrikeGate:
    """Stops a group of units alone at ``limit`` strikes in a row. A strike is a unit that
    finished but whose work was unusable (a judge gave no usable verdict on a text); its work
    calls ``strike``, and ``clean`` when usable. Until a group has had a clean unit, and while it
    has strikes, it runs at most ``limit - strikes`` units at once: a group broken from the start
    is paid for on at most ``limit`` units, whatever ``parallel`` is. A proven group runs as wide
    as the runner lets it (one bad unit is chance). At the limit the group stops: the work raises,
    and the runner records that unit's failure, cancels the group's units in flight and starts
    none of its others; the other groups go on."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.strikes: dict[str, int] = {}
        self.running: dict[str, int] = {}
        self.proven: set[str] = set()
        self.stopped: set[str] = set()

    def may_start(self, group: str | None) -> bool:
        if group is None:
            return True
        if group in self.stopped:
            return False
        strikes = self.strikes.get(group, 0)
        if group in self.proven and not strikes:
            return True
        return self.running.get(group, 0) + strikes < self.limit

    def strike(self, group: str) -> bool:
        """A unit of ``group`` came back unusable. True when this strike stops the group (the
        caller then raises the error that names it)."""
        if group in self.stopped:
            return False
        self.strikes[group] = self.strikes.get(group, 0) + 1
        if self.strikes[group] >= self.limit:
            self.stopped.add(group)
            return True
        return False

    def clean(self, group: str) -> None:
        """A unit of ``group`` came back usable: its strikes start again from nothing."""
        self.strikes[group] = 0
        self.proven.add(group)

    def strikes_in_a_row(self, group: str) -> int:
        return self.strikes.get(group, 0)


@dataclass(frozen=True)
class FailurePolicy:
    """What a unit that raises does to its stage. An exception in ``recorded`` fails its unit
    only: counted, named in ``failures`` and reported, and the other units go on. Any other
    exception stops the stage: no unit starts, those in flight finish, and it is raised. Among
    recorded failures, one in ``stops_at_once`` stops the stage at once, and
    ``endpoint_failures_in_a_row`` endpoint failures in a row (a dead endpoint, a wrong key) stop
    it with a StageError."""

    name: str
    recorded: tuple[type[Exception], ...]
    endpoint_failures_in_a_row: int = MAX_FAILURES_IN_A_ROW
    # Recorded, then the stage stops at once: every next unit would fail the same way. A dead
    # embedded server would otherwise fail each remaining unit in turn and end as a "finished" run.
    stops_at_once: tuple[type[Exception], ...] = (UnusableEndpointError, LocalServerDied)


# Evaluate and naturalness: many small independent units, so one that fails (a call the endpoint
# gave up on, a reply that stayed unusable) is recorded for the next run to retry, and the rest go on.
RECORD_AND_CONTINUE = FailurePolicy("record and continue", (UnspecificError, ValueError))
# Build: an instruction fails only on its own unusable reply (stored as status 'failed'); any other
# error (the generator gave up) stops the build at once, since every later unit needs that generator.
FAIL_FAST = FailurePolicy("fail fast", (ParseError,))


class RunUsage:
    """Adds the LLM usage counted in ``usage`` (a client's) since the last flush to a run's totals.
    ``run_id`` None: nothing is recorded (a stage called without a run, as tests do)."""

    def __init__(self, store: Store, run_id: str | None, usage: Usage) -> None:
        self.store, self.run_id, self.usage = store, run_id, usage
        self.last = Usage(**usage.as_dict())

    def flush(self) -> None:
        if self.run_id is None:
            return
        now = self.usage
        delta = Usage(**{k: getattr(now, k) - getattr(self.last, k) for k in now.as_dict()})
        if delta.calls or delta.cache_hits:
            add_usage(self.store, self.run_id, delta)
        self.last = Usage(**now.as_dict())


async def run_units(
    summary: StageSummary, units: Sequence[Unit], *, policy: FailurePolicy, parallel: int,
    progress: ProgressHook = no_progress, stop: StopFlag | None = None, budget: Budget | None = None,
    usage: RunUsage | None = None, gate: StrikeGate | None = None,
) -> StageSummary:
    """Run ``units`` for the stage ``summary`` names (its ``skipped`` already counted), at most
    ``parallel`` at once; fills in and returns ``summary``. Raises what stops the stage; with a
    ``gate``, the error that stopped a group alone is raised once the other units are done."""
    stage = summary.stage
    budget = budget or Budget(None)
    queue = deque(units)
    summary.total = len(units) + summary.skipped
    halt: list[Exception] = []  # what stopped the stage: the first is raised
    group_stops: list[Exception] = []  # what stopped a group alone (gate): raised at the end
    closed: set[str] = set()  # groups whose stop was handled
    running: dict[asyncio.Future[str | None], Unit] = {}
    cancelled: set[asyncio.Future[str | None]] = set()  # in flight when their group stopped
    ended = asyncio.Event()  # a unit ended: a worker waiting on the gate looks again
    in_a_row = 0  # endpoint failures in a row
    progress(ProgressEvent(stage, summary.done + summary.skipped, summary.total,
                           f"{stage}: {len(units)} to do, {summary.skipped} already stored"))

    def finished() -> int:
        return summary.done + summary.skipped + summary.failed

    def drop_stopped() -> None:
        """Units of a stopped group never start."""
        if gate is not None and gate.stopped:
            kept = [u for u in queue if u.group not in gate.stopped]
            if len(kept) != len(queue):
                queue.clear()
                queue.extend(kept)

    def take() -> Unit | None:
        """The first queued unit the gate lets start."""
        drop_stopped()
        for i, unit in enumerate(queue):
            if gate is None or gate.may_start(unit.group):
                del queue[i]
                return unit
        return None

    def stop_group(group: str, exc: Exception) -> None:
        closed.add(group)
        group_stops.append(exc)
        drop_stopped()
        for task, unit in running.items():
            if unit.group == group and not task.done():
                cancelled.add(task)
                task.cancel()

    def record(unit: Unit, exc: Exception) -> None:
        nonlocal in_a_row
        summary.failed += 1
        summary.failures.append(Failure(stage, unit.label, redact(str(exc)) or ""))
        progress(ProgressEvent(stage, finished(), summary.total,
                               f"{unit.label}: failed: {exc}", kind="error"))
        if gate is not None and unit.group is not None and unit.group in gate.stopped:
            if unit.group not in closed:
                stop_group(unit.group, exc)
            return  # this group alone stops: the others go on
        if isinstance(exc, policy.stops_at_once):
            halt.append(exc)
            return
        # Only the endpoint failing again and again means it is down; a unit's own problem (no
        # base article to edit, a reply that stayed unusable) says nothing about the next.
        in_a_row = in_a_row + 1 if isinstance(exc, EndpointError) else 0
        if in_a_row >= policy.endpoint_failures_in_a_row:
            halt.append(StageError(
                f"{stage}: {in_a_row} units failed in a row, stopping (finished work is stored; "
                f"run again to resume). Last error: {exc}"))

    async def worker() -> None:
        nonlocal in_a_row
        while queue and not halt:
            if (stop is not None and stop.stopped) or budget.exhausted:
                return
            ended.clear()
            unit = take()
            if unit is None:  # the gate holds back what is left: wait until a unit ends
                if queue:
                    await ended.wait()
                continue
            budget.take()
            task = asyncio.ensure_future(unit.work())
            running[task] = unit
            if gate is not None and unit.group is not None:
                gate.running[unit.group] = gate.running.get(unit.group, 0) + 1
            try:
                message = await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if task in cancelled and not (current is not None and current.cancelling()):
                    continue  # its group stopped: not started again, not a failure of its own
                raise
            except BatchPending as exc:
                # Not a failure, and says nothing about the endpoint: the unit is taken up again
                # when the batch is collected.
                summary.deferred += 1
                summary.waiting_failed += int(exc.failed)
                continue
            except policy.recorded as exc:
                record(unit, exc)
                continue
            except Exception as exc:  # noqa: BLE001 - stops the stage; raised once the units in flight finish
                halt.append(exc)
                return
            finally:
                del running[task]
                if gate is not None and unit.group is not None:
                    gate.running[unit.group] -= 1
                if usage is not None:
                    usage.flush()
                ended.set()
            in_a_row = 0
            summary.done += 1
            progress(ProgressEvent(stage, finished(), summary.total, message or ""))

    try:
        await asyncio.gather(*(worker() for _ in range(min(max(1, parallel), len(units)))))
    finally:
        if usage is not None:
            usage.flush()
    summary.stopped = bool(queue) and not halt
    if summary.deferred:
        progress(ProgressEvent(stage, finished(), summary.total,
                               f"{stage}: {summary.deferred} unit(s) wait on a batch"))
    if halt:
        raise halt[0]
    if group_stops:
        raise group_stops[0]
    return summary
