"""Org, Core and superficial corrected for each judge's measured error (issue 27, items 2-4):
scripted judges of known sensitivity and specificity on synthetic benchmarks, no LLM."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from pipeline.analysis.correction import (
    JudgeStatus,
    UnitRates,
    correct_rates,
    corrected_joint,
    corrected_metrics,
    judge_statuses,
    lost_share,
    rogan_gladen,
)
from pipeline.analysis.judge_validation import draw_judge_plan, load_judge_plan, save_judge_plan
from pipeline.analysis.metrics import compute_metrics
from pipeline.outputs.report import ReportOptions, build_report, render, write_tables
from pipeline.store.database import Store, open_store
from pipeline.store.judge_checks import CheckItem, JudgeCheck, put_check_items
from pipeline.store.validation import save_text_label
from tests.support.judge_checks import known_check


def _benchmark(rng: np.random.Generator, sens: float, spec: float, *, units: int = 60, constraints: int = 20,
               true_org: float = 0.5, keep: float = 0.6) -> tuple[UnitRates, dict[str, float]]:
    """Units of ``constraints`` items: true satisfaction on the response with ``true_org``, kept on the
    summary with ``keep``; one judge's verdicts on both with the given error rates."""
    full = rng.random((units, constraints)) < true_org
    summary = full & (rng.random((units, constraints)) < keep)

    def judged(truth: np.ndarray) -> np.ndarray:
        return np.where(truth, rng.random(truth.shape) < sens, rng.random(truth.shape) >= spec)

    yf, ys = judged(full), judged(summary)
    table = np.stack([np.stack([(~yf & ~ys).sum(1), (~yf & ys).sum(1)], -1),
                      np.stack([(yf & ~ys).sum(1), (yf & ys).sum(1)], -1)], -2).astype(float)
    rates = UnitRates(org=yf.mean(1)[:, None], core=ys.mean(1)[:, None], joint=table[:, None])
    raw = {"org": float(yf.mean()), "core": float(ys.mean()),
           "superficial": float((yf & ~ys).sum() / yf.sum())}
    return rates, raw


def test_rogan_gladen_recovers_a_known_rate() -> None:
    # true 0.5, sens 0.9, spec 0.7: observed 0.5 * 0.9 + 0.5 * 0.3 = 0.6
    assert rogan_gladen(0.6, 0.9, 0.7) == pytest.approx(0.5)
    assert rogan_gladen(0.1, 0.9, 0.7) == 0.0  # below the false-positive floor: clipped
    assert rogan_gladen(0.99, 0.9, 0.7) == 1.0
    assert math.isnan(rogan_gladen(0.6, 0.5, 0.5))  # chance: no information
    assert math.isnan(rogan_gladen(0.6, 0.4, 0.5))


def test_the_joint_correction_inverts_a_known_table() -> None:
    true = np.array([[0.4, 0.0], [0.24, 0.36]])  # superficial 0.24 / 0.6 = 0.4
    sens, spec = 0.9, 0.7
    a = np.array([[spec, 1 - sens], [1 - spec, sens]])
    observed = a @ true @ a.T
    assert lost_share(corrected_joint(observed, np.array(sens), np.array(spec))) == pytest.approx(0.4)
    assert lost_share(observed) != pytest.approx(0.4)


def test_a_lenient_judge_inflates_org_and_the_correction_takes_it_back() -> None:
    rng = np.random.default_rng(7)
    check = known_check(rng, 0.9, 0.7, n=1000)
    rates, raw = _benchmark(rng, 0.9, 0.7, units=200)
    assert raw["org"] == pytest.approx(0.6, abs=0.03)
    fixed = correct_rates(rates, [check], n_resamples=300)
    assert fixed.org.value == pytest.approx(0.5, abs=0.04)
    assert fixed.org.contains(0.5) and not fixed.org.contains(raw["org"])
    assert fixed.core.value == pytest.approx(0.3, abs=0.05)  # 0.5 * 0.6 kept
    assert fixed.core.contains(0.3)
    assert fixed.superficial.value == pytest.approx(0.4, abs=0.06)
    assert fixed.superficial.contains(0.4)


def test_each_judge_is_corrected_by_its_own_check_before_the_average() -> None:
    rng = np.random.default_rng(3)
    lenient, strict = known_check(rng, 0.95, 0.6, n=2000, judge="a"), known_check(rng, 0.7, 0.9,
                                                                                  n=2000, judge="b")
    ra, _ = _benchmark(rng, 0.95, 0.6, units=200)
    rb, _ = _benchmark(rng, 0.7, 0.9, units=200)
    both = UnitRates(np.hstack([ra.org, rb.org]), np.hstack([ra.core, rb.core]),
                     np.concatenate([ra.joint, rb.joint], 1))
    fixed = correct_rates(both, [lenient, strict], n_resamples=200)
    assert fixed.org.value == pytest.approx(0.5, abs=0.04)
    assert fixed.org.contains(0.5)
    assert fixed.superficial.contains(0.4)
    swapped = correct_rates(both, [strict, lenient], n_resamples=50)  # each judge by the other's rates
    assert not swapped.superficial.contains(0.4)


def test_a_chance_level_judge_gets_no_number_and_a_warning() -> None:
    rng = np.random.default_rng(1)
    check = known_check(rng, 0.5, 0.5, n=2000)
    # Guarantee the measured rates sum to at most 1, whatever the draw.
    check = JudgeCheck(check.judge, check.source, tp=50, fn=50, tn=40, fp=60, items=())
    rates, _ = _benchmark(rng, 0.5, 0.5)
    assert math.isnan(correct_rates(rates, [check], n_resamples=50).org.value)
    status = JudgeStatus("j", check)
    assert status.validated and not status.informative
    assert "carry no information" in status.line()


def test_an_unvalidated_judge_names_the_command_that_validates_it() -> None:
    line = JudgeStatus("j", None).line()
    assert "unvalidated" in line and "unspecific validate judges --builtin" in line


def test_the_interval_covers_the_true_rate_about_95_percent_of_the_time() -> None:
    truth = {"org": 0.5, "core": 0.3, "superficial": 0.4}
    covered = dict.fromkeys(truth, 0)
    seeds = 200
    for seed in range(seeds):
        rng = np.random.default_rng(1000 + seed)
        check = known_check(rng, 0.9, 0.7, n=200)
        rates, _ = _benchmark(rng, 0.9, 0.7, units=40, constraints=10)
        fixed = correct_rates(rates, [check], n_resamples=200, seed=seed)
        for name, value in truth.items():
            covered[name] += getattr(fixed, name).contains(value)
    # Binomial sd at 95% over 200 seeds is 1.5 points: 88-99% is the band a sound interval lands in.
    # (Resampling the benchmark alone, without the check's items, covers Org 85% of the time here.)
    assert all(0.88 <= n / seeds <= 0.99 for n in covered.values()), covered


# -- through the store: a scripted judge on a synthetic benchmark ------------------------------------


@pytest.fixture
def store_of(scripted: tuple[Path, dict[str, float]], tmp_path: Path) -> Store:
    path = tmp_path / "store.sqlite"
    path.write_bytes(scripted[0].read_bytes())
    s = open_store(path)
    yield s
    s.close()


def _put_check(store: Store, judge: str, sens: float, spec: float, n: int = 600, seed: int = 2) -> None:
    rng = np.random.default_rng(seed)
    put_check_items(store, judge, "builtin", known_check(rng, sens, spec, n, judge).items)


def test_a_scripted_judge_on_the_store_is_corrected_to_the_truth(store_of: Store, scripted) -> None:
    _, truth = scripted
    _put_check(store_of, "judge-a", 0.9, 0.7, n=3000)  # a large check: the interval is the benchmark's
    metrics = compute_metrics(store_of, n_resamples=200)
    fixed = corrected_metrics(store_of, metrics, n_resamples=300)
    org_group = next(g for g in metrics.groups if g.ratio is None)
    assert org_group.org.value == pytest.approx(0.5 * 0.9 + 0.5 * 0.3, abs=0.04)  # raw: inflated
    corrected = fixed.group(org_group.key)
    assert (corrected is not None and corrected.rates is not None
            and corrected.validation == "judge-a: builtin")
    assert corrected.rates.org.value == pytest.approx(truth["org"], abs=0.04)
    assert (corrected.rates.org.contains(truth["org"])
            and not corrected.rates.org.contains(org_group.org.value))
    at_ratio = fixed.group(next(g for g in metrics.groups if g.ratio is not None).key)
    assert at_ratio is not None and at_ratio.rates is not None
    assert at_ratio.rates.core.contains(truth["core"])


def test_people_are_preferred_over_the_built_in_check(store_of: Store) -> None:
    _put_check(store_of, "judge-a", 0.5, 0.5)  # a built-in check saying chance...
    save_judge_plan(store_of, draw_judge_plan(store_of, per_stratum=40, seed=1))
    plan = load_judge_plan(store_of)
    verdicts = dict(((c, g), y) for c, g, y in store_of.conn.execute(
        "SELECT constraint_id, generation_id, verdict FROM verdicts"))
    for i in plan.items:  # ...and people who agree with the judge: people win
        save_text_label(store_of, i.constraint_id, i.generation_id, "p",
                        verdicts[(i.constraint_id, i.generation_id)])
    (status,) = judge_statuses(store_of, ["judge-a"])
    assert status.check is not None and status.check.source == "people" and status.informative
    assert status.check.sensitivity == status.check.specificity == 1.0


def test_the_report_shows_raw_and_corrected_side_by_side(store_of: Store, tmp_path: Path) -> None:
    _put_check(store_of, "judge-a", 0.9, 0.7)
    report = build_report(store_of, ReportOptions(n_resamples=100, copy=False))
    console = Console(width=220, record=True)
    render(report, console)
    text = " ".join(console.export_text().split())  # a caption wraps
    assert ("Org corr." in text and "superficial corr." in text
            and "validation used: judge-a: built-in check" in text)
    assert "constructed, not drawn from these texts" in text
    write_tables(report, tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert all(row["corrected_by"] == "judge-a: builtin" and row["org_corrected"] is not None
               for row in summary)
    (judge,) = json.loads((tmp_path / "report.json").read_text())["judge_error"]
    assert judge["validation"] == "builtin" and judge["informative"]
    with (tmp_path / "summary.csv").open() as fh:
        assert "org_corrected" in next(csv.reader(fh))


def test_the_report_marks_an_unvalidated_judge_with_the_command(store_of: Store, tmp_path: Path) -> None:
    report = build_report(store_of, ReportOptions(n_resamples=50, copy=False))
    console = Console(width=220, record=True)
    render(report, console)
    text = " ".join(console.export_text().split())  # a caption wraps
    assert "corr." not in text.split("Judges")[0]  # no corrected column
    assert "unvalidated: judge-a (`unspecific validate judges --builtin`)" in text
    write_tables(report, tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert all(row["uncorrected_reason"].startswith("unvalidated: judge-a") and row["org_corrected"] is None
               for row in summary)


def test_the_report_warns_about_a_chance_level_judge(store_of: Store) -> None:
    put_check_items(store_of, "judge-a", "builtin",
                    [CheckItem("news", f"p{i}", 1, int(i < 5)) for i in range(10)]
                    + [CheckItem("news", f"n{i}", 0, int(i < 6)) for i in range(10)])  # sens 0.5, spec 0.4
    report = build_report(store_of, ReportOptions(n_resamples=50, copy=False))
    (warning,) = [w for w in report.warnings if w.kind == "judge_at_chance"]
    assert "carry no information" in warning.message
    assert all(g.rates is None and "no better than chance" in g.reason
               for g in report.correction.groups.values())
