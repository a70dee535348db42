"""The ``constraint_ledgers`` table: per instruction and stage (``synthesis``, ``revision``, ``import``),
the constraint gate's ledger as JSON (pipeline.analysis.gate.Ledger: candidates written, rejected by
each check, rounds, kept of wanted, some rejected candidates with why). Written by the build and the
import check; read by `report`, the export and the app. None of these functions commits."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pipeline.store.database import Store


def put_ledger(store: Store, instruction_id: int, stage: str, ledger: dict[str, Any],
               written_at: str) -> None:
    """The instruction's ledger for ``stage``, replacing the one stored."""
    store.conn.execute(
        "INSERT OR REPLACE INTO constraint_ledgers(instruction_id, stage, ledger, written_at)"
        " VALUES (?, ?, ?, ?)",
        (instruction_id, stage, json.dumps(ledger, ensure_ascii=False), written_at))


def ledgers_of(store: Store, instruction_ids: Sequence[int]) -> dict[int, dict[str, dict[str, Any]]]:
    """instruction id -> stage -> ledger (JSON decoded), for the instructions that have one."""
    out: dict[int, dict[str, dict[str, Any]]] = {}
    ids = sorted(set(instruction_ids))
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        rows = store.conn.execute(
            f"SELECT instruction_id, stage, ledger FROM constraint_ledgers WHERE instruction_id IN"
            f" ({','.join('?' * len(chunk))}) ORDER BY instruction_id, stage", chunk).fetchall()
        for iid, stage, text in rows:
            out.setdefault(int(iid), {})[stage] = json.loads(text)
    return out


def run_ledgers(store: Store, run_id: str) -> list[tuple[int, str, str, dict[str, Any]]]:
    """(instruction id, condition, stage, ledger) of every instruction of a run that has one."""
    rows = store.conn.execute(
        "SELECT l.instruction_id, i.condition, l.stage, l.ledger FROM constraint_ledgers l"
        " JOIN instructions i ON i.id = l.instruction_id WHERE i.run_id = ?"
        " ORDER BY l.instruction_id, l.stage",
        (run_id,)).fetchall()
    return [(int(r[0]), r[1], r[2], json.loads(r[3])) for r in rows]


def copy_ledger(store: Store, source_id: int, instruction_id: int, stage: str, written_at: str) -> None:
    """The shared common synthesis's ledger, for a condition that copied its constraints."""
    store.conn.execute(
        "INSERT OR REPLACE INTO constraint_ledgers(instruction_id, stage, ledger, written_at)"
        " SELECT ?, stage, ledger, ? FROM constraint_ledgers WHERE instruction_id = ? AND stage = ?",
        (instruction_id, written_at, source_id, stage))


def ledger_rows(store: Store, *, run_id: str | None = None, domain: str | None = None,
                condition: str | None = None) -> list[tuple[str, str, dict[str, Any]]]:
    """(condition, stage, ledger) of every stored ledger of the instructions matching the filters."""
    sql = ("SELECT i.condition, l.stage, l.ledger FROM constraint_ledgers l JOIN instructions i"
           " ON i.id = l.instruction_id WHERE 1 = 1")
    params: list[Any] = []
    for column, value in (("i.run_id", run_id), ("i.domain", domain), ("i.condition", condition)):
        if value is not None:
            sql += f" AND {column} = ?"
            params.append(value)
    rows = store.conn.execute(sql + " ORDER BY l.instruction_id, l.stage", params).fetchall()
    return [(r[0], r[1], json.loads(r[2])) for r in rows]
