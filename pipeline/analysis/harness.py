"""What a benchmark exported to another harness (inspect_ai, lm-evaluation-harness) and its logs
brought back share: the names that tie a log to this tool's task, and one sample's Org, Core and
superficial share from its verdicts, by the pass rule every report uses (definitions.passes).

The exporter (pipeline.outputs.harness_export), the inspect_ai scorer (pipeline.outputs.inspect_task)
and the importers (pipeline.importing.inspect_log, pipeline.importing.lm_eval) read these names here,
so a log written by the task is recognised by the same words that wrote it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.core.definitions import passes
from pipeline.core.errors import UnspecificError

# The @task an exported folder registers, and the scorer it scores with: a log of another task has
# neither. HARNESS_KEY holds, in the task's metadata, what the export was made from.
TASK_NAME = "unspecific"
SCORER_NAME = "core_satisfaction"
HARNESS_KEY = "unspecific"
# The export's layout; an importer refuses a log written by a task of another layout.
EXPORT_VERSION = 1
DATASET_FILE = "dataset.jsonl"
# The lm-eval task's name (its YAML's ``task:``) and its document file.
LM_EVAL_TASK = "unspecific"
LM_EVAL_DOCS = "unspecific.jsonl"
# The inspect_ai versions the task and the log reader work with: from the first whose model roles
# (get_model(role=...)) and dict metrics that leave out a NaN (an undefined superficial share) this
# uses (read in 0.3.120's source); tested on 0.3.285. 0.4 may change the log's schema.
INSPECT_BOUNDS = ((0, 3, 120), (0, 4))
INSPECT_SPEC = "inspect_ai>=0.3.120,<0.4"


class HarnessError(UnspecificError):
    title = "Harness"


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def inspect_version_problem(version: str) -> str | None:
    """Why this inspect_ai version cannot be used (one line naming it), or None when it can."""
    low, high = INSPECT_BOUNDS
    if low <= _version_tuple(version) < high:
        return None
    return (f"inspect_ai {version} is not supported: this tool works with {INSPECT_SPEC} "
            f"(pip install '{INSPECT_SPEC}')")


def require_inspect() -> str:
    """The installed inspect_ai version; HarnessError (one line) when it is missing or unsupported."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("inspect_ai")
    except PackageNotFoundError:
        raise HarnessError(f"inspect_ai is not installed: pip install '{INSPECT_SPEC}'") from None
    problem = inspect_version_problem(found)
    if problem:
        raise HarnessError(problem)
    return found


@dataclass(frozen=True)
class SampleScores:
    """One response's rates at one summary ratio, with one judge (NaN where undefined)."""

    org: float  # passed on the response / judged on it
    core: float  # passed on the summary / judged on both texts
    superficial: float  # of those passed on the response (judged on both), failed on the summary
    judged: int
    judged_both: int
    flipped: int
    passed_full: int = 0  # of the items judged on both texts, passed on the response

    def counts(self) -> dict[str, int]:
        """What the pooled superficial share adds up over samples (pooled_share)."""
        return {"flipped": self.flipped, "passed_full": self.passed_full}

    def value(self) -> dict[str, float]:
        return {"org": self.org, "core": self.core, "superficial": self.superficial}


def _score(verdict: bool | None) -> float | None:
    return None if verdict is None else float(verdict)


def sample_scores(full: Sequence[bool | None], summary: Sequence[bool | None]) -> SampleScores:
    """Org, Core and superficial of one response from one judge's verdicts on it and on its summary,
    constraint by constraint (None: missing, counted nowhere): as pipeline.store.scores counts them,
    an item passes when its score passes (definitions.passes), Core and superficial over the items
    judged on both texts."""
    if len(full) != len(summary):
        raise ValueError(f"{len(full)} verdicts on the response but {len(summary)} on its summary")
    judged = [passes(_score(v)) for v in full if v is not None]
    both = [(passes(_score(f)), passes(_score(s))) for f, s in zip(full, summary, strict=True)
            if f is not None and s is not None]
    full_yes = sum(1 for f, _ in both if f)
    flipped = sum(1 for f, s in both if f and not s)
    return SampleScores(
        org=sum(judged) / len(judged) if judged else math.nan,
        core=sum(1 for _, s in both if s) / len(both) if both else math.nan,
        superficial=flipped / full_yes if full_yes else math.nan,
        judged=len(judged), judged_both=len(both), flipped=flipped, passed_full=full_yes)


def pooled_share(num: Sequence[float], den: Sequence[float]) -> tuple[float, float]:
    """The pooled rate sum(num) / sum(den) over units, as the report pools the superficial share
    (flipped over passed on the response: pipeline.analysis.stats.bootstrap_ratio), and its standard
    error by the delta method over the units (the report bootstraps an interval instead); NaN where
    undefined (no denominator; a standard error from fewer than two units)."""
    total = sum(den)
    if len(num) != len(den) or total <= 0:
        return math.nan, math.nan
    rate = sum(num) / total
    n = len(den)
    if n < 2:
        return rate, math.nan
    mean_den = total / n
    spread = sum((a - rate * b) ** 2 for a, b in zip(num, den, strict=True)) / (n - 1)
    return rate, math.sqrt(spread / n) / mean_den
