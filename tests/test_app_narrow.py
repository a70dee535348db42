"""Narrow screens (issue 47 item 5), at 80x24 and 160x48: Audit's constraint column gets the width the
fixed columns can spare, with the whole constraint above the list; notices cover no pane, table or
caption; the queue's reasons bar keeps every reason, on and off marked by a symbol too; Report draws
its chart where lines are free and keeps raw and corrected rates in columns of their own; F1 opens
the help and the queue's `2` goes back to Instructions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.store.database import open_store
from pipeline.store.judge_checks import put_check_items
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.app import goto, on_screen, screen_text, settle, synthetic_app, text_of, textual_private
from tests.support.judge_checks import known_check
from tests.support.snapshot_app import lengthen_constraints
from unspecific_tui.app import UnspecificApp
from unspecific_tui.screens.help import HelpScreen
from unspecific_tui.widgets.constraint_list import ConstraintList

SIZES = [(80, 24), (160, 48)]
Toast = textual_private("textual.widgets._toast", "Toast")


async def open_list(app, pilot, size):  # noqa: ANN001, ANN201
    """Audit with its list in view (at 80 columns `l` shows it in place of the text)."""
    await settle(app, pilot)
    screen = await goto(app, pilot, "3")
    if size[0] < 120:
        await pilot.press("l")
        await settle(app, pilot)
    return screen, screen.query_one(ConstraintList)


@pytest.mark.parametrize("size", SIZES)
async def test_the_constraint_column_gets_what_the_fixed_columns_spare(tmp_path, size):
    """It was 17 cells at 80 columns and 24 at 160 (11 and 18 with the echo column): each fixed column
    now takes what it shows and one blank cell, no padding on both sides, the scrollbar one cell."""
    app = synthetic_app(tmp_path, n_instructions=4, seed=7)
    async with app.run_test(size=size) as pilot:
        screen, table = await open_list(app, pilot, size)
        columns = table.ordered_columns
        fixed = [c.get_render_width(table) for c in columns[:-1]]
        assert table.cell_padding == 0
        # Each fixed column's cells end a cell short of the next column: one blank cell between them.
        for index, width in enumerate(fixed):
            cells = [table.get_cell_at((row, index)) for row in range(table.row_count)]
            assert max(len(str(columns[index].label)), *(c.cell_len for c in cells)) < width
        text = columns[-1].get_render_width(table)
        assert sum(fixed) + text + 1 == table.size.width  # the rest, but the one-cell scrollbar
        assert text >= (27 if size[0] == 80 else 34)


@pytest.mark.parametrize("size", SIZES)
async def test_the_whole_constraint_stands_above_the_list(tmp_path, size):
    """A long constraint, cut in the list's column, is whole in the head above it (at 80 columns the
    head gives it the lines it needs while the list is shown)."""
    path = tmp_path / "long.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=4, seed=7))
    lengthen_constraints(path)  # every third constraint runs to ~200 characters
    app = UnspecificApp(path, stages={})
    async with app.run_test(size=size) as pilot:
        screen, table = await open_list(app, pilot, size)
        data = app.view.instruction(screen.shown.instruction_id)
        text = data.constraints[screen.shown.constraint_id].text
        assert len(text) > 150 and len(text) > table.ordered_columns[-1].width  # the column cuts it
        # On the screen, not only in the head's content: over the list at 80 columns it was one line, cut.
        head = " ".join(" ".join(screen_text(app).splitlines()[1:8]).split())
        assert " ".join(text.split()) in head


def _shown_regions(screen) -> list:  # noqa: ANN001
    """What a notice must leave alone: the panes shown, the verdicts, the legend, the list, the keys."""
    from unspecific_tui.widgets.footer import KeyFooter

    widgets = [p for p in screen.query("#panes TextPane") if p.display]
    widgets += [screen.query_one(f"#{name}") for name in ("audit-verdicts", "audit-legend", "audit-task")]
    widgets += [screen.query_one(ConstraintList), screen.query_one(KeyFooter)]
    return [w.region for w in widgets if w.region.area]


@pytest.mark.parametrize("size", SIZES)
async def test_a_notice_covers_no_pane_table_or_caption(tmp_path, size):
    """Notices covered the pane's footer and the judges' table at 80x24 and pushed the legend's caption
    off at 160x48: one notice at a time now takes the header's row and nothing else."""
    app = synthetic_app(tmp_path, n_instructions=4, seed=7)
    async with app.run_test(size=size, notifications=True) as pilot:
        await settle(app, pilot)
        screen = await goto(app, pilot, "3")
        legend = text_of(screen.query_one("#audit-legend"))
        regions = _shown_regions(screen)
        await pilot.press("s")  # says "list sorted by suspicion"
        await pilot.press("slash")  # and "list shows: flipped"
        await pilot.pause(0.1)
        toasts = list(screen.query(Toast))
        assert len(toasts) == 1 and "list shows" in str(toasts[0].render())
        region = toasts[0].region
        assert (region.y, region.height, region.width) == (0, 1, size[0])
        assert not [r for r in regions if r.overlaps(region)]
        assert text_of(screen.query_one("#audit-legend")) == legend  # the caption stays whole
        assert "list shows: flipped" in screen_text(app).splitlines()[0]


@pytest.mark.parametrize("size", SIZES)
async def test_the_reasons_bar_keeps_every_reason_and_marks_on_and_off(tmp_path, size):
    """At 80 columns the bar was cut ("uncertain" gone) and on or off showed only by colour."""
    from pipeline.analysis.suspicion import REASONS
    from unspecific_tui.screens.queue_rows import REASON_KEYS, REASON_OFF, REASON_ON

    app = synthetic_app(tmp_path, n_instructions=4, seed=7)
    async with on_screen(app, "2", size) as pilot:
        queue = await goto(app, pilot, "exclamation_mark")
        bar = queue.query_one("#queue-reasons")
        shown = screen_text(app)
        for reason in REASONS:
            assert f"{REASON_ON} {REASON_KEYS[reason]} {reason}" in text_of(bar)
            assert reason in shown  # on the screen, not cut off
        assert f"{REASON_ON} on {REASON_OFF} off" in text_of(bar)
        assert bar.size.height == (2 if size[0] == 80 else 1)
        await pilot.press("e")
        await settle(app, pilot)
        assert f"{REASON_OFF} e echo" in text_of(bar) and f"{REASON_ON} c copied" in text_of(bar)


@pytest.mark.parametrize("size", SIZES)
async def test_the_queues_2_goes_back_to_instructions(tmp_path, size):
    """The queue sits over Instructions; its help lists `2`, which did nothing there."""
    from unspecific_tui.screens.instructions import InstructionsScreen
    from unspecific_tui.screens.queue import QueueScreen

    app = synthetic_app(tmp_path, n_instructions=4, seed=7)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        instructions = await goto(app, pilot, "2")
        assert isinstance(await goto(app, pilot, "exclamation_mark"), QueueScreen)
        assert await goto(app, pilot, "2") is instructions
        assert isinstance(instructions, InstructionsScreen)
        await pilot.press("2")  # on Instructions itself: says so
        await settle(app, pilot)
        assert app.screen is instructions
        assert any(n.message == "this is the Instructions screen" for n in app._notifications)


@pytest.mark.parametrize("size", SIZES)
async def test_f1_opens_the_help(tmp_path, size):
    app = synthetic_app(tmp_path, n_instructions=4, seed=7)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        for key in ("1", "3", "6"):
            screen = await goto(app, pilot, key)
            await pilot.press("f1")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("f1")  # closes it, as ? does
            await pilot.pause()
            assert app.screen is screen


def _validated_store(tmp_path: Path, spec: SyntheticSpec) -> Path:
    """A store whose one judge has a built-in check: every rate has a corrected figure beside it."""
    path = tmp_path / "report.sqlite"
    build_synthetic_store(path, spec)
    store = open_store(path)
    check = known_check(np.random.default_rng(2), 0.9, 0.7, 600, "local")
    put_check_items(store, "local", "builtin", check.items)
    store.close()
    return path


@pytest.mark.parametrize("size", SIZES)
async def test_report_draws_its_chart_where_lines_are_free(tmp_path, size):
    """At 80x24 the demo's report (four groups) left 12 lines free and drew no chart, and `g` did
    nothing; raw and corrected rates read "76.9>93.5", which reads as a comparison."""
    from unspecific_tui.screens.report import CHART_MIN_LINES

    spec = SyntheticSpec(n_instructions=8, domains=("news",), models=("local",), judges=("local",), seed=3)
    app = UnspecificApp(_validated_store(tmp_path, spec), stages={})
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        screen = await goto(app, pilot, "6")
        await pilot.pause(0.2)
        chart, table = screen.query_one("#report-chart"), screen.query_one("#report-table")
        assert chart.display and chart.region.height >= CHART_MIN_LINES
        row = screen.query_one("#report-row")
        assert not chart.region.overlaps(table.region) and not chart.region.overlaps(row.region)
        assert table.region.height == table.row_count + 1  # as tall as its rows: the rest is the chart's
        notices = len(app._notifications)
        await pilot.press("g")
        await pilot.pause()
        assert screen.chart == "superficial" and len(app._notifications) == notices  # drawn, nothing to say
        headers = [str(c.label) for c in table.ordered_columns]
        for raw in ("Org", "Core", "sup."):
            at = next(i for i, h in enumerate(headers) if h.startswith(raw))
            assert "corr." in headers[at + 1]  # the corrected figure in a column of its own, beside it
        assert not any(">" in str(cell) for i in range(table.row_count) for cell in table.get_row_at(i))


async def test_report_says_when_the_chart_has_no_room(tmp_path):
    """Too many groups for a chart under the table at 80x24: `g` says why there is none."""
    spec = SyntheticSpec(n_instructions=24, models=("local", "other"), judges=("local",), seed=3)
    app = UnspecificApp(_validated_store(tmp_path, spec), stages={})
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        screen = await goto(app, pilot, "6")
        await pilot.pause(0.2)
        assert not screen.query_one("#report-chart").display
        await pilot.press("g")
        await pilot.pause()
        assert any("free lines under the table" in n.message for n in app._notifications)
