"""The stages the Build screen can run, and how one runs in a worker thread.

A stage is any ``async def run_<stage>(store, config, client, options, *, progress, stop,
max_units)`` (the convention of pipeline.stages). The registry maps a stage name to a loader
that imports its module lazily, so the app opens when a stage module is absent or broken,
and tests inject fake stage functions instead.

A stage runs through pipeline.stages.step (its own store and event loop, in a worker thread):
the UI thread never waits on SQLite writes or LLM calls, and the app never opens or holds a Store
(pairing too is a pipeline stage, pipeline.stages.pairing.run_pair).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
    StageSpec("pair", "Pair", "pipeline.stages.pairing", "run_pair", False),
    StageSpec("synthesize", "Synthesize", "pipeline.stages.build", "run_synthesize", True),
    StageSpec("base", "Base article", "pipeline.stages.build", "run_base", True),
    StageSpec("revise", "Revise", "pipeline.stages.build", "run_revise", True),
    StageSpec("respond", "Respond", "pipeline.stages.evaluate", "run_respond", True),
    StageSpec("summarize", "Summarize", "pipeline.stages.evaluate", "run_summarize", True),
    StageSpec("judge", "Judge", "pipeline.stages.evaluate", "run_judge", True),
)
SPECS = {s.name: s for s in STAGES}


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
