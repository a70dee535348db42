"""Compute and store constraint-reference similarity (read back through
pipeline.analysis.similarity.constraint_similarities).

Per active constraint: similarity to reference A and to reference B. With an embedder, the cosine
of the constraint's and the reference's vectors (cached in the ``embeddings`` table, so the
specificity-leak flag and a re-run reuse them); without one, ``lexical``: the share of the
constraint's content words found in the reference (pipeline.analysis.copying.lexical_overlap).

References, as the benchmark shows them (Audit's panes, the report's sim_ref_a/sim_ref_b): A is
the instruction's article A, B its article B; None for ``single`` (written from A alone) and for an
imported list of one reference. (The specificity-leak flag compares a ``single`` constraint with the
pair's partner too: that is the flag's own check, pipeline.analysis.flags.flag_instruction.) An
instruction with no article A has nothing to compare: skipped.

Resumable: each instruction's values are committed together, and vectors per embedding batch;
a re-run computes only constraints with no value by this method (a constraint replaced by revision
is a new constraint, so it has none)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.analysis.similarity import LEXICAL, lexical_similarity
from pipeline.core.errors import EmbeddingError, StageError
from pipeline.core.progress import ProgressEvent, ProgressHook, StopFlag, no_progress
from pipeline.store.articles import article_text_hash
from pipeline.store.constraints import ActiveConstraint, active_constraints
from pipeline.store.instructions import get_instruction
from pipeline.store.similarity import (
    SimilarityRow,
    constraints_lacking,
    instructions_with_constraints,
    put_similarities,
)

if TYPE_CHECKING:
    from pipeline.analysis.embeddings import Embedder
    from pipeline.store.database import Store

# The embedder when neither --embedder nor [build] embedder names one: the paper's model.
DEFAULT_EMBEDDER = "mpnet"
# Replaces that default (never an explicit choice): the tests set it to ``hash`` so no test loads mpnet.
EMBEDDER_ENV = "UNSPECIFIC_EMBEDDER"
# Names that mean "no embedder": similarity is lexical.
NO_EMBEDDER = ("lexical", "none")


def embedder_name(name: str | None) -> str:
    """The embedder to use: ``name`` when given, else $UNSPECIFIC_EMBEDDER, else mpnet."""
    return (name or os.environ.get(EMBEDDER_ENV) or DEFAULT_EMBEDDER).strip()


def check_embedder_name(name: str | None, where: str) -> None:
    """Raise a StageError naming ``where`` (the setting) unless ``name`` could be an embedder
    (pipeline.analysis.embeddings.canonical_embedder); loads nothing, so a build can check it before any
    work."""
    from pipeline.analysis.embeddings import canonical_embedder

    key = embedder_name(name)
    if key.lower() in NO_EMBEDDER:
        return
    try:
        canonical_embedder(key)
    except EmbeddingError:
        raise StageError(f"{where}: unknown embedder {key!r}: use mpnet (the default), minilm, hash, "
                         f"lexical or none (no embedding), or a folder holding a "
                         "sentence-transformers model") from None


def resolve_embedder(name: str | None, where: str) -> Embedder | None:
    """The embedder ``name`` (after the default) stands for, or None for lexical similarity."""
    check_embedder_name(name, where)
    key = embedder_name(name)
    if key.lower() in NO_EMBEDDER:
        return None
    from pipeline.analysis.embeddings import get_embedder

    return get_embedder(key)


def similarity_method(embedder: Embedder | None) -> str:
    return embedder.name if embedder is not None else LEXICAL


@dataclass(frozen=True)
class References:
    a: str  # text hash of reference A
    b: str | None  # text hash of reference B, None when there is none


def instruction_references(store: Store, instruction_id: int) -> References | None:
    """A and B as the module docstring defines them; None without an article A."""
    inst = get_instruction(store, instruction_id)
    if inst is None:
        return None
    a = article_text_hash(store, inst.article_a)
    if a is None:
        return None
    b_id = inst.article_b
    return References(a, article_text_hash(store, b_id) if b_id is not None else None)


def _embedded(store: Store, embedder: Embedder, instruction_id: int, constraints: Sequence[ActiveConstraint],
              refs: References) -> list[SimilarityRow]:
    from pipeline.analysis.embeddings import embed_stored, embed_texts

    ref_vectors = embed_stored(store, embedder, [refs.a] + ([refs.b] if refs.b else []))
    vectors = embed_texts(store, embedder, [c.text for c in constraints])
    sims = vectors @ ref_vectors.T  # unit rows: cosines, as pipeline.analysis.flags.embedding_cosines
    return [SimilarityRow(c.id, instruction_id, embedder.name, float(row[0]), float(row[1])
                          if refs.b else None)
            for c, row in zip(constraints, sims, strict=True)]


def _lexical(store: Store, instruction_id: int, constraints: Sequence[ActiveConstraint],
             refs: References) -> list[SimilarityRow]:
    ref_a = store.get_text(refs.a)
    ref_b = store.get_text(refs.b) if refs.b else None
    sims = [lexical_similarity(c.id, c.text, ref_a, ref_b) for c in constraints]
    return [SimilarityRow(s.constraint_id, instruction_id, s.method, s.to_a, s.to_b) for s in sims]


def compute_similarities(store: Store, embedder: Embedder | None, *,
                         instruction_ids: Sequence[int] | None = None,
                         progress: ProgressHook = no_progress, stop: StopFlag | None = None) -> int:
    """Compute and store the missing similarities of these instructions' active constraints (every
    instruction with constraints when None). Returns how many constraints got a value."""
    method = similarity_method(embedder)
    ids = list(instruction_ids) if instruction_ids is not None else instructions_with_constraints(store)
    lacking = constraints_lacking(store, method, ids)
    total = sum(len(v) for v in lacking.values())
    progress(ProgressEvent("similarity", 0, total,
                           f"{method}: {total} constraints to compare with their references"))
    done = stored = 0
    for instruction_id in sorted(lacking):
        if stop:
            break
        refs = instruction_references(store, instruction_id)
        wanted = lacking[instruction_id]
        if refs is not None:
            constraints = [c for c in active_constraints(store, instruction_id) if c.id in wanted]
            rows = (_embedded(store, embedder, instruction_id, constraints, refs) if embedder is not None
                    else _lexical(store, instruction_id, constraints, refs))
            put_similarities(store, rows)  # commits: a killed run keeps every finished instruction
            stored += len(rows)
        done += len(wanted)
        progress(ProgressEvent("similarity", done, total))
    return stored


def compute_for_run(store: Store, embedder: Embedder | None, *, run_id: str | None = None,
                    progress: ProgressHook = no_progress, stop: StopFlag | None = None) -> int:
    """Every instruction of a run (or of the store) with constraints: the CLI's way to fill in a store."""
    return compute_similarities(store, embedder,
                                instruction_ids=instructions_with_constraints(store, run_id=run_id),
                                progress=progress, stop=stop)
