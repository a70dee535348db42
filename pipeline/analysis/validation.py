"""The Core metric against people: the reviewers' validation protocol (issue 15), scored.

The items people label come from a **plan** (pipeline.analysis.validation_plan): a seeded,
stratified sample of (constraint, response) items, flipped ones per domain and passed-both ones.

The **report** compares the metric's call (flipped now: verdicts may have changed since the
draw, and the count of such items is shown) with the people's label (one annotator's, or the
consensus: an adjudicator's label when there is one, else the majority, ties left out).
Because the strata are drawn at different rates (50 of perhaps 2,000 passed-both items, 50 of
perhaps 80 flipped news items), each labelled item stands for population / labelled items of
its stratum; precision, recall and the integrated share are those weighted ratios, and their
95% intervals resample items within each stratum (a stratified bootstrap). Unweighted, the
tiny passed-both sample would hide nearly every superficial item the metric misses, and recall
would look better than it is.

This rule (``score_labels``) is the one definition of human validation: `validate report`,
the report's validation section (``human_validation``) and the Annotate screen
(``annotate_scores``) all score by it. With no plan, the items are every labelled one, each in
the stratum the metric's call puts it in now, weighted by that stratum's size now.

Criteria (docs/method.md, "What reviewers said"): precision and recall of "superficial" at least
0.8, the share labelled integrated among the flipped at most 10%. A criterion passes on its
point estimate; ``certain`` says whether its whole interval lies on the same side.

The **depth profile**: at ratios 0.5, 0.25 and 0.1, the share labelled superficial among the
labelled items that flipped at that ratio (labels belong to a constraint on a response, so one
label serves every ratio).

Sheets (pipeline.analysis.validation_sheets) are CSV, one row per item, with the texts and
without anything a judge said; an adjudicator's label (annotator ``adjudicator``) settles the
items two annotators labelled differently.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.analysis.metrics.base import Filters
from pipeline.analysis.metrics.items import Item
from pipeline.analysis.stats import DEFAULT_RESAMPLES, NAN_INTERVAL, Interval, cohen_kappa
from pipeline.analysis.validation_plan import (
    PASSED_STRATUM,
    Plan,
    current_items,
    items_by_key,
    load_plan,
    require_plan,
    stratum_of,
)
from pipeline.core.definitions import DEFAULT_RATIO, passes, ratio_key, same_ratio
from pipeline.store.annotations import labels_by_item
from pipeline.store.validation import instruction_domains, summary_flips
from pipeline.store.view import store_of

if TYPE_CHECKING:
    from pipeline.store.database import Store
    from pipeline.store.view import StoreReader

MIN_PRECISION = MIN_RECALL = 0.8
MAX_INTEGRATED = 0.10
PROFILE_RATIOS = (0.5, 0.25, 0.1)
# The label of this annotator settles an item two people disagreed on; it is not a rater in kappa.
ADJUDICATOR = "adjudicator"


# -- labels ------------------------------------------------------------------------------------


def read_labels(store: Store) -> dict[tuple[int, int], dict[str, str]]:
    """(constraint, response) -> annotator -> label."""
    return labels_by_item(store)


def consensus(by: dict[str, str], annotator: str | None = None) -> str | None:
    """One item's label: that annotator's; else the adjudicator's when there is one; else the
    majority of the annotators (None on a tie, or with no label)."""
    if annotator is not None:
        return by.get(annotator)
    if ADJUDICATOR in by:
        return by[ADJUDICATOR]
    votes: dict[str, int] = defaultdict(int)
    for value in by.values():
        votes[value] += 1
    if not votes:
        return None
    best = max(votes.values())
    top = [v for v, c in votes.items() if c == best]
    return top[0] if len(top) == 1 else None


# -- what the labels are scored against --------------------------------------------------------


@dataclass(frozen=True)
class Basis:
    """The metric's side of a validation: the items people's labels are scored on, each item's
    stratum and each stratum's population (an item stands for population / labelled items of
    its stratum).

    With a plan: the plan's items in its order, in the stratum they were drawn in, with the
    populations of the draw. Without one: every item in the selection at ``ratio``, its stratum
    from the metric's call now (``flipped:<domain>`` or ``passed``), populations counted now;
    items outside both (judges never passed the response) are outside the metric's call."""

    ratio: float
    plan: Plan | None
    items: dict[tuple[int, int], Item]  # the metric's item now, by (constraint, response)
    strata: dict[tuple[int, int], str]  # planless: only items in a stratum
    population: dict[str, int]
    order: tuple[tuple[int, int], ...] | None  # the plan's keys in its order; None: every labelled item


def validation_basis(reader: StoreReader, plan: Plan | None = None, *, ratio: float = DEFAULT_RATIO,
                     filters: Filters | None = None) -> Basis:
    store = store_of(reader)
    if plan is not None:
        return Basis(plan.ratio, plan, current_items(store, plan),
                     {(p.constraint_id, p.response_id): p.stratum for p in plan.items},
                     {s.name: s.population for s in plan.strata},
                     tuple((p.constraint_id, p.response_id) for p in plan.items))
    items = items_by_key(store, ratio, None, filters=filters)
    domain_of = instruction_domains(store, {i.instruction_id for i in items.values()})
    strata: dict[tuple[int, int], str] = {}
    population: dict[str, int] = defaultdict(int)
    for key, item in items.items():
        stratum = stratum_of(item, domain_of[item.instruction_id])
        if stratum is not None:
            strata[key] = stratum
            population[stratum] += 1
    return Basis(ratio, None, items, strata, dict(population), None)


# -- the report --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Criterion:
    name: str
    value: Interval
    threshold: float
    at_least: bool  # True: value >= threshold passes; False: value <= threshold passes

    @property
    def passed(self) -> bool:
        if math.isnan(self.value.value):
            return False
        return self.value.value >= self.threshold if self.at_least else self.value.value <= self.threshold

    @property
    def certain(self) -> bool:
        """The whole interval is on the same side of the threshold as the point estimate."""
        low, high = self.value.low, self.value.high
        if math.isnan(low):
            return False
        if self.at_least:
            return low >= self.threshold if self.passed else high < self.threshold
        return high <= self.threshold if self.passed else low > self.threshold

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value.value, "low": self.value.low, "high": self.value.high,
                "n": self.value.n, "threshold": self.threshold, "at_least": self.at_least,
                "passed": self.passed,
                "certain": self.certain}


@dataclass(frozen=True)
class AnnotatorKappa:
    annotator_a: str
    annotator_b: str
    kappa: Interval  # on the three labels, over the plan's items both labelled; n = the overlap
    percent: float

    def as_dict(self) -> dict[str, Any]:
        return {"annotator_a": self.annotator_a, "annotator_b": self.annotator_b, "kappa": self.kappa.value,
                "low": self.kappa.low, "high": self.kappa.high, "overlap": self.kappa.n,
                "percent": self.percent}


@dataclass(frozen=True)
class DepthPoint:
    ratio: float
    flipped: int  # items flipped at this ratio
    labelled: int  # of those, with a label (ambiguous included)
    superficial: Interval  # share labelled superficial among the labelled

    def as_dict(self) -> dict[str, Any]:
        return {"ratio": self.ratio, "flipped": self.flipped, "labelled": self.labelled,
                "superficial": self.superficial.value, "low": self.superficial.low,
                "high": self.superficial.high}


@dataclass
class ValidationReport:
    """The metric against people's labels, by the one rule (this module's docstring): each item's
    label is one annotator's or the consensus (the adjudicator decides, else the majority, ties
    left out), and each labelled item stands for its stratum's population."""

    ratio: float
    plan: Plan | None  # None: every labelled item, in strata by the metric's call now (Basis)
    annotator: str | None  # None: the consensus label
    items: int  # plan items; with no plan, items with a label
    labelled: int  # items with a label (ambiguous included)
    ties: int  # items whose annotators split evenly, with no adjudicator
    ambiguous: int
    out_of_scope: int  # labelled items the judges no longer pass on the full response (or no longer judge)
    changed: int  # plan items whose metric call differs from the stratum they were drawn in
    tp: int = 0  # in the sample, unweighted
    fp: int = 0
    fn: int = 0
    tn: int = 0
    precision: Interval = NAN_INTERVAL
    recall: Interval = NAN_INTERVAL
    integrated: Interval = NAN_INTERVAL  # share labelled integrated among labelled flipped items
    kappas: list[AnnotatorKappa] = field(default_factory=list)
    profile: list[DepthPoint] = field(default_factory=list)

    @property
    def n(self) -> int:
        """Items scored: labelled, in the metric's call, not ambiguous."""
        return self.tp + self.fp + self.fn + self.tn

    @property
    def criteria(self) -> list[Criterion]:
        return [Criterion("precision of superficial", self.precision, MIN_PRECISION, True),
                Criterion("recall of superficial", self.recall, MIN_RECALL, True),
                Criterion("integrated among flipped", self.integrated, MAX_INTEGRATED, False)]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.criteria)

    def as_dict(self) -> dict[str, Any]:
        plan = self.plan
        return {
            "plan": plan.name if plan else None, "ratio": self.ratio, "seed": plan.seed if plan else None,
            "run": plan.run if plan else None, "strata": [s.as_dict() for s in plan.strata] if plan else [],
            "annotator": self.annotator, "items": self.items,
            "labelled": self.labelled, "ties": self.ties, "ambiguous": self.ambiguous,
            "out_of_scope": self.out_of_scope, "changed_since_plan": self.changed,
            "sample": {"tp": self.tp, "fp": self.fp, "fn": self.fn, "tn": self.tn},
            "criteria": [c.as_dict() for c in self.criteria], "passed": self.passed,
            "annotators": [k.as_dict() for k in self.kappas],
            "depth_profile": [p.as_dict() for p in self.profile],
        }


def score_labels(basis: Basis, labels: dict[tuple[int, int], dict[str, str]], *, annotator: str | None = None,
                 n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> ValidationReport:
    """Human validation of Core, the one definition: the metric's call on ``basis`` against the
    labels (one ``annotator``'s, or the consensus). Precision and recall of "superficial" and the
    integrated share among the flipped are weighted by stratum. No kappas, no depth profile."""
    keys = basis.order if basis.order is not None else tuple(sorted(labels))
    report = ValidationReport(basis.ratio, basis.plan, annotator, len(keys), 0, 0, 0, 0, 0)
    # Per labelled, in-scope item: stratum, call, label.
    rows: list[tuple[str, bool, str]] = []
    for key in keys:
        item = basis.items.get(key)
        stratum = basis.strata.get(key)
        if basis.plan is not None and item is not None and item.flipped != (stratum != PASSED_STRATUM):
            report.changed += 1
        by = labels.get(key, {})
        label = consensus(by, annotator)
        if label is None:
            if annotator is None and len(by) > 1:
                report.ties += 1
            continue
        report.labelled += 1
        if item is None or stratum is None or not passes(item.full_score):
            report.out_of_scope += 1  # outside the metric's call: it never said Yes on the response
            continue
        if label == "ambiguous":
            report.ambiguous += 1
        rows.append((stratum, item.flipped, label))
    _score(report, rows, basis.population, n_resamples=n_resamples, seed=seed)
    return report


def validation_report(store: Store, plan: Plan | None = None, *, annotator: str | None = None,
                      n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                      profile_ratios: Sequence[float] = PROFILE_RATIOS) -> ValidationReport:
    """The metric against the labels of ``plan`` (the newest plan by default), with kappas
    between annotators and the depth profile: `unspecific validate report`."""
    plan = plan or require_plan(store)
    labels = read_labels(store)
    report = score_labels(validation_basis(store, plan), labels, annotator=annotator, n_resamples=n_resamples,
                          seed=seed)
    report.kappas = plan_kappas(plan, labels, n_resamples=n_resamples, seed=seed)
    report.profile = depth_profile(store, plan, labels, annotator=annotator, ratios=profile_ratios,
                                   n_resamples=n_resamples, seed=seed)
    return report


def human_validation(store: Store, *, ratio: float = DEFAULT_RATIO, filters: Filters | None = None,
                     annotator: str | None = None, n_resamples: int = DEFAULT_RESAMPLES,
                     seed: int = 0) -> ValidationReport:
    """The report's human validation: the newest plan's, as `validate report` computes it (the
    plan fixes the ratio and the items; ``ratio`` and ``filters`` then do not apply); with no
    plan, every labelled item within ``filters`` at ``ratio``, by the same rule. With kappas
    between annotators, without the depth profile."""
    plan = load_plan(store)
    basis = validation_basis(store, plan, ratio=ratio, filters=filters)
    labels = read_labels(store)
    report = score_labels(basis, labels, annotator=annotator, n_resamples=n_resamples, seed=seed)
    report.kappas = annotator_kappas(basis.order or tuple(sorted(labels)), labels, n_resamples=n_resamples,
                                     seed=seed)
    return report


@dataclass(frozen=True)
class AnnotateScores:
    """What the Annotate screen shows: each annotator's validation (by the one rule) and kappa
    between every pair of annotators."""

    by_annotator: dict[str, ValidationReport]
    kappas: list[AnnotatorKappa]


def annotate_scores(reader: StoreReader, *, ratio: float = DEFAULT_RATIO, basis: Basis | None = None,
                    n_resamples: int = 200, seed: int = 0) -> AnnotateScores:
    """Annotate's panel: as `human_validation` (the newest plan's items, or every labelled item at
    ``ratio``), once per annotator who labelled one of them. ``basis``: one computed before (the
    metric's call does not change while people label; the labels are read anew)."""
    store = store_of(reader)
    basis = basis or validation_basis(store, load_plan(store), ratio=ratio)
    labels = read_labels(store)
    keys = basis.order or tuple(sorted(k for k in labels if k in basis.items))
    who = sorted({a for k in keys for a in labels.get(k, {})})
    return AnnotateScores({a: score_labels(basis, labels, annotator=a, n_resamples=n_resamples, seed=seed)
                           for a in who},
                          annotator_kappas(keys, labels, n_resamples=n_resamples, seed=seed))


def _score(report: ValidationReport, rows: list[tuple[str, bool, str]], population: dict[str, int], *,
           n_resamples: int, seed: int) -> None:
    clear = [(s, call, label == "superficial") for s, call, label in rows if label != "ambiguous"]
    for _, call, truth in clear:
        report.tp += call and truth
        report.fp += call and not truth
        report.fn += (not call) and truth
        report.tn += (not call) and not truth
    # Each labelled item stands for population / labelled items of its stratum.
    per_stratum: dict[str, int] = defaultdict(int)
    for s, _, _ in rows:
        per_stratum[s] += 1
    weight = {s: population[s] / n for s, n in per_stratum.items()}
    strata = [s for s, _, _ in clear]
    calls = np.array([c for _, c, _ in clear], dtype=float)
    truths = np.array([t for _, _, t in clear], dtype=float)
    w = np.array([weight[s] for s in strata], dtype=float)
    report.precision = _weighted_ratio(strata, w * calls * truths, w * calls, n_resamples, seed)
    report.recall = _weighted_ratio(strata, w * calls * truths, w * truths, n_resamples, seed)
    flipped_rows = [(s, label) for s, c, label in rows if c]
    fw = np.array([weight[s] for s, _ in flipped_rows], dtype=float)
    integrated = np.array([label == "integrated" for _, label in flipped_rows], dtype=float)
    report.integrated = _weighted_ratio([s for s, _ in flipped_rows], fw * integrated, fw, n_resamples, seed)


def _weighted_ratio(strata: Sequence[str], num: np.ndarray, den: np.ndarray, n_resamples: int,
                    seed: int, alpha: float = 0.05) -> Interval:
    """sum(num) / sum(den), with a percentile interval from resampling items within each stratum
    (the sample was drawn per stratum, so a resample keeps each stratum's size)."""
    n = len(strata)
    if n == 0 or den.sum() <= 0:
        return Interval(math.nan, math.nan, math.nan, n)
    point = float(num.sum() / den.sum())
    rng = np.random.default_rng(seed)
    groups: dict[str, list[int]] = defaultdict(list)
    for k, s in enumerate(strata):
        groups[s].append(k)
    # (resamples, n) indices: each stratum's columns drawn from its own items.
    idx = np.empty((n_resamples, n), dtype=np.int64)
    col = 0
    for s in sorted(groups):
        members = np.asarray(groups[s])
        idx[:, col : col + members.size] = members[rng.integers(0, members.size,
                                                                size=(n_resamples, members.size))]
        col += members.size
    sn, sd = num[idx].sum(axis=1), den[idx].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        samples = np.where(sd > 0, sn / np.where(sd > 0, sd, 1), np.nan)
    samples = samples[~np.isnan(samples)]
    if samples.size == 0 or n == 1:
        return Interval(point, math.nan, math.nan, n)
    low, high = np.quantile(samples, [alpha / 2, 1 - alpha / 2])
    return Interval(point, float(low), float(high), n)


def plan_kappas(plan: Plan, labels: dict[tuple[int, int], dict[str, str]], *,
                n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[AnnotatorKappa]:
    """``annotator_kappas`` over the plan's items."""
    return annotator_kappas([(p.constraint_id, p.response_id) for p in plan.items], labels,
                            n_resamples=n_resamples, seed=seed)


def annotator_kappas(keys: Sequence[tuple[int, int]], labels: dict[tuple[int, int], dict[str, str]], *,
                     n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[AnnotatorKappa]:
    """Cohen's kappa (three labels) for each pair of annotators over the items of ``keys`` both
    labelled, with a bootstrap interval over those items. The adjudicator is not a rater."""
    people = sorted({who for k in keys for who in labels.get(k, {}) if who != ADJUDICATOR})
    out = []
    for i, a in enumerate(people):
        for b in people[i + 1 :]:
            shared = [(labels[k][a], labels[k][b]) for k in keys if a in labels.get(k, {})
                      and b in labels.get(k, {})]
            out.append(_kappa_interval(a, b, shared, n_resamples, seed))
    return out


def _kappa_interval(a: str, b: str, shared: list[tuple[str, str]], n_resamples: int, seed: int,
                    alpha: float = 0.05) -> AnnotatorKappa:
    n = len(shared)
    if n == 0:
        return AnnotatorKappa(a, b, Interval(math.nan, math.nan, math.nan, 0), math.nan)
    agreement = cohen_kappa([x for x, _ in shared], [y for _, y in shared])
    if n == 1:
        return AnnotatorKappa(a, b, Interval(agreement.kappa, math.nan, math.nan, 1), agreement.percent)
    code = {label: k for k, label in enumerate(sorted({v for pair in shared for v in pair}))}
    m = len(code)
    cells = np.array([code[x] * m + code[y] for x, y in shared])
    idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    # Each resample's contingency table, all at once: (resamples, m*m) counts.
    rows = np.repeat(np.arange(n_resamples) * m * m, n)
    tables = np.bincount(rows + cells[idx].ravel(), minlength=n_resamples * m
                         * m).reshape(n_resamples, m, m) / n
    p_o = np.trace(tables, axis1=1, axis2=2)
    p_e = np.einsum("ri,ri->r", tables.sum(axis=2), tables.sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        kappas = np.where(np.isclose(p_e, 1.0), np.nan, (p_o - p_e) / (1 - p_e))
    kappas = kappas[~np.isnan(kappas)]
    low, high = (np.quantile(kappas, [alpha / 2, 1 - alpha / 2]) if kappas.size else (math.nan, math.nan))
    return AnnotatorKappa(a, b, Interval(agreement.kappa, float(low), float(high), n), agreement.percent)


def depth_profile(store: Store, plan: Plan, labels: dict[tuple[int, int], dict[str, str]], *,
                  annotator: str | None = None, ratios: Sequence[float] = PROFILE_RATIOS,
                  n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[DepthPoint]:
    """At each ratio, the share labelled superficial among the labelled items that flipped there
    (within the plan's run). A ratio with no summaries gives a point with nothing flipped."""
    from pipeline.analysis.stats import bootstrap_mean

    labelled = {k for k, by in labels.items() if consensus(by, annotator) is not None}
    totals = flipped_totals(store, plan.run)
    out = []
    for ratio in ratios:
        # Outcomes only of the labelled items' responses; the total flipped from the kept totals.
        items = items_by_key(store, ratio, plan.run, [r for _, r in labelled])
        values = [float(consensus(labels[k], annotator) == "superficial")
                  for k, i in items.items() if i.flipped and k in labelled]
        total = next((n for r, n in totals.items() if same_ratio(r, ratio)), 0)
        out.append(DepthPoint(ratio, total, len(values),
                              bootstrap_mean(values, n_resamples=n_resamples, seed=seed) if values
                              else NAN_INTERVAL))
    return out


def flipped_totals(store: Store, run: str | None) -> dict[float, int]:
    """Per summary ratio, the (constraint, response) items flipped, from the per-text totals the
    store keeps (pipeline.store.scores, the same rule). A response summarised twice at one ratio counts
    its first summary's, as the metric's items do."""
    first: dict[tuple[int, float], tuple[int, int]] = {}  # (response, ratio) -> (summary id, flipped)
    for row in summary_flips(store, run):
        key = (row.response_id, ratio_key(row.ratio))
        if key not in first or row.summary_id < first[key][0]:
            first[key] = (row.summary_id, row.flipped)
    out: dict[float, int] = defaultdict(int)
    for (_, ratio), (_, flipped) in first.items():
        out[ratio] += flipped
    return dict(out)
