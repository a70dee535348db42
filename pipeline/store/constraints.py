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
            f"SELECT id, instruction_id, position, text FROM constraints WHERE active = 1 "
            "AND instruction_id IN"
            f" ({','.join('?' * len(chunk))}) ORDER BY instruction_id, position, id", chunk).fetchall()
        for row in rows:
            out.setdefault(row[1], []).append(ActiveConstraint(*row))
    return out


# -- writing an instruction's constraints (the build) ------------------------------------------------


@dataclass(frozen=True)
class Replacement:
    """A revision of one constraint: ``old_id`` at ``position`` gives way to ``text``, for ``reason``;
    ``verdict`` and ``quote``: the base article's verdict on the new text, when it was judged on it."""

    old_id: int
    position: int
    text: str
    reason: str
    verdict: int | None = None
    quote: str | None = None


def write_synthesis(store: Store, instruction_id: int, main_task: str | None,
                    texts: Sequence[str], *, status: str,
                    created_at: str) -> None:
    """The main task and the constraints, in one transaction with the new status (replacing any
    constraints the instruction had)."""
    with store.conn:
        store.conn.execute("DELETE FROM constraints WHERE instruction_id = ?", (instruction_id,))
        store.conn.executemany(
            "INSERT INTO constraints (instruction_id, position, text, origin, active, created_at)"
            " VALUES (?, ?, ?, 'synthesized', 1, ?)",
            [(instruction_id, i, text, created_at) for i, text in enumerate(texts, 1)],
        )
        store.conn.execute(
            "UPDATE instructions SET main_task = ?, n_constraints = ?, status = ?, error = NULL WHERE id = ?",
            (main_task, len(texts), status, instruction_id),
        )


def copy_synthesis(store: Store, source_id: int, instruction_id: int, *, status: str, created_at: str) -> int:
    """Copy the shared common synthesis of ``source_id`` into another instruction, in one
    transaction; each copy points back to its source constraint (``source_id``). Returns the
    number of constraints copied."""
    source = store.conn.execute("SELECT main_task FROM instructions WHERE id = ?", (source_id,)).fetchone()
    rows = store.conn.execute(
        "SELECT id, position, text FROM constraints WHERE instruction_id = ? AND origin = "
        "'synthesized' ORDER BY position",
        (source_id,)).fetchall()
    with store.conn:
        store.conn.execute("DELETE FROM constraints WHERE instruction_id = ?", (instruction_id,))
        store.conn.executemany(
            "INSERT INTO constraints (instruction_id, position, text, origin, active, source_id, created_at)"
            " VALUES (?, ?, ?, 'synthesized', 1, ?, ?)",
            [(instruction_id, position, text, cid, created_at) for cid, position, text in rows],
        )
        store.conn.execute(
            "UPDATE instructions SET main_task = ?, n_constraints = ?, status = ?, error = NULL WHERE id = ?",
            (source[0] if source else None, len(rows), status, instruction_id),
        )
    return len(rows)


def has_constraints(store: Store, instruction_id: int) -> bool:
    """Whether the instruction has any constraint row (active or replaced)."""
    return store.conn.execute("SELECT 1 FROM constraints WHERE instruction_id = ? LIMIT 1",
                              (instruction_id,)).fetchone() is not None


def count_revised(store: Store, instruction_id: int) -> int:
    """Constraints a revision wrote for the instruction."""
    return int(store.conn.execute("SELECT count(*) FROM constraints WHERE instruction_id = ? "
                                  "AND origin = 'revised'",
                                  (instruction_id,)).fetchone()[0])


def apply_revision(store: Store, instruction_id: int, replacements: Sequence[Replacement], *,
                   base_verdicts: dict[int, tuple[int | None, str | None]] | None = None,
                   created_at: str) -> None:
    """Record the base article's (verdict, quote) on each constraint of ``base_verdicts``, write the
    replacements with their lineage, retire the replaced rows and mark the instruction revised:
    one transaction, so a killed run never leaves half a revision."""
    with store.conn:
        for cid, (verdict, quote) in (base_verdicts or {}).items():
            store.conn.execute("UPDATE constraints SET base_verdict = ?, base_quote = ? WHERE id = ?",
                               (verdict, quote, cid))
        for r in replacements:
            store.conn.execute("UPDATE constraints SET active = 0, position = NULL WHERE id = ?", (r.old_id,))
            store.conn.execute(
                "INSERT INTO constraints (instruction_id, position, text, origin, active, "
                "replaces_id, replaced_reason,"
                " base_verdict, base_quote, created_at) VALUES (?, ?, ?, 'revised', 1, ?, ?, ?, ?, ?)",
                (instruction_id, r.position, r.text, r.old_id, r.reason, r.verdict, r.quote, created_at),
            )
        store.conn.execute("UPDATE instructions SET status = 'revised', error = NULL WHERE id = ?",
                           (instruction_id,))


def insert_constraints(store: Store, instruction_id: int, texts: Sequence[str], *, created_at: str,
                       origin: str = "synthesized") -> None:
    """New active constraints numbered 1, 2, 3... in the order given (an import's, or a human-written
    set's with origin ``human``; not committed)."""
    store.conn.executemany(
        "INSERT INTO constraints (instruction_id, position, text, origin, active, created_at)"
        " VALUES (?, ?, ?, ?, 1, ?)",
        [(instruction_id, i, text, origin, created_at) for i, text in enumerate(texts, 1)],
    )


@dataclass(frozen=True)
class ConstraintRecord:
    """A constraint row as the outputs show it, active or replaced, with its lineage."""

    id: int
    instruction_id: int
    position: int | None
    text: str
    origin: str | None
    active: int
    replaces_id: int | None
    replaced_reason: str | None
    base_verdict: int | None
    base_quote: str | None


_RECORD_COLUMNS = ("id, instruction_id, position, text, origin, active, replaces_id, "
                   "replaced_reason, base_verdict, base_quote")


def constraint_record(store: Store, constraint_id: int) -> ConstraintRecord | None:
    row = store.conn.execute(f"SELECT {_RECORD_COLUMNS} FROM constraints WHERE id = ?",
                             (constraint_id,)).fetchone()
    return ConstraintRecord(*row) if row else None


def constraint_records_of(store: Store, instruction_ids: Sequence[int]) -> dict[int, list[ConstraintRecord]]:
    """Every constraint (active and replaced) of many instructions, each list by position, then id."""
    out: dict[int, list[ConstraintRecord]] = {}
    ids = list(instruction_ids)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        for row in store.conn.execute(
                f"SELECT {_RECORD_COLUMNS} FROM constraints WHERE instruction_id IN "
                f"({','.join('?' * len(chunk))})"
                " ORDER BY instruction_id, position, id", chunk):
            out.setdefault(row[1], []).append(ConstraintRecord(*row))
    return out
