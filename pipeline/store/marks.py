"""The ``suspicion_marks`` table: an auditor's verdict on a suspect of the suspicion queue, per
(response, constraint): ``confirmed`` (the response did satisfy the constraint by copy-paste) or
``dismissed`` (it did not). One mark per item; the latest replaces the earlier.

``MarkWriter`` is the narrow writer the app gets: a connection of its own that can only put and
clear marks, so no screen holds a Store or runs SQL. ``marks`` reads them (the app's view, the
queue's export).

May import: pipeline.core, pipeline.store.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import NamedTuple

from pipeline.core.errors import StoreError
from pipeline.store.database import Store, now

MARKS = ("confirmed", "dismissed")
ItemKey = tuple[int, int]  # (response id, constraint id)


class Mark(NamedTuple):
    mark: str  # confirmed | dismissed
    auditor: str
    marked_at: str


def _has_table(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'suspicion_marks'").fetchone() \
        is not None


def marks(store: Store) -> dict[ItemKey, Mark]:
    """Every mark by (response, constraint); {} on a store from before the table."""
    conn = store.conn
    if not _has_table(conn):
        return {}
    return {(rid, cid): Mark(mark, who, when) for rid, cid, mark, who, when in conn.execute(
        "SELECT response_id, constraint_id, mark, auditor, marked_at FROM suspicion_marks")}


class MarkWriter:
    """Puts and clears marks, and nothing else. Each call commits at once (a mark is saved the
    moment it is given); a build writing the same store makes it wait (busy timeout), never fail."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=10)
            # As the store's own connections: WAL commits need no fsync each (a mark a key press).
            self._conn.execute("PRAGMA synchronous = NORMAL")
        return self._conn

    def put(self, response_id: int, constraint_id: int, mark: str, auditor: str) -> None:
        if mark not in MARKS:
            raise ValueError(f"unknown mark {mark!r}: choose from {', '.join(MARKS)}")
        self._write("INSERT INTO suspicion_marks(response_id, constraint_id, mark, auditor, marked_at)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT(response_id, constraint_id) DO UPDATE SET"
                    " mark = excluded.mark, auditor = excluded.auditor, marked_at = excluded.marked_at",
                    (response_id, constraint_id, mark, auditor, now()))

    def clear(self, response_id: int, constraint_id: int) -> None:
        self._write("DELETE FROM suspicion_marks WHERE response_id = ? AND constraint_id = ?",
                    (response_id, constraint_id))

    def _write(self, sql: str, params: tuple) -> None:
        """One statement, committed; a failure is a StoreError naming the store (a store not yet
        migrated to the marks' table, a read-only file, a lock held too long)."""
        try:
            conn = self._connection()
            with conn:
                conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: the mark could not be saved ({exc})") from exc

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
