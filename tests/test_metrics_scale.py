"""compute_metrics on a large store reads verdicts in parts on parallel connections: the same
numbers, rows and order as the single-connection path."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pipeline import metrics
from pipeline.metrics import Filters, compute_metrics
from pipeline.store import open_store
from pipeline.synthetic import SyntheticSpec, build_synthetic_store


def _plain(m: metrics.Metrics) -> tuple:
    def clean(d: dict) -> dict:
        return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}

    return (m.raters, [clean(r.as_dict()) for r in m.rows], [clean(g.as_dict()) for g in m.groups],
            [clean(a.as_dict()) for a in m.agreement], m.ratios)


@pytest.fixture
def store(tmp_path: Path):
    build_synthetic_store(tmp_path / "s.sqlite", SyntheticSpec(n_instructions=24, ratios=(0.5, 0.25), n_constraints=12))
    s = open_store(tmp_path / "s.sqlite")
    # A third rater only on responses with an odd id: one part has it, the other does not, so
    # the merge must put its counts in the right column.
    s.conn.execute(
        "INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, prompt_hash, verdict)"
        " SELECT v.generation_id, v.constraint_id, 'judge-0', 'per_constraint', 'p', 1 - v.verdict"
        " FROM verdicts v JOIN generations g ON g.id = v.generation_id"
        " WHERE v.judge = 'judge-a' AND g.kind = 'response' AND g.id % 2 = 1")
    s.commit()
    yield s
    s.close()


@pytest.mark.parametrize("filters", [Filters(), Filters(models=("model-b",)), Filters(judges=("judge-a", "judge-0"))])
def test_parts_give_the_single_connection_numbers(store, monkeypatch, filters: Filters) -> None:
    monkeypatch.setattr(metrics, "_PARTS", 1)
    assert metrics._parallel_path(store) is None
    single = compute_metrics(store, filters, n_resamples=50, seed=3)
    monkeypatch.setattr(metrics, "_PARTS", 2)
    monkeypatch.setattr(metrics, "_PARALLEL_MIN_TEXTS", 0)
    assert metrics._parallel_path(store) is not None
    parts = compute_metrics(store, filters, n_resamples=50, seed=3)
    assert single.rows and ("judge-0" in single.raters or filters.models)
    assert _plain(parts) == _plain(single)
    ids = [r.response_id for r in parts.rows]
    assert ids == sorted(ids)


def test_uncommitted_writes_keep_one_connection(store, monkeypatch) -> None:
    monkeypatch.setattr(metrics, "_PARALLEL_MIN_TEXTS", 0)
    store.conn.execute("UPDATE verdicts SET verdict = 1 - verdict WHERE judge = 'judge-b'")
    assert store.conn.in_transaction
    # Other connections would not see the change: this one computes alone, and sees it.
    assert metrics._parallel_path(store) is None
    changed = compute_metrics(store, n_resamples=10)
    store.conn.rollback()
    assert _plain(changed) != _plain(compute_metrics(store, n_resamples=10))
