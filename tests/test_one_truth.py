"""One source of truth: on random small stores, every consumer of a constraint's outcome agrees.

The stores mix what made the consumers disagree before: two models answering in both modes
(direct and edit), two judges in two judging modes, re-judging (a newer verdict replaces the
older), a latest verdict with no Yes/No, replaced constraints that still hold verdicts,
summaries at two ratios, raters who judged a response but not its summary, and several runs.

The consumers: the per-text totals the app's Instructions screen and Annotate list read
(``text_items`` through ``compute_analysis``), pipeline.analysis.metrics' items (Annotate, the report's
human validation), the per-response items the Audit and Compare screens read
(pipeline.store.queries.item_outcomes), and, with one rater, the report's per-response flipped count.
"""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from pipeline.analysis.metrics import Filters, compute_metrics, constraint_items
from pipeline.store.database import Store, open_store
from pipeline.store.queries import Writer, item_outcomes
from unspecific_tui.data import StoreView, compute_analysis, connect

RATIOS = (0.5, 0.25)
MODELS = ("m1", "m2")
MODES = ("direct", "edit")
RATERS = (("J1", "batched"), ("J2", "batched"), ("J1", "per_constraint"))


def random_store(path: Path, seed: int, *, raters: tuple[tuple[str, str], ...] = RATERS) -> Store:
    rng = random.Random(seed)
    store = open_store(path)
    c = store.conn
    a, b = store.put_text("Reference A."), store.put_text("Reference B.")
    c.execute("INSERT INTO articles(id, corpus, domain, source_id, title, text_hash, words, status) VALUES"
              " (1, 't', 'news', 'a', 'A', ?, 2, 'kept'), (2, 't', 'news', 'b', 'B', ?, 2, 'kept')", (a, b))
    gid = cid = 0
    verdicts: list[tuple] = []
    for run in range(rng.randint(1, 2)):
        # One instruction per condition and run; the runs share the pair (1, 2).
        for k, condition in enumerate(rng.sample(("single", "none", "direct", "eval"), rng.randint(1, 3))):
            iid = 10 * run + k + 1
            c.execute("INSERT INTO instructions(id, run_id, domain, condition, article_a, article_b, main_task,"
                      " n_constraints, status) VALUES (?, ?, 'news', ?, 1, 2, 'Write.', 4, 'done')",
                      (iid, f"r{run}", condition))
            constraints = []
            for position in range(1, rng.randint(2, 5)):
                cid += 1
                replaced = rng.random() < 0.3
                if replaced:  # the old one keeps its verdicts: they must never count
                    c.execute("INSERT INTO constraints(id, instruction_id, position, text, origin, active)"
                              " VALUES (?, ?, NULL, 'old', 'synthesized', 0)", (cid, iid))
                    constraints.append((cid, False))
                    cid += 1
                c.execute("INSERT INTO constraints(id, instruction_id, position, text, origin, active, replaces_id)"
                          " VALUES (?, ?, ?, 'C', ?, 1, ?)",
                          (cid, iid, position, "revised" if replaced else "synthesized", cid - 1 if replaced else None))
                constraints.append((cid, True))
            for model in MODELS:
                for mode in MODES:
                    if rng.random() < 0.2:
                        continue
                    gid += 1
                    response = gid
                    h = store.put_text(f"response {response}")
                    c.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, text_hash)"
                              " VALUES (?, 'response', ?, ?, ?, ?)", (response, iid, model, mode, h))
                    texts = [response]
                    for ratio in RATIOS:
                        if rng.random() < 0.85:
                            gid += 1
                            c.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, ratio, parent_id,"
                                      " text_hash) VALUES (?, 'summary', ?, 'summ', '', ?, ?, ?)",
                                      (gid, iid, ratio, response, store.put_text(f"summary {gid}")))
                            texts.append(gid)
                    for text in texts:
                        for con, _ in constraints:
                            for judge, judging_mode in raters:
                                if rng.random() < 0.15:
                                    continue  # this rater has not judged it
                                verdicts.append((text, con, judge, judging_mode, "p1", rng.random() < 0.6))
                                if rng.random() < 0.2:  # re-judged under a new prompt, or left without a Yes/No
                                    again = None if rng.random() < 0.2 else rng.random() < 0.5
                                    verdicts.append((text, con, judge, judging_mode, "p2", again))
    rng.shuffle(verdicts)  # ids in any order across texts, but a re-judge always after its first
    verdicts.sort(key=lambda v: v[4])
    c.executemany("INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, prompt_hash, verdict)"
                  " VALUES (?, ?, ?, ?, ?, ?)",
                  [(*v[:5], None if v[5] is None else int(v[5])) for v in verdicts])
    store.commit()
    return store


def _responses(conn: sqlite3.Connection) -> list[tuple[int, int, Writer]]:
    return [(r, i, Writer(m, mode)) for r, i, m, mode in conn.execute(
        "SELECT id, instruction_id, model, mode FROM generations WHERE kind = 'response' ORDER BY id")]


def _latest_by_hand(conn: sqlite3.Connection) -> dict[tuple[int, int, str, str], int]:
    """The rule written out in Python: per (text, active constraint, judge, mode), the newest
    verdict that holds a Yes/No."""
    out = {}
    for gid, cid, judge, mode, verdict in conn.execute(
            "SELECT v.generation_id, v.constraint_id, v.judge, v.judging_mode, v.verdict FROM verdicts v"
            " JOIN constraints c ON c.id = v.constraint_id WHERE c.active = 1 ORDER BY v.id"):
        if verdict is not None:
            out[(gid, cid, judge, mode)] = verdict
    return out


def _flipped_by_hand(conn: sqlite3.Connection, ratio: float) -> set[tuple[int, int]]:
    """(constraint, response) flipped at ``ratio``: over the raters who judged both texts, the
    mean verdict >= 0.5 on the response and < 0.5 on the summary."""
    latest = _latest_by_hand(conn)
    flipped = set()
    for summary, response in conn.execute(
            "SELECT id, parent_id FROM generations WHERE kind = 'summary' AND abs(ratio - ?) < 1e-9", (ratio,)):
        for cid in {k[1] for k in latest if k[0] == summary}:
            pairs = [(latest[(response, cid, j, m)], latest[(summary, cid, j, m)]) for j, m in RATERS
                     if (response, cid, j, m) in latest and (summary, cid, j, m) in latest]
            if pairs and 2 * sum(f for f, _ in pairs) >= len(pairs) and 2 * sum(s for _, s in pairs) < len(pairs):
                flipped.add((cid, response))
    return flipped


@pytest.mark.parametrize("seed", range(12))
def test_every_consumer_counts_the_same_flipped_items(tmp_path: Path, seed: int) -> None:
    store = random_store(tmp_path / "s.sqlite", seed)
    conn = store.conn
    responses = _responses(conn)
    assert len({w for _, _, w in responses}) >= 3  # both modes of a model, as in the issue
    for ratio in RATIOS:
        expected = _flipped_by_hand(conn, ratio)
        # pipeline.analysis.metrics' items (Annotate's list, the report's human validation).
        items = constraint_items(store, ratio=ratio)
        assert {(i.constraint_id, i.response_id) for i in items if i.flipped} == expected
        # The Audit and Compare screens' per-response items, one response at a time.
        per_response = set()
        view_conn = connect(store.path)  # as the app reads: read-only, sqlite3.Row rows
        for response, iid, writer in responses:
            outcomes = item_outcomes(view_conn, store.path, iid, writer, ratio)
            assert all(item.response_id == response for item in outcomes.values())  # never the other mode's
            per_response |= {(cid, response) for cid, item in outcomes.items() if item.flipped}
        view_conn.close()
        assert per_response == expected
        # The Instructions screen's rows (the stored per-text totals), one per response.
        view = connect(store.path)
        try:
            analysis = compute_analysis(view, ratio=ratio)
        finally:
            view.close()
        assert analysis.ratio == ratio
        assert len(analysis.rows) == len(responses)
        counts = Counter(r for _, r in expected)
        assert {r.response_id: r.flipped for r in analysis.rows} == {r: counts.get(r, 0) for r, _, _ in responses}
        assert {r.response_id: r.writer for r in analysis.rows} == {r: w for r, _, w in responses}
    store.close()


@pytest.mark.parametrize("seed", range(4))
def test_with_one_rater_the_report_counts_the_same_flips(tmp_path: Path, seed: int) -> None:
    # With one rater the report's per-rater flipped count is the item count (with more, the
    # report's superficial share is per rater by design: METHOD.md, pipeline.analysis.metrics).
    store = random_store(tmp_path / "s.sqlite", 100 + seed, raters=(("J1", "batched"),))
    rows = {(r.response_id, r.ratio): r for r in compute_metrics(store, n_resamples=20).rows if r.ratio is not None}
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
    conn = connect(store.path)
    view = StoreView(conn, store.path)
    for response, iid, writer in responses:
        data = view.instruction(iid)
        assert data.responses[writer].id == response
        for ratio in data.ratios:
            summary = data.summary(writer, ratio)
            assert summary is None or summary.parent_id == response
    conn.close()


def test_metrics_filter_by_instruction_and_mode(tmp_path: Path) -> None:
    store = random_store(tmp_path / "s.sqlite", 5)
    responses = _responses(store.conn)
    response, iid, writer = responses[-1]
    items = constraint_items(store, Filters(instruction=iid, models=(writer.model,), mode=writer.mode), ratio=0.25)
    assert {i.response_id for i in items} <= {response}
    assert all((i.model, i.mode) == writer for i in items)
    store.close()


@pytest.mark.parametrize("seed", range(6))
def test_the_verdicts_screens_show_are_the_ones_that_count(tmp_path: Path, seed: int) -> None:
    # The latest-verdict rule, as SQL (LATEST_VERDICT: Audit's and Compare's verdict lists) and
    # in bulk (pivot: every count), picks the same verdict for every (text, constraint, rater).
    from pipeline.store.queries import latest_verdicts

    store = random_store(tmp_path / "s.sqlite", 200 + seed)
    expected = _latest_by_hand(store.conn)
    gids = [g for (g,) in store.conn.execute("SELECT id FROM generations")]
    active = {c for (c,) in store.conn.execute("SELECT id FROM constraints WHERE active = 1")}
    shown = {(v.generation_id, v.constraint_id, v.judge, v.judging_mode): v.verdict
             for v in latest_verdicts(store.conn, gids) if v.constraint_id in active}
    assert shown == expected
    store.close()
    conn = connect(store.path)
    view = StoreView(conn, store.path)
    for cid in sorted(active):
        by_view = Counter((v.generation_id, v.judge) for v in view.verdicts(cid))
        by_rule = Counter((g, j) for (g, c, j, _m) in expected if c == cid)
        assert by_view == by_rule  # one latest verdict per rater, none where the rater has no Yes/No
    conn.close()
