"""One source of truth: on random small stores, every consumer of a constraint's outcome agrees.

The stores mix what made the consumers disagree before: two models answering in both modes
(direct and edit), two judges in two judging modes, re-judging (a newer verdict replaces the
older), a latest verdict with no Yes/No, replaced constraints that still hold verdicts,
summaries at two ratios, raters who judged a response but not its summary, and several runs.

The consumers: the per-text totals the app's Instructions screen and Annotate list read
(``text_items`` through ``compute_analysis``), pipeline.analysis.metrics' items (Annotate, the report's
human validation), the per-response items the Audit and Compare screens read
(unspecific_tui.data.item_outcomes on the store's read-only view), and, with one rater, the report's
per-response flipped count.
"""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from pipeline.analysis.metrics import Filters, compute_metrics, constraint_items
from pipeline.store.database import Store, open_store
from pipeline.store.view import StoreView, Writer
from tests.support.random_stores import RATIOS, _latest_by_hand, flipped_by_hand, random_store
from unspecific_tui.data import compute_analysis, item_outcomes


def _responses(conn: sqlite3.Connection) -> list[tuple[int, int, Writer]]:
    return [(r, i, Writer(m, mode)) for r, i, m, mode in conn.execute(
        "SELECT id, instruction_id, model, mode FROM generations WHERE kind = 'response' ORDER BY id")]


@pytest.mark.parametrize("seed", range(12))
def test_every_consumer_counts_the_same_flipped_items(tmp_path: Path, seed: int) -> None:
    store = random_store(tmp_path / "s.sqlite", seed)
    conn = store.conn
    responses = _responses(conn)
    assert len({w for _, _, w in responses}) >= 3  # both modes of a model, as in the issue
    for ratio in RATIOS:
        expected = flipped_by_hand(conn, ratio)
        # pipeline.analysis.metrics' items (Annotate's list, the report's human validation).
        items = constraint_items(store, ratio=ratio)
        assert {(i.constraint_id, i.response_id) for i in items if i.flipped} == expected
        # The Audit and Compare screens' per-response items, one response at a time.
        per_response = set()
        app_view = StoreView.open(store.path)  # as the app reads: read-only
        for response, iid, writer in responses:
            outcomes = item_outcomes(app_view, iid, writer, ratio)
            assert all(item.response_id == response for item in outcomes.values())  # never the other mode's
            per_response |= {(cid, response) for cid, item in outcomes.items() if item.flipped}
        app_view.close()
        assert per_response == expected
        # The Instructions screen's rows (the stored per-text totals), one per response.
        view = StoreView.open(store.path)
        try:
            analysis = compute_analysis(view, ratio=ratio)
        finally:
            view.close()
        assert analysis.ratio == ratio
        assert len(analysis.rows) == len(responses)
        counts = Counter(r for _, r in expected)
        assert {r.response_id: r.flipped for r in analysis.rows} == {r: counts.get(r, 0)
                                                                     for r, _, _ in responses}
        assert {r.response_id: r.writer for r in analysis.rows} == {r: w for r, _, w in responses}
    store.close()


@pytest.mark.parametrize("seed", range(4))
def test_with_one_rater_the_report_counts_the_same_flips(tmp_path: Path, seed: int) -> None:
    # With one rater the report's per-rater flipped count is the item count (with more, the
    # report's superficial share is per rater by design: docs/method.md, pipeline.analysis.metrics).
    store = random_store(tmp_path / "s.sqlite", 100 + seed, raters=(("J1", "batched"),))
    rows = {(r.response_id, r.ratio): r for r in compute_metrics(store, n_resamples=20).rows
            if r.ratio is not None}
    for ratio in RATIOS:
        flipped = Counter(i.response_id for i in constraint_items(store, ratio=ratio) if i.flipped)
        for (response, row_ratio), row in rows.items():
            if row_ratio == ratio:
                assert row.flipped == flipped.get(response, 0), (response, ratio)
    store.close()


def test_the_store_view_keys_responses_by_model_and_mode(tmp_path: Path) -> None:
    store = random_store(tmp_path / "s.sqlite", 3)
    responses = _responses(store.conn)
    store.close()
    view = StoreView.open(store.path)
    for response, iid, writer in responses:
        data = view.instruction(iid)
        assert data.responses[writer].id == response
        for ratio in data.ratios:
            summary = data.summary(writer, ratio)
            assert summary is None or summary.parent_id == response
    view.close()


def test_metrics_filter_by_instruction_and_mode(tmp_path: Path) -> None:
    store = random_store(tmp_path / "s.sqlite", 5)
    responses = _responses(store.conn)
    response, iid, writer = responses[-1]
    items = constraint_items(store,
                             Filters(instruction=iid, models=(writer.model,), mode=writer.mode), ratio=0.25)
    assert {i.response_id for i in items} <= {response}
    assert all((i.model, i.mode) == writer for i in items)
    store.close()


@pytest.mark.parametrize("seed", range(6))
def test_the_verdicts_screens_show_are_the_ones_that_count(tmp_path: Path, seed: int) -> None:
    # The latest-verdict rule, as SQL (LATEST_VERDICT: Audit's and Compare's verdict lists) and
    # in bulk (pivot: every count), picks the same verdict for every (text, constraint, rater).
    from pipeline.store.verdicts import latest_verdicts

    store = random_store(tmp_path / "s.sqlite", 200 + seed)
    expected = _latest_by_hand(store.conn)
    gids = [g for (g,) in store.conn.execute("SELECT id FROM generations")]
    active = {c for (c,) in store.conn.execute("SELECT id FROM constraints WHERE active = 1")}
    shown = {(v.generation_id, v.constraint_id, v.judge, v.judging_mode): v.verdict
             for v in latest_verdicts(store, gids) if v.constraint_id in active}
    assert shown == expected
    store.close()
    view = StoreView.open(store.path)
    for cid in sorted(active):
        by_view = Counter((v.generation_id, v.judge) for v in view.verdicts(cid))
        by_rule = Counter((g, j) for (g, c, j, _m) in expected if c == cid)
        assert by_view == by_rule  # one latest verdict per rater, none where the rater has no Yes/No
    view.close()


# -- human validation: one rule for `validate report`, the report and Annotate -------------------


def _label_everything(store: Store, keys: list[tuple[int, int]], seed: int) -> None:
    """alice and bob label every item, disagreeing on about a third; the adjudicator settles a few."""
    from pipeline.store.annotations import save_annotation

    rng = random.Random(seed)
    for k, (cid, rid) in enumerate(keys):
        alice = rng.choice(("superficial", "integrated", "superficial", "ambiguous"))
        bob = alice if rng.random() < 0.66 else rng.choice(("superficial", "integrated"))
        save_annotation(store, cid, rid, "alice", alice)
        save_annotation(store, cid, rid, "bob", bob)
        if alice != bob and k % 2:
            save_annotation(store, cid, rid, "adjudicator", bob)


def _numbers(v) -> tuple:  # noqa: ANN001 - a ValidationReport or its JSON
    if isinstance(v, dict):
        crit = {c["name"]: c["value"] for c in v["criteria"]}
        return (v["sample"]["tp"], v["sample"]["fp"], v["sample"]["fn"], v["sample"]["tn"],
                crit["precision of superficial"], crit["recall of superficial"])
    return v.tp, v.fp, v.fn, v.tn, v.precision.value, v.recall.value


def test_human_validation_is_one_number_in_report_validate_and_annotate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README once showed 92.9% (report, Annotate: unweighted, the adjudicator one more vote)
    against 76.2% (`validate report`: weighted by stratum, the adjudicator decides) on one sheet.
    Now all three read pipeline.analysis.validation's one rule."""
    import json

    from pipeline.analysis.validation import annotate_scores, human_validation, validation_report
    from pipeline.analysis.validation_plan import draw_plan, save_plan
    from pipeline.cli import main
    from pipeline.outputs.report import ReportOptions, build_report
    from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store

    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=8, seed=3))
    store = open_store(path)
    try:
        # With no plan first: every labelled item, in its stratum now; Annotate and the report agree.
        items = sorted((i.constraint_id, i.response_id) for i in constraint_items(store, ratio=0.25))
        _label_everything(store, items[::3], seed=1)
        planless = annotate_scores(store, ratio=0.25).by_annotator
        for who in ("alice", "bob"):
            assert _numbers(planless[who]) == _numbers(human_validation(store, annotator=who,
                                                                        n_resamples=200))
        # Then a plan: `validate report`, the report and Annotate all score the plan's items.
        plan = save_plan(store, draw_plan(store, per_domain=6, passed=6, seed=2))
        _label_everything(store, [(p.constraint_id, p.response_id) for p in plan.items], seed=4)
        validated = validation_report(store, n_resamples=100)
        reported = build_report(store, ReportOptions(n_resamples=100, copy=False)).validation
        assert reported is not None and reported.plan is not None and reported.plan.name == plan.name
        assert _numbers(reported) == _numbers(validated)
        assert (reported.ties, reported.ambiguous, reported.out_of_scope) == \
            (validated.ties, validated.ambiguous, validated.out_of_scope)
        assert reported.tp + reported.fn > 0 and reported.tp + reported.fp > 0  # precision and recall exist
        screen = annotate_scores(store).by_annotator
        for who in ("alice", "bob"):
            assert _numbers(screen[who]) == _numbers(validation_report(store, annotator=who, n_resamples=100))
    finally:
        store.close()
    assert main(["--store", str(path), "validate", "report", "--json"]) == 0
    assert _numbers(json.loads(capsys.readouterr().out)) == _numbers(validated)


# -- one definition each, checked on the source: a second copy is a test failure, not a review note --

SOURCES = sorted(p for d in ("pipeline", "unspecific_tui")
                 for p in (Path(__file__).parent.parent / d).rglob("*.py"))


def _definitions(pattern: str) -> list[str]:
    """``path:line name`` of every function or class whose name matches ``pattern``."""
    import ast
    import re

    root = Path(__file__).parent.parent
    return [f"{path.relative_to(root)}:{node.lineno} {node.name}" for path in SOURCES
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and re.fullmatch(pattern, node.name)]


def _lines_matching(pattern: str, *, allowed: set[str]) -> list[str]:
    """``path:line`` of code lines (not docstrings or comments) matching ``pattern``."""
    import re

    from tests.support.code import code_lines

    root = Path(__file__).parent.parent
    return [f"{p.relative_to(root)}:{i}" for p in SOURCES if p.relative_to(root).as_posix() not in allowed
            for i, line in code_lines(p) if re.search(pattern, line)]


def test_active_constraints_are_defined_once() -> None:
    assert [d.split(" ")[1] for d in _definitions(r"_?active_constraints(_of)?")] == \
        ["active_constraints", "active_constraints_of"]
    assert all("pipeline/store/constraints.py" in d for d in _definitions(r"_?active_constraints(_of)?"))
    # The rule itself (active = 1) is written in the store alone.
    outside = [hit for hit in _lines_matching(r"active\s*=\s*1", allowed=set())
               if not hit.startswith("pipeline/store/")]
    assert outside == []


def test_words_are_counted_once() -> None:
    counters = _definitions(r"_?(count_words|word_count|n_words|words_in)")
    assert [d.split(" ")[1] for d in counters] == ["count_words"] and "pipeline/core/text.py" in counters[0]
    # No module counts by splitting on its own.
    assert _lines_matching(r"len\([^)]*\.split\(\)\)", allowed=set()) == []


def test_cosine_is_defined_once() -> None:
    cosines = _definitions(r"_?cosine\w*")
    assert [d.split(" ")[1]
            for d in cosines] == ["cosine"] and "pipeline/analysis/embeddings.py" in cosines[0]


def test_the_pass_threshold_and_the_default_ratio_are_named_once() -> None:
    from pipeline.core import definitions

    assert definitions.PASS_THRESHOLD == 0.5 and definitions.DEFAULT_RATIO == 0.25
    # A literal 0.25 or 0.5 as a ratio default or a pass test, outside core/definitions.py.
    ratio_defaults = _lines_matching(r"ratio\w*\s*(:\s*float\s*)?=\s*0\.25\b|default=0\.25\b|"
                                     r">=\s*0\.5\b|<\s*0\.5\b",
                                     allowed={"pipeline/core/definitions.py"})
    assert ratio_defaults == [], (f"write DEFAULT_RATIO / PASS_THRESHOLD "
                                  f"(pipeline.core.definitions): {ratio_defaults}")


def test_one_verdict_type() -> None:
    verdicts = [d for d in _definitions(r"_?\w*Verdict") if "class" not in d]
    types = _definitions(r"_?(Latest|Shown)?Verdict")
    assert [t.split(" ")[1]
            for t in types] == ["Verdict"] and "pipeline/store/verdicts.py" in types[0], verdicts


def test_flag_names_are_defined_once() -> None:
    copies = _lines_matching(r"^\s*FLAG_NAMES\s*=|^\s*LEXICAL_FLAGS\s*=",
                             allowed={"pipeline/core/definitions.py"})
    assert copies == []
