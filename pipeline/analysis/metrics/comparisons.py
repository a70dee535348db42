"""Paired comparisons of two models, conditions or response modes (pipeline.analysis.stats.paired_test)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.analysis.metrics.base import Metrics, _SideTable
from pipeline.analysis.stats import DEFAULT_RESAMPLES, PairedTest, paired_test
from pipeline.core.definitions import DEFAULT_RATIO


@dataclass(frozen=True)
class Comparison:
    by: str  # model | condition | mode
    a: str
    b: str
    domain: str
    within: str  # the condition (model comparison) or model/mode (condition comparison)
    metric: str  # org | core | superficial | gap (org - core) | copy-paste (model pairs: model_duel)
    ratio: float | None
    test: PairedTest
    p_holm: float = math.nan  # Holm-adjusted over the family the report tested together

    def as_dict(self) -> dict[str, Any]:
        return {"by": self.by, "a": self.a, "b": self.b, "domain": self.domain, "within": self.within,
                "metric": self.metric, "ratio": self.ratio, **self.test.as_dict(), "p_holm": self.p_holm}


def compare(metrics: Metrics, a: str, b: str, *, by: str | None = None, ratio: float | None = DEFAULT_RATIO,
            n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[Comparison]:
    """Paired tests of ``a`` against ``b``: two models (units: the same instructions, per domain,
    condition and mode), two conditions (units: the same reference article A, per domain, model
    and mode) or two response modes, direct vs edit (units: the same instructions, per domain,
    condition and model). ``by`` defaults to whichever of condition / mode both names are in the
    data, else model. Metrics: org, and at a ratio core, superficial and gap (= org - core)."""
    if by is None:
        conditions = {r.condition for r in metrics.rows}
        modes_present = {r.mode for r in metrics.rows}
        by = ("condition" if a in conditions and b in conditions
              else "mode" if a in modes_present and b in modes_present else "model")
    ratio, strata = paired_values(metrics, a, b, by=by, ratio=ratio)
    metric_names = ["org"] if ratio is None else ["org", "core", "superficial", "gap"]
    out: list[Comparison] = []
    for domain, within, xa, xb in strata:
        for k, metric in enumerate(metric_names):
            test = paired_test(xa[:, k], xb[:, k], n_resamples=n_resamples, seed=seed)
            out.append(Comparison(by, a, b, domain, within, metric, ratio, test))
    return out


def paired_values(metrics: Metrics, a: str, b: str, *, by: str, ratio: float | None = DEFAULT_RATIO
                  ) -> tuple[float | None, list[tuple[str, str, np.ndarray, np.ndarray]]]:
    """What ``compare`` tests: the ratio the units are at (None: Org only), and per stratum (domain,
    within) each side's units x (org, core, superficial, gap), row i of both sides the same unit.
    pipeline.analysis.model_duel reads each side's values from it, for their intervals."""
    if by not in ("model", "condition", "mode"):
        raise ValueError(f"compare: by must be 'model', 'condition' or 'mode', not {by!r}")
    table, ratio = _side_table(metrics, by, ratio)
    out = []
    for (domain, within), units in sorted(table.items()):
        # Units with both sides, in the order their first row of either side came.
        paired = sorted((min(sa[0], sb[0]), sa[1], sb[1]) for sides in units.values()
                        if (sa := sides.get(a)) and (sb := sides.get(b)))
        if not paired:
            continue
        xa = np.array([_unit_values(ra) for _, ra, _ in paired], dtype=float)
        xb = np.array([_unit_values(rb) for _, _, rb in paired], dtype=float)
        out.append((domain, within, xa, xb))
    return ratio, out


def _side_table(metrics: Metrics, by: str, ratio: float | None) -> tuple[_SideTable, float | None]:
    """Every side's rows per stratum and unit, for ``by``; and the ratio they are at (None when
    nothing is summarised at ``ratio``: Org only)."""
    cached = metrics._sides.get((by, ratio))
    if cached is not None:
        return cached
    asked = ratio
    rows = metrics.at_ratio(ratio) if ratio is not None else metrics.response_rows()
    if ratio is not None and not rows:
        rows, ratio = metrics.response_rows(), None
    table: _SideTable = defaultdict(lambda: defaultdict(dict))
    several_modes = len({r.mode for r in rows}) > 1
    unit: Hashable  # a pair of references, one reference, or ("instruction", id)
    for position, row in enumerate(rows):
        mode = f"/{row.mode}" if several_modes and row.mode else ""
        # A pair of references built by several runs is one unit, as in the groups (_pair_units).
        pair = (row.article_a, row.article_b) if row.article_a is not None else ("instruction",
                                                                                 row.instruction_id)
        if by == "model":
            side, stratum, unit = row.model, (row.domain, f"{row.condition}{mode}"), pair
        elif by == "mode":
            side, stratum, unit = row.mode, (row.domain, f"{row.condition}/{row.model}"), pair
        else:
            # Conditions pair on reference A; an imported instruction without one pairs with nothing
            # (its own unit), rather than every such instruction merging into one unit "None".
            unit = row.article_a if row.article_a is not None else ("instruction", row.instruction_id)
            side, stratum = row.condition, (row.domain, f"{row.model}{mode}")
        values = (row.org, row.core, row.superficial, row.org - row.core)
        sides = table[stratum][unit]
        if side in sides:
            sides[side][1].append(values)
        else:
            sides[side] = (position, [values])
    metrics._sides[(by, asked)] = (table, ratio)
    return table, ratio


def _unit_values(values: list[tuple[float, ...]]) -> tuple[float, ...]:
    return values[0] if len(values) == 1 else tuple(_unit_mean(values, k) for k in range(len(values[0])))


def _unit_mean(values: list[tuple[float, ...]], k: int) -> float:
    """A unit's value of metric k: the mean over its rows (several runs of one reference),
    NaNs left out."""
    if len(values) == 1:
        return values[0][k]
    kept = [v[k] for v in values if not math.isnan(v[k])]
    return sum(kept) / len(kept) if kept else math.nan
