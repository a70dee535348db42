"""One rule for the summary ratio a person sees (issue 36, item 1): the app, `report`, the HTML report
and `export --suspicious` show the same ratio, and an asked-for ratio with no summaries is refused
before any work (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.core.definitions import DEFAULT_RATIO, shown_ratio, unknown_ratio
from pipeline.store.database import open_store
from pipeline.store.view import StoreView
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from unspecific_tui.data import compute_analysis


def test_the_rule_prefers_the_asked_ratio_then_the_nearest_then_the_larger() -> None:
    assert shown_ratio([0.5, 0.1]) == 0.1  # nearest to DEFAULT_RATIO (0.25), not the largest
    assert shown_ratio([0.5, 0.25, 0.1]) == DEFAULT_RATIO
    assert shown_ratio([0.5, 0.1], 0.5) == 0.5
    assert shown_ratio([0.5, 0.1],
                       0.45) == 0.5  # the app's asked ratio, when not stored, moves to the nearest
    assert shown_ratio([0.2, 0.3]) == 0.3  # a tie: the gentler summary
    assert shown_ratio([]) is None
    assert unknown_ratio(0.1 + 1e-12, [0.1]) is None
    assert unknown_ratio(0.3, [0.5, 0.1], "s.sqlite") == (
        "--ratio 0.3: no summaries at that ratio in s.sqlite (summaries here are at 0.5, 0.1)")


@pytest.fixture(scope="module")
def two_ratio_store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ratios") / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=4, n_constraints=6, ratios=(0.5, 0.1)))
    return path


def test_the_app_and_the_report_show_the_same_ratio(two_ratio_store: Path) -> None:
    from pipeline.outputs.report import ReportOptions, build_report

    view = StoreView.open(two_ratio_store)
    try:
        app_ratio = compute_analysis(view).ratio
    finally:
        view.close()
    store = open_store(two_ratio_store, readonly=True)
    try:
        report = build_report(store, ReportOptions(copy=False, n_resamples=10))
    finally:
        store.close()
    assert app_ratio == report.ratio == 0.1


def test_export_writes_the_ranking_at_that_ratio(two_ratio_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "suspects.jsonl"
    assert main(["--store", str(two_ratio_store), "export", "--suspicious", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and {r["ratio"] for r in rows} == {0.1}


@pytest.mark.parametrize("command", [["report", "--no-copy"], ["export", "--suspicious", "--out", "-"]])
def test_a_ratio_with_no_summaries_is_refused_before_any_work(two_ratio_store: Path,
                                                              command: list[str], capsys,
                                                             monkeypatch) -> None:
    import pipeline.outputs.report as report
    import pipeline.outputs.suspicion as suspicion

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("the ratio was checked after the work")

    monkeypatch.setattr(report, "build_report", no_work)
    monkeypatch.setattr(suspicion, "suspicion_rows", no_work)
    assert main(["--store", str(two_ratio_store), *command, "--ratio", "0.25"]) == 2
    err = capsys.readouterr().err
    assert "--ratio 0.25: no summaries at that ratio" in err and "summaries here are at 0.5, 0.1" in err
