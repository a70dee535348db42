"""Context follows the auditor (issue 26, item 5): the instruction, response (model and mode) and
summary ratio shown on one screen are where Audit and Compare open; Build opens on the latest
build run, or on the store's totals when there is none."""

from __future__ import annotations

import sqlite3

from pipeline.store.view import Writer
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.app import goto, make_known_store, settle, store_rows, text_of
from unspecific_tui.app import UnspecificApp

B_DIRECT = Writer("model-b", "direct")


async def test_compare_opens_on_what_audit_shows_and_audit_on_what_compare_shows(tmp_path):
    summary = build_synthetic_store(tmp_path / "s.sqlite",
                                    SyntheticSpec(n_instructions=8, ratios=(0.5, 0.25, 0.1)))
    app = UnspecificApp(summary.path, stages={})
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        app.open_audit(3, B_DIRECT)
        await settle(app, pilot)
        audit = app.screen
        assert (audit.shown.instruction_id, audit.shown.writer) == (3, B_DIRECT)
        await pilot.press("r")  # Audit's ratio: no longer the analysis' 0.25
        await pilot.pause()
        audit_ratio = audit.ratio
        assert audit_ratio is not None and audit_ratio != 0.25
        await goto(app, pilot, "4")
        compare = app.screen
        assert compare.data.id == 3  # not instruction 1
        # Both responses side by side, by name (B's on side B), and B's the one Audit opens on again.
        assert compare.writers == sorted(compare.writers) and B_DIRECT in compare.writers
        assert compare.context().writer == B_DIRECT
        assert compare.context().ratio == audit_ratio
        assert f"summary {audit_ratio:g}" in text_of(compare.query_one("#compare-head"))
        # Compare's summaries are at that ratio too.
        assert all(summary.ratio == audit_ratio for _, summary in compare._texts)

        await pilot.press("right_square_bracket", "down", "down",
                          "r")  # instruction 4, its third row, next ratio
        await pilot.pause()
        row_cid, compare_ratio = compare.row_cids[2], compare.context().ratio
        assert compare_ratio != audit_ratio
        await goto(app, pilot, "3")
        assert app.current_mode == "audit"
        assert (audit.shown.instruction_id, audit.shown.writer,
                audit.shown.constraint_id) == (4, B_DIRECT, row_cid)
        side = compare.writers.index(B_DIRECT)
        assert audit.ratio == compare_ratio and audit.shown.summary_id == compare._texts[side][1].id
        # Another screen in between (Report) keeps the context: Compare is still on instruction 4.
        await goto(app, pilot, "6")
        await goto(app, pilot, "4")
        assert (compare.data.id, compare.context().writer, compare._cursor_cid()) == (4, B_DIRECT, row_cid)
        # Compare's `a` (audit this row) carries the ratio too.
        await pilot.press("r")
        await pilot.pause()
        compare_ratio = compare.context().ratio
        await goto(app, pilot, "a")
        assert (audit.shown.constraint_id, audit.ratio) == (row_cid, compare_ratio)


async def test_instructions_row_opens_compare_on_its_response(tmp_path):
    summary = build_synthetic_store(tmp_path / "s.sqlite", SyntheticSpec(n_instructions=8))
    app = UnspecificApp(summary.path, stages={})
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        app.open_compare(5, B_DIRECT)
        await settle(app, pilot)
        # On a side (the sides by name), the one Audit opens on from there.
        assert (app.screen.data.id, app.screen.context().writer) == (5, B_DIRECT)
        assert B_DIRECT in app.screen.writers


async def test_build_opens_on_the_latest_build_run_not_a_newer_evaluate_run(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    with sqlite3.connect(known.path) as conn:
        conn.execute("INSERT INTO runs(id, kind, name, config, status, started_at) VALUES"
                     " ('e1', 'evaluate', 'e1', '{}', 'done', '2026-06-01T00:00:00+00:00')")
    conn.close()
    app = UnspecificApp(known.path, stages={})
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        assert app.run_id == "r1"
        screen = app.screen
        assert screen.stages.counts["synthesize"] == 1 and screen.stages.counts["judge"] > 0
        assert screen.query_one("#runs").cursor_row == 1  # r1, below the newer evaluate run


async def test_build_shows_store_totals_when_no_build_run_exists(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    with sqlite3.connect(known.path) as conn:  # the store's only run is an evaluate run
        conn.execute("UPDATE runs SET kind = 'evaluate'")
    conn.close()
    app = UnspecificApp(known.path, stages={})
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        assert app.run_id is None
        screen = app.screen
        judged = store_rows(app, "SELECT count(*) FROM verdicts")[0][0]
        counts = screen.stages.counts
        assert (counts["synthesize"], counts["respond"], counts["judge"]) == (1, 2, judged)
        assert "store totals" in text_of(screen.query_one("#run-totals"))
