"""tests.fakes.synthetic: deterministic, the advertised shape, readable by the pipeline's metrics."""

from __future__ import annotations

import hashlib
import sqlite3

from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store

TABLES = ("texts", "articles", "pairs", "instructions", "constraints", "constraint_flags",
          "generations", "verdicts",
          "annotations")


def digest(path) -> str:
    conn = sqlite3.connect(path)
    h = hashlib.sha256()
    for table in TABLES:
        for row in conn.execute(f"SELECT * FROM {table} ORDER BY rowid"):
            h.update(repr(row).encode())
    conn.close()
    return h.hexdigest()


def test_same_spec_same_store_and_shape(tmp_path):
    spec = SyntheticSpec(n_instructions=10, seed=5, annotators=("ann1", "ann2"))
    a = build_synthetic_store(tmp_path / "a.sqlite", spec)
    b = build_synthetic_store(tmp_path / "b.sqlite", spec)
    assert digest(a.path) == digest(b.path)
    other = build_synthetic_store(tmp_path / "c.sqlite", SyntheticSpec(n_instructions=10, seed=6))
    assert digest(other.path) != digest(a.path)

    conn = sqlite3.connect(a.path)
    one = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    assert one("SELECT count(*) FROM instructions") == 10
    assert {r[0]
            for r in conn.execute("SELECT count(*) FROM constraints WHERE active = 1 "
                                  "GROUP BY instruction_id")} == {39}
    assert {r[0] for r in conn.execute("SELECT condition FROM instructions")} == {"single", "none",
                                                                                  "direct", "eval"}
    # Revised constraints keep their lineage; single instructions have no reference B.
    assert one("SELECT count(*) FROM constraints c JOIN constraints o ON o.id = c.replaces_id"
               " WHERE c.origin = 'revised' AND o.active = 0 AND c.replaced_reason != ''") > 0
    assert one("SELECT count(*) FROM instructions WHERE condition = 'single' AND article_b IS NOT NULL") == 0
    # Articles of a pair share sentences.
    a_text, b_text = conn.execute("SELECT ta.body, tb.body FROM pairs p JOIN articles a ON a.id = p.article_a"
                                  " JOIN articles b ON b.id = p.article_b JOIN texts ta ON "
                                  "ta.hash = a.text_hash"
                                  " JOIN texts tb ON tb.hash = b.text_hash LIMIT 1").fetchone()
    assert set(a_text.split(". ")) & set(b_text.split(". "))
    # Two judges on every response and summary, for every active constraint.
    gens = one("SELECT count(*) FROM generations WHERE kind IN ('response', 'summary')")
    assert one("SELECT count(*) FROM verdicts") == gens * 39 * 2 == a.verdicts
    assert one("SELECT count(*) FROM verdicts WHERE quote_found = 'missing'") > 0
    assert one("SELECT count(DISTINCT annotator) FROM annotations") == 2
    conn.close()


def test_metrics_read_a_synthetic_store(tmp_path):
    from pipeline.analysis.metrics import compute_metrics
    from pipeline.store.database import open_store

    summary = build_synthetic_store(tmp_path / "s.sqlite", SyntheticSpec(n_instructions=8, seed=2))
    store = open_store(summary.path, readonly=True)
    metrics = compute_metrics(store, n_resamples=50)
    store.close()
    at = [g for g in metrics.groups if g.ratio == 0.25]
    assert {g.model for g in at} == {"model-a", "model-b"}
    # model-a is built to be the better instruction follower, with the smaller Org-Core gap.
    org = {m: sum(g.org.value for g in at if g.model == m) for m in ("model-a", "model-b")}
    assert org["model-a"] > org["model-b"]
