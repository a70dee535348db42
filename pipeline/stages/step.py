"""One stage run to completion on a store path: its own store (as the one writer), its own event
loop, and its options from the run's stored ones. The app's Build screen runs its stages through
here from a worker thread, so it never opens a Store itself.

A stage is any ``async def run_<stage>(store, config, client, options, *, progress, stop,
max_units)`` (the convention of pipeline.stages)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.core.progress import ProgressHook, StopFlag
from pipeline.store.database import Store, open_store
from pipeline.store.runs import run_config

StageFn = Callable[..., Any]


def make_options(fn: StageFn, run_id: str, config: Any = None, stored: dict[str, Any] | None = None) -> Any:
    """Options for a stage: its ``options`` parameter's dataclass, from the run's stored options
    (what the run was created with), the run id filled in, and the config's defaults."""
    try:
        hints = inspect.get_annotations(fn, eval_str=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to a plain dict
        hints = {}
    kind = hints.get("options")
    if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
        return {**(stored or {}), "run_id": run_id}
    names = {f.name for f in dataclasses.fields(kind)}
    values = {k: v for k, v in (stored or {}).items() if k in names}
    if "run_id" in names:
        values["run_id"] = run_id
    if "build_run" in names:
        values["build_run"] = run_id
    from_config = getattr(kind, "from_config", None)
    if config is not None and callable(from_config):
        return from_config(config, **values)
    return kind(**values)


def stored_options(store: Store, run_id: str) -> dict[str, Any]:
    """The options the run was created with ({} when unknown or unreadable)."""
    config = run_config(store, run_id)
    try:
        return dict(json.loads(config).get("options") or {}) if config else {}
    except (ValueError, AttributeError):
        return {}


def run_stage_blocking(
    fn: StageFn,
    *,
    store_path: Path,
    config: Any,
    run_id: str,
    progress: ProgressHook,
    stop: StopFlag,
    max_units: int | None,
    needs_client: bool = True,
    stage: str = "",
    options: Any = None,
) -> Any:
    """Run one stage to completion (or to ``max_units``/``stop``) on this thread's own loop."""
    # The one writer of the store while it runs: a CLI command writing the same store is refused,
    # and this stage is refused while one is at work (shown as an error box).
    store = open_store(store_path, writer="the app's Build screen")
    try:
        if options is None:
            options = make_options(fn, run_id, config, stored_options(store, run_id))
        return asyncio.run(_run(fn, store, config, run_id, options, progress, stop, max_units,
                                needs_client, stage))
    finally:
        store.close()


async def _run(fn: StageFn, store: Store, config: Any, run_id: str, options: Any, progress: ProgressHook,
               stop: StopFlag, max_units: int | None, needs_client: bool, stage: str) -> Any:
    if not needs_client:
        return await fn(store, config, None, options, progress=progress, stop=stop, max_units=max_units)
    from pipeline.core.progress import ProgressEvent
    from pipeline.stages.runs import open_client

    def on_event(kind: str, detail: str) -> None:  # the client's retries, waits, local server start
        progress(ProgressEvent(stage, 0, 0, f"{kind}: {detail}", kind="log"))

    # The stages add their usage to the run unit by unit (pipeline.stages.units), as in the CLI.
    async with open_client(config, store, run_id=run_id, on_event=on_event) as client:
        return await fn(store, config, client, options, progress=progress, stop=stop, max_units=max_units)
