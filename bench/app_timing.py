"""Shared by the app benchmarks (app_latency.py, scale.py): when did the app paint, and how long
until the analysis is done and Audit open?"""

from __future__ import annotations

import asyncio
import time
from typing import Any


def paint_event(app: Any) -> asyncio.Event:
    """An event the app sets each time it paints (its ``_display`` hook). A key's effect is timed to
    the paint that follows it, not to ``pilot.press``, whose idle detection waits on whole-process
    CPU time and so measures the machine's load instead."""
    painted = asyncio.Event()
    display = app._display

    def hook(screen: Any, renderable: Any) -> None:
        display(screen, renderable)
        painted.set()

    app._display = hook
    return painted


async def wait_for_first_screen(app: Any, timeout_s: float = 60.0) -> None:
    """Until the Build screen lists the runs: what a user sees first. A store the app cannot
    show (an error screen instead) fails after ``timeout_s`` rather than waiting forever."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not app.screen.query("#runs") or not app.screen.query_one("#runs").row_count:
        if loop.time() > deadline:
            raise TimeoutError(f"no first screen after {timeout_s:.0f} s; the app shows "
                               f"{type(app.screen).__name__}")
        await asyncio.sleep(0.005)


async def analysis_then_audit(app: Any, pilot: Any, t0: float, *, audit_workers: bool) -> dict[str, float]:
    """``analysis_ready_s``: from ``t0`` until the app's workers (the store-wide analysis) are done;
    ``open_audit_s``: from pressing 3 until Audit is shown (``audit_workers``: and its workers done)."""
    await app.workers.wait_for_complete()
    out = {"analysis_ready_s": time.perf_counter() - t0}
    t = time.perf_counter()
    await pilot.press("3")
    await pilot.pause()
    if audit_workers:
        await app.workers.wait_for_complete()
    out["open_audit_s"] = time.perf_counter() - t
    return out
