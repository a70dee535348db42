"""The ``constraint_flags`` table (quality flags per constraint, with a JSON detail the app shows
and highlights from) and ``contradictions`` (pairs of an instruction's constraints an LLM found
jointly unsatisfiable). Written by pipeline.analysis.flags: each function here is one transaction,
committed, so an instruction's flags are never half replaced."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.store.database import Store

CONTRADICTION = "contradiction"


@dataclass(frozen=True)
class ConstraintFlag:
    constraint_id: int
    flag: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class Contradiction:
    constraint_a: int
    constraint_b: int
    reason: str


def _put_flags(store: Store, flags: Sequence[ConstraintFlag]) -> None:
    store.conn.executemany(
        "INSERT OR REPLACE INTO constraint_flags (constraint_id, flag, detail) VALUES (?, ?, ?)",
        [(f.constraint_id, f.flag, json.dumps(f.detail, ensure_ascii=False)) for f in flags],
    )


def replace_flags(store: Store, instruction_id: int, names: Sequence[str],
                  flags: Sequence[ConstraintFlag]) -> None:
    """Drop the instruction's flags named in ``names`` (on any of its constraints) and store ``flags``;
    commits."""
    marks = ",".join("?" * len(names))
    with store.conn:
        store.conn.execute(
            f"DELETE FROM constraint_flags WHERE flag IN ({marks}) AND constraint_id IN"
            " (SELECT id FROM constraints WHERE instruction_id = ?)",
            (*names, instruction_id),
        )
        _put_flags(store, flags)


def replace_contradictions(store: Store, instruction_id: int, pairs: Sequence[Contradiction],
                           flags: Sequence[ConstraintFlag]) -> None:
    """The instruction's contradictions and ``contradiction`` flags become these; commits."""
    with store.conn:
        store.conn.execute("DELETE FROM contradictions WHERE instruction_id = ?", (instruction_id,))
        store.conn.execute(
            "DELETE FROM constraint_flags WHERE flag = ? AND constraint_id IN"
            " (SELECT id FROM constraints WHERE instruction_id = ?)", (CONTRADICTION, instruction_id)
        )
        store.conn.executemany(
            "INSERT OR REPLACE INTO contradictions (instruction_id, constraint_a, constraint_b, "
            "reason) VALUES (?, ?, ?, ?)",
            [(instruction_id, p.constraint_a, p.constraint_b, p.reason) for p in pairs],
        )
        _put_flags(store, flags)


@dataclass(frozen=True)
class StoredFlag:
    constraint_id: int
    flag: str
    detail: str | None  # JSON as stored


def flags_of_active_constraints(store: Store, instruction_id: int) -> list[StoredFlag]:
    """The flags of an instruction's active constraints, by constraint, then flag."""
    return [StoredFlag(*row) for row in store.conn.execute(
        "SELECT f.constraint_id, f.flag, f.detail FROM constraint_flags f JOIN constraints c"
        " ON c.id = f.constraint_id WHERE c.instruction_id = ? AND c.active = 1 ORDER BY "
        "f.constraint_id, f.flag",
        (instruction_id,))]
