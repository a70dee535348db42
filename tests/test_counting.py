"""Each pair and condition counts once in the report, whatever the runs that built it."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.analysis.metrics import compute_metrics, runs_covered
from pipeline.outputs.report import ReportOptions, build_report, render
from pipeline.store.database import Store, open_store


def _store(path, runs: int, n_pairs: int = 12, seed: int = 0, models: tuple[str, ...] = ("m",)) -> Store:
    """``n_pairs`` pairs of references, each built by every one of ``runs`` runs (the same
    build repeated under another id), one judged response per instruction."""
    rng = np.random.default_rng(seed)
    store = open_store(path)
    c = store.conn
    h = store.put_text("text")
    iid = gid = 0
    skill = rng.random(n_pairs)  # a pair's difficulty, shared by its runs
    for run in range(runs):
        for pair in range(n_pairs):
            iid += 1
            c.execute("INSERT INTO instructions(id, run_id, domain, condition, article_a, "
                      "article_b, main_task, status)"
                      " VALUES (?, ?, 'news', 'eval', ?, ?, 'task', 'done')",
                      (iid, f"r{run}", 2 * pair + 1, 2 * pair + 2))
            for k in range(1, 11):
                c.execute("INSERT INTO constraints(id, instruction_id, position, text, active) "
                          "VALUES (?, ?, ?, 'c', 1)",
                          (iid * 100 + k, iid, k))
            for m, model in enumerate(models):
                gid += 1
                c.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, text_hash) VALUES"
                          " (?, 'response', ?, ?, 'direct', ?)", (gid, iid, model, h))
                for k in range(1, 11):
                    c.execute("INSERT INTO verdicts(generation_id, constraint_id, judge, "
                              "judging_mode, prompt_hash, verdict) VALUES (?, ?, 'J', 'batched', 'p', ?)",
                              (gid, iid * 100 + k, int(k <= 10 * skill[pair] - 2 * m)))
    store.commit()
    return store


def test_a_pair_built_by_two_runs_counts_once(tmp_path) -> None:
    once = _store(tmp_path / "once.sqlite", runs=1)
    twice = _store(tmp_path / "twice.sqlite", runs=2)
    g1 = compute_metrics(once, n_resamples=500).group("news", "eval", "m", "direct", None)
    g2 = compute_metrics(twice, n_resamples=500).group("news", "eval", "m", "direct", None)
    # n counts pairs, and the repeated pairs do not narrow the interval (before: n 12 -> 24,
    # and a narrower interval from the same evidence).
    assert (g1.n, g2.n) == (12, 12)
    assert g2.org.value == pytest.approx(g1.org.value)
    assert (g2.org.low, g2.org.high) == pytest.approx((g1.org.low, g1.org.high))
    assert runs_covered(compute_metrics(twice, n_resamples=10)) == ["r0", "r1"]
    once.close()
    twice.close()


def test_a_paired_comparison_counts_each_pair_once(tmp_path) -> None:
    from pipeline.analysis.metrics import compare

    once = _store(tmp_path / "once.sqlite", runs=1, models=("a", "b"))
    twice = _store(tmp_path / "twice.sqlite", runs=2, models=("a", "b"))
    (t1,) = compare(compute_metrics(once, n_resamples=200), "a", "b", ratio=None, n_resamples=500)
    (t2,) = compare(compute_metrics(twice, n_resamples=200), "a", "b", ratio=None, n_resamples=500)
    assert (t1.test.n, t2.test.n) == (12, 12)
    assert t2.test.diff == pytest.approx(t1.test.diff)
    once.close()
    twice.close()


def test_the_report_says_which_runs_it_covers(tmp_path) -> None:
    from rich.console import Console

    store = _store(tmp_path / "s.sqlite", runs=2, n_pairs=3)
    console = Console(record=True, width=160)
    render(build_report(store, ReportOptions(n_resamples=50, copy=False)), console)
    assert "runs: r0, r1" in console.export_text()
    store.close()
