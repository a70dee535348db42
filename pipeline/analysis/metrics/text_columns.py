"""Columns that read texts: copied n-grams against the references (kept in copy_stats) and
embedding similarity."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pipeline.analysis import copying
from pipeline.analysis.metrics.base import Row
from pipeline.store import metrics as reads
from pipeline.store.constraints import active_constraints_of

if TYPE_CHECKING:
    from pipeline.analysis.embeddings import Embedder
    from pipeline.store.database import Store


def _response_and_reference_hashes(store: Store, rows: list[Row]) -> tuple[dict[int, str], dict[int, str]]:
    resp = reads.text_hashes(store, "generations", [r.response_id for r in rows])
    references = [a for r in rows for a in (r.article_a, r.article_b) if a is not None]
    arts = reads.text_hashes(store, "articles", references)
    return resp, arts


def _add_copying(store: Store, rows: list[Row], ngram: int) -> None:
    """copy_a_ngrams, copy_a_share, copy_b_ngrams, copy_b_share, copy_longest per response.

    Counts are kept in the store's copy_stats table by the texts' hashes; only new pairs of
    texts are read and compared."""
    resp, arts = _response_and_reference_hashes(store, rows)
    known = reads.stored_copy_stats(store, ngram)
    needed = {(resp.get(r.response_id), arts.get(article)) for r in rows
              for article in (r.article_a, r.article_b)
              if article is not None}
    missing = sorted((r, a) for r, a in needed if r and a and (r, a) not in known)
    if missing:
        bodies = reads.text_bodies(store, {h for pair in missing for h in pair})
        fresh = {}
        for r, a in missing:
            if r in bodies and a in bodies:
                stats = copying.copy_stats(bodies[r], bodies[a], ngram)
                fresh[(r, a)] = (stats.shared_ngrams, stats.copied_words, stats.words, stats.longest)
        reads.keep_copy_stats(store, ngram, fresh)
        known.update(fresh)

    def reference_hash(article: int | None) -> str | None:
        return None if article is None else arts.get(article)

    per_response: dict[int, dict[str, float]] = {}
    for row in rows:
        values = per_response.get(row.response_id)
        if values is None:
            values = per_response[row.response_id] = _copy_values(
                known, resp.get(row.response_id),
                (("a", reference_hash(row.article_a)), ("b", reference_hash(row.article_b))))
        row.extra.update(values)


def _copy_values(known: reads.CopyCounts, r_hash: str | None,
                 references: Sequence[tuple[str, str | None]]) -> dict[str, float]:
    values: dict[str, float] = {}
    longest = 0
    for label, a_hash in references:
        counts = known.get((r_hash, a_hash)) if r_hash and a_hash else None
        if counts is None:
            continue
        shared, copied, words, span = counts
        values[f"copy_{label}_ngrams"] = float(shared)
        values[f"copy_{label}_share"] = copied / words if words else 0.0
        longest = max(longest, span)
    if values:
        values["copy_longest"] = float(longest)
    return values


def _stored_reference_similarity(store: Store, instruction_id: int, method: str,
                                 constraint_ids: Sequence[int]) -> dict[str, float] | None:
    """sim_ref_a / sim_ref_b from the stored values (pipeline.analysis.similarity: the one definition
    the app and the HTML show), when every active constraint has one by this embedder; else None.
    Only the instruction's own references become columns: for ``single``, the stored B (the
    pair's partner) is not the instruction's B, and its column stays empty as before."""
    from pipeline.analysis.similarity import constraint_similarities

    sims = constraint_similarities(store, instruction_id=instruction_id)
    chosen = [sims.get(cid) for cid in constraint_ids]
    found = [s for s in chosen if s is not None and s.method == method]
    if not chosen or len(found) < len(chosen):
        return None
    values = {"sim_ref_a": float(np.mean([s.to_a for s in found]))}
    to_b = [s.to_b for s in found if s.to_b is not None]
    if len(to_b) == len(found):
        values["sim_ref_b"] = float(np.mean(to_b))
    return values


def _add_similarity(store: Store, rows: list[Row], embedder: Embedder) -> None:
    """sim_ref_a / sim_ref_b (cosine), lex_ref_a / lex_ref_b (lexical overlap) per instruction;
    sim_response per response: the mean over its constraints of their echo (pipeline.analysis.echo,
    the research code's copy-paste score), read where the echo stage stored it by this embedder and
    computed by the same function where not."""
    from pipeline.analysis.echo import text_echoes
    from pipeline.analysis.embeddings import embed_texts
    from pipeline.store.echo import echoes_of

    resp, arts = _response_and_reference_hashes(store, rows)
    bodies = reads.text_bodies(store, {*resp.values(), *arts.values()})
    active_rows = active_constraints_of(store, [r.instruction_id for r in rows])
    constraints = {iid: [c.text for c in active] for iid, active in active_rows.items()}
    stored_echo = echoes_of(store, list(resp), embedder.name)
    # One embedding call for every distinct text: the cache makes repeats free anyway.
    all_texts = list(dict.fromkeys(
        [t for ts in constraints.values() for t in ts]
        + [bodies[h] for h in arts.values() if h in bodies]
    ))
    if not all_texts:
        return
    vectors = embed_texts(store, embedder, all_texts)
    index = {t: i for i, t in enumerate(all_texts)}

    def vecs(texts: Sequence[str]) -> np.ndarray:
        return vectors[[index[t] for t in texts]] if texts else np.zeros((0, vectors.shape[1]),
                                                                         dtype=np.float32)

    per_instruction: dict[int, dict[str, float]] = {}
    per_response: dict[int, float] = {}
    for row in rows:
        cons = constraints.get(row.instruction_id, [])
        if row.instruction_id not in per_instruction:
            values: dict[str, float] = {}
            cv = vecs(cons)
            stored = _stored_reference_similarity(store, row.instruction_id, embedder.name,
                                                  [c.id for c in active_rows.get(row.instruction_id, [])])
            for label, article in (("a", row.article_a), ("b", row.article_b)):
                body = bodies.get(arts.get(article, ""), "") if article is not None else ""
                if not body or not cons:
                    continue
                if stored is not None and f"sim_ref_{label}" in stored:
                    values[f"sim_ref_{label}"] = stored[f"sim_ref_{label}"]
                else:
                    values[f"sim_ref_{label}"] = float((cv @ vectors[index[body]]).mean())
                values[f"lex_ref_{label}"] = float(np.mean([copying.lexical_overlap(c, body) for c in cons]))
            per_instruction[row.instruction_id] = values
        if row.response_id not in per_response:
            active = active_rows.get(row.instruction_id, [])
            found = [stored_echo.get((row.response_id, c.id)) for c in active]
            echoes = [e for e in found if e is not None]
            if len(echoes) < len(found):
                text = bodies.get(resp.get(row.response_id, ""), "")
                echoes = [e for e, _ in text_echoes(store, embedder, text, cons)] if text else []
            per_response[row.response_id] = float(np.mean(echoes)) if echoes else math.nan
        row.extra.update(per_instruction[row.instruction_id])
        row.extra["sim_response"] = per_response[row.response_id]
