"""Audit's constraint list: every active constraint with its outcome and trust marks, the detail
following the list, sort and filter, following a flag or the queue, the context, and sizes."""

from __future__ import annotations

import json
import re
import sqlite3

from pipeline.store.view import Writer
from tests.support.app import (
    C2,
    C3,
    goto,
    make_known_store,
    on_screen,
    screen_text,
    settle,
    synthetic_app,
    text_of,
)
from unspecific_tui.app import UnspecificApp
from unspecific_tui.following import Following, Stop
from unspecific_tui.widgets.audit.listing import AuditList
from unspecific_tui.widgets.constraint_list import ConstraintList

M1, M2 = Writer("m1", "direct"), Writer("m2", "direct")


def make_doubtful_store(path):
    """The known store, with two outcomes that must not read as certain:
    - C2 FLIPPED on m1 now rests on judge-b's Yes whose quote is MISSING from the response;
    - C1 on m2 passes both, but the judges split 1-1 on the summary (a mean of 0.5 passes)."""
    known = make_known_store(path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE verdicts SET quote_found = 'missing', quote = 'not in the text' "
                     "WHERE generation_id = ?"
                     " AND constraint_id = ? AND judge = 'judge-b'", (known.response, known.c2))
        conn.execute("UPDATE verdicts SET verdict = 0, quote = '', reason = 'no' WHERE generation_id = ?"
                     " AND constraint_id = ? AND judge = 'judge-b'", (known.summary_2, known.c1))
        # C1 and C3 near-duplicates of each other (pipeline.analysis.flags' detail: constraint ids).
        for cid, other in ((known.c1, known.c3), (known.c3, known.c1)):
            conn.execute("INSERT INTO constraint_flags VALUES (?, 'duplicate', ?)",
                         (cid, json.dumps({"with": [{"constraint_id": other, "score": 88.5}]})))
    conn.close()
    return known


async def open_on(tmp_path, size=(160, 48)):
    known = make_doubtful_store(tmp_path / "s.sqlite")
    return known, UnspecificApp(known.path, stages={}, annotator="ann")


def rows_of(screen) -> list[tuple[int, str]]:
    table = screen.query_one(ConstraintList)
    return [(r.constraint_id, table.get_row_at(i)[1].plain) for i, r in enumerate(table.rows_shown)]


async def test_list_shows_every_constraint_with_outcome_and_trust(tmp_path):
    known, app = await open_on(tmp_path)
    async with on_screen(app, "3", (160, 48)) as pilot:
        screen = app.screen
        assert screen.shown.writer == M1
        assert "task: Write a news article about a town fighting over a flood plan." in text_of(
            screen.query_one("#audit-task"))
        # Every active constraint (the replaced one is not), in position order, with its outcome;
        # C1's judge-b Yes has no quote on the response: doubtful ('?', not green), '*' in the judges' cell.
        assert rows_of(screen) == [(known.c1, "pass both?"), (known.c2, "FLIPPED?"), (known.c3, "fails")]
        table = screen.query_one(ConstraintList)
        first = table.get_row_at(0)
        assert first[2].plain.split() == ["2-0*", "2-0"]
        assert all("green" not in str(s.style) for s in first[1].spans) and "green" not in str(first[1].style)
        assert first[5].plain == "3w AB"  # 'flood defence plan': 3 words, in A, in B and in the response
        await pilot.press("down")  # the list's down arrow: the next constraint, and its detail
        await pilot.pause()
        assert screen.shown.constraint_id == known.c2 and table.cursor_row == 1
        head = text_of(screen.query_one("#audit-head"))
        assert "FLIPPED" in head and "rests on a Yes whose quote is MISSING" in head and "judge-b" in head
        assert C2 in head
        await pilot.press("m")  # model m2: C1 passes both with the judges split on the summary
        await pilot.pause()
        assert screen.shown.writer == M2
        table.move_cursor(row=0)  # selecting a row shows its detail
        await pilot.pause()
        assert screen.shown.constraint_id == known.c1
        assert rows_of(screen)[0] == (known.c1, "pass both?")
        head = text_of(screen.query_one("#audit-head"))
        assert "judges split 1-1" in head and "the judges split: not a clear call" in head
        verdicts = text_of(screen.query_one("#audit-verdicts")).splitlines()
        assert verdicts[0].split() == ["judge", "text", "verdict", "quote", "found?", "quote", "/", "reason"]


async def test_sort_and_filter_change_the_rows(tmp_path):
    known, app = await open_on(tmp_path)
    async with on_screen(app, "3", (160, 48)) as pilot:
        screen = app.screen
        ids = lambda: [c for c, _ in rows_of(screen)]  # noqa: E731
        assert ids() == [known.c1, known.c2, known.c3]
        await pilot.press("s")  # suspicion: C1 (copied, unquoted) before C2 (lost, unquoted) before C3
        await pilot.pause()
        assert screen.listing.sort == "suspicion" and ids() == [known.c1, known.c2, known.c3]
        await pilot.press("s", "s")  # outcome: the flipped one first
        await pilot.pause()
        assert screen.listing.sort == "outcome" and ids()[0] == known.c2
        await pilot.press("s", "slash")  # back to position; show only flipped
        await pilot.pause()
        assert screen.listing.filter == "flipped" and ids() == [known.c2]
        assert screen.shown.constraint_id == known.c2  # the filter hid C1: the first row it shows
        await pilot.press("slash")  # split: nothing splits on m1
        await pilot.pause()
        # Nothing to show instead: C2 stays, its row shown with the filter lifted for it (and said).
        assert ids() == [known.c2]
        assert "0/3 constraints + #2: filter lifted" in text_of(screen.query_one("#audit-list-head"))
        assert screen.shown.constraint_id == known.c2
        await pilot.press("slash", "slash")  # flagged: C1 (duplicate) and C3 (duplicate, proper noun)
        await pilot.pause()
        assert screen.listing.filter == "flagged" and ids() == [known.c1, known.c3]


async def test_f_picks_a_flag_and_n_follows_it(tmp_path):
    known, app = await open_on(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("3", "j")
        await settle(app, pilot)
        screen = app.screen
        await pilot.press("f")
        await pilot.pause()
        picker = app.screen
        options = [str(picker.query_one("OptionList").get_option_at_index(i).prompt)
                   for i in range(picker.query_one("OptionList").option_count)]
        assert options[0].split()[:3] == ["flag", "duplicate",
                                          "2"] and options[1].split()[:3] == ["flag", "proper_noun", "1"]
        assert any("suspicion queue" in o for o in options)
        await pilot.press("enter")  # duplicate
        await pilot.pause()
        assert app.screen is screen
        following = app.nav.following
        assert following is not None and following.label == "flag duplicate"
        assert [s.constraint_id for s in following.stops] == [known.c1, known.c3]
        # From the shown constraint (C2) on: the first duplicate at or after it is C3.
        assert screen.shown.constraint_id == known.c3
        head = text_of(screen.query_one("#audit-head"))
        assert "flag duplicate item 2 of 2" in head
        assert "duplicates #1 Describe the flood defence plan" in head and "88.5" in head
        await pilot.press("p")
        await pilot.pause()
        assert screen.shown.constraint_id == known.c1
        assert "flag duplicate item 1 of 2" in text_of(screen.query_one("#audit-head"))
        await pilot.press("escape")
        await pilot.pause()
        assert app.nav.following is None
        await pilot.press("n")  # no longer following: the next row
        await pilot.pause()
        assert screen.shown.constraint_id == known.c2


async def test_audit_honours_the_queue_it_was_opened_on(tmp_path):
    known, app = await open_on(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        app.nav.follow(Following("suspicion queue", [Stop(known.c1, 1, M1), Stop(known.c3, 1, M2),
                                                      Stop(known.c2, 1, M1)]))
        app.open_audit(1, M2, known.c3)  # what the queue screen's enter does
        await settle(app, pilot)
        screen = app.screen
        assert screen.shown.constraint_id == known.c3 and screen.shown.writer == M2
        assert app.nav.following.index == 1
        await pilot.press("n")
        await pilot.pause()
        assert screen.shown.constraint_id == known.c2 and screen.shown.writer == M1
        assert "suspicion queue item 3 of 3" in text_of(screen.query_one("#audit-head"))


async def test_context_round_trip_with_compare(tmp_path):
    known, app = await open_on(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("3", "j", "m")
        await settle(app, pilot)
        audit = app.screen
        context = audit.context()
        assert (context.instruction_id, context.writer, context.ratio,
                context.constraint_id) == (1, M2, 0.25, known.c2)
        await goto(app, pilot, "4")
        assert app.nav.context == context
        assert app.screen.context().instruction_id == 1 and app.screen.context().writer == M2
        await goto(app, pilot, "3")
        assert app.screen is audit
        assert audit.shown.instruction_id == 1 and audit.shown.writer == M2


async def _check_size(tmp_path, size) -> None:
    known, app = await open_on(tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        await pilot.press("3", "j")
        await settle(app, pilot)
        screen = app.screen
        verdicts = screen.query_one("#audit-verdicts")
        # A header and four verdicts, one line each: none wrapped, none cut off.
        assert verdicts.content_region.height == 5
        plain = screen_text(app)
        for judge, where, said in (("judge-a", "full", "yes"), ("judge-b", "full", "yes"),
                                   ("judge-a", "summary 0.25", "no"), ("judge-b", "summary 0.25", "no")):
            assert re.search(rf"{judge}\s+{where}\s+{said}", plain), (judge, where, plain)
        assert "replaced #2" in plain  # the lineage stays in view
        assert "FLIPPED" in plain and "quote / reason" in plain
        await pilot.press("t")  # t does something visible at every width
        await pilot.pause()
        assert (screen.query_one("#ref-b").has_class("-current")
                and not screen.query_one("#ref-a").has_class("-current"))
        await pilot.press("pagedown")  # the page keys scroll the current pane, the arrows still move the list
        await pilot.press("down")
        await pilot.pause()
        assert screen.shown.constraint_id == C3_ID


C3_ID = 4  # the known store's C3
assert C3  # (its text is in tests/support/app.py)


async def test_narrow_80x24_keeps_verdict_rows_whole(tmp_path):
    await _check_size(tmp_path, (80, 24))


async def test_wide_160x48_keeps_verdict_rows_whole(tmp_path):
    await _check_size(tmp_path, (160, 48))


async def test_list_moves_on_to_the_next_instruction(tmp_path):
    app = synthetic_app(tmp_path, n_instructions=2, n_constraints=4)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        await pilot.press("3", "down", "down", "down")
        await pilot.pause()
        screen = app.screen
        assert screen.shown.instruction_id == 1 and screen.query_one(ConstraintList).cursor_row == 3
        await pilot.press("down")
        await pilot.pause()
        assert screen.shown.instruction_id == 2 and screen.query_one(ConstraintList).cursor_row == 0
        assert len(screen.query_one(ConstraintList).rows_shown) == 4
        await pilot.press("up")
        await pilot.pause()
        assert screen.shown.instruction_id == 1 and screen.query_one(ConstraintList).cursor_row == 3


async def test_f_can_follow_the_suspicion_queue(tmp_path):
    from pipeline.analysis.suspicion import suspicion_queue
    from pipeline.store.database import open_store

    known, app = await open_on(tmp_path)
    store = open_store(known.path, readonly=True)
    ranked = suspicion_queue(store, ratio=0.25)
    store.close()
    async with on_screen(app, "3", (160, 48)) as pilot:
        screen = app.screen
        await pilot.press("f", "down", "down", "enter")  # past the two flags: the queue
        await settle(app, pilot)
        following = app.nav.following
        assert following is not None and following.label == "suspicion queue"
        assert [(s.constraint_id, s.writer) for s in following.stops] == [(e.constraint_id, e.writer)
                                                                          for e in ranked]
        first = ranked[0]
        assert (screen.shown.constraint_id, screen.shown.writer) == (first.constraint_id, first.writer)
        assert f"suspicion queue item 1 of {len(ranked)}" in text_of(screen.query_one("#audit-head"))


async def test_list_cells_render_as_datatable_renders_them(tmp_path):
    """ConstraintList draws its one-line cells without DataTable's Padding and Styled, and keeps each
    cell's text apart from the row style: every row (every cell in it), with the cursor and the mouse
    on it or not, and every line must come out segment for segment as DataTable's own rendering makes it."""
    from rich.style import Style
    from textual.widgets import DataTable

    known, app = await open_on(tmp_path)
    async with on_screen(app, "3", (160, 48)) as pilot:
        table = app.screen.query_one(ConstraintList)
        assert table.row_count >= 3
        text_width = table.ordered_columns[-1].get_render_width(table) - 2 * table.cell_padding
        assert any(len(r.text) > text_width for r in table.rows_shown)  # a cell cut with an ellipsis
        base = table.get_component_styles("datatable--odd-row").rich_style + Style(bold=False)

        def fresh() -> None:
            for cache in (table._cell_render_cache, table._row_render_cache, table._line_cache, table._strips,
                          table._plain_cells, table._row_cells):
                cache.clear()

        # Whole rows (cells and the row's style carried to the right edge), the cursor and the mouse
        # on it or elsewhere; then every line the widget draws, header included.
        from textual.coordinate import Coordinate

        for row in range(table.row_count):
            key = table._row_locations.get_key(row)
            cells = table.row_cells(table.rows_shown[row])
            for show_hover in (False, True):
                table._show_hover_cursor = show_hover
                for cursor in (row, (row + 1) % table.row_count):
                    for hover in (row, (row + 2) % table.row_count):
                        at, over = Coordinate(cursor, 0), Coordinate(hover, 0)
                        fresh()
                        ours = table._row_segments(cells, row, cursor == row, hover == row, base)
                        assert table._plain_cells, "the list's own rendering was not taken"
                        fresh()
                        theirs = DataTable._render_line_in_row(table, key, 0, base, at, over)
                        assert theirs == ([], ours), (row, cursor, hover, show_hover)
        table._show_hover_cursor = False
        # The sizes DataTable would work out (it measures every cell; the list does not need to).
        virtual = table.virtual_size
        DataTable._update_dimensions(table, list(table.rows))
        assert table.virtual_size == virtual
        for cursor in range(table.row_count):
            table.move_cursor(row=cursor, animate=False)
            await pilot.pause()
            for y in range(table.size.height):
                fresh()
                ours_line = table.render_line(y)
                fresh()
                assert list(ours_line) == list(DataTable.render_line(table, y)), (cursor, y)


async def test_the_cursor_stays_in_view_down_a_list_longer_than_the_screen(tmp_path):
    """At 80x24 the list shows a few rows of 39: moving down (and back up) keeps the cursor's row in view."""
    app = synthetic_app(tmp_path, n_instructions=1, n_constraints=39)
    async with on_screen(app, "3", (80, 24)) as pilot:
        await pilot.press("l")  # 80 columns: the list in place of the text pane
        await settle(app, pilot)
        table = app.screen.query_one(ConstraintList)
        view = table.scrollable_content_region.height - table.header_height
        assert 0 < view < 39
        for keys in (["down"] * 30, ["up"] * 25):
            for key in keys:
                await pilot.press(key)
                await pilot.pause()
                top = round(table.scroll_y)
                assert top <= table.cursor_row < top + view, (table.cursor_row, top, view)
        assert table.cursor_row == 5


async def test_following_reads_the_next_item_ahead(tmp_path, monkeypatch):
    """While an item of what n follows is shown, the next is read ahead (after the paint): `n` then
    reads no rows from the store, renders no row of the list and wraps no text, and the list shows
    exactly what it shows drawn from nothing (issue 35: the next item at 160x48 in under 50 ms)."""
    from unspecific_tui.widgets import text_pane

    app = synthetic_app(tmp_path, n_instructions=3, n_constraints=8)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        stops = []
        for iid in (1, 2, 3):  # each stop in another instruction, on the other model from the first
            data = app.view.instruction(iid)
            active = sorted((c.position or 0, c.id) for c in data.constraints.values() if c.active)
            stops.append(Stop(active[2][1], iid, data.writers[-1]))
        app.nav.follow(Following("suspicion queue", stops))
        app.open_audit(stops[0].instruction_id, stops[0].writer, stops[0].constraint_id)
        await settle(app, pilot)
        await pilot.pause(0.2)  # painted; the next stop read ahead
        screen = app.screen
        table = screen.query_one(ConstraintList)
        work: list[str] = []
        listing = screen.query_one(AuditList)  # the part that reads an instruction's rows
        read_rows, row_segments = listing._read_rows, table._row_segments
        monkeypatch.setattr(listing, "_read_rows", lambda *a: work.append("rows") or read_rows(*a))
        monkeypatch.setattr(table, "_row_segments", lambda *a: work.append("row") or row_segments(*a))
        wrapped = text_pane.wrap_lines.cache_info().misses
        screen.action_follow(1)  # `n`, up to the paint: the screen's refresh and the list's lines
        lines = [list(table.render_line(y)) for y in range(table.size.height)]
        assert (screen.shown.instruction_id, screen.shown.constraint_id, screen.shown.writer) == \
            (stops[1].instruction_id, stops[1].constraint_id, stops[1].writer)
        assert work == [] and text_pane.wrap_lines.cache_info().misses == wrapped
        assert table.constraint_at(table.cursor_row) == stops[1].constraint_id
        for cache in (table._strips, table._plain_cells, table._row_cells):
            cache.clear()
        assert [list(table.render_line(y)) for y in range(table.size.height)] == lines
        await pilot.pause(0.2)
        work.clear()
        await pilot.press("n")  # the last stop, read ahead in turn
        await pilot.pause()
        assert screen.shown.constraint_id == stops[2].constraint_id and "rows" not in work


async def test_a_move_holds_the_collector_until_its_paint(tmp_path):
    """Audit's moves hold automatic garbage collection from the key to the paint: a full collection
    falling there made the slowest moves (60-180 ms on the 2,000-instruction bench store). It runs
    again once the move is painted, and never stays off past the app."""
    import gc

    known, app = await open_on(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        screen = await goto(app, pilot, "3")
        assert gc.isenabled()
        screen.action_move(1)
        assert not gc.isenabled()
        await pilot.pause(0.1)  # painted, and a moment after
        assert gc.isenabled() and screen.shown.constraint_id == known.c2
        screen.action_move(1)
        assert not gc.isenabled()
    assert gc.isenabled()
