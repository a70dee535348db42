"""Empty and partial states said in words (issue 47 item 4), at 80x24 and 160x48: Compare with one
response says so and what would fill side B; `m` and `r` say when there is nothing to switch to; a
response that refuses the task is marked wherever it shows; Build's `a` opens Audit after a finished
run, `n` asks before it creates a run, and the title names the run the screens show."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.core.config import parse_config
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.app import REFUSAL, goto, make_refusal, settle, store_rows, text_of
from unspecific_tui.app import UnspecificApp

SIZES = [(80, 24), (160, 48)]
# The demo's shape: one model under test, one response mode, one summary ratio.
ONE_WRITER = SyntheticSpec(n_instructions=4, seed=7, models=("local",))
CONFIG = parse_config({"endpoints": {"fake": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}},
                       "roles": {"generator": "fake", "judges": ["fake"], "summarizer": "fake",
                                 "naturalness_judge": "fake", "models_under_test": ["fake"]}})


def one_writer_app(tmp_path: Path, *, refusal: bool = False, **kwargs: object) -> UnspecificApp:
    path = tmp_path / "one.sqlite"
    build_synthetic_store(path, ONE_WRITER)
    if refusal:  # instruction 1's response, as the demo's local model refused one
        make_refusal(path, first_response(path))
    return UnspecificApp(path, stages={}, **kwargs)  # type: ignore[arg-type]


def first_response(path: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT min(id) FROM generations WHERE kind = 'response'").fetchone()[0]
    finally:
        conn.close()


def notices(app: UnspecificApp) -> list[str]:
    return [n.message for n in app._notifications]


async def said(app, pilot, key: str) -> str:  # noqa: ANN001
    """Press ``key``; the notice it gave ("" for none)."""
    before = {n.identity for n in app._notifications}
    await pilot.press(key)
    await settle(app, pilot)
    new = [n.message for n in app._notifications if n.identity not in before]
    return new[-1] if new else ""


@pytest.mark.parametrize("size", SIZES)
async def test_compare_with_one_response_says_so_and_what_fills_side_b(tmp_path, size):
    """The demo's Compare set its one response beside itself ("rows that differ: 0 of 39"): side B is
    now empty and says what would fill it; m, M, d and r say there is nothing to switch to."""
    app = one_writer_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        screen = await goto(app, pilot, "4")
        assert screen.writers[0] is not None and screen.writers[1] is None
        assert "none: one response" in text_of(screen.query_one("#compare-head"))
        b_pane = screen.query_one("#cmp-b")
        assert "no second response" in b_pane.border_title
        assert "unspecific evaluate --models" in b_pane._text.plain
        assert all(cells[2:] == ("·", "·") for cells in screen.cells)  # B's verdicts: none, not A's again
        assert screen.totals["b"] == ("-", "-")
        for key in ("m", "M"):
            message = await said(app, pilot, key)
            assert "one response to this instruction" in message and "nothing to switch to" in message
            assert "evaluate --models" in message
        assert "no second side" in await said(app, pilot, "d")
        assert "one ratio only (0.25)" in await said(app, pilot, "r")
        assert screen.writers[1] is None


async def test_compare_with_two_responses_says_when_a_side_has_no_other(tmp_path):
    """Two responses: each side shows one; m on side A, which can only show its own, says so."""
    from tests.support.app import synthetic_app

    app = synthetic_app(tmp_path, n_instructions=4, seed=7)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        screen = await goto(app, pilot, "4")
        before = list(screen.writers)
        assert None not in before and before[0] != before[1]
        assert "no other response to show" in await said(app, pilot, "m")
        assert screen.writers == before


@pytest.mark.parametrize("size", SIZES)
async def test_audit_m_and_r_say_there_is_nothing_to_switch_to(tmp_path, size):
    app = one_writer_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        screen = await goto(app, pilot, "3")
        shown = (screen.shown.writer, screen.shown.constraint_id)
        message = await said(app, pilot, "m")
        assert "one response (local [direct])" in message and "no other model or mode" in message
        assert "one ratio only (0.25)" in await said(app, pilot, "r")
        assert (screen.shown.writer, screen.shown.constraint_id) == shown


@pytest.mark.parametrize("size", SIZES)
async def test_a_refusal_is_marked_in_instructions_audit_and_compare(tmp_path, size):
    """The demo's refusal read "Org 0 Core 0" with no mark: the word 'refusal' now stands beside it in
    Instructions (and a filter finds the refusals), in Audit's head and response pane, and in Compare."""
    app = one_writer_app(tmp_path, refusal=True)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        screen = await goto(app, pilot, "2")
        table = screen.query_one("#instr-table")
        org = [c.key for c in screen.columns].index("org")
        cells = [str(table.get_row_at(i)[org]) for i in range(table.row_count)]
        assert cells[0].endswith(" refusal") and not any("refusal" in c for c in cells[1:])
        assert table.columns[table.ordered_columns[org].key].width >= len(cells[0])  # never cut off
        screen.set_filter("flag", "refusal")
        await pilot.pause()
        assert [r.instruction_id for r in screen.rows] == [1]
        screen.set_filter("flag", None)
        await pilot.pause()
        await pilot.press("enter")  # Audit on instruction 1
        await settle(app, pilot)
        audit = app.screen
        assert audit.shown.refusal and audit.shown.instruction_id == 1
        assert "local [direct] · refusal" in text_of(audit.query_one("#audit-head"))
        assert audit.query_one("#response").border_title.startswith("Response: refusal")
        compare = await goto(app, pilot, "4")
        assert compare.query_one("#cmp-a")._text.plain == REFUSAL
        assert "refusal" in compare.query_one("#cmp-a").border_title
        assert "refusal" in text_of(compare.query_one("#cmp-a-totals"))
        await pilot.press("right_square_bracket")  # instruction 2 answered: no mark
        await settle(app, pilot)
        assert "refusal" not in compare.query_one("#cmp-a").border_title


def test_the_view_reads_the_refusal_flag_and_a_store_from_before_it(tmp_path):
    """StoreView carries generations.refusal to each text and each response's totals; a store from
    before the column (the app paints before migrating) reads as no refusal, not an error."""
    import sqlite3

    from pipeline.store.view import StoreView

    path = tmp_path / "one.sqlite"
    build_synthetic_store(path, ONE_WRITER)
    rid = first_response(path)
    make_refusal(path, rid)
    view = StoreView.open(path)
    try:
        assert [w.refusal for w in view.instruction(1).responses.values()] == [True]
        assert not any(g.refusal for g in view.instruction(2).responses.values())
        assert {t.id for t in view.text_totals() if t.refusal} == {rid}
    finally:
        view.close()
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE generations DROP COLUMN refusal")
    conn.commit()
    conn.close()
    view = StoreView.open(path)
    try:
        assert not any(g.refusal for g in view.instruction(1).responses.values())
        assert not any(t.refusal for t in view.text_totals())
    finally:
        view.close()


@pytest.mark.parametrize("size", SIZES)
async def test_build_a_after_a_finished_run_opens_audit(tmp_path, size):
    """No step ran this session (the demo finished, the app opened again): `a` opened nothing ("run a
    step first"); it opens Audit on the selected run's first judged instruction."""
    app = one_writer_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        assert app.current_mode == "build" and app.screen.written.last_instruction is None
        await pilot.press("a")
        await settle(app, pilot)
        assert app.current_mode == "audit" and app.screen.shown.instruction_id == 1


async def test_build_a_with_nothing_in_the_store_says_so(tmp_path):
    app = UnspecificApp(tmp_path / "empty.sqlite", stages={})
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert "nothing to audit yet" in await said(app, pilot, "a")
        assert app.current_mode == "build"


@pytest.mark.parametrize("size", SIZES)
async def test_build_n_asks_before_it_creates_a_run_and_the_title_names_the_run_shown(tmp_path, size):
    """`n` made a persistent empty run without asking, and the title then named it while every screen
    showed the demo's: it asks now, and the title names the run the screens show, and Build's new
    one as empty."""
    from unspecific_tui.screens.help import ConfirmScreen

    app = one_writer_app(tmp_path, config=CONFIG)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        assert app.sub_title == "run: synthetic"
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")  # no
        await settle(app, pilot)
        assert store_rows(app, "SELECT count(*) FROM runs")[0][0] == 1 and app.run_id == "synthetic"
        await pilot.press("n")
        await pilot.pause()
        await pilot.press("y")
        await settle(app, pilot)
        assert store_rows(app, "SELECT count(*) FROM runs")[0][0] == 2
        new = app.run_id
        assert new != "synthetic"
        assert app.sub_title.startswith("run: synthetic") and f"Build: {new}, empty" in app.sub_title
        screen = await goto(app, pilot, "2")  # the screens show the instructions the title names
        assert {r.run_id for r in screen.rows} == {"synthetic"}


def test_the_title_names_the_runs_holding_instructions():
    from unspecific_tui.app import shown_runs

    assert shown_runs({}, None) == "no instructions yet"
    assert shown_runs({"demo": 3}, "demo") == "run: demo"
    assert shown_runs({"demo": 3, "build-2": 0}, "build-2") == "run: demo · Build: build-2, empty"
    assert shown_runs({"a": 1, "b": 2}, "a") == "runs: a, b"
    assert shown_runs({k: 1 for k in "abcd"}, "a") == "4 runs"
