"""The ``constraint_similarity`` table: per constraint, its similarity to reference A and to
reference B (NULL: the instruction has one reference only), and the method that computed it (an
embedder's name, or ``lexical``).

One row per constraint: computing with another method replaces the row. A constraint replaced by
revision is a new constraint (a new id), so it gets its own row. Written by
pipeline.stages.similarity, one committed batch at a time; read through
pipeline.analysis.similarity.constraint_similarities, the one definition the app, the report and
the HTML share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.store.database import Store, has_table, now

# SQLite caps the number of bound parameters.
_CHUNK = 500


@dataclass(frozen=True)
class SimilarityRow:
    constraint_id: int
    instruction_id: int
    method: str
    to_a: float
    to_b: float | None


def has_similarity_table(store: Store) -> bool:
    """False on a store opened read-only before the table's migration ran (the app's view of an old store)."""
    return has_table(store.conn, "constraint_similarity")


def similarity_rows(store: Store, *, instruction_id: int | None = None) -> list[SimilarityRow]:
    """The stored rows of one instruction (indexed), or of the whole store."""
    if not has_similarity_table(store):
        return []
    sql = "SELECT constraint_id, instruction_id, method, to_a, to_b FROM constraint_similarity"
    params: tuple[int, ...] = ()
    if instruction_id is not None:
        sql += " WHERE instruction_id = ?"
        params = (instruction_id,)
    return [SimilarityRow(*row) for row in store.conn.execute(sql, params)]


def constraints_lacking(store: Store, method: str, instruction_ids: Sequence[int]) -> dict[int, set[int]]:
    """instruction id -> its active constraints with no row, or a row by another method (stale)."""
    out: dict[int, set[int]] = {}
    ids = sorted(set(instruction_ids))
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        rows = store.conn.execute(
            "SELECT c.instruction_id, c.id FROM constraints c"
            " LEFT JOIN constraint_similarity s ON s.constraint_id = c.id AND s.method = ?"
            f" WHERE c.active = 1 AND s.constraint_id IS NULL AND c.instruction_id IN "
            f"({','.join('?' * len(chunk))})",
            (method, *chunk))
        for instruction_id, constraint_id in rows:
            out.setdefault(instruction_id, set()).add(constraint_id)
    return out


def instructions_with_constraints(store: Store, *, run_id: str | None = None) -> list[int]:
    """Every instruction (of one run, when given) that has active constraints, in id order."""
    sql = "SELECT DISTINCT c.instruction_id FROM constraints c"
    params: tuple[str, ...] = ()
    if run_id is not None:
        sql += " JOIN instructions i ON i.id = c.instruction_id WHERE i.run_id = ? AND c.active = 1"
        params = (run_id,)
    else:
        sql += " WHERE c.active = 1"
    return [row[0] for row in store.conn.execute(sql + " ORDER BY c.instruction_id", params)]


def put_similarities(store: Store, rows: Sequence[SimilarityRow]) -> None:
    """Store these rows, replacing any earlier row of the same constraint; commits (one batch)."""
    stamp = now()
    with store.conn:
        store.conn.executemany(
            "INSERT OR REPLACE INTO constraint_similarity(constraint_id, instruction_id, method, "
            "to_a, to_b, computed_at) VALUES (?, ?, ?, ?, ?, ?)",
            [(r.constraint_id, r.instruction_id, r.method, r.to_a, r.to_b, stamp) for r in rows])
