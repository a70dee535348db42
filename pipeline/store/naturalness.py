"""The ``naturalness`` table: one LLM judge's preference between two constraint sets written for
the same reference article, per judge, pair and order (``shown_first``); ``winner`` NULL is a tie.
Written by pipeline.stages.naturalness; nothing here commits."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.store.database import Store, now


@dataclass(frozen=True)
class Preference:
    judge: str
    instruction_a: int
    instruction_b: int
    shown_first: int  # which instruction the judge saw first
    winner: int | None  # None: a tie
    reason: str
    call_id: int | None


def judged_orders(store: Store) -> set[tuple[str, int, int, int]]:
    """(judge, instruction a, instruction b, shown first) of every stored comparison."""
    return {tuple(r) for r in store.conn.execute(  # type: ignore[misc]
        "SELECT judge, instruction_a, instruction_b, shown_first FROM naturalness")}


def put_preference(store: Store, p: Preference) -> None:
    """Store one comparison, replacing the same judge's on the same pair and order."""
    store.conn.execute(
        "INSERT OR REPLACE INTO naturalness (judge, instruction_a, instruction_b, shown_first, "
        "winner, reason, call_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (p.judge, p.instruction_a, p.instruction_b, p.shown_first, p.winner, p.reason, p.call_id, now()),
    )
