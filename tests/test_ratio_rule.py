"""One rule decides the summary ratio every view shows (pipeline.core.definitions.view_ratio): on
random stores and random choices, the app's analysis, the app's screens (app.view_ratio), `report`,
`export --suspicious` and the suspicion ranking name the same ratio."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pipeline.analysis.suspicion import suspicion_queue
from pipeline.cli.export_cmd import _shown_ratio
from pipeline.core.definitions import DEFAULT_RATIO, next_ratio, ratio_key, same_ratio, view_ratio
from pipeline.outputs.report import ReportOptions, build_report
from pipeline.store.database import open_store
from pipeline.store.generations import summary_ratios
from pipeline.store.view import StoreView
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from unspecific_tui.data import compute_analysis

CHOICES = (None, 0.1, 0.25, 0.3, 0.5, 0.9, 0.25000000001)


@pytest.mark.parametrize("seed", range(6))
def test_every_view_names_the_same_ratio(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    ratios = tuple(sorted(rng.sample((0.1, 0.25, 0.5, 0.75), rng.randint(1, 3)), reverse=True))
    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=4, n_constraints=4, ratios=ratios, seed=seed,
                                              domains=("news",)))
    store = open_store(path)
    view = StoreView.open(path)
    try:
        stored = summary_ratios(store)
        assert [round(r, 9) for r in stored] == [round(r, 9) for r in ratios]
        for asked in CHOICES:
            expected = view_ratio(stored, asked)
            assert any(same_ratio(expected, r) for r in stored)  # always a ratio the store holds
            analysis = compute_analysis(view, ratio=asked)
            assert same_ratio(analysis.ratio, expected) and analysis.ratios == stored
            report = build_report(store, ReportOptions(ratio=DEFAULT_RATIO if asked is None else asked, n_resamples=20,
                                                       copy=False))
            assert report.ratio is not None and same_ratio(report.ratio, expected), asked
            if asked is None or any(same_ratio(asked, r) for r in stored):  # export refuses an unstored --ratio
                exported = _shown_ratio(store, None, asked)
                assert exported is not None and same_ratio(exported, expected)
            queue = suspicion_queue(store, ratio=asked, limit=5)
            assert all(same_ratio(e.ratio, expected) for e in queue)
    finally:
        view.close()
        store.close()


def test_no_summaries_means_the_default_and_r_cycles_by_tolerance() -> None:
    assert view_ratio([], None) == DEFAULT_RATIO and view_ratio([], 0.5) == DEFAULT_RATIO
    assert next_ratio([0.5, 0.25, 0.1], 0.25000000001) == 0.1  # a ratio read back, not the same float
    assert next_ratio([0.5, 0.25, 0.1], 0.1) == 0.5 and next_ratio([0.5, 0.25], 0.3) == 0.5
    # The metrics group by the same tolerance the views compare with.
    assert ratio_key(0.25000000001) == ratio_key(0.25) and ratio_key(0.2500001) != ratio_key(0.25)
    assert same_ratio(0.25000000001, 0.25) and not same_ratio(0.2500001, 0.25)
