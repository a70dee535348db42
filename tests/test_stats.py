"""Bootstrap intervals, paired and unpaired tests, kappa and precision/recall."""

from __future__ import annotations

import math
import time
from dataclasses import asdict

import numpy as np
import pytest

from pipeline.analysis.stats import (
    bootstrap_mean,
    bootstrap_ratio,
    cohen_kappa,
    kappa_from_counts,
    paired_test,
    precision_recall,
    unpaired_test,
)


def test_bootstrap_mean_contains_estimate_and_shrinks_with_n() -> None:
    rng = np.random.default_rng(0)
    small = rng.binomial(1, 0.7, 20).astype(float)
    large = rng.binomial(1, 0.7, 2000).astype(float)
    a = bootstrap_mean(small, seed=1)
    b = bootstrap_mean(large, seed=1)
    assert a.value == pytest.approx(small.mean()) and a.contains(a.value) and a.n == 20
    assert b.contains(b.value) and b.contains(0.7)
    # Width falls like 1/sqrt(n): 100x the units, about a tenth of the width.
    assert (b.high - b.low) < 0.2 * (a.high - a.low)
    # Seeded: the same seed gives the same interval; another seed a slightly different one.
    assert bootstrap_mean(small, seed=1) == a
    assert bootstrap_mean(small, seed=2) != a


def test_bootstrap_edge_cases() -> None:
    assert math.isnan(bootstrap_mean([]).value)
    one = bootstrap_mean([0.4])
    assert one.value == 0.4 and math.isnan(one.low)
    assert bootstrap_mean([0.5, math.nan, 0.7]).n == 2
    assert bootstrap_mean([0.3] * 10).low == pytest.approx(0.3)


def test_bootstrap_ratio_pooled_and_per_judge() -> None:
    # Pooled: (1 + 3) / (2 + 4) = 2/3, not the mean of shares (1/2 + 3/4) / 2.
    iv = bootstrap_ratio([1, 3], [2, 4], seed=0)
    assert iv.value == pytest.approx(2 / 3) and iv.low <= iv.value <= iv.high
    # Two judges (columns): judge 1 pools 2/4, judge 2 pools 1/4: mean 3/8.
    num = np.array([[1, 0], [1, 1]])
    den = np.array([[2, 2], [2, 2]])
    assert bootstrap_ratio(num, den).value == pytest.approx(3 / 8)
    # A judge with nothing satisfied is skipped, not counted as 0.
    assert bootstrap_ratio(np.array([[1, 0]]), np.array([[2, 0]])).value == pytest.approx(0.5)
    assert math.isnan(bootstrap_ratio([0, 0], [0, 0]).value)


def test_paired_test_detects_a_real_difference_and_not_a_null_one() -> None:
    rng = np.random.default_rng(42)
    base = rng.uniform(0.5, 0.9, 60)  # instruction difficulty, shared by both systems
    better = base + 0.05 + rng.normal(0, 0.03, 60)
    same = base + rng.normal(0, 0.03, 60)
    real = paired_test(better, base, seed=7)
    assert real.p_value < 0.01 and real.significant()
    assert real.low > 0 and real.diff == pytest.approx(float(np.mean(better - base)))
    null = paired_test(same, base, seed=7)
    assert null.p_value > 0.05 and not null.significant()
    assert null.low < 0 < null.high
    # Far beyond every resample, the p-value goes below the Monte Carlo floor 1/(B+1), so a
    # family of 144 such tests still survives a Holm correction.
    assert real.p_value < 1e-4
    # The pairing matters: unpaired, the shared difficulty swamps a 0.05 difference.
    assert unpaired_test(better, base, seed=7).p_value > real.p_value


def test_unpaired_test() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.8, 0.1, 50), rng.normal(0.6, 0.1, 40)
    t = unpaired_test(a, b, seed=0, n_resamples=500)
    assert t.p_value < 0.01 and t.low > 0
    assert unpaired_test(rng.normal(0, 1, 30), rng.normal(0, 1, 30), seed=0, n_resamples=500).p_value > 0.05


def test_paired_test_guards() -> None:
    with pytest.raises(ValueError):
        paired_test([1, 2], [1])
    assert math.isnan(paired_test([], []).p_value)
    t = paired_test([0.5, math.nan, 0.7], [0.4, 0.1, math.nan])
    assert t.n == 1 and t.diff == pytest.approx(0.1)


def test_kappa_known_values() -> None:
    # Perfect agreement with both labels used: 1. Two judges opposed on every item: -1.
    assert cohen_kappa([1, 0, 1, 0], [1, 0, 1, 0]).kappa == pytest.approx(1.0)
    opposed = cohen_kappa([1, 0, 1, 0], [0, 1, 0, 1])
    assert opposed.kappa == pytest.approx(-1.0) and opposed.percent == 0.0
    # Textbook table: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no. p_o = 0.7;
    # p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = 0.4.
    assert kappa_from_counts([[20, 5], [10, 15]]).kappa == pytest.approx(0.4)
    # One label everywhere: chance agreement 1, kappa undefined; percent agreement still 1.
    same = cohen_kappa([1, 1, 1], [1, 1, 1])
    assert math.isnan(same.kappa) and same.percent == 1.0
    # Three labels (annotators).
    three = cohen_kappa(["s", "i", "a", "s"], ["s", "i", "s", "i"])
    assert three.n == 4 and three.percent == 0.5


def test_precision_recall() -> None:
    pr = precision_recall([True, True, False, False, True], [True, False, True, False, True])
    assert (pr.tp, pr.fp, pr.fn, pr.tn) == (2, 1, 1, 1)
    assert pr.precision == pytest.approx(2 / 3) and pr.recall == pytest.approx(2 / 3) and pr.n == 5
    empty = precision_recall([], [])
    assert math.isnan(empty.precision) and math.isnan(empty.f1)


def test_bootstrap_is_fast_at_scale() -> None:
    values = np.random.default_rng(0).random(10_000)
    start = time.perf_counter()
    iv = bootstrap_mean(values, n_resamples=1000)
    paired_test(values, values[::-1], n_resamples=1000)
    assert time.perf_counter() - start < 10  # vectorized: about a second on a busy 2-core machine
    assert iv.high - iv.low < 0.02


def test_holm() -> None:
    from pipeline.analysis.stats import holm

    # Sorted 0.01, 0.02, 0.04 times 3, 2, 1 -> 0.03, 0.04, 0.04 (monotone), NaN kept.
    assert holm([0.04, 0.01, float("nan"), 0.02]) == pytest.approx([0.04, 0.03, float("nan"),
                                                                    0.04], nan_ok=True)
    assert holm([0.9, 0.8]) == [1.0, 1.0]
    assert holm([]) == []


def _same(x, y) -> bool:
    """Equal up to float rounding: cached draws sum by a matrix product, fresh ones by gathering."""
    dx, dy = asdict(x), asdict(y)
    return dx.keys() == dy.keys() and all(
        (math.isnan(dx[k]) and math.isnan(dy[k]))
        or dx[k] == pytest.approx(dy[k], rel=1e-12, abs=1e-15) for k in dx)


def test_reused_draws_give_the_numbers_of_fresh_draws() -> None:
    # An int seed reuses the draws a fresh generator makes for a sample size (pipeline.analysis.stats
    # _fresh_draws); a Generator seed always draws anew. Both must give the same results, also
    # when the cache is warm from an earlier call on other data of the same size.
    rng = np.random.default_rng(11)
    for n in (2, 37, 833):
        a = rng.integers(0, 40, n) / 39
        b = np.clip(a + rng.integers(-4, 3, n) / 39, 0, 1)
        num = rng.integers(0, 5, (n, 2)).astype(float)
        den = num + rng.integers(0, 9, (n, 2))
        for _ in range(2):  # cold, then warm
            assert _same(paired_test(a, b, seed=5), paired_test(a, b, seed=np.random.default_rng(5)))
            assert _same(bootstrap_mean(a, seed=5), bootstrap_mean(a, seed=np.random.default_rng(5)))
            assert _same(bootstrap_ratio(num, den, seed=5),
                         bootstrap_ratio(num, den, seed=np.random.default_rng(5)))
        assert paired_test(a, b, seed=5) != paired_test(a, b, seed=6) or n == 2
