"""A mark lands on the item the head names with the list filtered (issue 62): following the
suspicion queue onto an item whose constraint the filter hides, `y` / `d` mark that item, the list
shows its row (the filter lifted for it, and said), and n / p step the queue, not the filtered list.
Then every navigation key, under every filter and sort, marks the item the head names."""

from __future__ import annotations

import re

import pytest

from tests.support.app import settle, synthetic_app, text_of
from tests.support.marks import NAVIGATION, named_item, stored_marks
from unspecific_tui.screens.audit import AuditScreen
from unspecific_tui.widgets.constraint_list import FILTERS, SORTS, filter_rows


async def _audit_on_queue(app, pilot):  # noqa: ANN001, ANN202
    await settle(app, pilot)
    await pilot.press("2", "exclamation_mark")
    await settle(app, pilot)
    await pilot.press("enter")
    await settle(app, pilot)
    audit = app.screen
    assert isinstance(audit, AuditScreen) and app.nav.following is not None
    return audit


def _hidden(audit) -> bool:  # noqa: ANN001
    """The shown constraint's row is one the list's filter hides."""
    row = audit.shown.row
    return row is not None and not filter_rows([row], audit.listing.filter)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
@pytest.mark.parametrize("key", ["y", "d"])
async def test_a_followed_item_the_filter_hides_is_the_one_marked(tmp_path, size, key):
    app = synthetic_app(tmp_path, n_instructions=3, n_constraints=6)
    async with app.run_test(size=size) as pilot:
        audit = await _audit_on_queue(app, pilot)
        if size[0] < 120:
            await pilot.press("l")  # at 80 columns the list is behind `l`: the auditor looks at it
            await settle(app, pilot)
        await pilot.press("slash")  # flipped only
        await settle(app, pilot)
        assert audit.listing.filter == "flipped"
        steps = 0
        while not _hidden(audit):  # n along the queue to an item whose constraint the filter hides
            index = app.nav.following.index
            await pilot.press("n")
            await settle(app, pilot)
            steps += 1
            assert app.nav.following.index == index + 1, "n stepped the queue by one"
            assert steps < len(app.nav.following.stops)
        head = text_of(audit.query_one("#audit-head"))
        assert f"suspicion queue item {app.nav.following.index + 1} of" in head
        item = named_item(app, head)
        # The list shows the item's row, and says the filter was lifted for it.
        assert audit.listing.cursor_constraint() == item[1] or not audit.body.list_visible()
        assert "filter lifted" in text_of(audit.query_one("#audit-list-head"))
        before = stored_marks(app)
        await pilot.press(key)
        await settle(app, pilot)
        after = stored_marks(app)
        changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        assert changed == {item}, (head, changed)
        assert after[item] == ("confirmed" if key == "y" else "dismissed")


async def _set(pilot, app, audit, key: str, attribute: str, value: str) -> None:  # noqa: ANN001
    """Press ``key`` until the list's ``attribute`` (filter, sort) is ``value``."""
    for _ in range(len(FILTERS) + len(SORTS)):
        if getattr(audit.listing, attribute) == value:
            return
        await pilot.press(key)
        await settle(app, pilot)
    raise AssertionError(f"{attribute} never became {value}")


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("filter_", FILTERS)
async def test_every_key_under_every_filter_and_sort_marks_the_item_the_head_names(tmp_path, filter_, sort):
    """Following the queue with the list filtered and sorted, each navigation key (n, p, the list's keys,
    [ ], x, the filter, the sort, the model, the ratio, the panes) then `y`: the one mark written is on
    the item the head names, and "suspicion queue item k of N" names stop k."""
    app = synthetic_app(tmp_path, n_instructions=3, n_constraints=6)
    async with app.run_test(size=(160, 48)) as pilot:
        audit = await _audit_on_queue(app, pilot)
        await _set(pilot, app, audit, "slash", "filter", filter_)
        await _set(pilot, app, audit, "s", "sort", sort)
        stops = app.nav.following.stops
        for key in NAVIGATION:
            before = stored_marks(app)
            index, left = app.nav.following.index, app.nav.following.left
            await pilot.press(key)
            await settle(app, pilot)
            assert stored_marks(app) == before, f"{key} wrote a mark"
            if key in ("n", "p") and not left and app.nav.following is not None:
                # n / p step the queue by one (clamped at its ends), whatever the list shows
                expected = max(0, min(len(stops) - 1, index + (1 if key == "n" else -1)))
                assert app.nav.following.index == expected, (key, index, app.nav.following.index)
            head = text_of(audit.query_one("#audit-head"))
            item = named_item(app, head)
            at = re.search(r"suspicion queue item ([\d,]+) of", head)
            shown = audit.shown
            if at:
                stop = stops[int(at[1].replace(",", "")) - 1]
                assert stop.is_at(shown.constraint_id, shown.instruction_id, shown.writer), key
            assert (shown.response_id, shown.constraint_id) == item
            if audit.body.list_visible():
                assert audit.listing.cursor_constraint() == item[1], (key, head)
            await pilot.press("y")
            await settle(app, pilot)
            after = stored_marks(app)
            changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
            assert changed == {item}, (key, head, changed)


async def test_the_issues_walk_by_f_with_the_list_hidden_marks_the_head_s_item(tmp_path):
    """The issue's second walk at 160x48: the list filtered, `f` -> the suspicion queue, `l` (the list
    hidden) and `l` (back), `d` on an item the filter hides: the dismissed item is the one the head
    names."""
    from textual.widgets import OptionList

    from unspecific_tui.widgets.flag_picker import QUEUE

    app = synthetic_app(tmp_path, n_instructions=3, n_constraints=6)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        await pilot.press("3", "slash")
        await settle(app, pilot)
        audit = app.screen
        assert isinstance(audit, AuditScreen) and audit.listing.filter == "flipped"
        await pilot.press("f")
        await settle(app, pilot)
        options = app.screen.query_one("#picker-options", OptionList)
        options.highlighted = next(i for i in range(options.option_count)
                                   if options.get_option_at_index(i).id == QUEUE)
        await pilot.press("enter")
        await settle(app, pilot)
        assert app.screen is audit and app.nav.following is not None
        await pilot.press("l")
        await settle(app, pilot)
        assert not audit.body.list_visible()
        await pilot.press("l")
        await settle(app, pilot)
        for _ in range(len(app.nav.following.stops)):
            if _hidden(audit):
                break
            await pilot.press("n")
            await settle(app, pilot)
        assert _hidden(audit)
        head = text_of(audit.query_one("#audit-head"))
        item = named_item(app, head)
        before = stored_marks(app)
        await pilot.press("d")
        await settle(app, pilot)
        after = stored_marks(app)
        changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        assert changed == {item} and after[item] == "dismissed", (head, changed)
