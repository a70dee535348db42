"""Typed reads and writes for the app's screens: the SQL lives here, not in the screens.

A response is named by its writer, (model under test, response mode): one model answers an
instruction directly and, in edit mode, by editing a draft, and the two are different texts
with different verdicts. Every per-item outcome comes from pipeline.analysis.metrics.constraint_items
(one definition, pipeline.store.scores.item_outcome_sql); every verdict shown is the latest one by
pipeline.store.scores.LATEST_VERDICT.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from pipeline.store.scores import LATEST_VERDICT

if TYPE_CHECKING:
    from pipeline.analysis.metrics import Item


class Writer(NamedTuple):
    """Who wrote a response: the model under test and the response mode (direct | edit)."""

    model: str
    mode: str

    @property
    def label(self) -> str:
        """Plain text ("m1 [edit]"); escape ``[`` before putting it in Rich markup."""
        return f"{self.model} [{self.mode}]" if self.mode else self.model


@dataclass(frozen=True)
class LatestVerdict:
    generation_id: int
    constraint_id: int
    judge: str
    judging_mode: str
    verdict: int
    quote: str


def latest_run_id(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT id FROM runs ORDER BY started_at DESC, id LIMIT 1").fetchone()
    return row[0] if row else None


def instruction_ids(conn: sqlite3.Connection) -> list[int]:
    return [row[0] for row in conn.execute("SELECT id FROM instructions ORDER BY id")]


def latest_verdicts(conn: sqlite3.Connection, generation_ids: Sequence[int]) -> list[LatestVerdict]:
    """Each rater's latest verdict on every constraint of the given texts."""
    if not generation_ids:
        return []
    marks = ",".join("?" * len(generation_ids))
    return [LatestVerdict(*row) for row in conn.execute(
        "SELECT v.generation_id, v.constraint_id, v.judge, v.judging_mode, v.verdict, coalesce(v.quote, '')"
        f" FROM verdicts v WHERE v.generation_id IN ({marks}) AND {LATEST_VERDICT} ORDER BY v.id",
        tuple(generation_ids))]


def item_outcomes(conn: sqlite3.Connection, path: Path, instruction_id: int, writer: Writer,
                  ratio: float) -> dict[int, Item]:
    """pipeline.analysis.metrics.Item per constraint of one response at one ratio, keyed by constraint id.
    With two summaries at the ratio (two summarizers), the first summary's item is kept."""
    from pipeline.analysis.metrics import Filters, constraint_items
    from pipeline.store.database import Store

    # pipeline.analysis.metrics reads plain tuples: a caller's row factory (sqlite3.Row) is set aside.
    factory, conn.row_factory = conn.row_factory, None
    try:
        items = constraint_items(Store(path=path, conn=conn),
                                 Filters(instruction=instruction_id, models=(writer.model,), mode=writer.mode),
                                 ratio=ratio)
    finally:
        conn.row_factory = factory
    out: dict[int, Item] = {}
    for item in items:
        out.setdefault(item.constraint_id, item)
    return out


# -- annotations -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Label:
    label: str
    note: str


def annotations(conn: sqlite3.Connection) -> dict[tuple[int, int], dict[str, Label]]:
    """(constraint, response) -> annotator -> label and note."""
    out: dict[tuple[int, int], dict[str, Label]] = {}
    for cid, gid, who, label, note in conn.execute(
            "SELECT constraint_id, generation_id, annotator, label, note FROM annotations"):
        out.setdefault((cid, gid), {})[who] = Label(label, note or "")
    return out


def save_annotation(conn: sqlite3.Connection, constraint_id: int, response_id: int, annotator: str, label: str,
                    note: str, when: str) -> None:
    """Store (or replace) one annotator's label of a constraint on exactly this response."""
    kind = conn.execute("SELECT kind FROM generations WHERE id = ?", (response_id,)).fetchone()
    if kind is None or kind[0] != "response":
        # A label must name the response that was read, never a summary or a text that is gone.
        raise ValueError(f"generation {response_id} is not a response")
    conn.execute(
        "INSERT INTO annotations(constraint_id, generation_id, annotator, label, note, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(constraint_id, generation_id, annotator)"
        " DO UPDATE SET label = excluded.label, note = excluded.note, created_at = excluded.created_at",
        (constraint_id, response_id, annotator, label, note, when))
    conn.commit()


# -- runs and what a step wrote (the Build screen) ---------------------------------------------


@dataclass(frozen=True)
class RunRow:
    id: str
    kind: str
    status: str
    started_at: str | None
    calls: int | None
    cache_hits: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    error: str | None


def runs(conn: sqlite3.Connection) -> list[RunRow]:
    """Every run, newest first."""
    return [RunRow(*row) for row in conn.execute(
        "SELECT id, kind, status, started_at, calls, cache_hits, prompt_tokens, completion_tokens, cost, error"
        " FROM runs ORDER BY started_at DESC, id")]


def instructions_per_run(conn: sqlite3.Connection) -> dict[str, int]:
    return dict(conn.execute("SELECT run_id, count(*) FROM instructions GROUP BY run_id").fetchall())


def count(conn: sqlite3.Connection, sql: str, params: dict[str, object]) -> int:
    """A stage's unit count (unspecific_tui.stages' ``count_sql``, a registry entry)."""
    return int(conn.execute(sql, params).fetchone()[0])


# The tables a step may add rows to, by name: only these are ever put into SQL text.
WRITTEN_TABLES = ("articles", "pairs", "instructions", "constraints", "generations", "verdicts")


def high_water(conn: sqlite3.Connection, tables: Sequence[str] = WRITTEN_TABLES) -> dict[str, int]:
    """The highest rowid of each table: rows above it were written later."""
    return {t: conn.execute(f"SELECT coalesce(max(rowid), 0) FROM {_table(t)}").fetchone()[0] for t in tables}


def newest_rows(conn: sqlite3.Connection, table: str, after: int, limit: int = 3) -> list[dict[str, object]]:
    """The newest rows of ``table`` written after rowid ``after``, newest first."""
    cur = conn.execute(f"SELECT * FROM {_table(table)} WHERE rowid > ? ORDER BY rowid DESC LIMIT ?", (after, limit))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, values)) for values in cur.fetchall()]


def instruction_written(conn: sqlite3.Connection, before: dict[str, int]) -> int | None:
    """The instruction of the newest instruction, constraint or generation written since ``before``."""
    for table, column in (("instructions", "id"), ("constraints", "instruction_id"), ("generations", "instruction_id")):
        row = conn.execute(f"SELECT {column} FROM {_table(table)} WHERE rowid > ? ORDER BY rowid DESC LIMIT 1",
                           (before.get(table, 0),)).fetchone()
        if row and row[0] is not None:
            return int(row[0])
    return None


def _table(name: str) -> str:
    if name not in WRITTEN_TABLES:
        raise ValueError(f"not a table a step writes: {name!r}")
    return name
