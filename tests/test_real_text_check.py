"""The real-text check (issue 61): a sample of the store's own verdicts drawn by text kind x model x the
judge's verdict, labelled by people, corrects the judge's rates with the strata's weights; the report
says which check corrected, names a constructed one, and says when the two disagree."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from rich.console import Console

from pipeline.analysis.correction import CONSTRUCTED, corrected_metrics, judge_statuses, rogan_gladen
from pipeline.analysis.judge_validation import (
    draw_judge_plan,
    items_for_width,
    load_judge_plan,
    save_judge_plan,
)
from pipeline.analysis.metrics import compute_metrics
from pipeline.cli import main
from pipeline.outputs.html_tables import judges_html
from pipeline.outputs.report import ReportOptions, build_report, render
from pipeline.store.database import Store, open_store
from pipeline.store.judge_checks import put_check_items
from pipeline.store.validation import save_text_label
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.judge_checks import known_check
from unspecific_tui.screens.report import judge_lines, judges_summary

JUDGE = ("judge-a", "batched")


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[tuple[int, int], int], dict]:
    """Two models, the stored verdicts taken as the truth, then replaced by a strict scripted judge
    (sensitivity 0.6, specificity 0.95): its Yes are few, so a draw of as many of its Yes as of its No
    over-represents them, and only the strata's weights give its error back. Returns the store, the
    truth per (constraint, text), and the true and raw Org."""
    path = tmp_path_factory.mktemp("real_text") / "store.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=60, domains=("news",), conditions=("single",),
                                              models=("model-a", "model-b"), judges=("judge-a",),
                                              model_skill={"model-a": (0.3, 0.5), "model-b": (0.45, 0.5)},
                                              seed=9))
    store = open_store(path)
    rng = np.random.default_rng(4)
    rows = store.conn.execute("SELECT v.id, v.constraint_id, v.generation_id, v.verdict, g.kind"
                              " FROM verdicts v JOIN generations g ON g.id = v.generation_id"
                              " WHERE v.verdict IS NOT NULL").fetchall()
    truth = {(c, g): int(t) for _, c, g, t, _ in rows}
    t = np.array([r[3] for r in rows])
    judged = np.where(t == 1, rng.random(len(rows)) < 0.6, rng.random(len(rows)) >= 0.95)
    with store.conn:
        store.conn.executemany("UPDATE verdicts SET verdict = ? WHERE id = ?",
                               [(int(v), r[0]) for v, r in zip(judged, rows)])
    kinds = np.array([r[4] for r in rows])
    truths = {"org": float(t[kinds == "response"].mean()), "core": float(t[kinds == "summary"].mean()),
              "raw_org": float(judged[kinds == "response"].mean())}
    store.close()
    return path, truth, truths


@pytest.fixture
def store(strict, tmp_path: Path) -> Store:
    path = tmp_path / "store.sqlite"
    path.write_bytes(strict[0].read_bytes())
    s = open_store(path)
    yield s
    s.close()


def _label_plan(store: Store, truth: dict[tuple[int, int], int], per_stratum: int = 60) -> None:
    save_judge_plan(store, draw_judge_plan(store, per_stratum=per_stratum, seed=1, judge=JUDGE))
    for i in load_judge_plan(store).items:
        key = (i.constraint_id, i.generation_id)
        save_text_label(store, *key, "p", truth[key])


def test_the_draw_is_stratified_by_kind_model_and_verdict_with_its_populations(store: Store) -> None:
    plan = draw_judge_plan(store, per_stratum=30, seed=3, judge=JUDGE)
    assert set(plan.strata) == {f"{k}|{m}|{v}" for k in ("response", "summary")
                                for m in ("model-a", "model-b") for v in ("yes", "no")}
    verdicts = dict(((c, g), v) for c, g, v in store.conn.execute(
        "SELECT constraint_id, generation_id, verdict FROM verdicts"))
    populations: dict[str, int] = {}
    for (c, g), v in verdicts.items():
        kind, model = store.conn.execute(
            "SELECT g.kind, coalesce(p.model, g.model) FROM generations g LEFT JOIN generations p"
            " ON p.id = g.parent_id WHERE g.id = ?", (g,)).fetchone()
        key = f"{kind}|{model}|{'yes' if v else 'no'}"
        populations[key] = populations.get(key, 0) + 1
    assert {k: pop for k, (pop, _) in plan.strata.items()} == populations
    assert all(drawn == 30 for _, drawn in plan.strata.values())
    for i in plan.items:  # each item sits in the stratum of its own verdict
        assert plan.item_strata[(i.constraint_id, i.generation_id)].endswith(
            "|yes" if verdicts[(i.constraint_id, i.generation_id)] else "|no")
    save_judge_plan(store, plan)
    again = load_judge_plan(store)
    assert again.item_strata == plan.item_strata and again.judge == "judge-a [batched]" and again.weighted


def test_the_weighted_correction_recovers_the_true_rates_the_unweighted_one_misses(store: Store,
                                                                                    strict) -> None:
    _, truth, truths = strict
    assert truths["raw_org"] < truths["org"] - 0.08  # the strict judge: its Yes rate below the truth
    _label_plan(store, truth)
    (status,) = judge_statuses(store, ["judge-a"])
    check = status.check
    assert check is not None and check.source == "people" and check.populations
    metrics = compute_metrics(store, n_resamples=100)
    fixed = corrected_metrics(store, metrics, n_resamples=200)
    org_group = next(g for g in metrics.groups if g.ratio is None and g.model == "model-a")
    corrected = fixed.group(org_group.key)
    true_a = _true_org(store, truth, "model-a")
    assert corrected.rates.org.contains(true_a) and not corrected.rates.org.contains(org_group.org.value)
    assert corrected.rates.org.value == pytest.approx(true_a, abs=0.05)
    assert check.sensitivity == pytest.approx(0.6, abs=0.08)
    assert check.specificity == pytest.approx(0.95, abs=0.03)
    # Unweighted, the same labels over-represent the judge's rare Yes: its error reads all wrong, and the
    # rate corrected by it misses the truth.
    plain = replace(check, populations=None)
    assert plain.sensitivity > 0.8 and plain.specificity < 0.9
    raw = org_group.org.value
    assert abs(rogan_gladen(raw, plain.sensitivity, plain.specificity) - true_a) > 0.1


def _true_org(store: Store, truth: dict[tuple[int, int], int], model: str) -> float:
    rows = store.conn.execute("SELECT DISTINCT v.constraint_id, v.generation_id FROM verdicts v"
                              " JOIN generations g ON g.id = v.generation_id"
                              " WHERE g.kind = 'response' AND g.model = ?",
                              (model,)).fetchall()
    return float(np.mean([truth[(c, g)] for c, g in rows]))


def test_the_report_uses_the_real_text_check_and_names_a_constructed_one(store: Store, strict) -> None:
    _, truth, _ = strict
    rng = np.random.default_rng(2)
    put_check_items(store, "judge-a", "builtin", known_check(rng, 0.6, 0.95, n=600, judge="judge-a").items)
    report = build_report(store, ReportOptions(n_resamples=50, copy=False))
    text = _rendered(report)
    assert f"built-in check ({CONSTRUCTED})" in text and "label a real-text check" in text
    _label_plan(store, truth)
    report = build_report(store, ReportOptions(n_resamples=50, copy=False))
    text = _rendered(report)
    assert "validation used: judge-a: real-text check" in text and CONSTRUCTED not in text.split("Judges'")[0]
    assert report.correction.judges[0].check.source == "people"


def test_a_disagreement_between_the_checks_is_said_real_text_first(store: Store, strict) -> None:
    _, truth, _ = strict
    rng = np.random.default_rng(2)
    put_check_items(store, "judge-a", "builtin", known_check(rng, 0.6, 0.95, n=600, judge="judge-a").items)
    _label_plan(store, truth)
    (agrees,) = judge_statuses(store, ["judge-a"])
    assert agrees.constructed is not None and agrees.disagreement == ""
    put_check_items(store, "judge-a", "builtin", known_check(rng, 0.95, 0.6, n=600, judge="judge-a").items)
    (differs,) = judge_statuses(store, ["judge-a"])
    sentence = differs.disagreement
    assert sentence.startswith("judge-a on these texts: sensitivity")
    assert "sensitivity and specificity differ beyond" in sentence
    assert sentence.index("real-text check") < sentence.index("built-in check")
    report = build_report(store, ReportOptions(n_resamples=50, copy=False))
    assert sentence in _rendered(report)
    assert any(w.kind == "judge_checks_disagree" for w in report.warnings)
    assert sentence in judges_html(report)
    analysis = SimpleNamespace(correction=report.correction)  # the app's Report screen
    assert sentence in judge_lines(analysis) and sentence in judges_summary(analysis).plain


def _rendered(report) -> str:
    console = Console(width=240, record=True)
    render(report, console)
    return " ".join(console.export_text().split())


def test_the_plan_cli_draws_by_verdict_and_says_what_labelling_buys(
        store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", str(store.path), "validate", "judge-plan", "--within", "0.1"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # as the words read, whatever the console's width
    assert "real-text check of judge-a [batched]" in out and "summary|model-b|yes" in out
    assert items_for_width(0.1) == 97 and "+-10 points" in out
    plan = load_judge_plan(store)
    assert plan.weighted and all(d == min(97, p) for p, d in plan.strata.values())
    assert main(["--store", str(store.path), "validate", "judge-plan", "--judge", "nobody",
                 "--replace"]) == 2


def test_the_embedded_judge_without_a_real_text_check_shows_its_shipped_standing(tmp_path: Path) -> None:
    from pipeline.analysis.judge_real import shipped_figures

    path = tmp_path / "store.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=6, domains=("news",), conditions=("single",),
                                              models=("model-a",), judges=("local",), seed=3))
    store = open_store(path)
    rng = np.random.default_rng(1)
    put_check_items(store, "local", "builtin", known_check(rng, 0.9, 0.8, n=200, judge="local").items)
    held = shipped_figures()["held_out"]["all"]
    text = _rendered(build_report(store, ReportOptions(n_resamples=30, copy=False)))
    assert f"local on real demo text ({held['n']} held-out items" in text
    assert f"κ {held['kappa']:.2f}" in text and "validate judge-plan --within 0.15" in text
    assert "43 items a stratum" in text and "about 172 here" in text  # one model: 2 kinds x 2 verdicts
    save_judge_plan(store, draw_judge_plan(store, per_stratum=20, seed=1, judge=("local", "batched")))
    for i in load_judge_plan(store).items:
        save_text_label(store, i.constraint_id, i.generation_id, "p", 1)
    text = _rendered(build_report(store, ReportOptions(n_resamples=30, copy=False)))
    assert "on real demo text" not in text  # its own real-text check now speaks for it
    store.close()


def test_the_shipped_real_text_set_reads_back_and_scores() -> None:
    from pipeline.analysis.judge_real import figures, shipped_figures, shipped_items

    items = shipped_items()
    assert {i.split for i in items} == {"dev", "held_out"} and all(i.label in (0, 1) for i in items)
    # No instruction is in both splits: the judge is tuned on dev, measured on held_out.
    assert not ({i.instruction_id for i in items if i.split == "dev"}
                & {i.instruction_id for i in items if i.split == "held_out"})
    held = [i for i in items if i.split == "held_out"]
    assert shipped_figures()["held_out"]["all"]["n"] == len(held)
    perfect = figures(held, {i.id: bool(i.label) for i in held})
    assert perfect.kappa == 1.0 and perfect.precision == 1.0 and perfect.yes_rate == perfect.label_rate
