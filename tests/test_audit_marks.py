"""An auditor's mark lands on the item the head names. While Audit follows the suspicion queue, every
key that moves the view (n, p, the list's keys, [ ], x, the filter, the sort, the model, the ratio,
the panes) is pressed, and `y` after each: the one mark written is on the item the head names
(instruction, constraint, model), and when the head says "suspicion queue item k of N", item k is
that item. No key but `y` / `d` writes a mark."""

from __future__ import annotations

import re

import pytest

from tests.support.app import settle, synthetic_app, text_of
from tests.support.marks import NAVIGATION, named_item, stored_marks
from unspecific_tui.screens.audit import AuditScreen
from unspecific_tui.screens.queue import QueueScreen


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_every_key_while_following_marks_the_item_the_head_names(tmp_path, size):
    app = synthetic_app(tmp_path, n_instructions=3, n_constraints=6)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        await pilot.press("2", "exclamation_mark")
        await settle(app, pilot)
        queue = app.screen
        assert isinstance(queue, QueueScreen) and len(queue.ranked) >= 5
        await pilot.press("enter")
        await settle(app, pilot)
        audit = app.screen
        assert isinstance(audit, AuditScreen) and app.nav.following is not None
        stops = app.nav.following.stops
        left_seen = followed_seen = 0
        for key in NAVIGATION:
            before = stored_marks(app)
            await pilot.press(key)
            await settle(app, pilot)
            assert stored_marks(app) == before, f"{key} wrote a mark"
            head = text_of(audit.query_one("#audit-head"))
            item = named_item(app, head)
            at = re.search(r"suspicion queue item ([\d,]+) of", head)
            if at:  # the head says the item shown is this stop of the queue
                followed_seen += 1
                stop = stops[int(at[1].replace(",", "")) - 1]
                shown = audit.shown
                assert stop.is_at(shown.constraint_id, shown.instruction_id, shown.writer), key
                assert (shown.response_id, shown.constraint_id) == item
            else:
                left_seen += 1
                assert "not in the suspicion queue" in head, (key, head)
            await pilot.press("y")
            await settle(app, pilot)
            after = stored_marks(app)
            changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
            assert changed == {item}, (key, head, changed)
        # Both cases were met: keys that stay in the queue and keys that leave it.
        assert followed_seen and left_seen


async def test_off_the_queue_n_goes_back_to_the_item_left(tmp_path):
    app = synthetic_app(tmp_path, n_instructions=3, n_constraints=6)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("2", "exclamation_mark")
        await settle(app, pilot)
        await pilot.press("enter")
        await settle(app, pilot)
        audit, following = app.screen, app.nav.following
        assert following is not None
        left = following.current
        for _ in range(20):  # down the list until the view leaves the queue (it may pass other stops)
            left = following.current
            await pilot.press("j")
            await settle(app, pilot)
            if following.left:
                break
        assert following.left and following.current == left
        head = text_of(audit.query_one("#audit-head"))
        assert "not in the suspicion queue" in head and f"n/p back to item {following.index + 1}" in head
        await pilot.press("n")
        await settle(app, pilot)
        shown = audit.shown
        assert not following.left and left is not None
        assert left.is_at(shown.constraint_id, shown.instruction_id, shown.writer)
        assert f"suspicion queue item {following.index + 1} of" in text_of(audit.query_one("#audit-head"))


@pytest.mark.parametrize("following", [False, True])
async def test_a_mark_right_after_a_click_lands_on_the_clicked_row(tmp_path, following):
    """A click moves the list's cursor and tells the screen by a message; `y` pressed before that
    message is read marks the clicked row (the one the head then names), not the row shown before."""
    app = synthetic_app(tmp_path, n_instructions=2, n_constraints=6)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        if following:  # from the suspicion queue: the key leaves it, as any move does
            await pilot.press("2", "exclamation_mark")
            await settle(app, pilot)
            await pilot.press("enter")
        else:
            await pilot.press("3")
        await settle(app, pilot)
        audit = app.screen
        assert isinstance(audit, AuditScreen) and audit.body.list_visible()
        table = audit.listing.table
        before, shown_before = stored_marks(app), audit.shown.constraint_id
        row = next(i for i, r in enumerate(table.rows_shown) if r.constraint_id != shown_before)
        clicked = table.rows_shown[row].constraint_id
        # The click's cursor move, and the key handled before the list's message arrives.
        table.move_cursor(row=row, animate=False)
        audit.action_mark("confirmed")
        await settle(app, pilot)
        after = stored_marks(app)
        changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        head = text_of(audit.query_one("#audit-head"))
        assert changed == {named_item(app, head)} and audit.shown.constraint_id == clicked
        assert next(iter(changed))[1] == clicked and after[next(iter(changed))] == "confirmed"
