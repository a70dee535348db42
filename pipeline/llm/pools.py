"""Endpoint pools: a pool's calls go to the member with the fewest outstanding requests for its
concurrency; a member failing ``drain_after`` times in a row is set aside for ``drain_s``; a
member that refuses us for good (401/403/404) leaves the pool. The cache key names the pool's
model, not the member (pipeline.llm.cache).

The transport (pipeline.llm.transport) counts each endpoint's outstanding requests and tells
the pools when one finishes (``wake``); its retry loop asks here which member to try next."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pipeline.core.config import Config, Endpoint
from pipeline.core.errors import EndpointError


class Slots(Protocol):
    """What a pool reads of an endpoint's state: requests given to it and not finished."""

    outstanding: int


@dataclass
class PoolState:
    streak: dict[str, int] = field(default_factory=dict)  # failures in a row, per member
    drained_until: dict[str, float] = field(default_factory=dict)  # monotonic time a member is back
    drains: dict[str, int] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)  # refused us for good (401/403/404)
    waiters: list[asyncio.Future[None]] = field(default_factory=list)  # requests waiting for a free slot

    def has_live_member(self, members: tuple[str, ...], besides: str) -> bool:
        t = time.monotonic()
        return any(m != besides and m not in self.dead and self.drained_until.get(m, 0.0) <= t
                   for m in members)


class Pools:
    """The state of every pool a client has sent to."""

    def __init__(self, config: Config, slots: Callable[[Endpoint], Slots],
                 emit: Callable[[str, str], None]) -> None:
        self.config = config
        self._slots = slots
        self._emit = emit
        self._states: dict[str, PoolState] = {}

    def state(self, pool: Endpoint) -> PoolState:
        return self._states.setdefault(pool.name, PoolState())

    async def pick(self, pool: Endpoint) -> Endpoint:
        """The member with the fewest outstanding requests for its concurrency, among those with
        a free slot and not drained. A request waits here for a free slot rather than queueing
        behind one member: a slow member then holds its slots longer and is offered less work.
        When every live member is drained, the first to come back is tried again."""
        state = self.state(pool)
        members = [self.config.endpoint(m) for m in pool.members]
        while True:
            if len(state.dead) == len(members):
                raise EndpointError(f"endpoint '{pool.name}': every member of the pool refused us for good")
            t = time.monotonic()
            live = [m for m in members if m.name not in state.dead]
            ready = [m for m in live if state.drained_until.get(m.name, 0.0) <= t]
            free = [m for m in ready if self._slots(m).outstanding < m.concurrency]
            if free:
                # min keeps the config order on ties: the first member listed takes the first call.
                chosen = min(free, key=lambda m: self._slots(m).outstanding / m.concurrency)
                self._slots(chosen).outstanding += 1  # reserved now, before any other task picks
                return chosen
            waiter = asyncio.get_running_loop().create_future()
            state.waiters.append(waiter)
            # Woken by a finished request; or, when nothing runs, by the end of the first drain.
            back = [state.drained_until[m.name] - t for m in live if m not in ready]
            try:
                await asyncio.wait_for(waiter, timeout=max(0.0, min(back)) + 0.001 if back
                                       and not ready else None)
            except TimeoutError:
                pass
            finally:
                if waiter in state.waiters:
                    state.waiters.remove(waiter)

    def wake(self) -> None:
        """A request finished somewhere: wake the requests waiting on a pool for a free slot."""
        for pool in self._states.values():
            for waiter in pool.waiters:
                if not waiter.done():
                    waiter.set_result(None)
            pool.waiters.clear()

    def member_failed(self, pool: Endpoint, member: Endpoint, reason: str) -> None:
        """An attempt at ``member`` failed in a way a retry may cure."""
        state = self._states[pool.name]
        if state.drained_until.get(member.name, 0.0) > time.monotonic():
            return  # a request sent before it was set aside: the pause already counts it
        streak = state.streak.get(member.name, 0) + 1
        state.streak[member.name] = streak
        if streak >= pool.drain_after:
            state.drained_until[member.name] = time.monotonic() + pool.drain_s
            state.drains[member.name] = state.drains.get(member.name, 0) + 1
            state.streak[member.name] = 0  # after the pause it gets drain_after tries again
            self._emit("drain",
                       f"{pool.name}: member {member.name} failed {streak} times in a row ({reason}); "
                                f"set aside for {pool.drain_s:g}s")

    def member_answered(self, pool: Endpoint, member: Endpoint) -> None:
        self._states[pool.name].streak[member.name] = 0

    def member_refused(self, pool: Endpoint, member: Endpoint, exc: Exception) -> None:
        """A member with a wrong key or model is taken out of the pool for good; the others go
        on. Only when none is left does the call fail."""
        state = self._states[pool.name]
        state.dead.add(member.name)
        self._emit("drain", f"{pool.name}: member {member.name} removed: {exc}")
        if len(state.dead) == len(pool.members):
            raise EndpointError(f"endpoint '{pool.name}': every member of the pool failed "
                                f"for good; last: {exc}") from None

    def status(self, name: str, calls: Callable[[str], int],
               outstanding: Callable[[str], int]) -> dict[str, Any]:
        """Per member of a pool: outstanding requests, drained or dead, times drained, calls."""
        state = self._states.get(name, PoolState())
        t = time.monotonic()
        out = {}
        for m in self.config.endpoint(name).members:
            out[m] = {
                "outstanding": outstanding(m),
                "drained": state.drained_until.get(m, 0.0) > t,
                "dead": m in state.dead,
                "drains": state.drains.get(m, 0),
                "calls": calls(m),
            }
        return out
