"""Per-text verdict totals kept in the store (pipeline.store.scores) give the metrics of a full pivot.

Every check compares ``compute_metrics`` on the store, whose totals were kept up to date
incrementally, with the same computation after every total was thrown away and rebuilt from
the verdicts, and also checks that the change made a visible difference.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from pipeline.analysis import copying
from pipeline.analysis.metrics import Filters, Metrics, compute_metrics
from pipeline.store.database import Store, open_store
from pipeline.store.scores import refresh_text_scores
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.store_probes import stale_count

SPEC = SyntheticSpec(n_instructions=16, n_constraints=6, ratios=(0.25, 0.5))


def _plain(m: Metrics) -> dict:
    def clean(d: dict) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}

    return {"raters": m.raters,
            "rows": [clean(r.as_dict())
                     | {"by": [list(map(str, r.satisfied_by)), list(map(str, r.flipped_by))]}
                     for r in m.rows],
            "groups": [clean(g.as_dict()) for g in m.groups],
            "agreement": [clean(a.as_dict()) for a in m.agreement]}


def _rebuilt(path: Path, tmp_path: Path, filters: Filters | None = None) -> dict:
    """The metrics of a copy of the store whose totals are all thrown away and scored anew."""
    copy = tmp_path / f"rebuilt-{len(list(tmp_path.iterdir()))}.sqlite"
    with sqlite3.connect(path) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    store = open_store(copy)
    try:
        with store.conn:
            store.conn.execute("DELETE FROM text_scores")
            store.conn.execute("DELETE FROM text_agreement")
            store.conn.execute("INSERT OR IGNORE INTO text_scores_stale SELECT id FROM generations")
        return _plain(compute_metrics(store, filters, n_resamples=50))
    finally:
        store.close()


def _kept(store: Store, filters: Filters | None = None) -> dict:
    return _plain(compute_metrics(store, filters, n_resamples=50))


@pytest.fixture
def synthetic(tmp_path: Path) -> tuple[Path, Store]:
    path = tmp_path / "store.sqlite"
    build_synthetic_store(path, SPEC)
    store = open_store(path)
    yield path, store
    store.close()


def test_kept_totals_follow_every_kind_of_change(synthetic, tmp_path):
    path, store = synthetic
    conn = store.conn
    first = _kept(store)
    assert stale_count(store.conn) == 0 and first == _rebuilt(path, tmp_path)
    assert len(first["raters"]) == 2 and first["agreement"]

    # A re-judge under a new prompt: the latest verdict wins over the stored one.
    response = conn.execute("SELECT id, instruction_id FROM generations WHERE kind = "
                            "'response' ORDER BY id").fetchone()
    with conn:
        conn.execute(
            "INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, prompt_hash, "
            "verdict, created_at)"
            " SELECT generation_id, constraint_id, judge, judging_mode, 'new-prompt', 1 - verdict, created_at"
            " FROM verdicts WHERE generation_id = ? AND judge = 'judge-a'", (response[0],))
    assert stale_count(store.conn) == 1
    rejudged = _kept(store)
    assert rejudged != first and rejudged == _rebuilt(path, tmp_path)

    # A constraint replaced by revision: its verdicts stop counting on every text of the instruction.
    with conn:
        conn.execute("UPDATE constraints SET active = 0 WHERE id = (SELECT min(id) FROM constraints"
                     " WHERE instruction_id = ? AND active = 1)", (response[1],))
    assert stale_count(store.conn) > 1
    replaced = _kept(store)
    assert replaced != rejudged and replaced == _rebuilt(path, tmp_path)

    # A third rater (another judging mode of judge-a) on some texts.
    with conn:
        conn.execute(
            "INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, prompt_hash, "
            "verdict, created_at)"
            " SELECT generation_id, constraint_id, judge, 'per_constraint', 'p', verdict, "
            "created_at FROM verdicts"
            " WHERE judge = 'judge-a' AND generation_id <= 12 AND prompt_hash != 'new-prompt'")
    three = _kept(store)
    assert "judge-a [per_constraint]" in three["raters"] and three == _rebuilt(path, tmp_path)
    for filters in (Filters(judging_mode="batched"), Filters(judges=("judge-a",)), Filters(domain="news")):
        assert _kept(store, filters) == _rebuilt(path, tmp_path, filters)

    # Verdicts of a response deleted: its summaries lose the constraints judged on both.
    with conn:
        conn.execute("DELETE FROM verdicts WHERE generation_id = ? AND judge = 'judge-b'", (response[0],))
    deleted = _kept(store)
    assert deleted != three and deleted == _rebuilt(path, tmp_path)
    assert stale_count(store.conn) == 0


def test_a_read_only_store_reads_fresh_totals_without_writing(synthetic, tmp_path):
    path, store = synthetic
    compute_metrics(store, n_resamples=50)
    with store.conn:
        store.conn.execute("UPDATE verdicts SET verdict = 1 - verdict WHERE generation_id <= 5")
    stale = stale_count(store.conn)
    assert stale >= 5
    readonly = open_store(path, readonly=True)
    try:
        assert refresh_text_scores(readonly.conn) is None
        assert _kept(readonly) == _rebuilt(path, tmp_path)
        assert stale_count(readonly.conn) == stale  # nothing written
        temp = readonly.conn.execute("SELECT name FROM sqlite_temp_master WHERE type = 'table'").fetchall()
        assert temp == []  # the shadowing temp tables are gone after the computation
        assert not readonly.conn.in_transaction
    finally:
        readonly.close()


def test_a_locked_store_still_gives_fresh_metrics(synthetic, tmp_path):
    path, store = synthetic
    with store.conn:
        store.conn.execute("UPDATE verdicts SET verdict = 1 - verdict WHERE generation_id <= 3")
    writer = sqlite3.connect(path)
    writer.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        store.conn.execute("PRAGMA busy_timeout = 50")
        assert refresh_text_scores(store.conn) is None
        assert _kept(store) == _rebuilt(path, tmp_path)
        assert stale_count(store.conn) > 0
    finally:
        writer.rollback()
        writer.close()
    assert refresh_text_scores(store.conn) > 0 and stale_count(store.conn) == 0


def _schema_1_store(path: Path) -> Path:
    """A synthetic store as the first release wrote it: without what schema 2 added (and with its
    texts table: '_' is a LIKE wildcard, so 'text_%' alone would drop `texts` too)."""
    build_synthetic_store(path, SPEC)
    with sqlite3.connect(path) as conn:
        for kind, name in conn.execute("SELECT type, name FROM sqlite_master WHERE type IN "
                                       "('table', 'trigger')"
                                       " AND (name LIKE 'text\\_%' ESCAPE '\\' OR name LIKE '%_stale_%' OR "
                                       "name = 'copy_stats')"
                                       " ORDER BY type = 'table'").fetchall():
            conn.execute(f"DROP {kind} {name}")
        conn.execute("PRAGMA user_version = 1")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE "
                            "'text\\_%' ESCAPE '\\'").fetchone()[0] == 0
    return path


async def test_the_app_migrates_before_its_store_wide_pass(tmp_path):
    from pipeline.store.database import SCHEMA_VERSION
    from tests.support.app import settle
    from unspecific_tui.app import UnspecificApp

    path = _schema_1_store(tmp_path / "old.sqlite")
    app = UnspecificApp(path, stages={})
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        assert type(app.screen).__name__ == "BuildScreen"  # no error on top
        assert app.analysis is not None and app.analysis.rows and app.analysis.metrics is not None
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_store_from_before_the_totals_is_migrated_and_scored(tmp_path):
    path = _schema_1_store(tmp_path / "old.sqlite")
    store = open_store(path)
    try:
        assert stale_count(store.conn) == store.scalar("SELECT count(DISTINCT generation_id) FROM "
                                                       "verdicts") > 0
        assert _kept(store) == _rebuilt(path, tmp_path)
        assert stale_count(store.conn) == 0
    finally:
        store.close()


def test_copy_statistics_are_kept_and_reused(synthetic, monkeypatch):
    path, store = synthetic
    first = compute_metrics(store, n_resamples=20, copy=True)
    kept = store.scalar("SELECT count(*) FROM copy_stats")
    assert kept > 0 and any(r.extra.get("copy_a_ngrams") for r in first.rows)

    def no_more(*_args, **_kwargs):
        raise AssertionError("copy statistics computed again")

    monkeypatch.setattr(copying, "copy_stats", no_more)
    again = compute_metrics(store, n_resamples=20, copy=True)
    assert [r.extra for r in again.rows] == [r.extra for r in first.rows]
    assert store.scalar("SELECT count(*) FROM copy_stats") == kept


def test_copy_statistics_on_a_read_only_store_are_computed_not_stored(synthetic):
    path, store = synthetic
    readonly = open_store(path, readonly=True)
    try:
        rows = compute_metrics(readonly, n_resamples=20, copy=True).rows
        assert any(r.extra.get("copy_a_share") for r in rows)
        assert readonly.scalar("SELECT count(*) FROM copy_stats") == 0
    finally:
        readonly.close()


def _items_by_hand(conn: sqlite3.Connection, ratio: float) -> dict[tuple[int, str], tuple]:
    """The app's per-(instruction, model) counts straight from the verdicts, in Python."""
    latest: dict[tuple[int, int, str, str], tuple[int, int, str]] = {}
    for vid, gid, cid, judge, mode, verdict, found in conn.execute(
            "SELECT id, generation_id, constraint_id, judge, judging_mode, verdict, "
            "quote_found FROM verdicts"):
        key = (gid, cid, judge, mode)
        if key not in latest or latest[key][0] < vid:
            latest[key] = (vid, verdict, found)
    active = {cid for (cid,) in conn.execute("SELECT id FROM constraints WHERE active = 1")}
    items: dict[tuple[int, int], list[tuple[int, str]]] = {}
    for (gid, cid, _, _), (_, verdict, found) in latest.items():
        if cid in active:
            items.setdefault((gid, cid), []).append((verdict, found))
    mean = {k: sum(v for v, _ in vs) / len(vs) for k, vs in items.items()}
    out = {}
    for gid, iid, model in conn.execute("SELECT id, instruction_id, model FROM generations "
                                        "WHERE kind = 'response'"):
        summary = conn.execute("SELECT id FROM generations WHERE kind = 'summary' AND "
                               "parent_id = ? AND ratio = ?",
                               (gid, ratio)).fetchone()
        mine = {cid: m for (g, cid), m in mean.items() if g == gid}
        passed = {cid for cid, m in mine.items() if m >= 0.5}
        flipped = 0 if summary is None else sum(
            1 for cid in passed if (summary[0], cid) in mean and mean[(summary[0], cid)] < 0.5)
        disagree = sum(1 for (g, _), vs in items.items() if g == gid and len({v for v, _ in vs}) > 1)
        missing = sum(1 for (g, _), vs in items.items() if g == gid and any(f == "missing" for _, f in vs))
        out[(iid, model)] = (len(passed), flipped, disagree, missing)
    return out


def test_the_apps_counts_match_the_verdicts_after_rejudging(synthetic):
    from pipeline.store.view import StoreView
    from unspecific_tui.data import compute_analysis

    path, store = synthetic
    conn = store.conn
    with conn:  # a re-judge of some texts under a new prompt, with other verdicts and quotes
        conn.execute(
            "INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, prompt_hash, "
            "verdict, quote_found,"
            " created_at) SELECT generation_id, constraint_id, judge, judging_mode, 'new', 1 - verdict,"
            " CASE WHEN quote_found = 'missing' THEN 'exact' ELSE 'missing' END, created_at FROM verdicts"
            " WHERE generation_id % 3 = 0 AND constraint_id % 2 = 0")
        conn.execute("UPDATE constraints SET active = 0 WHERE id % 7 = 0")
    analysis = compute_analysis(StoreView(store))
    by_hand = _items_by_hand(conn, analysis.ratio)
    got = {(r.instruction_id, r.model): (r.passed, r.flipped, r.disagree, r.quote_missing)
           for r in analysis.rows}
    assert got == by_hand
    assert sum(f for _, f, _, _ in got.values()) > 0 and sum(d for _, _, d, _ in got.values()) > 0
    assert analysis.n_flipped == sum(f for _, f, _, _ in got.values())


def test_no_change_is_lost_while_a_writer_and_refreshes_interleave(synthetic, tmp_path):
    """A judge writing verdicts in its own process while reports refresh the totals: every
    change the writer commits is in the totals once both are done."""
    import threading
    import time

    path, store = synthetic
    compute_metrics(store, n_resamples=20)
    texts = [g
             for (g,
                  ) in store.conn.execute("SELECT id FROM generations WHERE kind IN ('response', 'summary')")]
    done = threading.Event()

    def writer() -> None:
        conn = sqlite3.connect(path, timeout=10)
        try:
            for k in range(60):
                with conn:  # one judging unit: a text's verdicts flipped, committed together
                    conn.execute("UPDATE verdicts SET verdict = 1 - verdict WHERE generation_id = ?",
                                 (texts[(7 * k) % len(texts)],))
                time.sleep(0.002)  # as units arrive: refreshes run between them, not only after
        finally:
            conn.close()
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    refreshes = 0
    while not done.is_set():
        refresh_text_scores(store.conn, chunk=3)  # small chunks: many transactions to interleave with
        refreshes += 1
    thread.join()
    refresh_text_scores(store.conn)
    assert refreshes > 1 and stale_count(store.conn) == 0
    assert _kept(store) == _rebuilt(path, tmp_path)


@pytest.mark.parametrize("readonly", [False, True])
async def test_the_app_scores_changed_texts_into_the_store_unless_read_only(synthetic, readonly):
    from tests.support.app import settle
    from unspecific_tui.app import UnspecificApp

    path, store = synthetic
    with store.conn:
        store.conn.execute("UPDATE verdicts SET verdict = 1 - verdict WHERE generation_id <= 6")
    stale = stale_count(store.conn)
    assert stale > 0
    app = UnspecificApp(path, stages={}, readonly=readonly)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        assert app.analysis is not None and app.analysis.metrics is not None
        shown = {(r.instruction_id, r.model): (r.passed, r.flipped) for r in app.analysis.rows}
    assert stale_count(store.conn) == (stale if readonly else 0)
    from pipeline.store.view import StoreView
    from unspecific_tui.data import compute_analysis

    refresh_text_scores(store.conn)
    assert shown == {(r.instruction_id, r.model): (r.passed, r.flipped)
                     for r in compute_analysis(StoreView(store)).rows}


def test_a_store_scored_under_the_old_flipped_rule_is_rescored(tmp_path):
    # Schema 2 kept text_items.flipped counting every rater on each text apart; schema 3 marks
    # every judged text stale so the next refresh applies pipeline.store.scores.item_outcome_sql.
    from pipeline.store import database as store_mod
    path = tmp_path / "s.sqlite"
    store = open_store(path)
    store.conn.execute("PRAGMA foreign_keys = OFF")  # a bare verdict is enough here
    store.conn.execute("INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, "
                       "prompt_hash, verdict) VALUES (7, 1, 'J', 'batched', 'p', 1)")
    store.conn.execute("DELETE FROM text_scores_stale")
    store.conn.execute("PRAGMA user_version = 2")
    store.commit()
    store.close()
    assert store_mod.SCHEMA_VERSION >= 3  # the store above is at 2: steps 3 on run when it opens
    again = open_store(path)
    try:
        assert [g for (g,) in again.conn.execute("SELECT gid FROM text_scores_stale")] == [7]
    finally:
        again.close()


def test_the_stored_totals_follow_the_pass_threshold(tmp_path, monkeypatch):
    """The store's SQL reads PASS_THRESHOLD when it builds its statements: raised above a 1-1 split,
    the totals kept in the store count split items as failing, as pipeline.core.definitions.passes does."""
    from pipeline.core import definitions

    path = tmp_path / "t.sqlite"
    build_synthetic_store(path,
                          SyntheticSpec(n_instructions=6, n_constraints=6, judges=("judge-a", "judge-b")))
    store = open_store(path)
    try:
        def passed() -> int:
            store.conn.execute("INSERT OR IGNORE INTO text_scores_stale SELECT DISTINCT "
                               "generation_id FROM verdicts")
            store.conn.commit()
            assert refresh_text_scores(store.conn)
            return store.conn.execute("SELECT total(passed) FROM text_items").fetchone()[0]

        split = store.conn.execute(
            "SELECT count(*) FROM (SELECT generation_id, constraint_id FROM verdicts "
            "WHERE verdict IS NOT NULL"
            " GROUP BY generation_id, constraint_id HAVING count(*) = 2 AND sum(verdict) = 1)").fetchone()[0]
        assert split > 0
        at_half = passed()
        monkeypatch.setattr(definitions, "PASS_THRESHOLD", 0.75)
        assert passed() == at_half - split  # a 1-1 split no longer passes, in the store as in Python
        assert not definitions.passes(0.5)
    finally:
        store.close()
