"""Metrics on a hand-built store whose every number is worked out below.

The case (``build_hand_store``): one news/eval instruction with 4 active constraints c1..c4
and one replaced (inactive) constraint c0; model m1's response R (ratio None) and its
summary S at 0.25; judges J1 and J2.

    verdicts      c1 c2 c3 c4
    R  J1          1  1  1  0     Org J1 = 3/4
    R  J2          1  1  0  0     Org J2 = 2/4        Org = (0.75 + 0.5) / 2 = 0.625
    S  J1          1  0  0  0     Core J1 = 1/4
    S  J2          1  1  0  1     Core J2 = 3/4       Core = (0.25 + 0.75) / 2 = 0.5

  Superficial: J1 satisfied {c1,c2,c3} on R, of which c2,c3 are No on S: 2/3.
               J2 satisfied {c1,c2}, both still Yes on S: 0/2.
               superficial = (2/3 + 0) / 2 = 1/3; survival = 2/3.
  Flipped items (judges' mean >= 0.5 on R and < 0.5 on S): means on R c1=1 c2=1 c3=.5 c4=0,
               on S c1=1 c2=.5 c3=0 c4=.5 -> only c3 (c2 stays at .5 on S).
  Kappa J1 vs J2:
    on R: pairs (1,1)(1,1)(1,0)(0,0): p_o = 3/4; P(J1 yes) = 3/4, P(J2 yes) = 1/2,
          p_e = 3/4*1/2 + 1/4*1/2 = 1/2; kappa = (3/4 - 1/2) / (1/2) = 0.5
    on S: pairs (1,1)(0,1)(0,0)(0,1): p_o = 1/2; P(J1) = 1/4, P(J2) = 3/4,
          p_e = 1/4*3/4 + 3/4*1/4 = 3/8; kappa = (1/2 - 3/8) / (5/8) = 0.2
    both: n11=3 n10=1 n01=2 n00=2: p_o = 5/8; P(J1) = 4/8, P(J2) = 5/8,
          p_e = 1/2*5/8 + 1/2*3/8 = 1/2; kappa = (5/8 - 1/2) / (1/2) = 0.25
  c0 (inactive) has Yes verdicts from both judges everywhere: they must not count.
  J1 also has an older verdict on (R, c4) under a previous judge prompt, saying Yes: the
  newer No must win.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pipeline.analysis.metrics import (
    Filters,
    compare,
    compute_metrics,
    constraint_items,
    items_to_annotate,
    naturalness_rates,
)
from pipeline.analysis.validation import human_validation
from pipeline.store.database import Store, open_store
from tests.support.hand_store import (
    build_hand_store,
    many_store,
)

STAMP = "2026-01-01T00:00:00+00:00"


@pytest.fixture
def hand(tmp_path: Path) -> Store:
    store = build_hand_store(tmp_path / "hand.sqlite")
    yield store
    store.close()


def test_org_core_superficial_by_hand(hand: Store) -> None:
    m = compute_metrics(hand, n_resamples=200)
    assert m.raters == ["J1", "J2"]
    assert m.ratios == [0.25]
    full = m.response_rows()
    assert len(full) == 1
    assert full[0].org == pytest.approx(0.625)
    assert full[0].n_active == 4 and full[0].judged == 4  # c0 and the stale verdict left out
    (row,) = m.at_ratio(0.25)
    assert row.org == pytest.approx(0.625)
    assert row.core == pytest.approx(0.5)
    assert row.superficial == pytest.approx(1 / 3)
    assert row.satisfied_by == (3, 2) and row.flipped_by == (2, 0)
    assert row.achieved_ratio == pytest.approx(0.3)
    g = m.group("news", "eval", "m1", "direct", 0.25)
    assert g.n == 1 and g.org.value == pytest.approx(0.625) and g.core.value == pytest.approx(0.5)
    assert g.superficial.value == pytest.approx(1 / 3)
    assert g.survival.value == pytest.approx(2 / 3)
    # Judge kappa per group: response + summary at the group's ratio; Org-only group: response alone.
    assert g.kappa == pytest.approx(0.25)
    assert g.agreement == pytest.approx(5 / 8)
    assert m.group("news", "eval", "m1", "direct", None).kappa == pytest.approx(0.5)
    by_kind = {a.kind: a for a in m.agreement}
    assert by_kind["response"].kappa == pytest.approx(0.5)
    assert by_kind["summary"].kappa == pytest.approx(0.2)
    assert by_kind["all"].kappa == pytest.approx(0.25) and by_kind["all"].n == 8


def test_one_judge_and_filters(hand: Store) -> None:
    j1 = compute_metrics(hand, Filters(judges=("J1",)), n_resamples=50)
    (row,) = j1.at_ratio(0.25)
    assert (row.org, row.core, row.superficial) == pytest.approx((0.75, 0.25, 2 / 3))
    assert j1.agreement == []
    assert compute_metrics(hand, Filters(domain="story")).empty
    assert compute_metrics(hand, Filters(models=("m1",))).rows
    assert compute_metrics(hand, Filters(run="nope")).empty


def test_flipped_items(hand: Store) -> None:
    items = {i.constraint_id: i for i in constraint_items(hand, ratio=0.25)}
    assert set(items) == {1, 2, 3, 4}
    assert [i for i in items if items[i].flipped] == [3]
    assert items[2].full_score == 1.0 and items[2].summary_score == 0.5
    assert items[1].passed_both and not items[4].passed_both
    chosen = items_to_annotate(hand, ratio=0.25, passed_sample=5, seed=1)
    assert {i.constraint_id for i in chosen} == {3, 1, 2}  # the flipped one, and the passed-both ones
    assert constraint_items(hand, ratio=0.5) == []


def test_human_validation(hand: Store) -> None:
    # The report's rule is `validate report`'s (pipeline.analysis.validation): with no plan, each
    # labelled item stands for its stratum now (flipped:news holds c3; passed holds c1 and c2).
    # Annotator kappa on 4 items, labels S/I/A: pairs (S,S)(I,I)(S,I)(A,S): p_o = 1/2;
    # A1 S=1/2 I=1/4 A=1/4, A2 S=1/2 I=1/2: p_e = 1/4 + 1/8 = 3/8; kappa = (1/8) / (5/8) = 0.2.
    (agree,) = human_validation(hand).kappas
    assert (agree.kappa.value == pytest.approx(0.2) and agree.percent == pytest.approx(0.5)
            and agree.kappa.n == 4)
    # A1: c3 superficial + flipped = TP; c1 integrated + not flipped = TN; c2 superficial + not
    # flipped = FN; c4 (ambiguous) the judges never passed on the full response: outside the
    # metric's call before its label is read (the unweighted rule counted it as ambiguous).
    # Both strata are fully labelled (weight 1): precision 1/1, recall 1/2.
    v1 = human_validation(hand, annotator="A1")
    assert (v1.tp, v1.fp, v1.fn, v1.tn) == (1, 0, 1, 1)
    assert v1.precision.value == 1.0 and v1.recall.value == 0.5 and v1.out_of_scope == 1 and v1.ambiguous == 0
    # A2: c4 is labelled superficial but the judges never passed it on the full response.
    v2 = human_validation(hand, annotator="A2")
    assert v2.out_of_scope == 1 and v2.recall.value == 1.0 and v2.tn == 2
    # Majority: c2 (S vs I) and c4 (A vs S) split evenly: left out as ties.
    v = human_validation(hand)
    assert v.ties == 2 and (v.tp, v.tn) == (1, 1)


def test_naturalness_rates(hand: Store) -> None:
    rates = {(w.condition, w.opponent): w for w in naturalness_rates(hand, n_resamples=100)}
    w = rates[("eval", "none")]
    assert (w.n, w.wins, w.ties, w.losses) == (3, 1, 1, 1)
    assert w.rate.value == pytest.approx(0.5)
    assert w.first_shown_wins == pytest.approx(0.5)
    assert rates[("none", "any")].rate.value == pytest.approx(0.5)


def test_copy_and_similarity_columns(hand: Store) -> None:
    from pipeline.analysis.embeddings import HashEmbedder

    m = compute_metrics(hand, copy=True, embedder=HashEmbedder(), n_resamples=20)
    (row,) = m.at_ratio(0.25)
    # Two sentences of the response are copied from A: 10 + 15 words of 33, holding 6 + 11
    # word 5-grams; B shares no 5-gram.
    assert row.extra["copy_a_share"] == pytest.approx(25 / 33)
    assert row.extra["copy_a_ngrams"] == 6 + 11
    assert row.extra["copy_b_ngrams"] == 0 and row.extra["copy_longest"] == 15
    for name in ("sim_ref_a", "sim_ref_b", "sim_response"):
        assert -1.0 <= row.extra[name] <= 1.0
    assert 0.0 <= row.extra["lex_ref_a"] <= 1.0
    # The constraints share more content words with article A than with B.
    assert row.extra["lex_ref_a"] > row.extra["lex_ref_b"]
    g = m.group("news", "eval", "m1", "direct", 0.25)
    assert g.extra["copy_a_share"] == pytest.approx(25 / 33)


def test_compare_models_on_the_store(tmp_path: Path) -> None:
    store = many_store(tmp_path, {"strong": 0.9, "weak": 0.5, "twin": 0.9})
    m = compute_metrics(store, n_resamples=300)
    (real,) = compare(m, "strong", "weak", ratio=None, n_resamples=2000, seed=3)
    assert real.by == "model" and real.metric == "org" and real.test.n == 40
    assert real.test.diff > 0.25 and real.test.p_value < 0.01 and real.test.low > 0
    (null,) = compare(m, "strong", "twin", ratio=None, n_resamples=2000, seed=3)
    assert null.test.p_value > 0.05 and null.test.low < 0 < null.test.high
    g = m.group("news", "eval", "strong", "direct", None)
    assert g.org.contains(g.org.value) and g.org.high - g.org.low < 0.15
    store.close()


def test_empty_store(tmp_path: Path) -> None:
    store = open_store(tmp_path / "empty.sqlite")
    m = compute_metrics(store)
    assert m.empty and m.groups == [] and m.raters == []
    assert constraint_items(store) == [] and naturalness_rates(store) == []
    assert math.isnan(human_validation(store).precision.value)
    store.close()


def test_narrow_selection_reads_the_same_numbers(tmp_path: Path) -> None:
    # One model of five is 20% of the texts: the index-driven path; all five: the table scan.
    store = many_store(tmp_path, {"m1": 0.9, "m2": 0.7, "m3": 0.5, "m4": 0.6, "m5": 0.8}, n=10)
    whole = {(r.model, r.instruction_id): r.org for r in compute_metrics(store, n_resamples=10).rows}
    narrow = compute_metrics(store, Filters(models=("m3",)), n_resamples=10)
    assert narrow.raters == ["J"] and len(narrow.rows) == 10
    for row in narrow.rows:
        assert row.org == whole[("m3", row.instruction_id)]
    store.close()


def test_two_judging_modes_are_two_raters(hand: Store) -> None:
    # J1 re-judges the response one constraint at a time and now passes c4 too.
    hand.conn.executemany(
        "INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, prompt_hash, verdict)"
        " VALUES (100, ?, 'J1', 'per_constraint', 'single', ?)", [(1, 1), (2, 1), (3, 1), (4, 1)])
    hand.commit()
    m = compute_metrics(hand, n_resamples=20)
    assert m.raters == ["J1 [batched]", "J1 [per_constraint]", "J2"]
    pair = next(a for a in m.agreement if a.rater_b == "J1 [per_constraint]" and a.kind == "response")
    assert pair.rater_a == "J1 [batched]" and pair.percent == 0.75 and pair.n == 4
    # Org over three raters: (3/4 + 4/4 + 2/4) / 3; the summary has no per-constraint verdicts.
    assert m.response_rows()[0].org == pytest.approx(0.75)
    batched = compute_metrics(hand, Filters(judging_mode="batched"), n_resamples=20)
    assert batched.raters == ["J1", "J2"] and batched.response_rows()[0].org == pytest.approx(0.625)


def test_edit_mode_widens_the_gap(tmp_path: Path) -> None:
    # 30 instructions; each has a direct and an edit response from one model, both with Org 0.8
    # (8 of 10 constraints); the direct summary keeps 6 of them, the edit summary 3.
    store = open_store(tmp_path / "modes.sqlite")
    c = store.conn
    h = store.put_text("t")
    rows, gid = [], 0
    for i in range(1, 31):
        c.execute("INSERT INTO instructions(id, run_id, domain, condition, article_a, main_task) "
                  "VALUES (?, 'r', 'news',"
                  " 'eval', ?, 'task')", (i, i))
        c.executemany("INSERT INTO constraints(id, instruction_id, position, text, active) "
                      "VALUES (?, ?, ?, 'c', 1)",
                      [(i * 100 + k, i, k) for k in range(1, 11)])
        for mode, kept in (("direct", 6 + (i % 2)), ("edit", 3 + (i % 3 == 0))):
            rid, sid, gid = gid + 1, gid + 2, gid + 2
            c.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, text_hash) VALUES"
                      " (?, 'response', ?, 'm', ?, ?)", (rid, i, mode, h))
            c.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, ratio, "
                      "parent_id, text_hash) VALUES (?, 'summary', ?, 's', '', 0.25, ?, ?)", (sid, i, rid, h))
            rows += [(rid, i * 100 + k, int(k <= 8)) for k in range(1, 11)]
            rows += [(sid, i * 100 + k, int(k <= kept)) for k in range(1, 11)]
    c.executemany("INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, "
                  "prompt_hash, verdict) VALUES (?, ?, 'J', 'batched', 'p', ?)", rows)
    store.commit()
    m = compute_metrics(store, n_resamples=200)
    tests = {t.metric: t for t in compare(m, "edit", "direct", n_resamples=500)}
    assert all(t.by == "mode" for t in tests.values())
    assert tests["org"].test.diff == pytest.approx(0.0) and math.isnan(tests["org"].test.p_value) is False
    assert tests["gap"].test.diff > 0.2 and tests["gap"].test.p_value < 0.01
    assert tests["core"].test.diff == pytest.approx(-tests["gap"].test.diff)
    store.close()
