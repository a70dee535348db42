"""Pairing: for each reference article A, a similar-but-different partner B (docs/method.md part 1).

Two rules:
  paper     B = the most similar other kept article with cosine < max_cos (0.85), so
            near-duplicates are passed over. Every article gets a partner and partners repeat,
            but each unordered pair is used once: when B already took A as its partner, A
            takes its next candidate (a mirror pair would give two instructions the same two
            texts and count one comparison twice).
  research  B = a partner with min_cos <= cosine < max_cos ([0.70, 0.85)), each article in
            at most one pair: greedy in article-id order, A takes its most similar free
            partner in the window. Deterministic; articles with no free partner stay unpaired.
(The upper bound is exclusive in both rules so they agree at the threshold.)

Each pair keeps what an audit needs: the cosine, B's rank among A's neighbours (1 = most
similar), the rule and its parameters, and the next candidates A could have had.

Neighbours come from a full similarity matrix in chunks up to ``brute_force_limit`` kept
articles, and from a usearch HNSW index beyond, which avoids the n x n matrix.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.analysis.embeddings import get_embedder
from pipeline.core.definitions import PAIR_FLOOR
from pipeline.core.errors import CorpusError
from pipeline.core.progress import ProgressEvent, ProgressHook, StopFlag, no_progress
from pipeline.stages.settings import RULES, section
from pipeline.store.articles import count_articles, kept_articles
from pipeline.store.database import now
from pipeline.store.instructions import pair_ids_in_use
from pipeline.store.pairs import PairWrite, stored_pairing, write_pairing

if TYPE_CHECKING:
    from pipeline.analysis.embeddings import Embedder
    from pipeline.core.config import Config
    from pipeline.store.database import Store

BRUTE_FORCE_LIMIT = 4000
# HNSW settings. Real sentence embeddings have a low intrinsic dimension, where a small
# graph is accurate (bench/pairing.py: >= 0.99 agreement with brute force at expansion 64).
# Random 768-dim vectors are the opposite: no affordable setting reaches 0.99 there, so every
# search checks itself on a sample and falls back to exact search when it falls short.
INDEX_CONNECTIVITY = 16
INDEX_EXPANSION_ADD = 64
INDEX_EXPANSION_SEARCH = 64
INDEX_MAX_EXPANSION = 1024
INDEX_MIN_RECALL = 0.99  # share of sampled articles whose nearest neighbour the index finds
INDEX_CHECK_SAMPLE = 500


@dataclass
class PairOptions:
    domain: str
    rule: str = "paper"
    max_cos: float = 0.85
    min_cos: float = 0.70  # research rule only
    candidates: int = 5  # next candidates stored per pair
    brute_force_limit: int = BRUTE_FORCE_LIMIT
    floor: float = PAIR_FLOOR  # pairs below this cosine are reported (a build refuses them unless allowed)

    def params(self, model: str, search: str) -> dict[str, Any]:
        out: dict[str, Any] = {"max_cos": self.max_cos, "model": model, "candidates": self.candidates,
                               "search": search}
        if self.rule == "research":
            out["min_cos"] = self.min_cos
        return out


@dataclass
class Choice:
    article_a: int
    article_b: int
    cosine: float
    rank: int
    candidates: list[dict[str, Any]]


@dataclass
class PairSummary:
    domain: str
    rule: str
    model: str
    search: str  # brute | index | index->brute
    articles: int  # kept articles in the domain
    pairs: int = 0
    unpaired: list[int] = field(default_factory=list)  # articles in no pair (neither A nor B)
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0  # old pairs of this rule whose A is no longer paired
    kept_in_use: int = 0  # such old pairs kept because instructions use them
    pending: int = 0  # articles of the domain still awaiting the near-duplicate check
    seconds: dict[str, float] = field(default_factory=dict)
    mean_cosine: float = 0.0
    search_detail: str = ""  # the index's expansion and sampled recall
    floor: float = PAIR_FLOOR
    below_floor: list[tuple[int, int, float]] = field(default_factory=list)  # (A, B, cosine) under the floor


# -- neighbour search ------------------------------------------------------------------------
def neighbours_brute(vectors: np.ndarray, k: int, chunk: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k neighbours (self excluded) of every row, sorted by cosine descending.

    Chunked so memory stays at chunk x n, never n x n."""
    n = len(vectors)
    k = min(k, n - 1)
    ids = np.empty((n, k), dtype=np.int64)
    sims = np.empty((n, k), dtype=np.float32)
    for start in range(0, n, chunk):
        block = vectors[start : start + chunk] @ vectors.T
        rows = np.arange(block.shape[0])
        block[rows, rows + start] = -np.inf  # not one's own neighbour
        part = np.argpartition(-block, k - 1, axis=1)[:, :k] if k < n else np.argsort(-block, axis=1)[:, :k]
        part_sims = np.take_along_axis(block, part, axis=1)
        order = np.argsort(-part_sims, axis=1, kind="stable")
        ids[start : start + len(block)] = np.take_along_axis(part, order, axis=1)
        sims[start : start + len(block)] = np.take_along_axis(part_sims, order, axis=1)
    return ids, sims


@dataclass
class SearchReport:
    """How the neighbours were found, for the summary and the bench."""

    method: str  # brute | index | index->brute (the index missed the recall target)
    expansion: int | None = None  # the index's final expansion_search
    recalls: dict[int, float] = field(default_factory=dict)  # sampled recall per expansion tried
    seconds: dict[str, float] = field(default_factory=dict)


def build_index(vectors: np.ndarray, *, connectivity: int = INDEX_CONNECTIVITY,
                expansion_add: int = INDEX_EXPANSION_ADD):
    """A usearch HNSW index on inner product (rows are unit length: inner product = cosine)."""
    from usearch.index import Index

    index = Index(ndim=vectors.shape[1], metric="ip", dtype="f32", connectivity=connectivity,
                  expansion_add=expansion_add)
    index.add(np.arange(len(vectors), dtype=np.uint64), np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def search_index(index: Any, queries: np.ndarray, query_ids: np.ndarray, k: int,
                 expansion_search: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k neighbours of ``queries`` (rows ``query_ids`` of the index), self excluded;
    missing slots get id -1 and cosine -inf."""
    n = len(queries)
    index.expansion_search = max(expansion_search, k + 1)
    matches = index.search(np.ascontiguousarray(queries, dtype=np.float32), k + 1)
    keys = np.asarray(matches.keys).astype(np.int64).reshape(n, -1)
    dist = np.asarray(matches.distances, dtype=np.float32).reshape(n, -1)
    counts = np.asarray(matches.counts).reshape(n)
    ids = np.full((n, k), -1, dtype=np.int64)
    sims = np.full((n, k), -np.inf, dtype=np.float32)
    for i in range(n):
        row_keys, row_sims = keys[i, : counts[i]], 1.0 - dist[i, : counts[i]]
        keep = row_keys != query_ids[i]
        row_keys, row_sims = row_keys[keep][:k], row_sims[keep][:k]
        ids[i, : len(row_keys)] = row_keys
        sims[i, : len(row_keys)] = row_sims
    return ids, sims


def neighbours_index(
    vectors: np.ndarray, k: int, *, connectivity: int = INDEX_CONNECTIVITY,
    expansion_add: int = INDEX_EXPANSION_ADD,
    expansion_search: int = INDEX_EXPANSION_SEARCH, max_expansion: int = INDEX_MAX_EXPANSION,
    min_recall: float = INDEX_MIN_RECALL, sample: int = INDEX_CHECK_SAMPLE, fallback: bool = True,
) -> tuple[np.ndarray, np.ndarray, SearchReport]:
    """Top-k neighbours (self excluded) from an HNSW index, checked against exact search.

    The index answers a random sample first; while its nearest neighbours agree with the
    exact ones on less than ``min_recall`` of the sample, expansion_search doubles up to
    ``max_expansion``. Past that, exact search (``fallback``) or the best index answer."""
    n = len(vectors)
    k = min(k, n - 1)
    report = SearchReport("index")
    t0 = time.perf_counter()
    index = build_index(vectors, connectivity=connectivity, expansion_add=expansion_add)
    report.seconds["build"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    picks = np.random.default_rng(0).choice(n, size=min(sample, n), replace=False)
    exact = vectors[picks] @ vectors.T
    exact[np.arange(len(picks)), picks] = -np.inf
    truth = np.argmax(exact, axis=1)
    es = expansion_search
    while True:
        got, _ = search_index(index, vectors[picks], picks, 1, es)
        report.recalls[es] = float((got[:, 0] == truth).mean())
        if report.recalls[es] >= min_recall or es >= max_expansion:
            break
        es *= 2
    report.expansion = es
    report.seconds["check"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if report.recalls[es] < min_recall and fallback:
        ids, sims = neighbours_brute(vectors, k)
        report.method = "index->brute"
        report.seconds["brute"] = time.perf_counter() - t0
    else:
        ids, sims = search_index(index, vectors, np.arange(n), k, es)
        report.seconds["search"] = time.perf_counter() - t0
    return ids, sims, report


def nearest(vectors: np.ndarray, k: int,
            brute_force_limit: int = BRUTE_FORCE_LIMIT) -> tuple[np.ndarray, np.ndarray, SearchReport]:
    if len(vectors) <= brute_force_limit:
        t0 = time.perf_counter()
        ids, sims = neighbours_brute(vectors, k)
        return ids, sims, SearchReport("brute", seconds={"brute": time.perf_counter() - t0})
    return neighbours_index(vectors, k)


def _exact_row(vectors: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Every other row ranked by cosine with row i: the fallback when the top-k ran out."""
    sims = vectors @ vectors[i]
    sims[i] = -np.inf
    order = np.argsort(-sims, kind="stable")[:-1]
    return order, sims[order]


# -- the rules -----------------------------------------------------------------------------------
def choose_paper(vectors: np.ndarray, ids: np.ndarray, sims: np.ndarray, max_cos: float,
                 n_candidates: int) -> list[tuple[int, int, float, int, list[tuple[int, float, int]]]]:
    """(a, b, cosine, rank, next candidates as (index, cosine, rank)) per row, in row order.
    No unordered pair twice: a row skips the rows that already chose it as their partner."""
    out = []
    chosen_by: dict[int, set[int]] = {}  # row -> the earlier rows that took it as partner B
    for i in range(len(vectors)):
        row_ids, row_sims = ids[i], sims[i]
        skip = chosen_by.get(i, set())
        picked = _first_below(row_ids, row_sims, max_cos, 1 + n_candidates, skip)
        if len(picked) < 1 + n_candidates and len(row_ids) < len(vectors) - 1:
            row_ids, row_sims = _exact_row(vectors, i)  # the top-k was all near-duplicates (or mirrors)
            picked = _first_below(row_ids, row_sims, max_cos, 1 + n_candidates, skip)
        if picked:
            (b, c, r), rest = picked[0], picked[1:]
            chosen_by.setdefault(b, set()).add(i)
            out.append((i, b, c, r, rest))
    return out


def _first_below(row_ids: np.ndarray, row_sims: np.ndarray, max_cos: float, want: int,
                 skip: set[int] = frozenset()) -> list[tuple[int, float, int]]:  # type: ignore[assignment]
    picked = []
    for rank, (j, c) in enumerate(zip(row_ids.tolist(), row_sims.tolist()), 1):
        if j < 0:
            break
        if c < max_cos and j not in skip:
            picked.append((j, c, rank))
            if len(picked) == want:
                break
    return picked


def choose_research(vectors: np.ndarray, ids: np.ndarray, sims: np.ndarray, min_cos: float, max_cos: float,
                    n_candidates: int) -> list[tuple[int, int, float, int, list[tuple[int, float, int]]]]:
    """Greedy in row order: each free A takes its most similar free partner in [min, max)."""
    used = np.zeros(len(vectors), dtype=bool)
    out = []
    for i in range(len(vectors)):
        if used[i]:
            continue
        row_ids, row_sims = ids[i], sims[i]
        found = _in_window(row_ids, row_sims, used, min_cos, max_cos, 1 + n_candidates)
        if found is None and len(row_ids) < len(vectors) - 1:
            # The top-k ended before the window did: look at every article.
            row_ids, row_sims = _exact_row(vectors, i)
            found = _in_window(row_ids, row_sims, used, min_cos, max_cos, 1 + n_candidates)
        picked = found or []
        if picked:
            (b, c, r), rest = picked[0], picked[1:]
            used[i] = used[b] = True
            out.append((i, b, c, r, rest))
    return out


def _in_window(row_ids: np.ndarray, row_sims: np.ndarray, used: np.ndarray, min_cos: float, max_cos: float,
               want: int) -> list[tuple[int, float, int]] | None:
    """Free neighbours in the window, in rank order; None when the list ran out while still
    above min_cos (the answer may lie beyond it)."""
    picked: list[tuple[int, float, int]] = []
    for rank, (j, c) in enumerate(zip(row_ids.tolist(), row_sims.tolist()), 1):
        if j < 0:
            return picked if picked else None
        if c < min_cos:
            return picked  # sorted: nothing further is in the window
        if c < max_cos and not used[j]:
            picked.append((j, c, rank))
            if len(picked) == want:
                return picked
    return picked if picked else None


# -- the stage -------------------------------------------------------------------------------------
def pair_domain(
    store: Store, embedder: Embedder, options: PairOptions, *,
    progress: ProgressHook = no_progress, stop: StopFlag | None = None,
) -> PairSummary:
    """Pair the domain's kept articles under one rule and store the pairs.

    Re-running with the same rule updates rows in place (unique on domain, rule, article_a):
    identical pairs stay untouched, changed ones are rewritten, and pairs whose A is no
    longer paired are removed unless instructions already use them."""
    from pipeline.stages.corpus import article_vectors

    if options.rule not in RULES:
        raise CorpusError(f"unknown pairing rule {options.rule!r}; one of {', '.join(RULES)}")
    if not -1 < options.max_cos <= 1:
        raise CorpusError(f"--max-cos {options.max_cos}: need a cosine in (-1, 1]")
    if options.rule == "research" and not -1 <= options.min_cos < options.max_cos:
        raise CorpusError(f"cosine window [{options.min_cos}, {options.max_cos}): need -1 <= min < max <= 1")
    articles = kept_articles(store, options.domain)
    pending = count_articles(store, options.domain, "pending")
    if len(articles) < 2:
        total = count_articles(store, options.domain)
        hint = (f"; {pending} await the near-duplicate check (re-run `unspecific corpus add`)"
                if pending else "")
        raise CorpusError(
            f"domain '{options.domain}': {len(articles)} kept article(s) of {total} imported{hint}; "
            "pairing needs at least two (import more with `unspecific corpus add --domain "
            f"{options.domain} ...`, or run `unspecific corpus add` on the same file with "
            "a wider --min-words/"
            "--max-words: the stored articles are re-classified; `unspecific corpus list` "
            "shows their lengths)"
        )
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    vectors = article_vectors(store, embedder, articles, progress=progress)
    timings["embed"] = time.perf_counter() - t0
    if stop:  # embeddings done are cached; pairing itself is quick to redo
        return PairSummary(options.domain, options.rule, embedder.name, "-", len(articles), pending=pending,
                           seconds=timings)

    n = len(articles)
    k = min(n - 1, max(32, 4 * (options.candidates + 1)))
    progress(ProgressEvent("pair", 0, n, f"{n} articles, rule {options.rule}, finding {k} neighbours each"))
    t0 = time.perf_counter()
    ids, sims, report = nearest(vectors, k, options.brute_force_limit)
    search = report.method
    timings["search"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if options.rule == "paper":
        chosen = choose_paper(vectors, ids, sims, options.max_cos, options.candidates)
    else:
        chosen = choose_research(vectors, ids, sims, options.min_cos, options.max_cos, options.candidates)
    timings["choose"] = time.perf_counter() - t0
    progress(ProgressEvent("pair", n, n, f"{len(chosen)} pairs"))

    aid = [a.id for a in articles]
    choices = [
        Choice(aid[a], aid[b], round(c, 6), r,
               [{"article": aid[j], "cosine": round(cj, 6), "rank": rj} for j, cj, rj in rest])
        for a, b, c, r, rest in chosen
    ]
    summary = PairSummary(options.domain, options.rule, embedder.name, search, n, pairs=len(choices),
                          pending=pending, seconds=timings)
    paired = {c.article_a for c in choices} | {c.article_b for c in choices}
    summary.unpaired = [i for i in aid if i not in paired]
    summary.mean_cosine = float(np.mean([c.cosine for c in choices])) if choices else 0.0
    summary.floor = options.floor
    summary.below_floor = [(c.article_a, c.article_b, c.cosine) for c in choices if c.cosine < options.floor]
    if summary.below_floor:
        progress(ProgressEvent("pair", n, n, f"{len(summary.below_floor)} of {len(choices)} pairs below "
                               f"the floor {options.floor:.2f} (not similar: a build refuses them unless "
                               "allowed)",
                               kind="log"))
    if report.recalls:
        tried = ", ".join(f"{es}: {r:.3f}" for es, r in report.recalls.items())
        summary.search_detail = f"index sampled recall by expansion_search {{{tried}}}"
    _store_pairs(store, options, options.params(embedder.name, search), choices, summary)
    return summary


async def run_pair(store: Store, config: Config | None, client: None, options: Any, *, progress: ProgressHook,
                   stop: StopFlag | None = None, max_units: int | None = None) -> PairSummary:
    """Pairing behind the stage convention (pipeline.stages.step), as the app's Build screen runs it:
    one domain is one unit, the domain, rule and embedding model from the config's [pair]."""
    settings = section(config, "pair")
    embedder = await asyncio.to_thread(get_embedder, settings.model)
    opts = PairOptions(domain=settings.domain, rule=settings.rule, floor=settings.floor)
    return await asyncio.to_thread(pair_domain, store, embedder, opts, progress=progress, stop=stop)


def pair_floor(config: Config) -> float:
    """The cosine under which a pair is not similar: [pair] floor, else PAIR_FLOOR."""
    return float(section(config, "pair").floor)


def _store_pairs(store: Store, options: PairOptions, params: dict[str, Any], choices: list[Choice],
                 summary: PairSummary) -> None:
    params_json = json.dumps(params, sort_keys=True)
    existing = stored_pairing(store, options.domain, options.rule)
    in_use = pair_ids_in_use(store)
    writes: list[PairWrite] = []
    for c in choices:
        old = existing.pop(c.article_a, None)
        if old is not None and old.article_b == c.article_b and old.params == params_json:
            summary.unchanged += 1
            continue
        writes.append(PairWrite(None if old is None else old.id, c.article_a, c.article_b, c.cosine, c.rank,
                                json.dumps(c.candidates), params_json))
        if old is None:
            summary.inserted += 1
        else:
            summary.updated += 1
    removed: list[int] = []
    for old in existing.values():  # A no longer paired under this rule
        if old.id in in_use:
            summary.kept_in_use += 1
        else:
            removed.append(old.id)
            summary.removed += 1
    write_pairing(store, options.domain, options.rule, writes, removed, now())


def summary_dict(summary: PairSummary) -> dict[str, Any]:
    out = asdict(summary)
    out["unpaired"] = len(summary.unpaired)
    out["below_floor"] = len(summary.below_floor)
    return out
