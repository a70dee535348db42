"""Suspects (the suspicion queue): ranked rows, reason toggles, Enter into Audit following the
queue, the messages of an empty or older store, and an 80x24 terminal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from pipeline.analysis.suspicion import REASONS, suspicion_queue
from pipeline.core.definitions import Outcome
from pipeline.store.database import open_store
from pipeline.store.view import StoreView
from tests.support.app import Known, add_similarities, goto, make_known_store, settle, text_of
from unspecific_tui.app import UnspecificApp
from unspecific_tui.screens.queue import LABEL, QueueScreen
from unspecific_tui.screens.queue_rows import REASON_KEYS, column_width, layout, shorten


def expected_queue(path: Path, enabled: tuple[str, ...] = REASONS) -> list:
    view = StoreView.open(path)
    try:
        return suspicion_queue(view, enabled=enabled)
    finally:
        view.close()


async def open_queue(app, pilot) -> QueueScreen:  # noqa: ANN001
    await settle(app, pilot)
    await pilot.press("2", "exclamation_mark")
    await settle(app, pilot)
    screen = app.screen
    assert isinstance(screen, QueueScreen)
    return screen


QueueOn = tuple[UnspecificApp, Pilot, QueueScreen]


@asynccontextmanager
async def queue_on(path: Path, size: tuple[int, int]) -> AsyncIterator[QueueOn]:
    """The app on ``path`` at ``size``, its queue open: (app, pilot, the queue screen)."""
    app = UnspecificApp(path, stages={})
    async with app.run_test(size=size) as pilot:
        yield app, pilot, await open_queue(app, pilot)


def known_store(tmp_path: Path) -> Known:
    """The known store with its constraint-reference similarities: the queue's every reason."""
    known = make_known_store(tmp_path / "s.sqlite")
    add_similarities(known.path)
    return known


def table_rows(screen: QueueScreen) -> list[list[str]]:
    table = screen.query_one("#queue-table", DataTable)
    return [[str(getattr(cell, "plain", cell)) for cell in table.get_row_at(i)]
            for i in range(table.row_count)]


async def test_queue_lists_ranked_items(tmp_path):
    known = known_store(tmp_path)
    expected = expected_queue(known.path)
    assert expected, "the known store has suspects (a flipped constraint, a missing quote, copied n-grams)"
    async with queue_on(known.path, (160, 48)) as (app, pilot, screen):
        assert not any("similarity" in m for m in screen.missing)
        rows = table_rows(screen)
        assert len(rows) == len(expected)
        keys = [c.key for c in screen.table.layout_columns]
        scores = [float(r[keys.index("score")]) for r in rows]
        assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
        assert [(r.evidence.constraint_id, r.evidence.writer) for r in screen.ranked] == \
            [(e.constraint_id, e.writer) for e in sorted(expected, key=lambda e: -e.score())]
        # C2 satisfied by m1's direct response and lost in its summary: a "lost" suspect, FLIPPED as
        # Audit's list says it (one vocabulary: pipeline.core.definitions.Outcome).
        lost = [i for i, r in enumerate(screen.ranked)
                if r.evidence.constraint_id == known.c2 and r.evidence.writer == ("m1", "direct")]
        assert lost and "lost" in screen.ranked[lost[0]].evidence.reasons()
        assert rows[lost[0]][keys.index("outcome")] == Outcome.FLIPPED.short
        assert rows[lost[0]][keys.index("instr")] == str(known.instruction)
        # At 160 columns every column but the flags fits (they are in the detail below), the
        # header line names every reason.
        assert {"similarity", "copied", "outcome", "trust", "reasons"} <= set(keys)
        header = text_of(screen.query_one("#queue-reasons"))
        assert all(reason in header for reason in REASONS)


async def test_toggling_a_reason_reranks(tmp_path):
    known = known_store(tmp_path)
    async with queue_on(known.path, (160, 48)) as (app, pilot, screen):
        before = [(r.score, r.evidence.constraint_id, r.evidence.writer) for r in screen.ranked]
        screen.action_reason("lost")  # "l": lost off; the store ranks again, the table loads meanwhile
        assert "lost" not in screen.enabled
        assert screen.query_one("#queue-table", DataTable).loading
        await settle(app, pilot)
        assert not screen.query_one("#queue-table", DataTable).loading
        after = [(r.score, r.evidence.constraint_id, r.evidence.writer) for r in screen.ranked]
        assert after != before
        # The same order as scoring every item with Evidence.score and the queue's tie order.
        everything = expected_queue(known.path)
        by_definition = sorted(((e.score(screen.enabled), e) for e in everything
                                if e.score(screen.enabled) > 0),
                               key=lambda t: (-t[0], t[1].instruction_id, t[1].position, t[1].writer))
        assert after == [(score, e.constraint_id, e.writer) for score, e in by_definition]
        assert screen.total == len(after) == len(expected_queue(known.path, screen.enabled))
        # A row whose only reason was "lost" left the queue; the table shows what is ranked.
        only_lost = [(e.constraint_id, e.writer) for e in everything if e.reasons() == ("lost",)]
        assert only_lost and not {(c, w) for _, c, w in after} & set(only_lost)
        assert len(table_rows(screen)) == len(after)
        await goto(app, pilot, "l")
        assert [(r.score, r.evidence.constraint_id, r.evidence.writer) for r in screen.ranked] == before
        for key in REASON_KEYS.values():
            await pilot.press(key)
        await settle(app, pilot)
        assert screen.enabled == () and not screen.ranked
        assert "switched off" in text_of(screen.query_one("#queue-empty"))


async def test_a_reason_switched_while_ranking_waits_for_its_own_query(tmp_path):
    """Two toggles in a row: only the ranking under the reasons switched on at the end shows."""
    known = known_store(tmp_path)
    async with queue_on(known.path, (160, 48)) as (app, pilot, screen):
        await pilot.press("s", "l")
        await settle(app, pilot)
        enabled = tuple(r for r in REASONS if r not in ("similar", "lost"))
        assert screen.enabled == enabled
        assert [(r.evidence.constraint_id, r.evidence.writer) for r in screen.ranked] == \
            [(e.constraint_id, e.writer) for e in expected_queue(known.path, enabled)]


async def test_the_head_of_a_long_queue_and_more(tmp_path, monkeypatch):
    """The screen reads the top TOP suspects, says how many there are in all, and reads further when
    the cursor reaches the last row read (the cursor stays on it)."""
    from unspecific_tui.screens import queue as queue_screen
    from unspecific_tui.screens import queue_table

    known = known_store(tmp_path)
    everything = expected_queue(known.path)
    assert len(everything) >= 3
    monkeypatch.setattr(queue_screen, "TOP", 2)
    monkeypatch.setattr(queue_table, "PAGE", 2)
    async with queue_on(known.path, (160, 48)) as (app, pilot, screen):
        assert screen.total == len(everything) and len(screen.ranked) == 2 == len(table_rows(screen))
        assert f"the top 2 of {len(everything)} suspects" in text_of(screen.query_one("#queue-status"))
        await pilot.press("down")  # on the last row read: the next two are read
        await settle(app, pilot)
        assert len(screen.ranked) == 4 or len(screen.ranked) == len(everything)
        assert [(r.evidence.constraint_id, r.evidence.writer) for r in screen.ranked] == \
            [(e.constraint_id, e.writer) for e in everything[:len(screen.ranked)]]
        table = screen.query_one("#queue-table", DataTable)
        assert table.cursor_row == 1
        await pilot.press("down")
        await settle(app, pilot)
        assert table.cursor_row == 2 and table.row_count == len(screen.ranked)


async def test_enter_opens_audit_following_the_queue(tmp_path):
    known = known_store(tmp_path)
    async with queue_on(known.path, (160, 48)) as (app, pilot, screen):
        assert len(screen.ranked) >= 2
        await pilot.press("down", "enter")
        await settle(app, pilot)
        target = screen.ranked[1].evidence
        assert app.current_mode == "audit"
        following = app.nav.following
        assert following is not None and following.label == LABEL and following.index == 1
        assert [(s.constraint_id, s.instruction_id, s.writer) for s in following.stops] == \
            [(r.evidence.constraint_id, r.evidence.instruction_id, r.evidence.writer) for r in screen.ranked]
        shown = app.screen.shown
        assert (shown.instruction_id, shown.constraint_id, shown.writer) == \
            (target.instruction_id, target.constraint_id, target.writer)


async def test_older_store_says_how_to_compute_evidence(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")  # no similarities stored
    async with queue_on(known.path, (160, 48)) as (app, pilot, screen):
        assert len(screen.missing) == 2  # no copied n-grams, no similarity
        note = text_of(screen.query_one("#queue-note"))
        assert screen.query_one("#queue-note").display
        assert "never computed" in note and "not computed for every response" in note
        assert note.count("`unspecific evidence`") == 2  # the one command that computes both
        assert screen.ranked  # what the store does hold still ranks (a lost constraint, judges split)


async def test_empty_store_says_so(tmp_path):
    path = tmp_path / "empty.sqlite"
    open_store(path).close()
    async with queue_on(path, (100, 30)) as (app, pilot, screen):
        assert not screen.ranked
        assert "No suspects" in text_of(screen.query_one("#queue-empty"))
        await pilot.press("enter")  # nothing to open
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is not screen and app.current_mode == "instructions"


async def test_readable_at_80x24(tmp_path):
    known = known_store(tmp_path)
    async with queue_on(known.path, (80, 24)) as (app, pilot, screen):
        keys = [c.key for c in screen.table.layout_columns]
        # The copy count at 80 columns too (the detail line names the instruction).
        assert {"rank", "score", "constraint", "writer", "reasons", "copied"} <= set(keys)
        assert "trust" not in keys  # narrow: the optional columns gave way
        widths = {c.key: c.width or screen.table.text_width for c in screen.table.layout_columns}
        assert sum(w + 2 for w in widths.values()) <= 80
        for row in table_rows(screen):
            for key, cell in zip(keys, row, strict=True):
                assert len(cell) <= widths[key], (key, cell)
        # The cut text ends on a whole word and an ellipsis.
        text = screen.ranked[0].evidence.text
        cell = table_rows(screen)[0][keys.index("constraint")]
        if cell.endswith("…"):
            assert f"{screen.ranked[0].evidence.position}. {text}".startswith(cell[:-1])


def test_shorten_and_layout():
    assert shorten("Describe the flood defence plan", 40) == "Describe the flood defence plan"
    assert shorten("Describe the flood defence plan", 20) == "Describe the flood…"
    assert shorten("Describe the flood defence plan", 14) == "Describe the…"
    cols80, text80 = layout(80)
    cols160, text160 = layout(160)
    assert len(cols80) < len(cols160) and text80 >= 20 and text160 >= 32
    assert [c.key for c in cols80] == ["mark", "rank", "score", "constraint", "writer", "reasons", "copied"]
    assert "flags" in [c.key for c in layout(200)[0]]
    # The rank column as wide as the highest rank: its spare cells go to the constraint.
    cols, text = layout(80, ranks=300)
    assert column_width(cols, "rank") == 3 and text == text80 + 3


async def test_command_palette_opens_the_queue(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={})
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Suspects")
        command.callback()
        await settle(app, pilot)
        assert isinstance(app.screen, QueueScreen) and app.current_mode == "build"


async def test_auditing_the_queue_is_a_loop(tmp_path):
    """Enter on the first suspect, then one key per item: `y` confirms and goes on, `d` dismisses;
    Audit's head says "suspicion queue item k of N" and how many are done; the marks are stored
    (the store's narrow writer), shown in the queue and exported."""
    from pipeline.outputs.suspicion import suspicion_rows
    from pipeline.store.marks import marks

    known = known_store(tmp_path)
    async with queue_on(known.path, (80, 24)) as (app, pilot, screen):
        n = len(screen.ranked)
        assert n >= 3
        await pilot.press("enter")
        await settle(app, pilot)
        audit = app.screen
        head = text_of(audit.query_one("#audit-head"))
        assert f"suspicion queue item 1 of {n}" in head and "0 done" in head
        await pilot.press("y")  # confirmed, and on to item 2
        await pilot.pause()
        assert app.nav.following.index == 1
        head = text_of(audit.query_one("#audit-head"))
        assert f"suspicion queue item 2 of {n}" in head and "1 done (1 confirmed, 0 dismissed)" in head
        await pilot.press("d")
        await pilot.pause()
        assert app.nav.following.index == 2
        # The notice on the header's row (one at a time: the newest); the pane keeps its caption.
        assert any("dismissed the previous item" in n.message for n in app._notifications)
        assert not any("confirmed the previous item" in n.message for n in app._notifications)
        shown = [p for p in audit.query("#panes TextPane") if p.display]
        assert (len(shown) == 1 and "t: next)" in shown[0].border_title
                and "dismissed" not in shown[0].border_title)
        first, second = (r.evidence for r in screen.ranked[:2])
        await pilot.press("2")  # back to the queue, over Instructions
        await settle(app, pilot)
        assert app.screen is screen
        rows = table_rows(screen)
        assert rows[0][0] == "✓" and rows[1][0] == "✗" and rows[2][0] == " "
        assert "2 done (1 confirmed, 1 dismissed)" in text_of(screen.query_one("#queue-status"))
        assert screen.query_one("#queue-table", DataTable).cursor_row == 2  # where Audit was
    store = open_store(known.path, create=False)
    try:
        stored = marks(store)
        assert {k: m.mark for k, m in stored.items()} == {
            (first.response_id, first.constraint_id): "confirmed",
            (second.response_id, second.constraint_id): "dismissed"}
        rows, _ = suspicion_rows(store)
        assert [r["mark"] for r in rows[:3]] == ["confirmed", "dismissed", None]
    finally:
        store.close()


async def test_copy_only_view_and_reasons_in_words(tmp_path):
    known = known_store(tmp_path)
    async with queue_on(known.path, (160, 48)) as (app, pilot, screen):
        everything = len(screen.ranked)
        await pilot.press("o")
        await settle(app, pilot)
        assert screen.enabled == ("similar", "copied", "echo")
        assert screen.ranked and len(screen.ranked) <= everything
        assert all(set(r.evidence.reasons()) & {"similar", "copied", "echo"} for r in screen.ranked)
        # The copy-only view agrees with the copied column: every row with a count is in it.
        assert all(r.evidence.copy_count.words == 0 or {"copied", "echo"} & set(r.evidence.reasons())
                   for r in screen.ranked)
        assert "copy evidence only" in text_of(screen.query_one("#queue-status"))
        detail = text_of(screen.query_one("#queue-detail"))
        assert "similar to reference" in detail or "→ constraint → response" in detail
        await pilot.press("o")
        await settle(app, pilot)
        assert screen.enabled == REASONS and len(screen.ranked) == everything


async def test_help_is_the_queues_own(tmp_path):
    from textual.containers import VerticalScroll
    from textual.widgets import Markdown

    from unspecific_tui.screens.help import HelpScreen

    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={})
    async with app.run_test(size=(80, 24)) as pilot:
        await open_queue(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        text = help_screen.query_one("#help-text", Markdown).source
        assert text.startswith("# Suspects")  # not the Instructions help underneath
        scroll = help_screen.query_one("#help-scroll", VerticalScroll)
        assert scroll.has_focus and scroll.max_scroll_y > 0  # longer than 80x24: it scrolls
        await pilot.press("pagedown")
        await pilot.pause()
        assert scroll.scroll_y > 0


async def test_an_uncertain_verdict_is_a_reason_in_words_and_switches_off(tmp_path):
    """A yes_no judge's No at P(Yes) 0.45 (threshold 0.5) on m2's response to C3: "uncertain" alone."""
    known = make_known_store(tmp_path / "s.sqlite")
    store = open_store(known.path)
    try:
        store.conn.execute("INSERT INTO verdicts(generation_id, constraint_id, judge, "
                           "judging_mode, prompt_hash,"
                           " verdict, p_yes) VALUES (3, 4, 'judge-y', 'yes_no', 'h', 0, 0.45)")
        store.commit()
    finally:
        store.close()
    async with queue_on(known.path, (160, 48)) as (app, pilot, screen):
        row = next(i for i, r in enumerate(screen.ranked) if r.evidence.constraint_id == 4
                   and r.evidence.writer == ("m2", "direct"))
        assert screen.ranked[row].evidence.reasons() == ("uncertain",) and screen.ranked[row].score == 0.05
        keys = [c.key for c in screen.table.layout_columns]
        assert table_rows(screen)[row][keys.index("reasons")] == "unsure"
        screen.query_one("#queue-table", DataTable).move_cursor(row=row)
        await pilot.pause()
        assert "the judge was unsure: P(Yes) 0.45 against its threshold 0.50" in text_of(
            screen.query_one("#queue-detail"))
        await goto(app, pilot, "t")
        assert "uncertain" not in screen.enabled
        assert all(r.evidence.constraint_id != 4 or r.evidence.writer != ("m2", "direct")
                   for r in screen.ranked)


async def test_at_80x24_a_copy_suspect_opens_on_the_response(tmp_path):
    """Following the queue at 80x24 (one pane shown), an item whose response holds copied words
    opens on the response pane, as the wide layout shows it; `t` moves on and stays until the next
    item. Without following, the pane stays where the auditor put it."""
    from pipeline.stages.copy_evidence import compute_copy_evidence

    known = known_store(tmp_path)
    store = open_store(known.path)
    compute_copy_evidence(store)
    store.close()
    async with queue_on(known.path, (80, 24)) as (app, pilot, screen):
        copies = [i for i, r in enumerate(screen.ranked) if r.evidence.copy_count.words]
        assert copies, "the known store has copy suspects"
        table = screen.query_one("#queue-table", DataTable)
        table.move_cursor(row=copies[0])
        await pilot.press("enter")
        await settle(app, pilot)
        audit = app.screen
        response = audit.query_one("#response")
        assert response.display and response.border_title.startswith("Response (3/4")
        await pilot.press("t")
        await pilot.pause()
        assert audit.query_one("#summary").display and not response.display
        await pilot.press("escape")  # stop following: moving keeps the pane chosen
        await pilot.press("down")
        await settle(app, pilot)
        assert audit.query_one("#summary").display and not response.display


def _grouped_store(path: Path) -> Path:
    """tests/support/copy_store.py's store, its copy evidence computed: per instruction, the
    topic's five constraints copy only "the US trade deficit", four of them filed under the first."""
    from pipeline.stages.copy_evidence import compute_copy_evidence
    from tests.support.copy_store import build_copy_store

    store = build_copy_store(path)
    try:
        compute_copy_evidence(store)
    finally:
        store.close()
    return path


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_queue_says_its_length_one_way_and_plus_shows_a_group(tmp_path, size):
    """"8 leaders, 8 more filed under them", never "N suspects (showing M: + for more)" with
    nothing more to show; `+` shows the highlighted leader's filed items as rows under it (no rank
    of their own), Audit then follows every row shown, and `+` again (from a filed row too) hides them."""
    path = _grouped_store(tmp_path / "g.sqlite")
    expected = expected_queue(path)
    filed = sum(len(e.same_phrase) for e in expected)
    assert filed and all(f.lead_key == e.lead_key for e in expected for f in e.same_phrase)
    async with queue_on(path, size) as (app, pilot, screen):
        status = text_of(screen.query_one("#queue-status"))
        assert status.startswith(f"{len(expected)} leaders, {filed} more filed under them ·")
        assert "showing" not in status and " of " not in status.split("·")[0]
        table = screen.query_one("#queue-table", DataTable)
        assert table.row_count == len(expected) == len(screen.ranked)
        at = next(i for i, r in enumerate(screen.ranked) if r.evidence.same_phrase)
        group = screen.ranked[at].evidence.same_phrase
        keys = [c.key for c in screen.table.layout_columns]
        assert table_rows(screen)[at][keys.index("constraint")].startswith(f"[+{len(group)}]")
        table.move_cursor(row=at)
        await pilot.pause()
        await pilot.press("plus")
        await pilot.pause()
        assert table.row_count == len(expected) + len(group) == len(screen.ranked)
        assert [r.evidence for r in screen.ranked[at + 1:at + 1 + len(group)]] == list(group)
        rows = table_rows(screen)
        assert rows[at][keys.index("constraint")].startswith(f"[-{len(group)}]")
        for row in rows[at + 1:at + 1 + len(group)]:
            assert row[keys.index("constraint")].startswith("└") and row[keys.index("rank")] == ""
        assert rows[at + 1 + len(group)][keys.index("rank")] == str(at + 2)  # the next leader keeps its rank
        assert text_of(screen.query_one("#queue-status")) == status  # the same queue, one group open
        # Enter on the first filed row: Audit on it, following every row shown.
        await pilot.press("down", "enter")
        await settle(app, pilot)
        following = app.nav.following
        assert following is not None and following.index == at + 1
        assert len(following.stops) == len(expected) + len(group)
        assert app.screen.shown.constraint_id == group[0].constraint_id
        await pilot.press("2")  # back to the queue
        await settle(app, pilot)
        assert app.screen is screen and table.cursor_row == at + 1
        await pilot.press("plus")  # from a filed row: its group closes, the cursor on its leader
        await pilot.pause()
        assert table.row_count == len(expected) and table.cursor_row == at
        assert table_rows(screen)[at][keys.index("constraint")].startswith(f"[+{len(group)}]")
        alone = next(i for i, r in enumerate(screen.ranked) if not r.evidence.same_phrase)
        table.move_cursor(row=alone)
        await pilot.pause()
        await pilot.press("plus")  # nothing filed under it: said, nothing changes
        await pilot.pause()
        assert table.row_count == len(expected)
        assert any(n.message == "no constraints are filed under this row" for n in app._notifications)


async def test_a_grouped_head_reads_further_as_the_cursor_reaches_its_end(tmp_path, monkeypatch):
    """The head read holds fewer rows than suspects (some are filed under a leader): at its last
    row the screen reads further until new rows come, and says how many of the suspects it read,
    on one line at 80 columns."""
    from unspecific_tui.screens import queue as queue_screen

    path = _grouped_store(tmp_path / "g.sqlite")
    expected = expected_queue(path)
    total = len(expected) + sum(len(e.same_phrase) for e in expected)
    monkeypatch.setattr(queue_screen, "TOP", 3)
    async with queue_on(path, (80, 24)) as (app, pilot, screen):
        status = text_of(screen.query_one("#queue-status"))
        assert status.startswith(f"3 suspects · 3 of {total} read ·") and len(status) <= 78
        table = screen.query_one("#queue-table", DataTable)
        await pilot.press("down", "down")  # the last row read
        for _ in range(6):
            await settle(app, pilot)
        assert table.cursor_row == 2 and len(screen.leaders) > 3
        read = sum(1 + len(r.evidence.same_phrase) for r in screen.leaders)
        assert [(r.evidence.constraint_id, r.evidence.writer) for r in screen.leaders] == \
            [(e.constraint_id, e.writer) for e in suspicion_queue_head(path, read)]
        status = text_of(screen.query_one("#queue-status"))
        assert f"{read} of {total} read" in status or (read == total and "leaders" in status)


def suspicion_queue_head(path: Path, limit: int) -> list:
    view = StoreView.open(path)
    try:
        return list(suspicion_queue(view, limit=limit))
    finally:
        view.close()


def test_the_length_line() -> None:
    from types import SimpleNamespace

    from unspecific_tui.screens.queue_rows import length_line

    def rows(*filed: int) -> list:
        return [SimpleNamespace(evidence=SimpleNamespace(same_phrase=(None,) * n)) for n in filed]

    assert length_line(rows(0, 0), 2, wide=True) == "2 suspects"
    assert length_line(rows(3, 0, 1), 7, wide=False) == "3 leaders, 4 more filed under them"
    assert length_line(rows(0), 1, wide=True) == "1 suspect"
    assert length_line(rows(1), 2, wide=True) == "1 leader, 1 more filed under them"
    assert length_line(rows(0, 2), 5000, wide=True) == \
        "the top 4 of 5,000 suspects: 2 leaders, 2 more filed under them (more as you scroll)"
    assert length_line(rows(0, 2), 5000, wide=False) == "2 leaders, 2 more filed under them · 4 of 5,000 read"
    assert length_line(rows(0, 0), 5000, wide=True) == "the top 2 of 5,000 suspects (more as you scroll)"
