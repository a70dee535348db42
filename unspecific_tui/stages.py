"""The stages the Build screen can run, and how one runs in a worker thread.

A stage is any ``async def run_<stage>(store, config, client, options, *, progress, stop,
max_units)`` (the convention of pipeline.stages). The registry maps a stage name to a loader
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

from pipeline.core.progress import ProgressHook, StopFlag

StageFn = Callable[..., Any]


@dataclass(frozen=True)
class StageSpec:
    """A row of the Build screen. Its unit count comes from pipeline.store.view.STAGE_UNITS (by name)."""

    name: str
    label: str
    module: str  # pipeline module holding the stage function
    function: str
    needs_client: bool = True
    hint: str = ""  # set when the stage cannot run from the app: what to do instead

    def load(self) -> StageFn | None:
        """The stage function, or None while its module does not exist yet or it cannot run from the app."""
        if self.hint:
            return None
        try:
            module = importlib.import_module(self.module)
        except ModuleNotFoundError as exc:
            if exc.name == self.module:
                return None
            raise
        return getattr(module, self.function, None)


STAGES: tuple[StageSpec, ...] = (
    # Importing articles reads files the user names: the CLI's job (pipeline.stages.corpus.import_corpus).
    StageSpec("corpus", "Corpus", "pipeline.stages.corpus", "import_corpus", False,
              hint="importing articles needs files: run `unspecific corpus add` in a shell"),
    StageSpec("pair", "Pair", "unspecific_tui.stages", "run_pair", False),
    StageSpec("synthesize", "Synthesize", "pipeline.stages.build", "run_synthesize", True),
    StageSpec("base", "Base article", "pipeline.stages.build", "run_base", True),
    StageSpec("revise", "Revise", "pipeline.stages.build", "run_revise", True),
    StageSpec("respond", "Respond", "pipeline.stages.evaluate", "run_respond", True),
    StageSpec("summarize", "Summarize", "pipeline.stages.evaluate", "run_summarize", True),
    StageSpec("judge", "Judge", "pipeline.stages.evaluate", "run_judge", True),
)
SPECS = {s.name: s for s in STAGES}


async def run_pair(store: Any, config: Any, client: Any, options: Any, *, progress: ProgressHook,
                   stop: StopFlag | None = None, max_units: int | None = None) -> Any:
    """Pairing behind the stage convention: one domain is one unit ([pair] domain/model in the config)."""
    from pipeline.analysis.embeddings import get_embedder
    from pipeline.stages.pairing import PairOptions, pair_domain

    section = config.settings.get("pair", {}) if config is not None else {}
    embedder = await asyncio.to_thread(get_embedder, section.get("model"))
    opts = PairOptions(domain=section.get("domain", "news"), rule=section.get("rule", "paper"))
    return await asyncio.to_thread(pair_domain, store, embedder, opts, progress=progress, stop=stop)


Registry = dict[str, StageFn | None]


def available(spec: StageSpec) -> bool:
    """Whether the stage's module exists, without importing it (imports wait until a stage runs,
    so the first screen does not pay for openai and friends)."""
    import importlib.util

    if spec.hint:
        return False
    try:
        return importlib.util.find_spec(spec.module) is not None
    except (ImportError, ValueError):
        return False


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


def stored_options(store: Any, run_id: str) -> dict[str, Any]:
    """The options the run was created with ({} when unknown or unreadable)."""
    import json

    from pipeline.store.runs import run_config

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
    spec: StageSpec | None = None,
    options: Any = None,
) -> Any:
    """Run one stage to completion (or to ``max_units``/``stop``) on this thread's own loop."""
    from pipeline.store.database import open_store

    # The one writer of the store while it runs: a CLI command writing the same store is refused,
    # and this stage is refused while one is at work (shown as an error box).
    store = open_store(store_path, writer="the app's Build screen")
    try:
        if options is None:
            options = make_options(fn, run_id, config, stored_options(store, run_id))
        return asyncio.run(_run(fn, store, config, run_id, options, progress, stop, max_units, spec))
    finally:
        store.close()


async def _run(fn: StageFn, store: Any, config: Any, run_id: str, options: Any, progress: ProgressHook,
               stop: StopFlag, max_units: int | None, spec: StageSpec | None) -> Any:
    if spec is not None and not spec.needs_client:
        return await fn(store, config, None, options, progress=progress, stop=stop, max_units=max_units)
    from pipeline.core.progress import ProgressEvent
    from pipeline.stages.runs import open_client

    stage = spec.name if spec is not None else ""

    def on_event(kind: str, detail: str) -> None:  # the client's retries, waits, local server start
        progress(ProgressEvent(stage, 0, 0, f"{kind}: {detail}", kind="log"))

    # The stages add their usage to the run unit by unit (pipeline.stages.units), as in the CLI.
    async with open_client(config, store, run_id=run_id, on_event=on_event) as client:
        return await fn(store, config, client, options, progress=progress, stop=stop, max_units=max_units)
