"""SVG snapshots of Suspects (the suspicion queue) at 80x24 and 160x48, on the snapshot app's
synthetic store with its copy evidence and constraint-reference similarities computed
(lexical: no model)."""

from __future__ import annotations

from pathlib import Path

from pipeline.stages.copy_evidence import compute_copy_evidence
from pipeline.stages.similarity import compute_similarities
from pipeline.store.database import open_store
from tests.support.app import settle
from tests.support.snapshot_app import make_app


def queue_app(folder: Path):  # noqa: ANN201
    make_app(folder)  # builds the store
    store = open_store(Path(folder) / "store.sqlite")
    try:
        compute_similarities(store, None)
        compute_copy_evidence(store)
    finally:
        store.close()
    return make_app(folder)


async def _open_queue(pilot) -> None:  # noqa: ANN001
    for keys in ((), ("2",), ("exclamation_mark",), ("down", "down")):
        await pilot.press(*keys)
        await settle(pilot.app, pilot, rounds=1)


def test_queue_snapshot(snap_compare, tmp_path):
    assert snap_compare(queue_app(tmp_path), terminal_size=(160, 48), run_before=_open_queue)


def test_queue_narrow_snapshot(snap_compare, tmp_path):
    assert snap_compare(queue_app(tmp_path), terminal_size=(80, 24), run_before=_open_queue)


def _audit_following(*keys: str):  # noqa: ANN202
    """Enter on the queue's third suspect (Audit follows the queue), then ``keys``."""
    async def before(pilot) -> None:  # noqa: ANN001
        await _open_queue(pilot)
        for key in ("enter", *keys):
            await pilot.press(key)
            await settle(pilot.app, pilot, rounds=1)
    return before


def test_audit_following_the_queue_snapshot(snap_compare, tmp_path):
    assert snap_compare(queue_app(tmp_path), terminal_size=(160, 48), run_before=_audit_following())


def test_audit_following_the_queue_narrow_snapshot(snap_compare, tmp_path):
    assert snap_compare(queue_app(tmp_path), terminal_size=(80, 24), run_before=_audit_following())


def test_source_beside_snapshot(snap_compare, tmp_path):
    assert snap_compare(queue_app(tmp_path), terminal_size=(160, 48), run_before=_audit_following("o"))


def test_source_beside_narrow_snapshot(snap_compare, tmp_path):
    assert snap_compare(queue_app(tmp_path), terminal_size=(80, 24), run_before=_audit_following("o"))
