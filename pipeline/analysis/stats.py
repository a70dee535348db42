"""Uncertainty and agreement: bootstrap intervals, paired tests, Cohen's kappa, precision/recall.

Bootstrap: percentile intervals from resampling the unit of independence (for the report,
instructions), vectorized with numpy and chunked so 10,000 units x 1,000 resamples stays
within a few tens of MB. Every function takes a ``seed`` so results are reproducible. A report
makes hundreds of intervals and tests with one seed over samples of a few sizes, and a fresh
generator with that seed draws the same indices (and sign flips) for every sample of a size:
those draws are made once per (seed, size, resamples) and reused (``_fresh_draws``), which
gives the same numbers as drawing them anew, at a fraction of the cost.

- ``bootstrap_mean``: the mean of per-unit values, with a 95% interval.
- ``bootstrap_ratio``: a pooled rate sum(num) / sum(den) (e.g. the superficial share: flipped
  constraints over satisfied constraints), resampling units, so units with more satisfied
  constraints weigh more, as in the paper's pooled rates; with one column per judge, the
  mean of the judges' pooled rates.
- ``paired_test``: two systems measured on the same units (two models on the same
  instructions, two conditions on the same reference article). The difference of means with
  a bootstrap interval, and a two-sided sign-flip permutation p-value on the per-unit
  differences (exact under the null that each difference is symmetric around 0; below the
  Monte Carlo floor 1/(B+1), the test's normal approximation).
- ``unpaired_test``: two independent samples; a label-permutation p-value.
- ``holm``: Holm-Bonferroni adjusted p-values for a family of tests (the report's comparisons).
- ``cohen_kappa`` / ``kappa_from_counts``: chance-corrected agreement of two raters on the
  same items. NaN when chance agreement is 1 (both raters gave one label to every item):
  kappa is undefined there; percent agreement still says they agree.
- ``precision_recall``: of a binary call against a reference labelling.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from pipeline.core.intervals import ci

DEFAULT_RESAMPLES = 1000
_CHUNK_CELLS = 4_000_000  # indices drawn at once: bounds memory for large n
_CACHE_CELLS = _CHUNK_CELLS  # cached draws (9 bytes a cell): at most 36 MB


@dataclass(frozen=True)
class Interval:
    value: float  # the point estimate on the full sample
    low: float
    high: float
    n: int  # units

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def fmt(self, digits: int = 1, scale: float = 100.0) -> str:
        """'78.2 [74.0, 82.1]' (percent by default); '-' when undefined (``ci``)."""
        return ci(self, scale=scale, digits=digits)


NAN_INTERVAL = Interval(math.nan, math.nan, math.nan, 0)


@dataclass(frozen=True)
class PairedTest:
    diff: float  # mean(a) - mean(b)
    low: float
    high: float
    p_value: float
    n: int
    mean_a: float
    mean_b: float

    def significant(self, alpha: float = 0.05) -> bool:
        return self.p_value < alpha

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


@dataclass(frozen=True)
class _Draws:
    # (resamples, n): how often each unit is drawn in each resample, from the first draw of a
    # fresh generator (unit indices). A resample's sum is then counts @ values: a matrix-vector
    # product, 4x faster than gathering the drawn values and adding them up.
    counts: np.ndarray
    signs: np.ndarray  # (resamples, n) int8 +-1: the generator's next draw (paired_test's sign flips)


_DRAWS: OrderedDict[tuple[int, int, int], _Draws] = OrderedDict()
_DRAWS_LOCK = threading.Lock()


def _fresh_draws(seed: int | np.random.Generator | None, n: int, n_resamples: int) -> _Draws | None:
    """What ``np.random.default_rng(seed)`` draws first for ``n`` units in one chunk: the
    bootstrap indices, then paired_test's signs. None (draw as usual) for a Generator or no
    seed (state that must advance) and for samples too large for one chunk."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or n * n_resamples > _CHUNK_CELLS:
        return None
    key = (int(seed), n, n_resamples)
    with _DRAWS_LOCK:
        draws = _DRAWS.get(key)
        if draws is not None:
            _DRAWS.move_to_end(key)
            return draws
        rng = np.random.default_rng(int(seed))
        # The same calls, in the same order, as _resampled_sums and paired_test make.
        idx = rng.integers(0, n, size=(n_resamples, n), dtype=np.int32)
        signs = rng.integers(0, 2, size=(n_resamples, n), dtype=np.int8) * 2 - 1
        rows = np.repeat(np.arange(n_resamples, dtype=np.int64) * n, n)
        counts = np.bincount(rows + idx.ravel(), minlength=n_resamples * n).reshape(n_resamples,
                                                                                    n).astype(float)
        counts.flags.writeable = signs.flags.writeable = False
        draws = _DRAWS[key] = _Draws(counts, signs)
        while sum(d.counts.size for d in _DRAWS.values()) > _CACHE_CELLS and len(_DRAWS) > 1:
            _DRAWS.popitem(last=False)
        return draws


def _resampled_sums(columns: Sequence[np.ndarray], n_resamples: int, rng: np.random.Generator | None,
                    draws: _Draws | None = None) -> list[np.ndarray]:
    """For each resample (units drawn with replacement), the sum of each column; from ``draws``
    when given, else drawn from ``rng``."""
    if draws is not None:
        # einsum, not @: see paired_test. Sums differ from the gathered ones by rounding only.
        return [np.einsum("ij,j->i", draws.counts, col) for col in columns]
    assert rng is not None
    n = len(columns[0])
    out = [np.empty(n_resamples) for _ in columns]
    step = max(1, _CHUNK_CELLS // max(n, 1))
    for start in range(0, n_resamples, step):
        stop = min(n_resamples, start + step)
        idx = rng.integers(0, n, size=(stop - start, n), dtype=np.int32 if n < 2**31 else np.int64)
        for col, res in zip(columns, out):
            res[start:stop] = col[idx].sum(axis=1)
    return out


def _percentiles(samples: np.ndarray, alpha: float) -> tuple[float, float]:
    samples = samples[~np.isnan(samples)]
    if samples.size == 0:
        return math.nan, math.nan
    low, high = np.quantile(samples, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def bootstrap_mean(values: Sequence[float] | np.ndarray, *, n_resamples: int = DEFAULT_RESAMPLES,
                   seed: int | np.random.Generator | None = 0, alpha: float = 0.05) -> Interval:
    """Mean of ``values`` (NaNs dropped) with a percentile bootstrap interval."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return NAN_INTERVAL
    point = float(x.mean())
    if x.size == 1:
        return Interval(point, math.nan, math.nan, 1)
    (sums,) = _resampled_sums([x], n_resamples, _rng(seed), _fresh_draws(seed, x.size, n_resamples))
    low, high = _percentiles(sums / x.size, alpha)
    return Interval(point, low, high, int(x.size))


def bootstrap_ratio(num: Sequence[float] | np.ndarray, den: Sequence[float] | np.ndarray, *,
                    n_resamples: int = DEFAULT_RESAMPLES, seed: int | np.random.Generator | None = 0,
                    alpha: float = 0.05) -> Interval:
    """Pooled rate sum(num) / sum(den), resampling units (rows num[i], den[i]).

    With 2-D inputs (units x raters) the statistic is the mean over raters of each rater's
    pooled rate (raters whose den sums to 0 are skipped): "per judge, then averaged"."""
    a = np.asarray(num, dtype=float)
    b = np.asarray(den, dtype=float)
    if a.ndim == 1:
        a, b = a[:, None], b[:, None]
    if a.shape != b.shape:
        raise ValueError(f"bootstrap_ratio: num {a.shape} and den {b.shape} differ")
    keep = ~(np.isnan(a).any(axis=1) | np.isnan(b).any(axis=1))
    a, b = a[keep], b[keep]
    n = int(a.shape[0])

    def statistic(sa: np.ndarray, sb: np.ndarray) -> np.ndarray:
        # sa, sb: (..., raters) sums; mean over raters with a positive denominator.
        with np.errstate(invalid="ignore", divide="ignore"):
            rates = np.where(sb > 0, sa / np.where(sb > 0, sb, 1), np.nan)
        valid = ~np.isnan(rates)
        counts = valid.sum(axis=-1)
        total = np.where(valid, rates, 0).sum(axis=-1)
        return np.where(counts > 0, total / np.maximum(counts, 1), np.nan)

    if n == 0 or not (b.sum(axis=0) > 0).any():
        return Interval(math.nan, math.nan, math.nan, n)
    point = float(statistic(a.sum(axis=0), b.sum(axis=0)))
    if n == 1:
        return Interval(point, math.nan, math.nan, 1)
    sums = _resampled_sums([*a.T, *b.T], n_resamples, _rng(seed), _fresh_draws(seed, n, n_resamples))
    k = a.shape[1]
    low, high = _percentiles(statistic(np.stack(sums[:k], axis=-1), np.stack(sums[k:], axis=-1)), alpha)
    return Interval(point, low, high, n)


def paired_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *,
                n_resamples: int = DEFAULT_RESAMPLES, seed: int | np.random.Generator | None = 0,
                alpha: float = 0.05) -> PairedTest:
    """Do two systems differ on the same units? ``a[i]`` and ``b[i]`` belong to unit i.

    Units where either value is NaN are dropped. The interval is a bootstrap of the mean
    difference; the p-value is a two-sided sign-flip permutation test, (1 + hits) / (1 + B),
    refined by the normal approximation of the same test when no resample reaches the observed
    difference (so that many tests can still be Holm-corrected).
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired_test: a has {x.size} units, b has {y.size}")
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    n = int(x.size)
    if n == 0:
        return PairedTest(math.nan, math.nan, math.nan, math.nan, 0, math.nan, math.nan)
    d = x - y
    observed = float(d.mean())
    if n == 1:
        return PairedTest(observed, math.nan, math.nan, math.nan, 1, float(x.mean()), float(y.mean()))
    draws = _fresh_draws(seed, n, n_resamples)
    rng = _rng(seed) if draws is None else None
    (sums,) = _resampled_sums([d], n_resamples, rng, draws)
    low, high = _percentiles(sums / n, alpha)
    tol = 1e-12 * max(1.0, abs(observed))

    def count_hits(signs: np.ndarray) -> int:
        # einsum, not signs @ d: a BLAS call here can cost 50x more when its threads wait for a
        # busy CPU. The summation order differs from @ by ~1e-16, far inside tol.
        return int((np.abs(np.einsum("ij,j->i", signs, d)) / n >= abs(observed) - tol).sum())

    if draws is not None:
        hits = count_hits(draws.signs)
    else:
        assert rng is not None  # drawn above whenever there are no precomputed draws
        hits = 0
        step = max(1, _CHUNK_CELLS // n)
        for start in range(0, n_resamples, step):
            rows = min(n_resamples, start + step) - start
            hits += count_hits(rng.integers(0, 2, size=(rows, n), dtype=np.int8) * 2 - 1)
    p = (1 + hits) / (1 + n_resamples)
    if hits == 0:
        # Beyond every resample: Monte Carlo only says p < 1/(B+1), too coarse to survive a
        # multiple-comparison correction. The sign-flip statistic's null distribution has mean 0
        # and variance sum(d^2) / n^2; its normal tail gives the finer value.
        z = abs(observed) * n / math.sqrt(float((d**2).sum()))
        p = min(p, math.erfc(z / math.sqrt(2)))
    return PairedTest(observed, low, high, float(p), n, float(x.mean()), float(y.mean()))


def unpaired_test(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *,
                  n_resamples: int = DEFAULT_RESAMPLES, seed: int | np.random.Generator | None = 0,
                  alpha: float = 0.05) -> PairedTest:
    """Two independent samples: difference of means, bootstrap interval (each sample resampled
    on its own), label-permutation p-value. ``n`` is the smaller sample's size."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    x, y = x[~np.isnan(x)], y[~np.isnan(y)]
    if x.size < 2 or y.size < 2:
        diff = float(x.mean() - y.mean()) if x.size and y.size else math.nan
        return PairedTest(diff, math.nan, math.nan, math.nan, int(min(x.size, y.size)),
                          float(x.mean()) if x.size else math.nan, float(y.mean()) if y.size else math.nan)
    rng = _rng(seed)
    observed = float(x.mean() - y.mean())
    (sx,) = _resampled_sums([x], n_resamples, rng)
    (sy,) = _resampled_sums([y], n_resamples, rng)
    low, high = _percentiles(sx / x.size - sy / y.size, alpha)
    pooled = np.concatenate([x, y])
    hits = 0
    tol = 1e-12 * max(1.0, abs(observed))
    for _ in range(n_resamples):
        perm = rng.permutation(pooled)
        if abs(perm[: x.size].mean() - perm[x.size :].mean()) >= abs(observed) - tol:
            hits += 1
    p = (1 + hits) / (1 + n_resamples)
    return PairedTest(observed, low, high, float(p), int(min(x.size, y.size)), float(x.mean()),
                      float(y.mean()))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (family-wise error over all the tests given); NaN stays NaN."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, math.nan)
    valid = np.flatnonzero(~np.isnan(p))
    if valid.size == 0:
        return out.tolist()
    order = valid[np.argsort(p[valid], kind="stable")]
    m = order.size
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out[order] = np.minimum(adjusted, 1.0)
    return out.tolist()


# -- agreement -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Agreement:
    kappa: float  # NaN when undefined (chance agreement of 1)
    percent: float  # share of items with the same label
    n: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def kappa_from_counts(table: np.ndarray | Sequence[Sequence[float]]) -> Agreement:
    """Cohen's kappa from a square contingency table: table[i][j] = items rater 1 labelled i
    and rater 2 labelled j. kappa = (p_o - p_e) / (1 - p_e)."""
    t = np.asarray(table, dtype=float)
    n = t.sum()
    if n == 0:
        return Agreement(math.nan, math.nan, 0)
    p_o = float(np.trace(t) / n)
    p_e = float((t.sum(axis=1) / n) @ (t.sum(axis=0) / n))
    kappa = math.nan if math.isclose(p_e, 1.0) else (p_o - p_e) / (1 - p_e)
    return Agreement(kappa, p_o, int(n))


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> Agreement:
    """Kappa and percent agreement of two raters' labels on the same items (any hashable labels)."""
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} labels against {len(b)}")
    labels = sorted(set(a) | set(b), key=str)
    index = {label: i for i, label in enumerate(labels)}
    table = np.zeros((len(labels), len(labels)))
    for x, y in zip(a, b):
        table[index[x], index[y]] += 1
    return kappa_from_counts(table)


@dataclass(frozen=True)
class PrecisionRecall:
    precision: float  # TP / (TP + FP); NaN with no positive call
    recall: float  # TP / (TP + FN); NaN with no positive truth
    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        if math.isnan(p) or math.isnan(r) or p + r == 0:
            return math.nan
        return 2 * p * r / (p + r)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "n": self.n, "f1": self.f1}


def precision_recall(predicted: Sequence[bool], truth: Sequence[bool]) -> PrecisionRecall:
    if len(predicted) != len(truth):
        raise ValueError(f"precision_recall: {len(predicted)} calls against {len(truth)} labels")
    p = np.asarray(predicted, dtype=bool)
    t = np.asarray(truth, dtype=bool)
    tp, fp = int((p & t).sum()), int((p & ~t).sum())
    fn, tn = int((~p & t).sum()), int((~p & ~t).sum())
    return PrecisionRecall(
        precision=tp / (tp + fp) if tp + fp else math.nan,
        recall=tp / (tp + fn) if tp + fn else math.nan,
        tp=tp, fp=fp, fn=fn, tn=tn,
    )
