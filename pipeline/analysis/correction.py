"""Org, Core and the superficial share corrected for each judge's measured error (issue 27).

A judge that says Yes too easily inflates every rate by its false-positive rate; one that misses
Yes deflates it. Where a judge has a check (people's own Yes/No from ``validate``, or the built-in
constructed set of ``validate judges --builtin``: pipeline.store.judge_checks), its sensitivity
(Yes on true Yes) and specificity (No on true No) give back the true rate, by Rogan-Gladen:

    p = (raw + specificity - 1) / (sensitivity + specificity - 1), clipped to [0, 1]

applied where the verdicts are, judge by judge and text kind by text kind:
  - Org: each judge's Yes rate on the responses, corrected, then the mean over judges;
  - Core: the same on the summaries;
  - superficial: per judge, the pooled 2x2 of (Yes on the response, Yes on the summary) over the
    constraints judged on both is corrected as a whole (each text's verdicts by the same rates:
    the observed table is A P A^T, so P = A^-1 Q A^-T, clipped and renormalised), then the share of
    truly satisfied constraints lost in the summary is read off it; the mean over judges.

The interval resamples both sources of error at once: the benchmark's units (pairs of references,
as the metrics resample them) and each judge's checked items. One bootstrap draws both.

Assumptions (README, "Corrected rates"): a judge's errors do not depend on the model under test
or on the text kind, and its check's items are drawn like the benchmark's. A judge whose
sensitivity + specificity is at most 1 is no better than chance: its rates carry no information
and it gets no corrected number. When a rate is averaged over judges, every judge must have an
informative check; otherwise the corrected rate is left out and ``reason`` says why.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.analysis.judge_real import standing_lines
from pipeline.analysis.judge_validation import load_judge_plan, people_verdict
from pipeline.analysis.metrics.base import Filters, Metrics, Row, rater_names
from pipeline.analysis.metrics.groups import _pair_units
from pipeline.analysis.stats import DEFAULT_RESAMPLES, NAN_INTERVAL, Interval
from pipeline.core.definitions import ratio_key
from pipeline.store import metrics as selection
from pipeline.store.judge_checks import CheckItem, JudgeCheck, check_counts, judge_check
from pipeline.store.validation import text_labels
from pipeline.store.verdicts import latest_verdicts
from pipeline.store.view import store_of

if TYPE_CHECKING:
    from pipeline.store.database import Store
    from pipeline.store.view import StoreReader

VALIDATE_COMMAND = "unspecific validate judges --builtin"
GroupKey = tuple[str, str, str, str, float | None]  # domain, condition, model, mode, ratio


# -- the arithmetic ----------------------------------------------------------------------------


def rogan_gladen(raw: Any, sensitivity: Any, specificity: Any) -> Any:
    """The true rate behind an observed Yes rate, clipped to [0, 1]; NaN where sens + spec <= 1."""
    raw, sens, spec = (np.asarray(x, dtype=float) for x in (raw, sensitivity, specificity))
    informative = sens + spec > 1
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.clip((raw + spec - 1) / np.where(informative, sens + spec - 1, 1.0), 0.0, 1.0)
    out = np.where(informative & ~np.isnan(raw), p, np.nan)
    return float(out) if out.ndim == 0 else out


def corrected_joint(table: np.ndarray, sensitivity: np.ndarray, specificity: np.ndarray) -> np.ndarray:
    """True (response, summary) shares behind observed ones: ``table`` (..., 2, 2) of counts
    [[No/No, No/Yes], [Yes/No, Yes/Yes]] (response first); sens and spec shaped (...). Clipped to
    be non-negative and renormalised; NaN where the judge is no better than chance."""
    sens, spec = np.asarray(sensitivity, dtype=float), np.asarray(specificity, dtype=float)
    d = sens + spec - 1
    safe = np.where(d > 0, d, np.nan)
    inverse = np.stack([np.stack([sens, -(1 - sens)], axis=-1), np.stack([-(1 - spec), spec], axis=-1)],
                       axis=-2) / safe[..., None, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        q = table / table.sum(axis=(-2, -1), keepdims=True)
        p = np.clip(inverse @ q @ np.swapaxes(inverse, -1, -2), 0.0, None)
        return p / p.sum(axis=(-2, -1), keepdims=True)


def lost_share(table: np.ndarray) -> np.ndarray:
    """Of the constraints satisfied on the response, the share not satisfied on the summary."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return table[..., 1, 0] / (table[..., 1, 0] + table[..., 1, 1])


def _rates_from_cells(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sensitivity and specificity from (..., 4) counts tp, fn, tn, fp (NaN when undefined)."""
    tp, fn, tn, fp = (cells[..., i].astype(float) for i in range(4))
    with np.errstate(invalid="ignore", divide="ignore"):
        return tp / (tp + fn), tn / (tn + fp)


def _check_draws(check: JudgeCheck, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples + 1, 4): the check's cells, then its items resampled with replacement (a multinomial
    draw over the four cells is exactly that). A stratified check is resampled within each stratum and
    its cells weighted by the stratum's population over its labelled items."""
    if check.populations:
        return _stratified_draws(check, n_resamples, rng)
    cells = np.array([check.tp, check.fn, check.tn, check.fp], dtype=float)
    n = int(cells.sum())
    drawn = rng.multinomial(n, cells / n, size=n_resamples) if n else np.zeros((n_resamples, 4))
    return np.vstack([cells[None, :], drawn])


def _stratified_draws(check: JudgeCheck, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    populations = check.populations or {}
    by: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(4))
    for i in check.answered:
        by[i.stratum][(0 if i.verdict else 1) if i.truth else (2 if not i.verdict else 3)] += 1
    out = np.zeros((n_resamples + 1, 4))
    for stratum in sorted(by):
        cells = by[stratum]
        n = int(cells.sum())
        weight = populations.get(stratum, 0) / n
        out[0] += weight * cells
        out[1:] += weight * rng.multinomial(n, cells / n, size=n_resamples)
    return out


def check_intervals(check: JudgeCheck, *, n_resamples: int = DEFAULT_RESAMPLES,
                    seed: int = 0) -> tuple[Interval, Interval]:
    """Sensitivity and specificity with 95% intervals over the check's items (within strata for a
    stratified check), as the corrected rates resample them."""
    draws = _check_draws(check, n_resamples, np.random.default_rng(seed))
    sens, spec = _rates_from_cells(draws)
    return _interval(sens, check.tp + check.fn), _interval(spec, check.tn + check.fp)


def _unit_weights(n_units: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples + 1, units): how often each unit is drawn; the first row is the sample itself."""
    idx = rng.integers(0, max(n_units, 1), size=(n_resamples, n_units))
    rows = np.repeat(np.arange(n_resamples) * n_units,
                     n_units)  # counted by bincount: much faster than multinomial
    drawn = np.bincount(rows + idx.ravel(), minlength=n_resamples * n_units).reshape(n_resamples, n_units)
    return np.vstack([np.ones((1, n_units)), drawn]).astype(float)


def _rater_means(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(draws, raters): each rater's weighted mean over the units it judged (NaN: none)."""
    present = ~np.isnan(values)
    num = weights @ np.where(present, values, 0.0)
    den = weights @ present.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def _interval(draws: np.ndarray, n: int, alpha: float = 0.05) -> Interval:
    """Point (draws[0]) and percentile interval over the resamples (NaN ones left out)."""
    point = float(draws[0])
    if math.isnan(point):
        return NAN_INTERVAL
    rest = draws[1:][~np.isnan(draws[1:])]
    if n < 2 or not rest.size:
        return Interval(point, math.nan, math.nan, n)
    low, high = np.quantile(rest, [alpha / 2, 1 - alpha / 2])
    return Interval(point, float(low), float(high), n)


@dataclass(frozen=True)
class UnitRates:
    """A group's figures per unit (rows) and rater (columns), NaN where a rater judged none.

    ``joint``: (units, raters, 2, 2) mean counts of (response verdict, summary verdict) over the
    constraints judged on both; None for a group without summaries (ratio None)."""

    org: np.ndarray
    core: np.ndarray | None = None
    joint: np.ndarray | None = None


@dataclass(frozen=True)
class CorrectedRates:
    org: Interval
    core: Interval = NAN_INTERVAL
    superficial: Interval = NAN_INTERVAL


def correct_rates(rates: UnitRates, checks: list[JudgeCheck], *, n_resamples: int = DEFAULT_RESAMPLES,
                  seed: int = 0) -> CorrectedRates:
    """Org, Core and superficial corrected judge by judge (``checks[k]`` for rater column k), then
    averaged over raters; the interval resamples the units and every check's items in one bootstrap."""
    rng = np.random.default_rng(seed)
    n_units = rates.org.shape[0]
    weights = _unit_weights(n_units, n_resamples, rng)
    cells = np.stack([_check_draws(c, n_resamples, rng) for c in checks], axis=1)  # (draws, raters, 4)
    sens, spec = _rates_from_cells(cells)

    def averaged(raw: np.ndarray, corrected: np.ndarray) -> np.ndarray:
        # Over the raters with a figure on the sample (as the metrics average); a draw in which a
        # judge's resampled check is no better than chance has no corrected number.
        judged = ~np.isnan(raw[0])
        return corrected[:, judged].mean(axis=1) if judged.any() else np.full(len(raw), math.nan)

    raw_org = _rater_means(rates.org, weights)
    org = averaged(raw_org, rogan_gladen(raw_org, sens, spec))
    out = CorrectedRates(_interval(org, n_units))
    if rates.core is None or rates.joint is None:
        return out
    raw_core = _rater_means(rates.core, weights)
    core = averaged(raw_core, rogan_gladen(raw_core, sens, spec))
    pooled = np.einsum("du,urij->drij", weights, np.nan_to_num(rates.joint))
    superficial = averaged(lost_share(pooled), lost_share(corrected_joint(pooled, sens, spec)))
    return CorrectedRates(out.org, _interval(core, n_units), _interval(superficial, n_units))


# -- which check a judge has -----------------------------------------------------------------


def people_checks(store: Store) -> dict[str, JudgeCheck]:
    """Per rater, its check against people: each item of the newest judge plan people answered
    (pipeline.analysis.judge_validation's rule: the adjudicator, else the majority) with the
    rater's latest verdict."""
    plan = load_judge_plan(store)
    if plan is None or not plan.items:
        return {}
    labels = text_labels(store)
    truth = {(i.constraint_id,
              i.generation_id): people_verdict(labels.get((i.constraint_id, i.generation_id), {}))
             for i in plan.items}
    domain = {(i.constraint_id, i.generation_id): i.domain for i in plan.items}
    # A real-text check drawn by the judge's verdict: each item stands for its stratum's population.
    populations = {k: pop for k, (pop, _) in plan.strata.items()} if plan.weighted else None
    by_rater: dict[tuple[str, str], list[CheckItem]] = defaultdict(list)
    for v in latest_verdicts(store, sorted({i.generation_id for i in plan.items})):
        key = (v.constraint_id, v.generation_id)
        person = truth.get(key)
        if v.verdict is not None and person is not None:
            by_rater[(v.judge, v.judging_mode)].append(
                CheckItem(domain[key], f"{key[0]}:{key[1]}", person, int(v.verdict), v.quote_found,
                          v.p_yes, plan.item_strata.get(key, "")))
    raters = sorted(by_rater)
    return {name: judge_check(name, "people", by_rater[r], populations)
            for r, name in zip(raters, rater_names(raters))}


def _lookup(judge: str, checks: dict[str, JudgeCheck]) -> JudgeCheck | None:
    # "judge [mode]" (the store has the judge in two modes) falls back to the judge's plain name.
    return checks.get(judge) or checks.get(judge.split(" [")[0])


# Said wherever a corrected rate rests on a check that is not the benchmark's own texts.
CONSTRUCTED = "constructed, not drawn from these texts"
SOURCE_NAMES = {"people": "real-text check", "own": f"own check set ({CONSTRUCTED})",
                "builtin": f"built-in check ({CONSTRUCTED})"}


def source_name(source: str) -> str:
    """A check's source as every output names it: the real-text check, or a constructed one said so."""
    return SOURCE_NAMES.get(source, source)


@dataclass(frozen=True)
class JudgeStatus:
    """A rater's validation as the report shows it beside the rates. ``check`` is what corrects its
    rates: the real-text check (people's labels of the benchmark's own verdicts) when there is one,
    else a constructed one; ``constructed``: the constructed check also held beside a real-text one."""

    judge: str
    check: JudgeCheck | None
    constructed: JudgeCheck | None = None

    @property
    def validated(self) -> bool:
        return (self.check is not None and self.check.sensitivity is not None
                and self.check.specificity is not None)

    @property
    def informative(self) -> bool:
        c = self.check
        return self.validated and c is not None and (c.sensitivity or 0) + (c.specificity or 0) > 1

    def line(self) -> str:
        c = self.check
        if c is None:
            return f"{self.judge}: unvalidated: its rates are shown raw; `{VALIDATE_COMMAND}` validates it"
        if not self.validated:
            lacking = "true Yes" if c.sensitivity is None else "true No"
            return (f"{self.judge}: its check ({source_name(c.source)}) has no {lacking} item with a "
                    "verdict: no sensitivity and "
                    f"specificity to correct by; `{VALIDATE_COMMAND}` runs the full check")
        if c.source == "people":
            source = ("the real-text check (people's labels of these texts' verdicts, "
                      + ("drawn by stratum, weighted)" if c.populations else "unweighted)"))
        else:
            source = f"the {source_name(c.source)}"
        rates = (f"sensitivity {c.sensitivity:.2f}, specificity {c.specificity:.2f}, "
                 f"n={c.n}, from {source}")
        if not self.informative:
            return (f"{self.judge}: {rates}: no better than chance (sensitivity + specificity <= "
                    "1): its rates carry no information; no corrected figure")
        return f"{self.judge}: {rates}"

    @cached_property
    def disagreement(self) -> str:
        """One sentence when the real-text check and the constructed one differ beyond their intervals
        (sensitivity or specificity), real-text figures first; "" otherwise."""
        real, built = self.check, self.constructed
        if real is None or built is None or real.source != "people" or not self.validated:
            return ""
        r_sens, r_spec = check_intervals(real)
        b_sens, b_spec = check_intervals(built)
        differ = [name for name, a, b in (("sensitivity", r_sens, b_sens), ("specificity", r_spec, b_spec))
                  if _apart(a, b)]
        if not differ:
            return ""
        return (f"{self.judge} on these texts: sensitivity {_fmt(r_sens)}, specificity {_fmt(r_spec)} "
                f"(real-text check, n={real.n}); on the {source_name(built.source)}: sensitivity "
                f"{_fmt(b_sens)}, specificity {_fmt(b_spec)}: its {' and '.join(differ)} differ beyond "
                "their intervals, so the constructed check does not describe this judge here (the "
                "corrected rates use the real-text check).")

    def as_dict(self) -> dict[str, Any]:
        c = self.check
        return {"judge": self.judge, "validation": c.source if c else None,
                "sensitivity": c.sensitivity if c else None, "specificity": c.specificity if c else None,
                "n": c.n if c else 0, "informative": self.informative,
                "weighted": bool(c and c.populations), "disagreement": self.disagreement or None}


def _apart(a: Interval, b: Interval) -> bool:
    """Two intervals that do not overlap (either without bounds: not apart)."""
    if any(math.isnan(x) for x in (a.low, a.high, b.low, b.high)):
        return False
    return a.high < b.low or b.high < a.low


def _fmt(iv: Interval) -> str:
    if math.isnan(iv.low):
        return f"{iv.value:.2f}"
    return f"{iv.value:.2f} [{iv.low:.2f}, {iv.high:.2f}]"


def judge_statuses(store: Store, raters: list[str]) -> list[JudgeStatus]:
    """Each rater's check: the real-text one (people's) when there is one, else a constructed one
    (own set, then built-in), else none; beside a real-text check, the constructed one it replaced."""
    people, stored = people_checks(store), check_counts(store)
    out = []
    for r in raters:
        real, other = _lookup(r, people), _lookup(r, stored)
        constructed = other if other is not None and other.source != "people" else None
        out.append(JudgeStatus(r, real or other, constructed if real is not None else None))
    return out


# -- per group ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CorrectedGroup:
    key: GroupKey
    rates: CorrectedRates | None  # None: some judge lacks an informative check (``reason``)
    reason: str = ""
    validation: str = ""  # which checks were used: "judge-a: people; judge-b: builtin"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"corrected_by": self.validation or None,
                               "uncorrected_reason": self.reason or None}
        for name in ("org", "core", "superficial"):
            iv = getattr(self.rates, name) if self.rates else NAN_INTERVAL
            out.update({f"{name}_corrected": iv.value, f"{name}_corrected_low": iv.low,
                        f"{name}_corrected_high": iv.high})
        return out


@dataclass
class Correction:
    judges: list[JudgeStatus]
    groups: dict[GroupKey, CorrectedGroup] = field(default_factory=dict)
    # The embedded judge without a real-text check: how it did on the shipped real demo text, and what
    # to label before trusting a corrected number (pipeline.analysis.judge_real.standing_lines).
    standing: list[str] = field(default_factory=list)

    def group(self, key: GroupKey) -> CorrectedGroup | None:
        return self.groups.get((*key[:4], ratio_key(key[4])))

    def warnings(self) -> list[str]:
        return [s.line() for s in self.judges if s.validated and not s.informative]

    def disagreements(self) -> list[str]:
        """One sentence per judge whose real-text and constructed checks differ beyond their intervals."""
        return [s.disagreement for s in self.judges if s.disagreement]

    @property
    def constructed_only(self) -> list[str]:
        """Judges whose corrected rates rest on a constructed check (no real-text check yet)."""
        return [s.judge for s in self.judges if s.check is not None and s.check.source != "people"]

    @property
    def unvalidated(self) -> list[str]:
        return [s.judge for s in self.judges if not s.validated]


def corrected_metrics(reader: StoreReader, metrics: Metrics, filters: Filters | None = None, *,
                      n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Correction:
    """Every group of ``metrics`` corrected for its judges' checks (the same selection of texts)."""
    store = store_of(reader)
    f = filters or Filters()
    with selection.scored_selection(store, f):
        keys = selection.scored_raters(store, f)
        if keys:
            selection.use_raters(store, keys)
        totals = selection.rater_text_totals(store) if keys else []
    names = rater_names(keys)
    statuses = judge_statuses(store, names)
    out = Correction(statuses)
    if not metrics.rows or not names:
        return out
    without_real = [s.judge for s in statuses if s.check is None or s.check.source != "people"]
    out.standing = standing_lines(without_real, 2 * 2 * len({row.model for row in metrics.rows}))
    reason = _why_uncorrected(statuses)
    used = "; ".join(f"{s.judge}: {s.check.source}" for s in statuses if s.check is not None)
    per_text = _per_text(totals, len(names))
    buckets: dict[GroupKey, list[Row]] = defaultdict(list)
    for row in metrics.rows:
        buckets[(row.domain, row.condition, row.model, row.mode, ratio_key(row.ratio))].append(row)
    for key, members in buckets.items():
        if reason:
            out.groups[key] = CorrectedGroup(key, None, reason, used)
            continue
        checks = [s.check for s in statuses if s.check is not None]
        rates = _unit_rates(_pair_units(members), key[4], per_text, len(names))
        out.groups[key] = CorrectedGroup(key,
                                         correct_rates(rates, checks, n_resamples=n_resamples, seed=seed),
                                         "", used)
    return out


def _why_uncorrected(statuses: list[JudgeStatus]) -> str:
    missing = [s.judge for s in statuses if not s.validated]
    if missing:
        return f"unvalidated: {', '.join(missing)} (`{VALIDATE_COMMAND}`)"
    chance = [s.judge for s in statuses if not s.informative]
    if chance:
        return f"no better than chance: {', '.join(chance)} (its rates carry no information)"
    return ""


# (response id, ratio or None) -> per rater: Org or Core share, and for summaries the 2x2 counts
_PerText = dict[tuple[int, float | None], tuple[np.ndarray, np.ndarray | None]]


def _per_text(totals: list[selection.RaterTextTotals], n_raters: int) -> _PerText:
    """Per response (ratio None) and per (response, ratio): each rater's share of Yes and, for the
    summaries, its 2x2 of verdicts, averaged over the summaries at the ratio (two summarizers)."""
    shares: dict[tuple[int, float | None],
                 list[list[float]]] = defaultdict(lambda: [[] for _ in range(n_raters)])
    tables: dict[tuple[int, float | None], list[list[np.ndarray]]] = defaultdict(
        lambda: [[] for _ in range(n_raters)])
    for t in totals:
        if t.kind == "response":
            if t.judged:
                shares[(t.response_id, None)][t.k].append(t.yes / t.judged)
            continue
        if not t.both:
            continue
        key = (t.response_id, ratio_key(t.ratio))
        shares[key][t.k].append((t.core_yes or 0) / t.both)
        both_yes = (t.full_yes or 0) - (t.flipped or 0)
        summary_only = (t.core_yes or 0) - both_yes
        tables[key][t.k].append(np.array([[t.both - (t.full_yes or 0) - summary_only, summary_only],
                                          [t.flipped or 0, both_yes]], dtype=float))
    out: _PerText = {}
    for key, by_rater in shares.items():
        # Plain sums: numpy's mean costs more than the one or two values averaged here.
        mean = np.array([sum(v) / len(v) if v else math.nan for v in by_rater])
        table = None
        if key[1] is not None:
            table = np.stack([sum(v) / len(v) if v else np.full((2, 2), math.nan) for v in tables[key]])
        out[key] = (mean, table)
    return out


def _unit_rates(units: list[list[Row]], ratio: float | None, per_text: _PerText, n_raters: int) -> UnitRates:
    """A group's units as the metrics resample them: each unit's mean over its responses, per rater."""
    nan_row = np.full(n_raters, math.nan)
    org, core, joint = [], [], []
    for unit in units:
        responses = [per_text.get((r.response_id, None), (nan_row, None))[0] for r in unit]
        org.append(_nanmean_rows(np.array(responses)))
        if ratio is not None:
            summaries = [per_text.get((r.response_id, ratio), (nan_row, None)) for r in unit]
            core.append(_nanmean_rows(np.array([s[0] for s in summaries])))
            tables = [s[1] for s in summaries if s[1] is not None]
            joint.append(_nanmean_rows(np.array(tables)) if tables else np.full((n_raters, 2, 2), math.nan))
    if ratio is None:
        return UnitRates(np.array(org))
    return UnitRates(np.array(org), np.array(core), np.array(joint))


def _nanmean_rows(values: np.ndarray) -> np.ndarray:
    """Mean over axis 0, ignoring NaN; NaN where every value is NaN (no warning)."""
    if len(values) == 1:  # most units hold one response
        return values[0]
    present = ~np.isnan(values)
    count = present.sum(axis=0)
    total = np.where(present, values, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.where(count > 0, count, 1), np.nan)
