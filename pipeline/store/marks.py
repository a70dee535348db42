"""The ``suspicion_marks`` table: an auditor's verdict on a suspect of the suspicion queue, per
(response, constraint): ``confirmed`` (the response did satisfy the constraint by copy-paste) or
``dismissed`` (it did not). One mark per item; the latest replaces the earlier.

``put_mark`` and ``clear_mark`` write them; the app reaches them only through the store's narrow
writer (pipeline.store.app_writer.AppWriter), so no screen holds a Store or runs SQL. ``marks``
reads them (the app's view, the queue's export).

May import: pipeline.core, pipeline.store.
"""

from __future__ import annotations

from typing import NamedTuple

from pipeline.store.database import Store, has_table

MARKS = ("confirmed", "dismissed")
ItemKey = tuple[int, int]  # (response id, constraint id)


class Mark(NamedTuple):
    mark: str  # confirmed | dismissed
    auditor: str
    marked_at: str


def marks(store: Store) -> dict[ItemKey, Mark]:
    """Every mark by (response, constraint); {} on a store from before the table."""
    conn = store.conn
    if not has_table(conn, "suspicion_marks"):
        return {}
    return {(rid, cid): Mark(mark, who, when) for rid, cid, mark, who, when in conn.execute(
        "SELECT response_id, constraint_id, mark, auditor, marked_at FROM suspicion_marks")}


def put_mark(store: Store, response_id: int, constraint_id: int, mark: str, auditor: str, when: str) -> None:
    """Put one mark, replacing the item's earlier one, and commit (a mark is saved the moment it is given)."""
    if mark not in MARKS:
        raise ValueError(f"unknown mark {mark!r}: choose from {', '.join(MARKS)}")
    with store.conn:
        store.conn.execute(
            "INSERT INTO suspicion_marks(response_id, constraint_id, mark, auditor, marked_at) "
            "VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT(response_id, constraint_id) DO UPDATE SET mark = excluded.mark, "
            "auditor = excluded.auditor,"
            " marked_at = excluded.marked_at", (response_id, constraint_id, mark, auditor, when))


def clear_mark(store: Store, response_id: int, constraint_id: int) -> None:
    """Take an item's mark off, and commit."""
    with store.conn:
        store.conn.execute("DELETE FROM suspicion_marks WHERE response_id = ? AND constraint_id = ?",
                           (response_id, constraint_id))
