"""SVG snapshots of the Audit, Compare and Build screens at fixed sizes (deterministic store,
title, no clock, no cursor blink; workers awaited before the picture)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "snapshots"))

from snapshot_app import make_app  # noqa: E402


async def _ready(pilot) -> None:  # noqa: ANN001
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def test_build_snapshot(snap_compare, tmp_path):
    assert snap_compare(make_app(tmp_path), terminal_size=(120, 36), run_before=_ready)


def test_audit_snapshot(snap_compare, tmp_path):
    async def before(pilot) -> None:  # noqa: ANN001
        await _ready(pilot)
        await pilot.press("3", "j", "j")
        await _ready(pilot)

    assert snap_compare(make_app(tmp_path), terminal_size=(140, 44), run_before=before)


def test_audit_narrow_snapshot(snap_compare, tmp_path):
    async def before(pilot) -> None:  # noqa: ANN001
        await _ready(pilot)
        await pilot.press("3", "t", "t")
        await _ready(pilot)

    assert snap_compare(make_app(tmp_path), terminal_size=(80, 24), run_before=before)


def test_compare_snapshot(snap_compare, tmp_path):
    async def before(pilot) -> None:  # noqa: ANN001
        await _ready(pilot)
        await pilot.press("4")
        await _ready(pilot)
        await pilot.press("down", "down")
        await pilot.pause()

    assert snap_compare(make_app(tmp_path), terminal_size=(140, 44), run_before=before)
