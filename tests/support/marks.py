"""Audit's marks as a test reads them: the keys that move the view, the marks stored, and the item
the head names (read through the store, as a reader would, not from the screen's state)."""

from __future__ import annotations

import re

from pipeline.store.view import StoreView
from tests.support.app import store_rows

# Every key of Audit's that changes what is shown, each pressed while following the queue.
NAVIGATION = ("n", "j", "down", "k", "up", "n", "right_square_bracket", "n", "p", "x", "left_square_bracket",
              "slash", "n", "s", "m", "p", "r", "t", "g", "o", "o", "c", "l", "l", "x", "n", "n")


def stored_marks(app) -> dict[tuple[int, int], str]:  # noqa: ANN001
    return {(r, c): m
            for r, c, m in store_rows(app, "SELECT response_id, constraint_id, mark FROM suspicion_marks")}


def named_item(app, head: str) -> tuple[int, int]:  # noqa: ANN001
    """(response id, constraint id) of the item the head's where-line names: "#iid ... constraint
    p/n · model [mode] ·", read through the store as a reader would, not from the screen's state."""
    where = re.search(r"#(\d+) .*? constraint (\d+)/\d+ · (.+?) · summary", head)
    assert where, head
    iid, position, label = int(where[1]), int(where[2]), where[3]
    view = StoreView.open(app.store_path)
    try:
        data = view.instruction(iid)
        writer = next(w for w in data.writers if w.label == label)
        con = next(c for c in data.constraints.values() if c.active and c.position == position)
        return data.responses[writer].id, con.id
    finally:
        view.close()
