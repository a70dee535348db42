"""The Report screen: raw and corrected rates side by side (issue 27), an unvalidated judge marked with
the command that validates it, a chance-level judge warned about; and the screen readable at 80x24
and 160x48 (issue 26 item 7): every table column shows, the warnings are one line that opens a list."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.analysis.correction import VALIDATE_COMMAND, corrected_metrics
from pipeline.analysis.metrics import compute_metrics
from pipeline.store.database import open_store
from pipeline.store.judge_checks import CheckItem, put_check_items
from tests.support.app import goto, make_known_store, settle, text_of
from tests.support.judge_checks import known_check
from unspecific_tui.app import UnspecificApp
from unspecific_tui.screens.report import WarningsScreen, _fmt

SIZES = [(80, 24), (160, 48)]


def _copy(scripted_store: tuple[Path, dict[str, float]], tmp_path: Path) -> Path:  # noqa: F811
    path = tmp_path / "store.sqlite"
    path.write_bytes(scripted_store[0].read_bytes())
    return path


def _validated(path: Path, sens: float = 0.9, spec: float = 0.7) -> Path:
    store = open_store(path)
    put_check_items(store, "judge-a", "builtin",
                    known_check(np.random.default_rng(2), sens, spec, 600, "judge-a").items)
    store.close()
    return path


def _at_chance(path: Path) -> Path:
    store = open_store(path)  # sensitivity 0.5, specificity 0.4: no better than chance
    put_check_items(store, "judge-a", "builtin",
                    [CheckItem("news", f"p{i}", 1, int(i < 5)) for i in range(10)]
                    + [CheckItem("news", f"n{i}", 0, int(i < 6)) for i in range(10)])
    store.close()
    return path


def _headers(table) -> list[str]:  # noqa: ANN001
    return [str(c.label) for c in table.ordered_columns]


def _fits(app) -> None:  # noqa: ANN001
    """Every column of the Report table shows: its columns are no wider than the room it has."""
    table = app.screen.query_one("#report-table")
    assert table.virtual_size.width <= table.scrollable_content_region.width, (
        _headers(table), table.virtual_size.width, table.scrollable_content_region.width)
    assert "more columns" not in text_of(app.screen.query_one("#report-row"))


async def _open_report(app, pilot) -> None:  # noqa: ANN001
    await settle(app, pilot)
    await goto(app, pilot, "6")
    await pilot.pause(0.1)


async def test_a_scripted_judge_shows_raw_and_corrected_side_by_side(scripted, tmp_path):  # noqa: F811
    path = _validated(_copy(scripted, tmp_path))
    store = open_store(path, readonly=True)
    metrics = compute_metrics(store, seed=0)
    fixed = corrected_metrics(store, metrics, seed=0)  # the function `report` calls, with the app's seed
    store.close()
    group = next(g for g in metrics.groups if g.ratio == 0.25)
    rates = fixed.group(group.key).rates
    app = UnspecificApp(path, stages={})
    async with app.run_test(size=(160, 48)) as pilot:
        await _open_report(app, pilot)
        table = app.screen.query_one("#report-table")
        headers = _headers(table)
        assert headers.index("Org corr.") == headers.index("Org %") + 1  # side by side
        assert headers.index("Core corr.") == headers.index("Core %") + 1
        row = table.get_row_at(0)
        org, org_fixed = row[headers.index("Org %")], row[headers.index("Org corr.")]
        assert org.split()[0] == f"{100 * group.org.value:.1f}"
        assert org_fixed.split()[0] == f"{100 * rates.org.value:.1f}" and org_fixed != org
        assert row[headers.index("sup. corr.")].split()[0] == f"{100 * rates.superficial.value:.1f}"
        judges = text_of(app.screen.query_one("#report-judges"))
        assert ("judge-a sens" in judges and "built-in" in judges
                and "constructed, not drawn from these texts" in judges)
        assert "?" not in " ".join(headers)  # validated: no unvalidated mark
        detail = text_of(app.screen.query_one("#report-row"))  # the highlighted row in full
        assert f"corr. {_fmt((rates.org.value, rates.org.low, rates.org.high))}" in detail
        _fits(app)
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.2)
        headers = _headers(table)  # narrow: raw and corrected in columns of their own, side by side
        assert headers.index("corr.") == headers.index("Org") + 1
        row = [str(cell) for cell in table.get_row_at(0)]
        raw, corrected = row[headers.index("Org")], row[headers.index("Org") + 1]
        assert (raw, corrected) == (f"{100 * group.org.value:.1f}", f"{100 * rates.org.value:.1f}")
        assert not any(">" in cell for cell in row)  # never "76.9>93.5", which reads as a comparison
        _fits(app)


async def test_a_chance_level_judge_gets_a_warning_and_no_corrected_number(scripted, tmp_path):  # noqa: F811
    path = _at_chance(_copy(scripted, tmp_path))
    app = UnspecificApp(path, stages={})
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_report(app, pilot)
        screen = app.screen
        assert not any("corr" in h for h in _headers(screen.query_one("#report-table")))
        assert all(c.corrected is None for c in screen.cells)
        assert "at chance: no corrected figure" in text_of(screen.query_one("#report-judges"))
        line = screen.query_one("#report-warnings")
        assert line.display and line.size.height == 1  # one line, however many warnings
        assert "warning(s)" in text_of(line)
        assert any("carry no information" in w for w in screen.warnings)
        await pilot.press("w")
        await pilot.pause()
        assert isinstance(app.screen, WarningsScreen)
        listed = " ".join(text_of(s) for s in app.screen.query(".warning"))
        assert "no better than chance" in listed and "carry no information" in listed
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        _fits(app)


async def test_an_unvalidated_judge_is_marked_with_the_command(scripted, tmp_path):  # noqa: F811
    path = _copy(scripted, tmp_path)
    app = UnspecificApp(path, stages={})
    async with app.run_test(size=(160, 48)) as pilot:
        await _open_report(app, pilot)
        headers = _headers(app.screen.query_one("#report-table"))
        assert {"Org % ?", "Core % ?", "sup. % ?"} <= set(headers)
        assert not any("corr" in h for h in headers)
        judges = text_of(app.screen.query_one("#report-judges"))
        assert "judge-a unvalidated" in judges and VALIDATE_COMMAND in judges
        assert "?" in text_of(app.screen.query_one("#report-row")).split("·")[1]  # the row's Org: marked
        await pilot.press("w")
        await pilot.pause()
        judge_lines = " ".join(text_of(s) for s in app.screen.query(".judge"))
        assert "unvalidated" in judge_lines and VALIDATE_COMMAND in judge_lines


@pytest.mark.parametrize("size", SIZES)
async def test_the_report_fits_with_its_warnings_on_one_line(tmp_path, size):
    known = make_known_store(tmp_path / "s.sqlite")  # one instruction: every group is warned about
    app = UnspecificApp(known.path, stages={})
    async with app.run_test(size=size) as pilot:
        await _open_report(app, pilot)
        screen = app.screen
        line = screen.query_one("#report-warnings")
        assert len(screen.warnings) >= 2 and line.size.height == 1
        assert text_of(line).startswith(f"! {len(screen.warnings)} warning(s)")
        table = screen.query_one("#report-table")
        assert table.region.height >= 3 and table.row_count == 2  # visible, under one line of warnings
        _fits(app)
        await pilot.press("i")  # the full intervals whatever the width; the hint says when they overflow
        await pilot.pause(0.1)
        overflows = table.virtual_size.width > table.scrollable_content_region.width
        assert overflows == ("more columns" in text_of(screen.query_one("#report-row")))
