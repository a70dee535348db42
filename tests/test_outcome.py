"""A constraint's outcome is decided once (issue 59 item 4): pipeline.core.definitions.item_outcome in
Python, pipeline.store.scores.item_outcome_sql the same rule in SQL for counting in the store. Every
combination of three raters' verdicts on a response and its summary gives the same call both ways."""

from __future__ import annotations

import itertools
import sqlite3

from pipeline.core.definitions import Outcome, item_outcome, passes, score_outcome
from pipeline.store.scores import item_outcome_sql

RATERS = 3
VALUES = (None, 0, 1)  # no verdict, No, Yes


def _python_call(full: tuple[int | None, ...], summary: tuple[int | None, ...]) -> Outcome:
    """The rule as a reader states it: the raters who judged both texts, their mean on each."""
    both = [(f, s) for f, s in zip(full, summary, strict=True) if f is not None and s is not None]
    if not both:
        return Outcome.NOT_JUDGED
    mean_full, mean_summary = (sum(pair[i] for pair in both) / len(both) for i in (0, 1))
    return item_outcome(passes(mean_full), passes(mean_summary))


def test_the_sql_and_the_python_rule_agree_on_every_combination() -> None:
    conn = sqlite3.connect(":memory:")
    columns = ", ".join(f"y{k} INTEGER" for k in range(RATERS))
    conn.execute(f"CREATE TABLE f(id INTEGER, {columns})")
    conn.execute(f"CREATE TABLE s(id INTEGER, {columns})")
    combos = list(itertools.product(itertools.product(VALUES, repeat=RATERS), repeat=2))
    for i, (full, summary) in enumerate(combos):
        conn.execute(f"INSERT INTO f VALUES (?, {', '.join('?' * RATERS)})", (i, *full))
        conn.execute(f"INSERT INTO s VALUES (?, {', '.join('?' * RATERS)})", (i, *summary))
    sql = item_outcome_sql(RATERS)
    rows = conn.execute(f"SELECT f.id, {sql['full_score']}, {sql['summary_score']}, {sql['flipped']},"
                        f" {sql['passed_both']} FROM f JOIN s ON s.id = f.id ORDER BY f.id").fetchall()
    assert len(rows) == len(combos) == 729
    calls = set()
    for (full, summary), (_, full_score, summary_score, flipped, passed_both) in zip(combos, rows,
                                                                                   strict=True):
        call = _python_call(full, summary)
        calls.add(call)
        # The scores the store reads give the same call (pipeline.store.metrics.Item.outcome) ...
        assert score_outcome(full_score, summary_score) is call, (full, summary)
        # ... and the SQL counts it the same way.
        assert bool(flipped) == (call is Outcome.FLIPPED), (full, summary)
        assert bool(passed_both) == (call is Outcome.PASSED_BOTH), (full, summary)
    assert calls == {Outcome.NOT_JUDGED, Outcome.FAILS_RESPONSE, Outcome.FLIPPED, Outcome.PASSED_BOTH}


def test_the_rule_in_words() -> None:
    assert item_outcome(None, None) is item_outcome(None, True) is Outcome.NOT_JUDGED
    assert item_outcome(False, None) is item_outcome(False, True) is Outcome.FAILS_RESPONSE
    assert item_outcome(True, None) is Outcome.PASSES_RESPONSE  # no rater judged the summary yet
    assert item_outcome(True, False) is Outcome.FLIPPED and item_outcome(True, True) is Outcome.PASSED_BOTH
    # A split pair passes (PASS_THRESHOLD 0.5); NaN, an item no rater judges any more, is no call.
    assert score_outcome(0.5, 0.0) is Outcome.FLIPPED
    assert score_outcome(float("nan"), 1.0) is Outcome.NOT_JUDGED
    # One vocabulary: a label, a short form for narrow columns, a key for a page's styles.
    assert [o.short for o in Outcome] == ["FLIPPED", "pass both", "pass full", "fails", "-"]
    assert Outcome.FLIPPED.key == "flipped" and Outcome.PASSED_BOTH.value == "pass both"
