"""The ``instruction_families`` table: instructions that are one task at several levels of
specificity (CS4 releases each of its tasks with 7, 15, 23, 31 and 39 constraints). A family is
named within its run (CS4's ``Instruction Number``); a member's level is its number of constraints.

Written by the CS4 import (pipeline.importing.cs4) inside its transaction; read by the report's
family table (pipeline.outputs.report). None of these functions commits."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.store.database import Store


@dataclass(frozen=True)
class FamilyMember:
    instruction_id: int
    run_id: str
    family: str  # unique within run_id
    level: int  # the member's number of constraints


def family_member(store: Store, instruction_id: int) -> FamilyMember | None:
    row = store.conn.execute(
        "SELECT f.instruction_id, i.run_id, f.family, f.level FROM instruction_families f"
        " JOIN instructions i ON i.id = f.instruction_id WHERE f.instruction_id = ?",
        (instruction_id,)).fetchone()
    return None if row is None else FamilyMember(int(row[0]), row[1], row[2], int(row[3]))


def set_family(store: Store, instruction_id: int, family: str, level: int) -> bool:
    """The instruction as a member of ``family`` at ``level``; False when it already was. Another
    family or level than the one stored is a ValueError, never a silent change."""
    stored = family_member(store, instruction_id)
    if stored is not None:
        if (stored.family, stored.level) != (family, level):
            raise ValueError(f"instruction {instruction_id} is in family {stored.family!r} at "
                             f"level {stored.level}, not {family!r} at level {level}")
        return False
    store.conn.execute("INSERT INTO instruction_families(instruction_id, family, level) VALUES (?, ?, ?)",
                       (instruction_id, family, level))
    return True


def family_members(store: Store) -> dict[int, FamilyMember]:
    """Every instruction that belongs to a family, by instruction id (small: CS4 holds 250 a file)."""
    rows = store.conn.execute(
        "SELECT f.instruction_id, i.run_id, f.family, f.level FROM instruction_families f"
        " JOIN instructions i ON i.id = f.instruction_id ORDER BY i.run_id, f.family, f.level")
    return {int(r[0]): FamilyMember(int(r[0]), r[1], r[2], int(r[3])) for r in rows}
