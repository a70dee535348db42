"""The ``constraints`` table: an instruction's constraints, with lineage.

A constraint is *active* while no revision has replaced it. The active constraints of an
instruction, in their order (position, then id), are defined here once: synthesis, revision,
generation, judging, the metrics, the exports and the app all read them through these functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.store.database import Store

# Lists of ids are read in chunks: SQLite caps the number of bound parameters.
_CHUNK = 500


@dataclass(frozen=True)
class ActiveConstraint:
    id: int
    instruction_id: int
    position: int
    text: str


def active_constraints(store: Store, instruction_id: int) -> list[ActiveConstraint]:
    """The instruction's active constraints, in order."""
    rows = store.conn.execute(
        "SELECT id, instruction_id, position, text FROM constraints WHERE instruction_id = ? AND active = 1"
        " ORDER BY position, id", (instruction_id,)).fetchall()
    return [ActiveConstraint(*row) for row in rows]


def active_constraints_of(store: Store, instruction_ids: Sequence[int]) -> dict[int, list[ActiveConstraint]]:
    """Active constraints of many instructions at once, each list in order."""
    out: dict[int, list[ActiveConstraint]] = {}
    ids = sorted(set(instruction_ids))
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        rows = store.conn.execute(
            f"SELECT id, instruction_id, position, text FROM constraints WHERE active = 1 AND instruction_id IN"
            f" ({','.join('?' * len(chunk))}) ORDER BY instruction_id, position, id", chunk).fetchall()
        for row in rows:
            out.setdefault(row[1], []).append(ActiveConstraint(*row))
    return out
