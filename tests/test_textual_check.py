"""The Textual versions the app's private overrides were written for (unspecific_tui/textual_check.py,
issue 36 item 3): this test fails when the installed Textual leaves the tested range or drops a
name the overrides read; outside it, the app says so at start and falls back to the stock widgets."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import unspecific_tui.textual_check as check
from tests.support.app import goto, make_known_store, settle
from unspecific_tui.app import UnspecificApp
from unspecific_tui.widgets.constraint_list import ConstraintList

ROOT = Path(__file__).resolve().parents[1]


def test_the_installed_textual_is_the_one_the_overrides_were_written_for() -> None:
    found = check.textual_version()
    assert check.in_tested_range(found), (
        f"Textual {found} is outside {check.TESTED_FROM} to below {check.TESTED_BELOW}: re-test "
        "the private overrides "
        "(tests/test_app_audit_list.py compares the Audit list with DataTable's drawing), "
        "then move the range in unspecific_tui/textual_check.py and pyproject's bound together")
    assert check.missing_names() == []
    assert check.private_api_problem() is None


def test_the_range_is_pyprojects_bound() -> None:
    bound = re.search(r'"textual>=([\d.]+),<([\d.]+)"', (ROOT / "pyproject.toml").read_text())
    assert bound is not None
    assert (check.release(bound.group(1)), check.release(bound.group(2))) == (check.TESTED_FROM,
                                                                              check.TESTED_BELOW)


def test_versions_are_read_by_their_release_numbers() -> None:
    assert check.release("8.2.8") == (8, 2, 8) and check.release("9.0.0a1") == (9, 0, 0)
    assert [check.in_tested_range(v) for v in ("7.9.1", "8.0.0", "8.99", "9.0.0", "9.0.0a1", "10.1")] == [
        False, True, True, False, False, False]


@pytest.fixture
def moved(monkeypatch):
    """Textual as if it had moved to 9.1.0."""
    monkeypatch.setattr(check, "textual_version", lambda: "9.1.0")
    check.private_api_problem.cache_clear()
    yield
    check.private_api_problem.cache_clear()


def test_a_moved_textual_is_named_with_what_falls_back(moved) -> None:
    problem = check.private_api_problem()
    assert problem is not None and problem.startswith("Textual 9.1.0 is outside 8.0 to below 9")
    assert "stock drawing" in problem and "textual>=8.0,<9" in problem
    assert not check.private_api_ok()


async def test_the_app_says_so_at_start_and_lists_with_the_stock_datatable(moved, tmp_path) -> None:
    from textual.widgets import DataTable

    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={})
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        # One line on the header's row: the title in front of the message.
        assert any(n.message.startswith("[b]Textual version[/b]: ") and "9.1.0" in n.message
                   for n in app._notifications)
        await goto(app, pilot, "3")
        table = app.screen.query_one(ConstraintList)
        assert table.row_count == 3
        for y in range(table.size.height):  # every line is DataTable's own
            assert list(table.render_line(y)) == list(DataTable.render_line(table, y))
        assert not table._strips  # the list's own line cache was never filled
        await pilot.press("q")


def test_every_private_name_the_app_uses_is_listed() -> None:
    """Each private Textual name in unspecific_tui/ is one the check looks for (a name read outside the
    list would break silently on a Textual that moved it)."""
    listed = {*check.DATA_TABLE_NAMES, *check.WIDGET_NAMES, *check.WIDGET_INSTANCE_NAMES, *check.APP_HOOKS,
              *check.APP_NAMES, *check.FOOTER_NAMES,
              *(name for _, name in check.PRIVATE_MODULES)}
    assert {"_bindings_ready", "_border_subtitle", "FooterKey"} <= listed
    private_modules = {m for path in (ROOT / "unspecific_tui").rglob("*.py")
                       for m in re.findall(r"^\s*(?:from|import) (textual\.\S*\._\w+)",
                                           path.read_text(), re.M)}
    assert private_modules == set(), f"private Textual modules imported directly: {private_modules}"


def test_tests_and_benches_reach_private_textual_modules_through_the_guard() -> None:
    """A test or bench that queries a private Textual class gets it through check.private_import
    (tests/support/app.py's textual_private), so a Textual that moves it says so in one place."""
    direct = {f"{path.relative_to(ROOT)}: {m}" for folder in ("tests", "bench")
              for path in (ROOT / folder).rglob("*.py")
              for m in re.findall(r"^\s*(?:from|import) (textual\.\S*\._\w+)", path.read_text(), re.M)}
    assert direct == set(), f"private Textual modules imported directly: {direct}"


async def test_the_footer_falls_back_to_textuals_own_on_a_moved_textual(moved, tmp_path) -> None:
    from unspecific_tui.widgets.footer import KeyFooter

    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={})
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        footer = app.screen.query_one(KeyFooter)
        assert footer.children  # Textual's stock footer keys, not none
        await pilot.press("q")
