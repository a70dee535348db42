"""Aggregates per (domain, condition, model, mode, ratio) with bootstrap intervals over pairs of
references, and judge agreement (Cohen's kappa) from the kept 2x2 cells."""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.analysis.metrics.base import CONDITION_ORDER, Group, JudgeAgreement, Row
from pipeline.analysis.stats import bootstrap_mean, bootstrap_ratio, kappa_from_counts


@dataclass
class _KappaCounts:
    """The 2x2 agreement cells [n11, n10, n01, n00] of each (text, pair of raters), one row each."""

    rid: np.ndarray  # the text's response (the text itself, or the response a summary shortens)
    summary: np.ndarray  # bool: the text is a summary
    ratio: np.ndarray  # a summary's ratio (NaN for responses)
    pair: np.ndarray  # (rows, 2): rater indices a < b
    cells: np.ndarray  # (rows, 4)

    @classmethod
    def empty(cls) -> _KappaCounts:
        return cls(np.zeros(0, int), np.zeros(0, bool), np.zeros(0), np.zeros((0, 2), int), np.zeros((0, 4)))

    def tables(self, mask: np.ndarray) -> dict[tuple[int, int], np.ndarray]:
        """Summed cells of the masked rows, per pair of raters."""
        out: dict[tuple[int, int], np.ndarray] = {}
        pairs, cells = self.pair[mask], self.cells[mask]
        if not len(pairs):
            return out
        codes = pairs[:, 0] * (int(self.pair.max()) + 1) + pairs[:, 1]  # one int per pair, in (a, b) order
        for code in np.unique(codes):
            rows = codes == code
            a, b = pairs[rows][0]
            out[(int(a), int(b))] = cells[rows].sum(axis=0)
        return out


def _groups(rows: list[Row], counts: _KappaCounts, *, n_resamples: int, seed: int) -> list[Group]:
    buckets: dict[tuple, list[Row]] = defaultdict(list)
    for row in rows:
        buckets[(row.domain, row.condition, row.model, row.mode, row.ratio)].append(row)
    groups: list[Group] = []
    for key in sorted(buckets, key=_group_sort_key):
        members = buckets[key]
        domain, condition, model, mode, ratio = key
        units = _pair_units(members)
        org = bootstrap_mean([_nanmean([r.org for r in u]) for u in units],
                             n_resamples=n_resamples, seed=seed)
        g = Group(domain, condition, model, mode, ratio, n=len(units), org=org)
        if ratio is not None:
            g.core = bootstrap_mean([_nanmean([r.core for r in u]) for u in units],
                                    n_resamples=n_resamples, seed=seed)
            # Units x raters; a rater who did not judge a response adds nothing to either sum.
            g.superficial = bootstrap_ratio(
                np.array([_unit_counts(u, "flipped_by") for u in units], dtype=float).reshape(len(units), -1),
                np.array([_unit_counts(u, "satisfied_by") for u in units],
                         dtype=float).reshape(len(units), -1),
                n_resamples=n_resamples, seed=seed)
            reached = [r.achieved_ratio for r in members if r.achieved_ratio is not None]
            g.achieved_ratio = float(np.mean(reached)) if reached else math.nan
        # Judge agreement: cells of the group's responses, plus their summaries at its ratio (both sides
        # ratio_key's, the one rounding: equal keys are the same ratio).
        texts = ~counts.summary if ratio is None else ~counts.summary | (counts.ratio == ratio)
        tables = counts.tables(np.isin(counts.rid, [r.response_id for r in members]) & texts)
        if tables:
            results = [kappa_from_counts(t.reshape(2, 2)) for t in tables.values()]
            kappas = [a.kappa for a in results if not math.isnan(a.kappa)]
            g.kappa = float(np.mean(kappas)) if kappas else math.nan
            g.agreement = float(np.mean([a.percent for a in results]))
            g.agreement_items = int(sum(a.n for a in results))
        extras = defaultdict(list)
        for row in members:
            for name, value in row.extra.items():
                if value is not None and not math.isnan(value):
                    extras[name].append(value)
        g.extra = {name: float(np.mean(values)) for name, values in extras.items()}
        groups.append(g)
    return groups


def _pair_units(rows: list[Row]) -> list[list[Row]]:
    """A group's rows by pair of reference articles, the bootstrap's unit: each (pair, condition,
    model, mode) counts once. Runs that built the same pair again (an identical build repeated
    under another id, or two builds sharing pairs) give one unit, whose value is the mean over
    its responses; counted apart, a repeated pair would narrow every interval. Rows without
    reference articles (hand-made instructions) are units of their own."""
    units: dict[Any, list[Row]] = {}
    for row in rows:
        key = (row.article_a, row.article_b) if row.article_a is not None else ("instruction",
                                                                                row.instruction_id)
        units.setdefault(key, []).append(row)
    return list(units.values())


def _nanmean(values: Sequence[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


def _unit_counts(rows: list[Row], name: str) -> list[float]:
    """Per rater, a unit's mean count over its responses (NaN = that rater judged none): 0 in
    the pooled sums."""
    columns = np.array([getattr(r, name) for r in rows], dtype=float)
    if columns.size == 0:
        return []
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a rater with no count in this unit
        means = np.nanmean(columns, axis=0)
    return np.nan_to_num(means).tolist()


def _group_sort_key(key: tuple) -> tuple:
    domain, condition, model, mode, ratio = key
    order = CONDITION_ORDER.index(condition) if condition in CONDITION_ORDER else len(CONDITION_ORDER)
    return (domain, order, condition, model, mode, -1.0 if ratio is None else -ratio)


def _agreement(raters: list[str], counts: _KappaCounts) -> list[JudgeAgreement]:
    out = []
    by_kind = {"all": counts.tables(np.ones(len(counts.rid), dtype=bool)),
               "response": counts.tables(~counts.summary), "summary": counts.tables(counts.summary)}
    for (ra, rb), kind in sorted((pair, kind) for kind, tables in by_kind.items() for pair in tables):
        a = kappa_from_counts(by_kind[kind][(ra, rb)].reshape(2, 2))
        out.append(JudgeAgreement(raters[ra], raters[rb], kind, a.kappa, a.percent, a.n))
    return out
