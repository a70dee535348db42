"""Shared by the app benchmarks (app_latency.py, scale.py): when did the app paint?"""

from __future__ import annotations

import asyncio
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
            raise TimeoutError(f"no first screen after {timeout_s:.0f} s; the app shows {type(app.screen).__name__}")
        await asyncio.sleep(0.005)
