"""Constraint-reference similarity: how close each constraint sits to reference A and to B.

The one definition every view shows (the app, the report, the HTML). Values are computed once by
pipeline.stages.similarity (the build runs it by default with the configured embedder; `unspecific
similarity` fills in an older store) and read here from the store:

    sims = constraint_similarities(store, instruction_id=42)   # {constraint id: Similarity}
    sims[cid].to_a, sims[cid].to_b, sims[cid].highest, sims[cid].method

The app passes its read-only view in place of the store. Nothing is computed here: a constraint
without a stored value is simply absent.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.analysis.copying import lexical_overlap
from pipeline.store.similarity import similarity_rows
from pipeline.store.view import StoreReader, store_of

LEXICAL = "lexical"  # the method name when no embedder is used (pipeline.analysis.copying.lexical_overlap)


@dataclass(frozen=True)
class Similarity:
    constraint_id: int
    method: str  # an embedder's name (its vector cache key), or "lexical"
    to_a: float
    to_b: float | None  # None: the instruction has one reference only

    @property
    def highest(self) -> float:
        """The closer reference's value: what a single number and bar show."""
        return self.to_a if self.to_b is None else max(self.to_a, self.to_b)


def constraint_similarities(reader: StoreReader, *, instruction_id: int
                            | None = None) -> dict[int, Similarity]:
    """Stored similarities by constraint id: one instruction's (one indexed query), or all; {} when none."""
    return {row.constraint_id: Similarity(row.constraint_id, row.method, row.to_a, row.to_b)
            for row in similarity_rows(store_of(reader), instruction_id=instruction_id)}


def lexical_similarity(constraint_id: int, constraint: str, reference_a: str, reference_b: str
                       | None) -> Similarity:
    """The ``lexical`` method: the share of the constraint's content words found in each reference
    (what pipeline.stages.similarity stores without an embedder, and what Audit shows while nothing is
    stored). ``reference_b`` None: one reference only."""
    return Similarity(constraint_id, LEXICAL, lexical_overlap(constraint, reference_a),
                      lexical_overlap(constraint, reference_b) if reference_b is not None else None)
