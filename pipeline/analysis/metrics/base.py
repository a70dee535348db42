"""The metrics' records and filters: what a computation selects (Filters) and returns (Row,
Group, JudgeAgreement, Metrics)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pipeline.analysis.stats import NAN_INTERVAL, Interval
from pipeline.core.definitions import same_ratio
from pipeline.store.metrics import Filters as Filters  # the selection is a query: it lives in the store

CONDITION_ORDER = ("single", "none", "direct", "eval", "human")


LABELS = ("integrated", "superficial", "ambiguous")


@dataclass
class Row:
    """One response at one summary ratio (``ratio = None``: the response alone)."""

    instruction_id: int
    run_id: str
    domain: str
    condition: str
    article_a: int | None
    article_b: int | None
    model: str
    mode: str
    response_id: int
    ratio: float | None
    n_active: int
    judged: float  # constraints judged on the full response, mean over raters
    org: float
    core: float = math.nan
    satisfied: float = math.nan  # constraints Yes on full (of those judged on the summary), mean over raters
    flipped: float = math.nan  # of those, No on the summary, mean over raters
    # Per rater (index = rater column; NaN = not judged): satisfied and flipped counts.
    satisfied_by: tuple[float, ...] = ()
    flipped_by: tuple[float, ...] = ()
    achieved_ratio: float | None = None
    raters: int = 0
    extra: dict[str, float] = field(default_factory=dict)  # copying and similarity columns
    # Mean over raters of flipped / satisfied: superficial_share(satisfied_by, flipped_by).
    superficial: float = math.nan

    @property
    def coverage(self) -> float:
        return self.judged / self.n_active if self.n_active else math.nan

    def as_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in _ROW_COLUMNS}
        out["superficial"] = self.superficial
        out["coverage"] = self.coverage
        out.update(self.extra)
        return out


_ROW_COLUMNS = [f.name for f in fields(Row)
                if f.name not in ("extra", "satisfied_by", "flipped_by", "superficial")]


def rater_names(raters: Sequence[tuple[str, str]]) -> list[str]:
    """A judge's name, or "judge [mode]" when the judge appears in both judging modes."""
    modes_per_judge: dict[str, int] = defaultdict(int)
    for judge, _ in raters:
        modes_per_judge[judge] += 1
    return [judge if modes_per_judge[judge] == 1 else f"{judge} [{mode}]" for judge, mode in raters]


def superficial_share(satisfied_by: Sequence[float], flipped_by: Sequence[float]) -> float:
    """Per rater, the share of its satisfied constraints that flipped; the mean over raters."""
    shares = [f / s for s, f in zip(satisfied_by, flipped_by) if not math.isnan(s) and s > 0]
    return sum(shares) / len(shares) if shares else math.nan


@dataclass
class Group:
    domain: str
    condition: str
    model: str
    mode: str
    ratio: float | None
    n: int
    org: Interval
    core: Interval = NAN_INTERVAL
    superficial: Interval = NAN_INTERVAL
    kappa: float = math.nan
    agreement: float = math.nan
    agreement_items: int = 0
    achieved_ratio: float = math.nan
    extra: dict[str, float] = field(default_factory=dict)
    # Verdicts given / expected over the group's texts (pipeline.analysis.coverage); missing ones are
    # left out of the rates above, so a low coverage makes them unsure in a way no interval shows.
    judged_items: int = 0
    expected_items: int = 0

    @property
    def key(self) -> tuple[str, str, str, str, float | None]:
        return (self.domain, self.condition, self.model, self.mode, self.ratio)

    @property
    def coverage(self) -> float:
        return self.judged_items / self.expected_items if self.expected_items else math.nan

    @property
    def survival(self) -> Interval:
        s = self.superficial
        return Interval(1 - s.value, 1 - s.high, 1 - s.low, s.n)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "domain": self.domain, "condition": self.condition, "model": self.model, "mode": self.mode,
            "ratio": self.ratio, "n": self.n, "achieved_ratio": self.achieved_ratio,
        }
        for name in ("org", "core", "superficial", "survival"):
            iv: Interval = getattr(self, name)
            out[name], out[f"{name}_low"], out[f"{name}_high"] = iv.value, iv.low, iv.high
        out["gap"] = self.org.value - self.core.value  # Org - Core over the same responses
        out.update({"kappa": self.kappa, "agreement": self.agreement,
                    "agreement_items": self.agreement_items})
        out.update({"coverage": self.coverage, "judged_items": self.judged_items,
                    "expected_items": self.expected_items})
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class JudgeAgreement:
    rater_a: str
    rater_b: str
    kind: str  # response | summary | all
    kappa: float
    percent: float
    n: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Metrics:
    raters: list[str]
    rows: list[Row]  # per response x ratio, plus one ratio=None row per response
    groups: list[Group]
    agreement: list[JudgeAgreement]
    ratios: list[float]
    # Per rater: (verdicts given, of them Yes) over the selected texts; a judge that always says
    # the same is flagged by the report.
    rater_totals: dict[str, tuple[int, int]] = field(default_factory=dict)
    # (judge, judging mode) of each rater, in the order of ``raters``.
    rater_keys: list[tuple[str, str]] = field(default_factory=list)
    # compare's rows by stratum, unit and side, per (by, ratio): a report compares many pairs.
    _sides: dict[tuple[str, float | None], tuple[_SideTable, float | None]] = field(
        default_factory=dict, repr=False, compare=False)

    @property
    def empty(self) -> bool:
        return not self.rows

    def response_rows(self) -> list[Row]:
        return [r for r in self.rows if r.ratio is None]

    def at_ratio(self, ratio: float | None) -> list[Row]:
        return [r for r in self.rows if _same_ratio(r.ratio, ratio)]

    def group(self, domain: str, condition: str, model: str, mode: str, ratio: float | None) -> Group | None:
        for g in self.groups:
            if g.key[:4] == (domain, condition, model, mode) and _same_ratio(g.ratio, ratio):
                return g
        return None


def _same_ratio(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return same_ratio(a, b)


# stratum (domain, within) -> unit -> side -> (position of the side's first row, [(org, core,
# superficial, gap) of each of its rows])
_SideTable = dict[tuple[str, str], dict[Any, dict[str, tuple[int, list[tuple[float, ...]]]]]]
