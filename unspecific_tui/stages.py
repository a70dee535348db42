"""The stages the Build screen can run, and how one runs in a worker thread.

A stage is any ``async def run_<stage>(store, config, client, options, *, progress, stop,
max_units)`` (the convention in HELPERS_BRIEF.md). The registry maps a stage name to a loader
that imports its module lazily, so the app opens when a stage module is absent or broken,
and tests inject fake stage functions instead.

Each run gets its own store connection and its own event loop in a worker thread: the UI
thread never waits on SQLite writes or LLM calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.progress import ProgressHook, StopFlag

StageFn = Callable[..., Any]


@dataclass(frozen=True)
class StageSpec:
    name: str
    label: str
    module: str  # pipeline module holding run_<name> (or ``function``)
    function: str
    needs_client: bool = True
    count_sql: str = ""  # how many units the store already holds for this stage in a run (param: run id)

    def load(self) -> StageFn | None:
        """The stage function, or None while its module does not exist yet."""
        try:
            module = importlib.import_module(self.module)
        except ModuleNotFoundError as exc:
            if exc.name == self.module:
                return None
            raise
        return getattr(module, self.function, None)


_RUN = "SELECT id FROM instructions WHERE run_id = :run"
STAGES: tuple[StageSpec, ...] = (
    StageSpec("corpus", "Corpus", "pipeline.corpus", "run_corpus", False,
              "SELECT count(*) FROM articles WHERE status = 'kept'"),
    StageSpec("pair", "Pair", "pipeline.pairing", "run_pair", False, "SELECT count(*) FROM pairs"),
    StageSpec("synthesize", "Synthesize", "pipeline.synthesis", "run_synthesize", True,
              "SELECT count(*) FROM instructions WHERE run_id = :run AND status != 'pending'"),
    StageSpec("revise", "Base / revise", "pipeline.revision", "run_revise", True,
              f"SELECT count(*) FROM generations WHERE kind = 'base' AND instruction_id IN ({_RUN})"),
    StageSpec("respond", "Respond", "pipeline.generation", "run_respond", True,
              f"SELECT count(*) FROM generations WHERE kind = 'response' AND instruction_id IN ({_RUN})"),
    StageSpec("summarize", "Summarize", "pipeline.generation", "run_summarize", True,
              f"SELECT count(*) FROM generations WHERE kind = 'summary' AND instruction_id IN ({_RUN})"),
    StageSpec("judge", "Judge", "pipeline.judging", "run_judge", True,
              "SELECT count(*) FROM verdicts WHERE generation_id IN (SELECT id FROM generations WHERE"
              f" kind IN ('response', 'summary') AND instruction_id IN ({_RUN}))"),
)

Registry = dict[str, StageFn | None]


def default_registry() -> Registry:
    """Name -> stage function for the stage modules that exist now (None for the others)."""
    out: Registry = {}
    for spec in STAGES:
        try:
            out[spec.name] = spec.load()
        except Exception:  # noqa: BLE001 - a broken stage module must not keep the app closed
            out[spec.name] = None
    return out


def make_options(fn: StageFn, run_id: str, overrides: dict[str, Any] | None = None) -> Any:
    """Default options for a stage: its ``options`` parameter's dataclass, with the run id filled in."""
    overrides = dict(overrides or {})
    try:
        hints = inspect.get_annotations(fn, eval_str=True)
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to a plain dict
        hints = {}
    kind = hints.get("options")
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        names = {f.name for f in dataclasses.fields(kind)}
        if "run_id" in names:
            overrides.setdefault("run_id", run_id)
        return kind(**{k: v for k, v in overrides.items() if k in names})
    return {"run_id": run_id, **overrides}


def run_stage_blocking(
    fn: StageFn,
    *,
    store_path: Path,
    config: Any,
    run_id: str,
    options: Any,
    progress: ProgressHook,
    stop: StopFlag,
    max_units: int | None,
    needs_client: bool = True,
) -> Any:
    """Run one stage to completion (or to ``max_units``/``stop``) on this thread's own loop."""
    from pipeline.store import open_store

    store = open_store(store_path)
    try:
        return asyncio.run(_run(fn, store, config, run_id, options, progress, stop, max_units, needs_client))
    finally:
        store.close()


async def _run(fn: StageFn, store: Any, config: Any, run_id: str, options: Any, progress: ProgressHook,
               stop: StopFlag, max_units: int | None, needs_client: bool) -> Any:
    if not needs_client:
        return await fn(store, config, None, options, progress=progress, stop=stop, max_units=max_units)
    from pipeline.runs import add_usage, open_client

    async with open_client(config, store, run_id=run_id) as client:
        try:
            return await fn(store, config, client, options, progress=progress, stop=stop, max_units=max_units)
        finally:
            usage = getattr(client, "usage", None)
            if usage is not None and not getattr(client, "usage_recorded", False):
                add_usage(store, run_id, usage)
