"""Models compared: two models under test on the same instructions (the report's "Models compared").

For every pair of models, per domain and condition (and response mode, when there are several),
each model's Org, Core, superficial share, Org-Core gap and copy-paste score over the instructions
both answered, each with a bootstrap 95% interval, and the paired test of their difference; which
model follows more deeply, if the tests can tell; and each model's refusals.

- Org, Core, superficial and gap are ``compare(by="model")``'s tests (pipeline.analysis.metrics): the
  units are the instructions both models answered (a pair of references built by several runs is one
  unit). A side's value is its mean over those units (superficial: the mean of each response's share,
  where the main table pools), with a bootstrap interval over the same units.
- The copy-paste score (pipeline.analysis.copy_numbers: per constraint its echo on the response,
  averaged) is tested here on the same units: a unit's value is the mean echo over its constraints.
  ``copy_paste_comparisons`` gives those tests as Comparisons, so the report adjusts them together
  with every other paired test it makes (pipeline.analysis.report_model.all_comparisons: one Holm
  family).
- A model follows *more deeply* when the tests of depth that are significant after Holm (Core higher,
  superficial share lower, copy-paste lower) all favour it; when none is, this benchmark is too small
  to tell; when some favour each, the verdict is mixed.
- Refusals: the flag stored per response (pipeline.llm.contract's ``is_refusal``), counted per model
  over the responses the report counts.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from pipeline.analysis.metrics import CONDITION_ORDER, Comparison, Filters, Metrics
from pipeline.analysis.metrics.comparisons import paired_values
from pipeline.analysis.stats import DEFAULT_RESAMPLES, NAN_INTERVAL, Interval, bootstrap_mean, paired_test
from pipeline.core.definitions import SIGNIFICANCE
from pipeline.store.echo import response_echoes
from pipeline.store.view import StoreReader, store_of

COPY_PASTE = "copy-paste"
# The metrics of a model pair, in the order the report lists them; the first four are compare's columns.
METRICS = ("org", "core", "superficial", "gap", COPY_PASTE)
# The tests that say which model follows more deeply, and the sign of a difference (a - b) that favours a.
DEPTH = {"core": 1, "superficial": -1, COPY_PASTE: -1}

# (domain, within) -> unit -> model -> the unit's copy-paste score
CopyUnits = dict[tuple[str, str], dict[Hashable, dict[str, float]]]


@dataclass(frozen=True)
class DuelRow:
    """One test of a model pair: the comparison (p_holm from the report's family) and each side's
    mean over the units both answered, with its interval."""

    comparison: Comparison
    a: Interval
    b: Interval

    def as_dict(self) -> dict[str, Any]:
        c = self.comparison
        out = {"model_a": c.a, "model_b": c.b, "domain": c.domain, "within": c.within, "metric": c.metric,
               "ratio": c.ratio}
        for side, iv in (("a", self.a), ("b", self.b)):
            out.update({f"{side}_value": iv.value, f"{side}_low": iv.low, f"{side}_high": iv.high})
        t = c.test
        out.update({"diff": t.diff, "diff_low": t.low, "diff_high": t.high, "n": t.n, "p_value": t.p_value,
                    "p_holm": c.p_holm})
        return out


@dataclass(frozen=True)
class ModelPair:
    a: str
    b: str
    rows: list[DuelRow]
    instructions: int  # instructions both models answered (judged), every stratum together
    core_a: float  # mean Core over the units of every stratum (NaN without summaries)
    core_b: float
    # model -> depth metric -> tests significant after Holm that favour it
    favours: dict[str, dict[str, int]] = field(default_factory=dict)
    tested: dict[str, int] = field(default_factory=dict)  # depth metric -> tests with a p-value

    @property
    def per_test(self) -> tuple[int, int]:
        """The fewest and the most units a test of the pair had."""
        counts = [row.comparison.test.n for row in self.rows]
        return (min(counts), max(counts)) if counts else (0, 0)

    @property
    def verdict(self) -> str:
        """none (no instruction in common), too_small (no depth test significant after Holm), deeper
        (every significant one favours one model) or mixed."""
        if not self.instructions:
            return "none"
        winners = [m for m in (self.a, self.b) if any(self.favours.get(m, {}).values())]
        return "too_small" if not winners else "deeper" if len(winners) == 1 else "mixed"

    @property
    def deeper(self) -> str | None:
        """The model that follows more deeply, when the verdict is ``deeper``."""
        if self.verdict != "deeper":
            return None
        return self.a if any(self.favours.get(self.a, {}).values()) else self.b

    def as_dict(self) -> dict[str, Any]:
        return {"model_a": self.a, "model_b": self.b, "instructions": self.instructions,
                "per_test": list(self.per_test), "core_a": self.core_a, "core_b": self.core_b,
                "verdict": self.verdict, "deeper": self.deeper, "favours": self.favours,
                "tested": self.tested}


@dataclass(frozen=True)
class RefusalCount:
    model: str
    refused: int
    responses: int  # the model's responses the report counts
    flagged: int  # of them, with a refusal flag (stores from before the flag have none)

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "refused": self.refused, "responses": self.responses,
                "flagged": self.flagged}


@dataclass(frozen=True)
class ModelDuel:
    pairs: list[ModelPair]
    refusals: list[RefusalCount]
    family: int  # tests with a p-value in the report's Holm family
    copy_paste_missing: bool  # responses were counted but no copy-paste score is stored

    def as_dict(self) -> dict[str, Any]:
        return {"pairs": [p.as_dict() for p in self.pairs], "refusals": [r.as_dict() for r in self.refusals],
                "holm_family": self.family, "copy_paste_missing": self.copy_paste_missing}


# -- the copy-paste score per unit ----------------------------------------------------------------


def copy_paste_units(reader: StoreReader, metrics: Metrics, filters: Filters | None = None) -> CopyUnits:
    """Per stratum (domain, within, as compare names them for models), unit (the pair of references,
    or the instruction without one) and model: the mean over the unit's instructions of each
    response's mean echo over its constraints. Constraints without a stored echo are left out."""
    several_modes = len({r.mode for r in metrics.response_rows()}) > 1
    per_unit: dict[tuple[str, str], dict[Hashable, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for r in response_echoes(store_of(reader), filters):
        within = f"{r.condition}/{r.mode}" if several_modes and r.mode else r.condition
        unit: Hashable = ((r.article_a, r.article_b) if r.article_a is not None
                          else ("instruction", r.instruction_id))
        per_unit[(r.domain, within)][unit][r.model].append(r.echo)
    return {stratum: {unit: {model: float(np.mean(v)) for model, v in sides.items()}
                      for unit, sides in units.items()}
            for stratum, units in per_unit.items()}


def _copy_sides(units: CopyUnits, a: str, b: str) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
    """Per stratum, both models' copy-paste scores on the units both have one for."""
    out = []
    for (domain, within), by_unit in sorted(units.items()):
        shared = [sides for sides in by_unit.values() if a in sides and b in sides]  # instruction order
        if shared:
            out.append((domain, within, np.array([s[a] for s in shared]), np.array([s[b] for s in shared])))
    return out


def _models(metrics: Metrics) -> list[str]:
    return sorted({r.model for r in metrics.rows})


def copy_paste_comparisons(metrics: Metrics, units: CopyUnits, *, n_resamples: int = DEFAULT_RESAMPLES,
                           seed: int = 0) -> list[Comparison]:
    """Every model pair's paired test of the copy-paste score, per stratum (p_holm left for the report's
    family)."""
    out = []
    for a, b in combinations(_models(metrics), 2):
        for domain, within, xa, xb in _copy_sides(units, a, b):
            test = paired_test(xa, xb, n_resamples=n_resamples, seed=seed)
            out.append(Comparison("model", a, b, domain, within, COPY_PASTE, None, test))
    return out


# -- the section ----------------------------------------------------------------------------------


def model_duel(metrics: Metrics, comparisons: Sequence[Comparison], units: CopyUnits, ratio: float | None, *,
               n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> ModelDuel:
    """Every model pair's tests (``comparisons``: the report's, Holm-adjusted together) with each side's
    interval, the pair's verdict, and each model's refusals."""
    pairs = []
    for a, b in combinations(_models(metrics), 2):
        at, strata = paired_values(metrics, a, b, by="model", ratio=ratio)
        sides: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]] = {}
        for domain, within, xa, xb in strata:
            for k, metric in enumerate(METRICS[:4]):
                sides[(domain, within, metric)] = xa[:, k], xb[:, k]
        for domain, within, xa, xb in _copy_sides(units, a, b):
            sides[(domain, within, COPY_PASTE)] = xa, xb
        mine = [c for c in comparisons if c.by == "model" and (c.a, c.b) == (a, b)]
        rows = [DuelRow(c, *_side_intervals(sides.get((c.domain, c.within, c.metric)), n_resamples, seed))
                for c in sorted(mine, key=_row_order)]
        core = [sides[k] for k in sorted(sides) if k[2] == "core"] if at is not None else []
        core_a, core_b = _pooled_mean(core) if core else (math.nan, math.nan)
        pairs.append(ModelPair(a, b, rows, _instructions_both(metrics, a, b, at), core_a, core_b,
                               *_favours(rows, a, b)))
    family = sum(not math.isnan(c.test.p_value) for c in comparisons)
    missing = bool(metrics.rows) and not any(units.values())
    return ModelDuel(pairs, refusal_counts(metrics), family, missing)


def _row_order(c: Comparison) -> tuple[Any, ...]:
    condition = c.within.split("/", 1)[0]
    rank = CONDITION_ORDER.index(condition) if condition in CONDITION_ORDER else len(CONDITION_ORDER)
    return c.domain, rank, c.within, METRICS.index(c.metric) if c.metric in METRICS else len(METRICS)


def _both(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep]


def _side_intervals(sides: tuple[np.ndarray, np.ndarray] | None, n_resamples: int, seed: int
                    ) -> tuple[Interval, Interval]:
    """Each side's mean with its bootstrap interval, over the units the test kept (both values known)."""
    if sides is None:
        return NAN_INTERVAL, NAN_INTERVAL
    x, y = _both(*sides)
    if not x.size:
        return NAN_INTERVAL, NAN_INTERVAL
    return (bootstrap_mean(x, n_resamples=n_resamples, seed=seed),
            bootstrap_mean(y, n_resamples=n_resamples, seed=seed))


def _pooled_mean(sides: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float]:
    """Each side's mean over the units of every stratum (both values known)."""
    x, y = _both(np.concatenate([a for a, _ in sides]), np.concatenate([b for _, b in sides]))
    return (float(x.mean()), float(y.mean())) if x.size else (math.nan, math.nan)


def _instructions_both(metrics: Metrics, a: str, b: str, ratio: float | None) -> int:
    """Instructions with a counted response (at the ratio, when the tests are) of both models."""
    rows = metrics.at_ratio(ratio) if ratio is not None else metrics.response_rows()
    answered: dict[str, set[int]] = defaultdict(set)
    for r in rows:
        answered[r.model].add(r.instruction_id)
    return len(answered[a] & answered[b])


def _favours(rows: Sequence[DuelRow], a: str, b: str) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """Per model and depth metric, the tests significant after Holm in its favour; per depth metric, the
    tests made."""
    favours: dict[str, dict[str, int]] = {a: dict.fromkeys(DEPTH, 0), b: dict.fromkeys(DEPTH, 0)}
    tested = dict.fromkeys(DEPTH, 0)
    for row in rows:
        c = row.comparison
        if c.metric not in DEPTH or math.isnan(c.test.p_value):
            continue
        tested[c.metric] += 1
        if c.p_holm < SIGNIFICANCE and c.test.diff != 0:
            favours[a if DEPTH[c.metric] * c.test.diff > 0 else b][c.metric] += 1
    return favours, tested


def refusal_counts(metrics: Metrics) -> list[RefusalCount]:
    """Per model, its responses the report counts and how many refuse the task."""
    seen: dict[str, dict[int, float | None]] = defaultdict(dict)
    for r in metrics.response_rows():
        seen[r.model][r.response_id] = r.extra.get("refusal")
    return [RefusalCount(model, sum(1 for f in flags.values() if f), len(flags),
                         sum(1 for f in flags.values() if f is not None))
            for model, flags in sorted(seen.items())]


__all__ = ["COPY_PASTE", "DEPTH", "METRICS", "CopyUnits", "DuelRow", "ModelDuel", "ModelPair", "RefusalCount",
           "copy_paste_comparisons", "copy_paste_units", "model_duel", "refusal_counts"]
