"""Pairing: neighbour search, the paper and research rules, storing, re-runs, BBC with MiniLM."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from pipeline.analysis.embeddings import embed_stored, get_embedder
from pipeline.cli import main
from pipeline.core.errors import CorpusError
from pipeline.stages.corpus import ImportOptions, import_corpus
from pipeline.stages.pairing import (
    PairOptions,
    choose_paper,
    choose_research,
    neighbours_brute,
    neighbours_index,
    pair_domain,
)
from pipeline.store.database import now, open_store


def unit(rows) -> np.ndarray:
    m = np.asarray(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def clustered(n: int, dim: int, clusters: int = 10, spread: float = 0.5, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim))
    return unit(centres[rng.integers(0, clusters, n)] + spread * rng.standard_normal((n, dim)))


def with_cosine(base: np.ndarray, c: float, rng: np.random.Generator) -> np.ndarray:
    """A unit vector with cosine exactly c to the unit vector ``base``."""
    noise = rng.standard_normal(base.shape)
    noise -= (noise @ base) * base
    noise /= np.linalg.norm(noise)
    return c * base + np.sqrt(1 - c * c) * noise


class TableEmbedder:
    """Maps texts 'article N ...' to preset vectors: pairing logic on exact cosines."""

    name = "table"

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = vectors
        self.dim = vectors.shape[1]

    def embed(self, texts):
        return np.stack([self.vectors[int(re.search(r"article (\d+)", t).group(1))] for t in texts])


def add_articles(store, n: int, domain: str = "news", start: int = 0) -> list[int]:
    ids = []
    for i in range(start, start + n):
        h = store.put_text(f"article {i} body")
        cur = store.conn.execute(
            "INSERT INTO articles(corpus, domain, source_id, title, text_hash, words, status, imported_at) "
            "VALUES ('t', ?, ?, '', ?, 400, 'kept', ?)", (domain, str(i), h, now()))
        ids.append(cur.lastrowid)
    store.commit()
    return ids


def test_brute_force_neighbours_match_a_full_sort():
    v = clustered(300, 16)
    ids, sims = neighbours_brute(v, 10, chunk=64)
    full = v @ v.T
    np.fill_diagonal(full, -np.inf)
    expected = np.argsort(-full, axis=1, kind="stable")[:, :10]
    assert np.allclose(np.sort(full, axis=1)[:, ::-1][:, :10], sims, atol=1e-5)
    assert (ids[:, 0] == expected[:, 0]).all()
    assert (ids != np.arange(300)[:, None]).all()


def test_index_neighbours_agree_with_brute_force():
    v = clustered(1500, 48)
    bi, _ = neighbours_brute(v, 8)
    ii, isims, report = neighbours_index(v, 8)
    assert report.method == "index" and min(report.recalls.values()) > 0
    assert (ii[:, 0] == bi[:, 0]).mean() >= 0.99
    assert (ii != np.arange(1500)[:, None]).all()
    assert np.allclose(isims[:, 0], np.einsum("ij,ij->i", v, v[ii[:, 0]]), atol=1e-4)


def test_index_falls_back_to_exact_search_when_its_recall_is_short():
    rng = np.random.default_rng(8)
    v = unit(rng.standard_normal((1200, 256)))  # random high-dimensional: HNSW's worst case
    bi, _ = neighbours_brute(v, 4)
    ii, _, report = neighbours_index(v, 4, connectivity=4, expansion_add=8, expansion_search=2,
                                     max_expansion=4,
                                     min_recall=0.999)
    assert report.method == "index->brute" and list(report.recalls) == [2, 4]
    assert max(report.recalls.values()) < 0.999
    assert np.array_equal(ii, bi)


def test_paper_rule_skips_near_duplicates_and_records_rank():
    rng = np.random.default_rng(1)
    base = unit([rng.standard_normal(32)])[0]
    v = unit([base, with_cosine(base, 0.95, rng), with_cosine(base, 0.88, rng), with_cosine(base, 0.80, rng),
              with_cosine(base, 0.40, rng)])
    ids, sims = neighbours_brute(v, 4)
    chosen = {a: (b, round(c, 3), r, rest) for a, b, c, r, rest in choose_paper(v, ids, sims, 0.85, 2)}
    b, c, rank, rest = chosen[0]
    assert (b, c, rank) == (3, 0.8, 3)  # 1 (0.95) and 2 (0.88) are too similar
    assert [j for j, _, _ in rest] == [4]  # the only other candidate below 0.85
    assert len(chosen) == 5  # every article gets a partner


def test_paper_rule_falls_back_to_all_articles_when_top_k_is_all_too_similar():
    rng = np.random.default_rng(2)
    base = unit([rng.standard_normal(16)])[0]
    near = [with_cosine(base, 0.99, rng) for _ in range(6)]
    v = unit([base, *near, with_cosine(base, 0.5, rng)])
    ids, sims = neighbours_brute(v, 3)  # top-3 holds only near-duplicates
    chosen = {a: (b, r) for a, b, _, r, _ in choose_paper(v, ids, sims, 0.85, 0)}
    assert chosen[0] == (7, 7)


def test_paper_rule_uses_each_unordered_pair_once():
    # Mutual nearest neighbours are common in clustered data: without the rule, A -> B and
    # B -> A are both stored and two instructions share the same two texts.
    v = clustered(120, 24, clusters=8, spread=0.9, seed=5)
    ids, sims = neighbours_brute(v, 8)
    chosen = choose_paper(v, ids, sims, 0.85, 2)
    unordered = [frozenset((a, b)) for a, b, *_ in chosen]
    assert len(unordered) == len(set(unordered))
    assert len(chosen) >= 115  # a mirror's second article takes its next candidate instead
    # The first article of a mutual pair keeps its nearest partner; the second moves down a rank.
    first = {a: (b, r) for a, b, _, r, _ in chosen}
    mutual = [(a, b) for a, (b, r) in first.items() if b > a and r == 1 and ids[b][0] == a]
    assert mutual and all(first[b][0] != a and first[b][1] > 1 for a, b in mutual)


def test_research_rule_window_and_one_pair_per_article():
    v = clustered(200, 24, clusters=6, spread=0.9, seed=3)
    ids, sims = neighbours_brute(v, 20)
    chosen = choose_research(v, ids, sims, 0.5, 0.85, 3)
    used = [a for a, *_ in chosen] + [b for _, b, *_ in chosen]
    assert len(used) == len(set(used)) and len(chosen) > 40
    for a, b, c, r, rest in chosen:
        assert 0.5 <= c < 0.85 and c == pytest.approx(float(v[a] @ v[b]), abs=1e-5)
        assert all(0.5 <= cj < 0.85 for _, cj, _ in rest)
    assert chosen == choose_research(v, ids, sims, 0.5, 0.85, 3)  # deterministic


def test_pair_domain_stores_auditable_pairs_and_reruns_cleanly(store):
    v = clustered(40, 32, clusters=4, spread=0.6, seed=4)
    ids = add_articles(store, 40)
    emb = TableEmbedder(v)
    s = pair_domain(store, emb, PairOptions(domain="news", rule="paper", candidates=3))
    assert (s.pairs, s.inserted, s.search) == (40, 40, "brute")
    rows = store.query("SELECT * FROM pairs ORDER BY article_a")
    index = {aid: i for i, aid in enumerate(ids)}
    partner = {index[r["article_a"]]: index[r["article_b"]] for r in rows}
    for row in rows:
        a, b = index[row["article_a"]], index[row["article_b"]]
        assert row["cosine"] == pytest.approx(float(v[a] @ v[b]), abs=1e-5) and row["cosine"] < 0.85
        others = [float(v[a] @ v[j]) for j in range(40) if j != a]
        assert row["rank"] == 1 + sum(c > row["cosine"] + 1e-5 for c in others)  # partner's rank among all
        # The most similar below 0.85, passing over the earlier articles that chose this one (no mirrors).
        allowed = [float(v[a] @ v[j]) for j in range(40) if j != a and not (j < a and partner[j] == a)]
        assert row["cosine"] == pytest.approx(max(c for c in allowed if c < 0.85), abs=1e-5)
        assert not (b < a and partner[b] == a)
        cands = json.loads(row["candidates"])
        assert len(cands) == 3 and all(c["cosine"] <= row["cosine"] + 1e-6 for c in cands)
        assert json.loads(row["params"]) == {"max_cos": 0.85, "model": "table", "candidates": 3,
                                             "search": "brute"}
    again = pair_domain(store, emb, PairOptions(domain="news", rule="paper", candidates=3))
    assert (again.unchanged, again.inserted, again.updated) == (40, 0, 0)
    assert store.scalar("SELECT count(*) FROM pairs") == 40
    changed = pair_domain(store, emb, PairOptions(domain="news", rule="paper", max_cos=0.6, candidates=3))
    assert changed.updated == 40 and store.scalar("SELECT max(cosine) FROM pairs") < 0.6
    assert store.scalar("SELECT count(*) FROM pairs") == 40


def test_research_rerun_removes_stale_pairs_but_keeps_used_ones(store):
    v = clustered(30, 16, clusters=3, spread=0.7, seed=5)
    add_articles(store, 30)
    emb = TableEmbedder(v)
    first = pair_domain(store, emb, PairOptions(domain="news", rule="research", min_cos=0.3, max_cos=0.95))
    assert first.pairs > 5
    used_pair = store.scalar("SELECT id FROM pairs ORDER BY id LIMIT 1")
    store.conn.execute("INSERT INTO instructions(run_id, domain, condition, pair_id) VALUES "
                       "('r', 'news', 'eval', ?)",
                       (used_pair,))
    store.commit()
    second = pair_domain(store, emb, PairOptions(domain="news", rule="research", min_cos=0.99, max_cos=0.995))
    assert second.pairs == 0 and second.kept_in_use == 1 and second.removed == first.pairs - 1
    assert store.scalar("SELECT count(*) FROM pairs") == 1
    # The paper rule's pairs live beside the research rule's.
    pair_domain(store, emb, PairOptions(domain="news", rule="paper"))
    assert store.scalar("SELECT count(*) FROM pairs WHERE rule = 'paper'") == 30


def test_index_path_beyond_the_brute_force_limit_matches_brute_force(store, tmp_path):
    v = clustered(300, 32, clusters=12, spread=0.5, seed=6)
    add_articles(store, 300)
    emb = TableEmbedder(v)
    brute = pair_domain(store, emb, PairOptions(domain="news"))
    b_pairs = dict(store.conn.execute("SELECT article_a, article_b FROM pairs"))
    idx = pair_domain(store, emb, PairOptions(domain="news", brute_force_limit=100))
    i_pairs = dict(store.conn.execute("SELECT article_a, article_b FROM pairs"))
    assert (brute.search, idx.search) == ("brute", "index")
    assert sum(b_pairs[a] == i_pairs[a] for a in b_pairs) / len(b_pairs) >= 0.99


def test_domains_are_paired_separately_and_need_two_articles(store):
    v = clustered(6, 8, seed=7)
    add_articles(store, 5, domain="news")
    add_articles(store, 1, domain="blog", start=5)
    s = pair_domain(store, TableEmbedder(v), PairOptions(domain="news"))
    assert s.pairs == 5
    assert store.scalar("SELECT count(*) FROM pairs WHERE domain = 'blog'") == 0
    with pytest.raises(CorpusError, match="domain 'blog': 1 kept article"):
        pair_domain(store, TableEmbedder(v), PairOptions(domain="blog"))
    with pytest.raises(CorpusError, match="domain 'story': 0 kept"):
        pair_domain(store, TableEmbedder(v), PairOptions(domain="story"))


def test_bad_rule_and_window_are_errors(store):
    add_articles(store, 3)
    with pytest.raises(CorpusError, match="unknown pairing rule"):
        pair_domain(store, TableEmbedder(np.eye(3)), PairOptions(domain="news", rule="random"))
    with pytest.raises(CorpusError, match="cosine window"):
        pair_domain(store, TableEmbedder(np.eye(3)),
                    PairOptions(domain="news", rule="research", min_cos=0.9, max_cos=0.8))


def test_cli_pair_with_hash_model(tmp_path, capsys):
    db = tmp_path / "s.sqlite"
    s = open_store(db)
    add_articles(s, 12)
    s.close()
    assert main(["--store", str(db), "pair", "--domain", "news", "--model", "hash"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "12 kept articles -> 12 pairs" in out
    s = open_store(db)
    assert s.scalar("SELECT count(*) FROM pairs WHERE rule = 'paper'") == 12
    s.close()
    assert main(["--store", str(db), "pair", "--domain", "nothing", "--model", "hash"]) == 2
    assert "0 kept article(s)" in capsys.readouterr().err
    assert main(["--store", str(tmp_path / "missing.sqlite"), "pair", "--model", "hash"]) == 2
    assert "no store here" in capsys.readouterr().err
    assert not (tmp_path / "missing.sqlite").exists()


def test_the_build_screen_s_pair_stage_reads_its_config(tmp_path):
    """run_pair as the app's Build screen runs it (pipeline.stages.step, no client): the domain,
    rule and embedding model come from the config's [pair]."""
    from types import SimpleNamespace

    from pipeline.core.progress import StopFlag
    from pipeline.stages.pairing import run_pair
    from pipeline.stages.step import run_stage_blocking

    db = tmp_path / "s.sqlite"
    s = open_store(db)
    add_articles(s, 12)
    add_articles(s, 4, domain="story", start=12)
    s.close()
    config = SimpleNamespace(settings={"pair": {"domain": "news", "rule": "research", "model": "hash"}})
    summary = run_stage_blocking(run_pair, store_path=db, config=config, run_id="r",
                                 progress=lambda event: None,
                                 stop=StopFlag(), max_units=None, needs_client=False, stage="pair")
    assert (summary.domain, summary.rule, summary.model, summary.articles) == ("news",
                                                                               "research", "hash-256", 12)
    s = open_store(db)
    assert s.scalar("SELECT count(*) FROM pairs WHERE rule = 'research' AND domain = 'news'") == summary.pairs
    s.close()


def test_bbc_import_and_pair_with_minilm(store):
    """The bundled BBC set, first 60 files, MiniLM: every kept article gets its most similar
    partner below 0.85 that has not already chosen it, checked against the cached vectors."""
    summary = import_corpus(store, ImportOptions(fmt="bbc-news", limit=60), get_embedder("minilm"))
    kept = summary.statuses["pending"] - summary.near_duplicates
    assert summary.read == 60 and kept >= 15
    assert store.scalar("SELECT count(*) FROM articles WHERE status = 'kept'") == kept
    s = pair_domain(store, get_embedder("minilm"), PairOptions(domain="news"))
    assert s.pairs == kept and s.model == "all-MiniLM-L6-v2"
    arts = store.query("SELECT id, text_hash FROM articles WHERE status = 'kept' ORDER BY id")
    v = embed_stored(store, get_embedder("minilm"), [a["text_hash"] for a in arts])  # from the cache
    pos = {a["id"]: i for i, a in enumerate(arts)}
    rows = store.query("SELECT article_a, article_b, cosine FROM pairs")
    partner = {pos[r["article_a"]]: pos[r["article_b"]] for r in rows}
    for row in rows:
        a = pos[row["article_a"]]
        sims = v @ v[a]
        sims[a] = -1
        for j in range(a):  # an earlier article that chose this one is not taken back (no mirror pair)
            if partner.get(j) == a:
                sims[j] = -1
        assert row["article_b"] == arts[int(np.argmax(np.where(sims < 0.85, sims, -1)))]["id"]
    assert len({frozenset(p) for p in partner.items()}) == len(partner)
    # Vectors came from the import's near-duplicate check: pairing embedded nothing new.
    assert store.scalar("SELECT count(*) FROM embeddings WHERE model "
                        "= 'all-MiniLM-L6-v2'") == summary.statuses["pending"]
