"""SVG snapshots of the screens at fixed sizes (the last ones on a store where one model
answered in both modes, direct and edit) (deterministic store,
title, no clock, no cursor blink; workers awaited before the picture)."""

from __future__ import annotations

from tests.support.app import settle
from tests.support.snapshot_app import make_app, make_small_app


async def _ready(pilot) -> None:  # noqa: ANN001
    await settle(pilot.app, pilot)


def test_build_snapshot(snap_compare, tmp_path):
    assert snap_compare(make_app(tmp_path), terminal_size=(120, 36), run_before=_ready)


def _on(keys: tuple[str, ...]):  # noqa: ANN202
    """Settled, ``keys`` pressed, settled again: the picture of the screen they lead to."""
    async def before(pilot) -> None:  # noqa: ANN001
        await _ready(pilot)
        await pilot.press(*keys)
        await _ready(pilot)

    return before


def test_audit_snapshot(snap_compare, tmp_path):
    assert snap_compare(make_app(tmp_path), terminal_size=(140, 44), run_before=_on(("3", "j", "j")))


def test_audit_narrow_snapshot(snap_compare, tmp_path):
    assert snap_compare(make_app(tmp_path), terminal_size=(80, 24), run_before=_on(("3", "t", "t")))


def test_compare_snapshot(snap_compare, tmp_path):
    async def before(pilot) -> None:  # noqa: ANN001
        await _ready(pilot)
        await pilot.press("4")
        await _ready(pilot)
        await pilot.press("down", "down")
        await pilot.pause()

    assert snap_compare(make_app(tmp_path), terminal_size=(140, 44), run_before=before)


def test_instructions_both_modes_snapshot(snap_compare, tmp_path):
    assert snap_compare(make_app(tmp_path, both_modes=True), terminal_size=(140, 36), run_before=_on(("2",)))


def test_audit_edit_mode_snapshot(snap_compare, tmp_path):
    # m: from model-a's direct response to its edit response.
    assert snap_compare(make_app(tmp_path, both_modes=True), terminal_size=(140, 44),
                        run_before=_on(("3", "j", "j", "m")))


def test_compare_both_modes_snapshot(snap_compare, tmp_path):
    # A = model-a [direct]; M moves B from model-b [direct] to model-a [edit] (A's own is skipped).
    assert snap_compare(make_app(tmp_path, both_modes=True), terminal_size=(140, 44),
                        run_before=_on(("4", "M", "down")))


def test_annotate_both_modes_snapshot(snap_compare, tmp_path):
    assert snap_compare(make_app(tmp_path, both_modes=True), terminal_size=(140, 40), run_before=_on(("5",)))


def test_build_both_modes_snapshot(snap_compare, tmp_path):
    assert snap_compare(make_app(tmp_path, both_modes=True), terminal_size=(120, 36), run_before=_ready)


# Every screen at the smallest and a large terminal (issue 26: readable from 80x24 to 200x60), on
# the fit tests' store (tests/test_app_fit.py): real-length model names and constraints, both modes,
# constraint-reference similarities. The Report's chart is text drawn the same on every run (its
# conclusion too: the paired tests' seed is the app's), so it is in the picture.
SIZES = {"80x24": (80, 24), "160x48": (160, 48)}
SCREEN_KEYS = {"build": "1", "instructions": "2", "audit": "3", "compare": "4",
               "annotate": "5", "report": "6"}


def _every_screen(screen: str, size: str):  # noqa: ANN202 - a pytest test
    def test(snap_compare, tmp_path) -> None:  # noqa: ANN001
        app = make_app(tmp_path, both_modes=True, long_names=True)
        # Build is the first screen: its own key there would only say so ("this is the Build screen").
        shown = _on(() if screen == "build" else (SCREEN_KEYS[screen],))
        assert snap_compare(app, terminal_size=SIZES[size], run_before=shown)

    test.__name__ = f"test_{screen}_{size}_snapshot"
    return test


for _screen in SCREEN_KEYS:
    for _size in SIZES:
        globals()[f"test_{_screen}_{_size}_snapshot"] = _every_screen(_screen, _size)


def _report_chart(size: str):  # noqa: ANN202 - a pytest test
    def test(snap_compare, tmp_path) -> None:  # noqa: ANN001
        assert snap_compare(make_small_app(tmp_path), terminal_size=SIZES[size], run_before=_on(("6",)))

    test.__name__ = f"test_report_chart_{size}_snapshot"
    return test


# The Report with its chart in sight (four bars): labels whole, bars true to value, ticks 0-100.
for _size in SIZES:
    globals()[f"test_report_chart_{_size}_snapshot"] = _report_chart(_size)
