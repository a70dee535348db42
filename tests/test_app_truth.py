"""Every screen tells the auditor the truth (issue 62): the queue and Audit count the same marks under
the same words; the Report concludes as `report` does; the first screen says what the store holds,
what is finished and what to press next, and no key means two things across screens without a
reason; `]` / `[` pass over instructions with no response; Compare keeps its sides in one order and
its panes scroll at 80x24; a mark toggled off says so; narrow screens show every reason and the
whole constraint."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from textual.binding import Binding

from pipeline.analysis.report_model import ReportOptions, build_report
from pipeline.outputs.models_report import verdict_sentence
from pipeline.store.database import open_store
from tests.support.app import goto, settle, synthetic_app, text_of
from tests.support.marks import named_item
from unspecific_tui.screens.audit import AuditScreen
from unspecific_tui.screens.queue import QueueScreen
from unspecific_tui.screens.registry import KEY_REASONS


def _add_unanswered(path: Path) -> int:
    """A copy of instruction 1 with its constraints and no response (a common condition's list shares
    its synthesis and may have none): its id, the store's last."""
    conn = sqlite3.connect(path)
    with conn:
        new = conn.execute("SELECT max(id) + 1 FROM instructions").fetchone()[0]
        conn.execute("INSERT INTO instructions(id, run_id, domain, condition, pair_id, article_a, article_b,"
                     " main_task, n_constraints, status, created_at) SELECT ?, run_id, domain, 'none',"
                     " pair_id, article_a, article_b, main_task, n_constraints, status, created_at"
                     " FROM instructions WHERE id = 1", (new,))
        top = conn.execute("SELECT max(id) FROM constraints").fetchone()[0]
        conn.execute("INSERT INTO constraints(id, instruction_id, position, text, origin, active, created_at)"
                     " SELECT ? + id, ?, position, text, origin, active, created_at FROM constraints"
                     " WHERE instruction_id = 1 AND active = 1", (top, new))
    conn.close()
    return new


async def _queue_then_audit(app, pilot):  # noqa: ANN001, ANN202
    await settle(app, pilot)
    await pilot.press("2", "exclamation_mark")
    await settle(app, pilot)
    queue = app.screen
    assert isinstance(queue, QueueScreen)
    await pilot.press("enter")
    await settle(app, pilot)
    audit = app.screen
    assert isinstance(audit, AuditScreen)
    return queue, audit


# -- 2. one count, one name ------------------------------------------------------------------------
async def test_the_queue_and_audit_count_the_same_marks_under_the_same_words(tmp_path):
    """A mark on an item off the queue is counted apart, under its own name, on both screens; the
    queue's items marked are "done" on both (Audit had counted every mark as done)."""
    app = synthetic_app(tmp_path, n_instructions=3, n_constraints=6)
    async with app.run_test(size=(160, 48)) as pilot:
        queue, audit = await _queue_then_audit(app, pilot)
        items = app.nav.following.items
        # A response's constraint the queue does not hold, marked (as Audit off the queue would).
        data = app.view.instruction(1)
        off = next((data.responses[w].id, cid) for w in data.writers for cid in data.constraints
                   if (data.responses[w].id, cid) not in items)
        assert app.mark(*off, "dismissed")
        await pilot.press("y")
        await settle(app, pilot)
        head = text_of(audit.query_one("#audit-head"))
        said = "1 done (1 confirmed, 0 dismissed) · 1 marked off the queue"
        assert said in head
        await pilot.press("2")
        await settle(app, pilot)
        assert app.screen is queue
        assert said in text_of(queue.query_one("#queue-status"))


async def test_toggling_a_mark_off_says_so(tmp_path):
    app = synthetic_app(tmp_path, n_instructions=2, n_constraints=6)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await goto(app, pilot, "3")
        await pilot.press("y")
        await settle(app, pilot)
        key = (app.screen.shown.response_id, app.screen.shown.constraint_id)
        assert app.marks[key] == "confirmed"
        await pilot.press("y")
        await settle(app, pilot)
        assert key not in app.marks
        said = [n.message for n in app._notifications]
        assert any("confirmed mark cleared (y again marks it confirmed)" in m for m in said), said


# -- 4. the Report concludes -----------------------------------------------------------------------
@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_report_screen_concludes_as_report_does(tmp_path, size):
    app = synthetic_app(tmp_path, n_instructions=8)
    store = open_store(app.store_path)
    try:
        report = build_report(store, ReportOptions(seed=app.sample_seed))
    finally:
        store.close()
    assert report.models is not None and report.models.pairs
    expected = [verdict_sentence(pair) for pair in report.models.pairs]
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        await goto(app, pilot, "6")
        await settle(app, pilot, rounds=3)
        said = " ".join(text_of(app.screen.query_one("#report-conclusion")).split())
        assert said.startswith("Models compared: ")
        for sentence in expected:
            assert " ".join(sentence.split()) in said


# -- 5. the first screen orients -------------------------------------------------------------------
async def test_the_first_screen_says_what_the_store_holds_and_what_to_press(tmp_path):
    app = synthetic_app(tmp_path, n_instructions=4)
    _add_unanswered(app.store_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot, rounds=3)
        text = " ".join(text_of(app.screen.query_one("#build-orient")).split())
        assert "5 instructions, 4 answered, 4 judged" in text
        assert "models: model-a, model-b" in text and "modes: direct" in text
        assert re.search(r"judges: \S", text) and "judges: …" not in text
        assert "Finished: " in text and "Judge" in text and "3 Audit" in text and "6 Report" in text
        stages = app.screen.stages
        # Finished stages draw a full bar; Respond is not finished (one instruction has no response).
        assert "respond" not in stages.finished() and "judge" in stages.finished()
        assert stages.get_cell("judge", "bar") == "█" * 12
        assert stages.get_cell("respond", "bar") != "█" * 12 and stages.get_cell("respond", "count") == "4/5"


def _screen_keys() -> dict[str, dict[str, str]]:
    """Each screen's keys (with a description): key -> action."""
    from unspecific_tui.screens.registry import SCREENS

    out: dict[str, dict[str, str]] = {}
    for name, load in SCREENS.items():
        cls = load()
        keys: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            if klass.__module__.startswith("unspecific_tui"):
                for b in klass.__dict__.get("BINDINGS", []):
                    if isinstance(b, Binding) and b.description:
                        for key in b.key.split(","):
                            keys[key.strip()] = b.action
        out[name] = keys
    return out


def test_no_key_means_two_things_across_screens_without_a_reason():
    """A key bound to different actions on two screens is in registry.KEY_REASONS with its reason;
    `d` dismisses in Audit and no longer starts the demo on Build (shift-d does)."""
    meanings: dict[str, set[str]] = {}
    for keys in _screen_keys().values():
        for key, action in keys.items():
            meanings.setdefault(key, set()).add(action)
    shared = {key for key, actions in meanings.items() if len(actions) > 1}
    assert shared <= set(KEY_REASONS), sorted(shared - set(KEY_REASONS))
    assert all(KEY_REASONS[key].strip() for key in shared)
    assert set(KEY_REASONS) <= shared, sorted(set(KEY_REASONS) - shared)  # no stale reason
    build = _screen_keys()["build"]
    assert build.get("D") == "demo" and "d" not in build


# -- 6. the smaller ones ---------------------------------------------------------------------------
async def test_brackets_pass_over_instructions_with_no_response(tmp_path):
    app = synthetic_app(tmp_path, n_instructions=3, n_constraints=6)
    unanswered = _add_unanswered(app.store_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await goto(app, pilot, "3")
        audit = app.screen
        for _ in range(4):
            await pilot.press("right_square_bracket")
            await settle(app, pilot)
            assert audit.shown.instruction_id != unanswered
        assert audit.shown.instruction_id == 3
        assert any("#3 is the last instruction with a response" in n.message for n in app._notifications)
        await goto(app, pilot, "4")
        compare = app.screen
        seen = set()
        for _ in range(5):
            await pilot.press("right_square_bracket")
            await settle(app, pilot)
            seen.add(compare.data.id)
        assert seen == {1, 2, 3}


async def test_compare_keeps_its_sides_in_one_order_and_scrolls_at_80x24(tmp_path):
    app = synthetic_app(tmp_path, n_instructions=3, n_constraints=6)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await goto(app, pilot, "3")
        await pilot.press("m")  # Audit on model-b's response
        await settle(app, pilot)
        assert app.screen.shown.writer.model == "model-b"
        await goto(app, pilot, "4")
        compare = app.screen
        assert [w.model for w in compare.writers] == ["model-a", "model-b"]
        await goto(app, pilot, "3")
        await goto(app, pilot, "4")
        assert [w.model for w in compare.writers] == ["model-a", "model-b"]
        panes = [compare.query_one(f"#cmp-{side}") for side in "ab"]
        assert all(p.max_scroll_y > p.size.height for p in panes)  # a few lines high: the texts go on
        before = [p.scroll_y for p in panes]  # each opened on its first quote
        await pilot.press("pageup", "pageup")
        await pilot.pause()
        assert all(p.scroll_y < b or b == 0 for p, b in zip(panes, before))
        top = [p.scroll_y for p in panes]
        await pilot.press("pagedown")  # both a page on, side by side (the table's cursor keeps its row)
        await pilot.pause()
        assert all(p.scroll_y > t for p, t in zip(panes, top))


async def test_at_80x24_the_queue_shows_every_reason_and_audit_the_whole_constraint(tmp_path):
    app = synthetic_app(tmp_path, n_instructions=3, n_constraints=6)
    long = ("Describe how the council budget affects the residents over several paragraphs, making sure"
            " that the reader understands who decided it, when it was decided, and what each of the"
            " people affected said about it")
    conn = sqlite3.connect(app.store_path)
    with conn:
        conn.execute("UPDATE constraints SET text = ? WHERE active = 1", (long,))
    conn.close()
    async with app.run_test(size=(80, 24)) as pilot:
        queue, audit = None, None
        await settle(app, pilot)
        await pilot.press("2", "exclamation_mark")
        await settle(app, pilot)
        queue = app.screen
        table = queue.table
        for row, ranked in enumerate(queue.ranked[:8]):
            table.move_cursor(row=row)
            await pilot.pause()
            detail = queue.query_one("#queue-detail")
            lines = detail.render_lines(detail.region.reset_offset)  # what the detail draws
            shown = " ".join("".join(s.text for s in line) for line in lines)
            # Each reason's sentence on its own bullet, all of them drawn.
            assert shown.count("•") >= len(ranked.evidence.reasons()), shown
        await pilot.press("enter")
        await settle(app, pilot)
        audit = app.screen
        head = " ".join(text_of(audit.query_one("#audit-head")).split())
        assert long in head and "…" not in head
        assert named_item(app, text_of(audit.query_one("#audit-head")))
