"""The store's one narrow writer for the app (pipeline.store.app_writer.AppWriter): labels, answers
and marks, each saved at once, read back through the app's view."""

from __future__ import annotations

import pytest

from pipeline.core.errors import StoreError
from pipeline.store.app_writer import AppWriter
from pipeline.store.view import StoreView
from tests.support.hand_store import build_hand_store


def test_labels_answers_and_marks_are_saved_at_once(tmp_path) -> None:
    path = tmp_path / "store.sqlite"
    build_hand_store(path).close()
    writer = AppWriter(path)
    view = StoreView.open(path)
    try:
        writer.label(2, 100, "alice", "superficial", "only a detail")
        writer.text_label(3, 101, "alice", False)
        writer.put_mark(100, 1, "confirmed", "alice")
        writer.put_mark(100, 2, "confirmed", "alice")
        writer.put_mark(100, 2, "dismissed", "bob")  # the latest mark replaces the earlier
        writer.clear_mark(100, 1)
        label = view.labels()[(2, 100)]["alice"]
        assert (label.label, label.note) == ("superficial", "only a detail")
        assert view.text_labels()[(3, 101)] == {"alice": 0}
        assert {key: (m.mark, m.auditor)
                for key, m in view.suspicion_marks().items()} == {(100, 2): ("dismissed", "bob")}
    finally:
        view.close()
        writer.close()


def test_a_mark_the_store_refuses_is_a_store_error(tmp_path) -> None:
    path = tmp_path / "store.sqlite"
    store = build_hand_store(path)
    store.conn.execute("DROP TABLE suspicion_marks")
    store.commit()
    store.close()
    writer = AppWriter(path)
    try:
        with pytest.raises(ValueError, match="unknown mark"):
            writer.put_mark(100, 1, "maybe", "alice")
        with pytest.raises(StoreError, match="the mark could not be saved"):
            writer.put_mark(100, 1, "confirmed", "alice")
        with pytest.raises(StoreError, match="the mark could not be saved"):
            writer.clear_mark(100, 1)
    finally:
        writer.close()


def test_the_writer_refreshes_the_score_totals_a_round_at_a_time(tmp_path) -> None:
    """The app's score refresh goes through its one writer: every stale text scored, one short
    transaction a round, and a mark given from another thread meanwhile is saved."""
    import threading

    from pipeline.store.database import open_store
    from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
    from tests.support.store_probes import stale_count

    path = tmp_path / "syn.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=6, n_constraints=4))
    store = open_store(path)
    store.conn.execute("INSERT OR IGNORE INTO text_scores_stale SELECT DISTINCT generation_id FROM verdicts")
    store.commit()
    stale = stale_count(store.conn)
    response, constraint = store.conn.execute(
        "SELECT g.id, c.id FROM generations g JOIN constraints c ON c.instruction_id = g.instruction_id"
        " WHERE g.kind = 'response' LIMIT 1").fetchone()
    store.close()
    assert stale > 0
    writer = AppWriter(path)
    try:
        marker = threading.Thread(target=writer.put_mark, args=(response, constraint, "confirmed", "alice"))
        marker.start()
        assert writer.refresh_scores() == stale
        marker.join()
        assert writer.refresh_scores() == 0  # nothing left
        view = StoreView.open(path)
        try:
            assert (response, constraint) in view.suspicion_marks()
        finally:
            view.close()
    finally:
        writer.close()
