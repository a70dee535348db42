"""A model's direct and edit responses are two texts: every screen keeps them apart, names the
mode, and shows exactly the text it labels or judges (issue 12)."""

from __future__ import annotations

from pipeline.store.view import Writer
from tests.support.app import (
    EDIT_RESPONSE,
    EDIT_SUMMARY,
    RESPONSE,
    SUMMARY,
    goto,
    make_two_mode_store,
    on_screen,
    settle,
    store_rows,
    text_of,
)
from unspecific_tui.app import UnspecificApp

DIRECT, EDIT = Writer("m1", "direct"), Writer("m1", "edit")


async def test_instructions_audit_and_compare_keep_the_modes_apart(tmp_path):
    known, edit, edit_summary = make_two_mode_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={}, annotator="ann")
    async with on_screen(app, "2", (160, 48)) as pilot:
        rows = app.screen.rows
        assert sorted((r.model, r.mode, r.response_id) for r in rows) == [
            ("m1", "direct", known.response), ("m1", "edit", edit), ("m2", "direct", known.response_2)]
        # The flipped counts of the two m1 rows are their own responses' (C2 on direct, C1 on edit).
        assert {r.mode: r.flipped for r in rows if r.model == "m1"} == {"direct": 1, "edit": 1}
        app.screen.set_filter("mode", "edit")
        await pilot.pause()
        assert [(r.model, r.mode) for r in app.screen.rows] == [("m1", "edit")]
        app.screen.set_filter("mode", None)

        app.open_audit(known.instruction, DIRECT, known.c1)
        await settle(app, pilot)
        screen = app.screen
        assert (screen.shown.writer, screen.shown.response_id, screen.shown.summary_id) == (
            DIRECT, known.response, known.summary)
        assert screen.shown.state == "pass both"
        assert screen.query_one("#response")._text.plain == RESPONSE
        screen.writer = EDIT
        screen.refresh_constraint()
        await pilot.pause()
        assert (screen.shown.response_id, screen.shown.summary_id,
                screen.shown.state) == (edit, edit_summary, "FLIPPED")
        assert screen.query_one("#response")._text.plain == EDIT_RESPONSE
        assert screen.query_one("#summary")._text.plain == EDIT_SUMMARY
        head = text_of(screen.query_one("#audit-head"))
        assert "m1 [edit]" in head  # the mode is on screen, not eaten as markup
        # Only the edit texts' verdicts and quotes: never the direct response's.
        assert {judge for judge, _ in screen.shown.quotes["response"]} == {"judge-a", "judge-b"}
        verdict_lines = text_of(screen.query_one("#audit-verdicts"))
        assert verdict_lines.count("full") == 2 and verdict_lines.count("summary 0.25") == 2

        await goto(app, pilot, "4")
        compare = app.screen
        # The response Audit showed (m1's edit one) and, as no other model answered in edit mode, the
        # other mode: the sides by name (direct before edit), the edit one what Audit opens on again.
        assert compare.writers == [DIRECT, EDIT] and compare.context().writer == EDIT
        # C1 passes both direct texts, flips on the edit ones; C2 the other way round.
        assert compare.cells[0] == ("yes", "yes", "yes", "FLIP")
        assert compare.cells[1] == ("yes", "FLIP", "yes", "yes")
        assert "m1 [edit]" in text_of(compare.query_one("#compare-head"))
        await pilot.press("m")  # A: the next response that is not B's: m2's
        await pilot.pause()
        assert compare.writers == [Writer("m2", "direct"), EDIT]


async def test_annotate_shows_exactly_the_response_it_labels(tmp_path):
    known, edit, edit_summary = make_two_mode_store(tmp_path / "s.sqlite")
    texts = {known.response: RESPONSE, known.summary: SUMMARY, edit: EDIT_RESPONSE,
             edit_summary: EDIT_SUMMARY}
    app = UnspecificApp(known.path, stages={}, annotator="ann", sample_seed=0)
    async with on_screen(app, "5", (160, 48)) as pilot:
        screen = app.screen
        flipped = {(i.constraint_id, i.generation_id) for i in screen.queue.items if i.flipped}
        assert flipped == {(known.c2, known.response), (known.c1, edit), (known.c2, known.response_2)}
        for _ in range(len(screen.queue.items)):
            item = screen.queue.items[screen.queue.index]
            assert screen.shown == (item.generation_id, item.summary_id)
            response_pane = screen.query_one("#ann-response")._text.plain
            if item.generation_id in texts:
                assert response_pane == texts[item.generation_id]
                assert screen.query_one("#ann-summary")._text.plain == texts[item.summary_id]
            head = text_of(screen.query_one("#ann-head"))
            assert f"{item.model} [{item.mode}]" in head and f"response #{item.generation_id}" in head
            await pilot.press("s")
            await pilot.pause()
        labelled = set(store_rows(app, "SELECT constraint_id, generation_id FROM annotations"))
        assert labelled == {(i.constraint_id, i.generation_id) for i in screen.queue.items}


async def test_report_screen_names_the_mode(tmp_path):
    known, _, _ = make_two_mode_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={})
    async with on_screen(app, "6", (160, 48)):
        cells = app.screen.cells
        assert sorted((c.model, c.mode) for c in cells) == [("m1", "direct"), ("m1", "edit"),
                                                            ("m2", "direct")]
        table = app.screen.query_one("#report-table")
        assert sorted((str(table.get_row_at(i)[2]), str(table.get_row_at(i)[3]))
                      for i in range(table.row_count)) == [
            ("m1", "direct"), ("m1", "edit"), ("m2", "direct")]
