"""Issue 26 items 5-7 on the Build, Instructions, Compare and Annotate screens: the demo's overall
bar moves, context follows the auditor into Instructions and Annotate, Compare shows each
constraint's similarity to its references, and the footer keeps the app's keys."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import DataTable, ProgressBar

from pipeline.store.view import Writer
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.app import goto, on_screen, settle, textual_private
from tests.support.snapshot_app import make_app
from unspecific_tui.app import UnspecificApp
from unspecific_tui.context import Context

# The events `unspecific demo --events` wrote for its first pair on the fake server (pairs=2, two
# conditions): the demo's own progress (instructions ready of 4), then each stage's, per pair.
FIRST_PAIR = [
    ("demo", 0, 4, "progress"), ("demo", 0, 2, "log"), ("synthesize", 0, 1, "progress"),
    ("synthesize", 1, 1, "progress"), ("base", 0, 0, "progress"), ("revise", 0, 1, "progress"),
    ("revise", 1, 1, "progress"), ("respond", 0, 1, "progress"), ("respond", 1, 1, "progress"),
    ("summarize", 0, 1, "progress"), ("summarize", 1, 1, "progress"), ("judge", 0, 2, "progress"),
    ("judge", 1, 2, "progress"), ("judge", 2, 2, "progress"), 1, ("demo", 1, 4, "progress"),
    # The next instruction starts: each stage from 0 again (this reset the one bar to 0%).
    ("synthesize", 0, 1, "progress"), ("base", 0, 1, "progress"),
]
REST = [
    ("base", 1, 1, "progress"), ("judge", 2, 2, "progress"), 3, ("demo", 2, 4, "progress"),
    ("demo", 1, 2, "log"), ("synthesize", 0, 1, "progress"), ("judge", 2, 2, "progress"), 4,
    ("demo", 3, 4, "progress"), ("judge", 2, 2, "progress"), 6, ("demo", 4, 4, "progress"),
    ("demo", 4, 4, "log"),
]
CHILD = """
import json, os, sys, time
def emit(e):
    if isinstance(e, int):
        print(json.dumps({"auditable": e}), flush=True)
    else:
        stage, done, total, kind = e
        print(json.dumps({"stage": stage, "done": done, "total": total, "message": "", "kind": kind}), \
flush=True)
first, rest, go = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
for e in first:
    emit(e)
while not os.path.exists(go):
    time.sleep(0.02)
for e in rest:
    emit(e)
print(json.dumps({"finished": {"auditable": [1, 3, 4, 6], "failed": [], "seconds": {}, \
"first_auditable_s": 1.0}}),
      flush=True)
"""


async def test_the_demo_bar_counts_instructions_ready_and_stages_do_not_reset_it(tmp_path, monkeypatch):
    from tests.support.app import make_known_store

    monkeypatch.setenv("UNSPECIFIC_CACHE", str(tmp_path / "cache"))
    script, go = tmp_path / "child.py", tmp_path / "go"
    script.write_text(CHILD)
    known = make_known_store(tmp_path / "s.sqlite")
    command = [sys.executable, str(script), json.dumps(FIRST_PAIR), json.dumps(REST), str(go)]
    app = UnspecificApp(known.path, demo_command=command)
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 20
        screen = app.screen
        bar = screen.query_one("#stage-bar", ProgressBar)
        # Past the first instruction, into the second one's stages.
        while screen.written.last_instruction != 1 or screen.stages.progress.get("base") != (0, 1):
            assert time.monotonic() < deadline
            await pilot.pause(0.05)
        await pilot.pause()
        assert (bar.progress, bar.total) == (1, 4)  # one instruction of four: 25%, not a stage's 0%
        assert "1 of 4 instruction(s) ready" in str(screen.query_one("#stage-status").render())
        assert screen.stages.progress["synthesize"] == (0, 1)  # each stage's own progress is in its row
        go.touch()
        await settle(app, pilot)
        while screen.runner.running is not None:
            assert time.monotonic() < deadline
            await pilot.pause(0.05)
        assert (bar.progress, bar.total) == (4, 4)


def _store(tmp_path: Path) -> Path:
    return build_synthetic_store(tmp_path / "s.sqlite",
                                 SyntheticSpec(n_instructions=8, annotators=("ann",))).path


async def test_instructions_opens_on_the_instruction_and_response_audit_shows(tmp_path):
    app = UnspecificApp(_store(tmp_path), stages={})
    b = Writer("model-b", "direct")
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        app.open_audit(6, b)
        await settle(app, pilot)
        audit_ratio = app.screen.context().ratio
        await goto(app, pilot, "2")
        instructions = app.screen
        row = instructions._current()
        assert (row.instruction_id, row.writer) == (6, b)
        # Leaving Instructions carries its row on, with the ratio it came with.
        await pilot.press("down")  # instruction 7, model-a
        context = instructions.context()
        assert context is not None and context.instruction_id == 7 and context.ratio == audit_ratio
        await goto(app, pilot, "4")
        assert app.screen.data.id == 7
        # Back from Compare: on Compare's instruction and side A's response; a modal closing
        # does not move the cursor back to the context.
        await goto(app, pilot, "2")
        assert (instructions._current().instruction_id,
                instructions._current().writer) == (7, app.screen.context().writer)
        await pilot.press("down")
        moved_to = instructions._current()
        await pilot.press("question_mark")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert instructions._current() == moved_to


async def test_annotate_opens_on_the_item_of_the_context_or_says_it_has_none(tmp_path):
    app = UnspecificApp(_store(tmp_path), stages={})
    async with on_screen(app, "5", (160, 48)) as pilot:
        annotate = app.screen
        items = annotate.queue.items
        assert len(items) > 3
        wanted = items[-2]  # not the item it starts on
        app.open_audit(wanted.instruction_id, wanted.writer, wanted.constraint_id)
        await settle(app, pilot)
        await goto(app, pilot, "5")
        assert annotate.queue.items[annotate.queue.index] == wanted
        assert annotate.context() == Context(wanted.instruction_id, wanted.writer, annotate.context().ratio,
                                             wanted.constraint_id)
        # An instruction with no item here: the item stays, and the screen says so.
        listed = {it.instruction_id for it in items}
        missing = max(app.view.instruction_ids()) + 1  # every instruction here has flipped constraints
        assert missing not in listed
        app.nav.context = Context(missing, wanted.writer)
        annotate.on_screen_resume()
        await pilot.pause()
        assert annotate.queue.items[annotate.queue.index] == wanted
        assert any(f"instruction #{missing} has no item" in str(n.message) for n in app._notifications)


async def test_compare_shows_each_constraints_similarity_as_a_number_with_a_bar(tmp_path):
    from pipeline.analysis.similarity import constraint_similarities
    from pipeline.store.database import open_store

    app = make_app(tmp_path, long_names=True)  # similarities stored (lexical)
    store = open_store(tmp_path / "store.sqlite", readonly=True)
    try:
        sims = constraint_similarities(store, instruction_id=1)
    finally:
        store.close()
    assert sims
    async with on_screen(app, "4", (80, 24)):
        compare = app.screen
        table = compare.query_one("#compare-table", DataTable)
        for row, cid in enumerate(compare.row_cids[:5]):
            cell = table.get_cell_at((row, 5))
            assert isinstance(cell, Text) and cell.plain.startswith(f"{sims[cid].highest:.2f} ")
            assert cell.plain[5:].strip() or sims[cid].highest < 1 / 32  # a bar, unless too short to draw
        # The constraint column is clipped to the table, with an ellipsis where a text is cut.
        texts = [str(table.get_cell_at((row, 6))) for row in range(len(compare.row_cids))]
        assert any(t.endswith("…") for t in texts)
        assert sum(c.get_render_width(table)
                   for c in table.ordered_columns) <= table.scrollable_content_region.width


@pytest.mark.parametrize("key", ["1", "2", "4", "5"])  # Build, Instructions, Compare, Annotate
async def test_keys_the_footer_leaves_out_at_80_columns_are_listed_by_help(key, tmp_path):
    FooterKey = textual_private("textual.widgets._footer", "FooterKey")

    from unspecific_tui.screens.help import bindings_table

    app = make_app(tmp_path, long_names=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press(key)
        await settle(app, pilot)
        screen = app.screen
        in_footer = {k.key_display for k in screen.query(FooterKey)}
        assert {"1-6", "?"} <= in_footer
        offered = [b for b in [*screen.BINDINGS, *app.BINDINGS] if b.show and b.description]
        left_out = [b for b in offered if app.get_key_display(b) not in in_footer and b.group is None]
        help_keys = "\n".join(str(cell) for cell in bindings_table(screen).columns[0]._cells)
        assert all((b.key_display or b.key) in help_keys for b in left_out)
        assert all(str(n) in help_keys for n in range(1, 7)) and "?" in help_keys and "^p" in help_keys


async def test_the_footer_lays_its_keys_out_again_when_the_terminal_narrows(tmp_path):
    FooterKey = textual_private("textual.widgets._footer", "FooterKey")

    app = make_app(tmp_path, long_names=True)
    async with on_screen(app, "2", (160, 48)) as pilot:
        wide = [k.key_display for k in app.screen.query(FooterKey)]
        await pilot.resize_terminal(80, 24)
        await settle(app, pilot)
        keys = list(app.screen.query(FooterKey))
        assert len(keys) < len(wide) and keys[0].key_display == "1-6"
        assert all(k.region.right <= 80 for k in keys)
