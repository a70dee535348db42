"""The method's copy numbers, per condition x model x mode, from stored values (nothing recomputed):

  copy-paste score      the research code's (cs4/analysis/copy_paste.py): per constraint, the highest
                        cosine between it and a sentence of the response (the echo, pipeline.stages.echo),
                        averaged over the cell's constraints
  reference similarity  each constraint's similarity to the closer of its references
                        (pipeline.stages.similarity), averaged over the cell's constraints

Each with a bootstrap interval over instructions (the unit every rate of the report resamples), and
the paired test the paper's claim needs: on the same reference article A, do the common conditions'
constraints sit further from their references, and get echoed less, than single's (CS4's
back-translation)? ``single`` against each common condition, per domain (and model and mode for the
copy-paste score); p-values Holm-adjusted over the tests of one report.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from pipeline.analysis.stats import (
    DEFAULT_RESAMPLES,
    Interval,
    PairedTest,
    bootstrap_ratio,
    holm,
    paired_test,
)
from pipeline.store.echo import CopyCell, copy_cells
from pipeline.store.metrics import Filters
from pipeline.store.view import StoreReader, store_of

MEASURES = ("copy-paste", "reference similarity")
SINGLE = "single"


@dataclass(frozen=True)
class CopyGroup:
    domain: str
    condition: str
    model: str
    mode: str
    copy_paste: Interval  # mean echo on the response, CI over instructions
    reference: Interval  # mean constraint-reference similarity, CI over instructions
    instructions: int
    constraints: int  # (constraint, response) cells
    echoed: int  # of them with an echo stored
    echo_method: str | None
    similarity_method: str | None

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k not in ("copy_paste", "reference")}
        for name, iv in (("copy_paste", self.copy_paste), ("reference_similarity", self.reference)):
            out.update({name: iv.value, f"{name}_low": iv.low, f"{name}_high": iv.high})
        return out


@dataclass(frozen=True)
class CopyTest:
    """``condition`` against single on the same reference articles A (``test.diff`` = condition - single)."""

    domain: str
    measure: str  # MEASURES
    condition: str
    model: str  # "" for reference similarity: the constraints', whoever responded
    mode: str
    test: PairedTest
    p_holm: float

    def lower(self, alpha: float) -> bool:
        """The condition is significantly lower than single."""
        return self.test.diff < 0 and self.p_holm < alpha

    def as_dict(self) -> dict[str, Any]:
        return {"domain": self.domain, "measure": self.measure, "condition": self.condition, "vs": SINGLE,
                "model": self.model, "mode": self.mode,
                **{f"test_{k}": v for k, v in self.test.as_dict().items()},
                "p_holm": self.p_holm}


@dataclass(frozen=True)
class CopyNumbers:
    groups: list[CopyGroup]
    tests: list[CopyTest]

    @property
    def missing_echo(self) -> int:
        return sum(g.constraints - g.echoed for g in self.groups)

    @property
    def empty(self) -> bool:
        return not self.groups


def _per_instruction(cells: Iterable[CopyCell], value: str) -> dict[int, tuple[float, int]]:
    """instruction -> (sum, count) of a cell value over its cells that have it."""
    out: dict[int, list[float]] = defaultdict(lambda: [0.0, 0])
    for c in cells:
        v = getattr(c, value)
        if v is not None:
            out[c.instruction_id][0] += v
            out[c.instruction_id][1] += 1
    return {k: (s, int(n)) for k, (s, n) in out.items()}


def _mean_interval(cells: Sequence[CopyCell], value: str, n_resamples: int, seed: int) -> Interval:
    """The cells' mean of ``value``, resampling instructions (a pooled ratio: each constraint weighs
    alike)."""
    sums = _per_instruction(cells, value)
    if not sums:
        return Interval(math.nan, math.nan, math.nan, 0)
    num = np.array([s for s, _ in sums.values()])
    den = np.array([n for _, n in sums.values()], dtype=float)
    return bootstrap_ratio(num, den, n_resamples=n_resamples, seed=seed)


def _by_article(cells: Iterable[CopyCell], value: str) -> dict[int, float]:
    """reference article A -> the mean of ``value`` over its cells."""
    acc: dict[int, list[float]] = defaultdict(list)
    for c in cells:
        v = getattr(c, value)
        if v is not None and c.article_a is not None:
            acc[c.article_a].append(v)
    return {a: float(np.mean(vs)) for a, vs in acc.items()}


def copy_numbers(reader: StoreReader, filters: Filters | None = None, *, n_resamples: int = DEFAULT_RESAMPLES,
                 seed: int = 0) -> CopyNumbers:
    cells = copy_cells(store_of(reader), filters)
    groups: dict[tuple[str, str, str, str], list[CopyCell]] = defaultdict(list)
    for c in cells:
        groups[(c.domain, c.condition, c.model, c.mode)].append(c)
    out = []
    for (domain, condition, model, mode), members in sorted(groups.items()):
        echoed = [c for c in members if c.echo is not None]
        out.append(CopyGroup(
            domain, condition, model, mode, _mean_interval(members, "echo", n_resamples, seed),
            _mean_interval(members, "reference_similarity", n_resamples, seed),
            len({c.instruction_id for c in members}), len(members), len(echoed),
            next((c.echo_method for c in echoed), None),
            next((c.similarity_method for c in members if c.similarity_method), None)))
    return CopyNumbers(out, _tests(groups, n_resamples, seed))


def _tests(groups: dict[tuple[str, str, str, str], list[CopyCell]], n_resamples: int,
           seed: int) -> list[CopyTest]:
    raw: list[tuple[str, str, str, str, str, PairedTest]] = []
    keys = sorted(groups)
    for domain, condition, model, mode in keys:
        if condition == SINGLE or (domain, SINGLE, model, mode) not in groups:
            continue
        single = groups[(domain, SINGLE, model, mode)]
        other = groups[(domain, condition, model, mode)]
        raw.append((domain, "copy-paste", condition, model, mode,
                    _paired(other, single, "echo", n_resamples, seed)))
    # Reference similarity belongs to the constraints: one test per domain and condition, every writer's
    # cells of an article pooled (each constraint counted once per response alike on both sides).
    by_condition: dict[tuple[str, str], list[CopyCell]] = defaultdict(list)
    for (domain, condition, _, _), members in groups.items():
        by_condition[(domain, condition)] += members
    for (domain, condition), members in sorted(by_condition.items()):
        if condition == SINGLE or (domain, SINGLE) not in by_condition:
            continue
        raw.append((domain, "reference similarity", condition, "", "",
                    _paired(members, by_condition[(domain, SINGLE)], "reference_similarity",
                            n_resamples, seed)))
    tested = [i for i, r in enumerate(raw) if not math.isnan(r[5].p_value)]
    adjusted = dict(zip(tested, holm([raw[i][5].p_value for i in tested]), strict=True))
    return [CopyTest(*r, adjusted.get(i, math.nan)) for i, r in enumerate(raw)]


def _paired(a: Sequence[CopyCell], b: Sequence[CopyCell], value: str, n_resamples: int,
            seed: int) -> PairedTest:
    left, right = _by_article(a, value), _by_article(b, value)
    shared = sorted(set(left) & set(right))
    return paired_test([left[k] for k in shared], [right[k] for k in shared],
                       n_resamples=n_resamples, seed=seed)


__all__ = ["MEASURES", "CopyGroup", "CopyNumbers", "CopyTest", "copy_numbers"]
