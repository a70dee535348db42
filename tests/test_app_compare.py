"""Compare (issue 26, item 6): both summaries under the responses, each side's Org and Core, a
filter for the rows where the sides differ, and the cursor kept when a side changes."""

from __future__ import annotations

from pipeline.store.view import Writer
from tests.support.app import SUMMARY, SUMMARY_2, make_known_store, make_two_mode_store, on_screen, text_of
from unspecific_tui.app import UnspecificApp

DIRECT, EDIT, M2 = Writer("m1", "direct"), Writer("m1", "edit"), Writer("m2", "direct")


def span(text: str, part: str) -> tuple[int, int]:
    start = text.index(part)
    return (start, start + len(part))


async def test_both_summaries_sit_under_the_responses_with_their_quotes(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={})
    async with on_screen(app, "4", (140, 40)):
        screen = app.screen
        a_sum, b_sum = screen.query_one("#cmp-a-summary"), screen.query_one("#cmp-b-summary")
        assert (a_sum._text.plain, b_sum._text.plain) == (SUMMARY, SUMMARY_2)
        assert a_sum.region.y > screen.query_one("#cmp-a").region.y  # under the response
        assert "summary 0.25" in a_sum.border_title
        # The judges' summary quotes for the row's constraint (C1) are highlighted there too.
        assert screen.highlighted["cmp-a-summary"] == [span(SUMMARY, "a flood defence plan")]
        assert screen.highlighted["cmp-b-summary"] == [span(SUMMARY_2, "The flood defence plan passed")]


async def test_each_side_shows_the_reports_org_and_core(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={})
    async with on_screen(app, "4", (140, 40)):
        screen = app.screen
        metrics = app.analysis.metrics
        assert metrics is not None
        for side, response in (("a", known.response), ("b", known.response_2)):
            row = next(r for r in metrics.rows if r.response_id == response and r.ratio == 0.25)
            expected = (f"{100 * row.org:.0f}%", f"{100 * row.core:.0f}%")
            assert screen.totals[side] == expected
            line = text_of(screen.query_one(f"#cmp-{side}-totals"))
            assert f"Org {expected[0]}" in line and f"Core {expected[1]}" in line


async def test_rows_that_differ_filter_keeps_the_cursor_on_its_constraint(tmp_path):
    known, _, _ = make_two_mode_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={})
    async with on_screen(app, "4", (140, 40)) as pilot:
        screen = app.screen
        await pilot.press("M")  # B: m1's edit response (C1 and C2 flip the other way round there)
        await pilot.pause()
        assert screen.writers == [DIRECT, EDIT]
        assert len(screen.row_cids) == 3
        await pilot.press("down")  # C2
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        assert screen.row_cids == [known.c1, known.c2]  # C3 fails on both: the same, hidden
        assert all(cells[:2] != cells[2:] for cells in screen.cells)
        assert screen._cursor_cid() == known.c2
        assert "rows that differ" in text_of(screen.query_one("#compare-head"))
        await pilot.press("d")  # every row again
        await pilot.pause()
        assert screen.row_cids == [known.c1, known.c2, known.c3] and screen._cursor_cid() == known.c2


async def test_changing_a_side_keeps_the_cursor_row(tmp_path):
    known, _, _ = make_two_mode_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={})
    async with on_screen(app, "4", (140, 40)) as pilot:
        screen = app.screen
        table = screen.query_one("#compare-table")
        await pilot.press("down", "down")
        await pilot.pause()
        assert screen._cursor_cid() == known.c3
        await pilot.press("m")  # side A: the next response
        await pilot.pause()
        assert screen.writers[0] != DIRECT
        assert table.cursor_row == 2 and screen._cursor_cid() == known.c3
        await pilot.press("M")
        await pilot.pause()
        assert table.cursor_row == 2 and screen._cursor_cid() == known.c3
        # The panes follow the row kept (C3: no Yes quote anywhere), not the first row (C1: quotes on both).
        assert screen.highlighted["cmp-a"] == [] and screen.highlighted["cmp-b"] == []
        assert screen.context().constraint_id == known.c3
