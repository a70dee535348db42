"""The first screen (issue 26, item 9): Build paints its runs at once, and the app's start does
not load what that screen never reads (bench/first_screen.py times it on a large store)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from pipeline.store.database import open_store
from tests.support.app import goto, make_known_store, settle, text_of
from unspecific_tui.app import UnspecificApp


def first_paints(app: UnspecificApp) -> list[tuple[int, str]]:
    """Record, at each paint, how many runs the Build screen lists and what its totals say."""
    seen: list[tuple[int, str]] = []
    display = app._display

    def hook(screen: Any, renderable: Any) -> None:
        display(screen, renderable)
        runs, totals = app.screen.query("#runs"), app.screen.query("#run-totals")
        seen.append((runs.first().row_count if runs else -1, text_of(totals.first()) if totals else ""))

    app._display = hook  # type: ignore[method-assign]
    return seen


async def test_the_first_paint_lists_the_runs(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={})
    seen = first_paints(app)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        rows, totals = seen[0]
        # Listed from the app's view before the first paint, not by the worker after it.
        assert rows == 1 and "r1" in totals and "calls 12" in totals
        assert app.screen.stages.counts["judge"] == 24  # the counts still come, from the worker


async def test_selecting_a_run_updates_its_totals(tmp_path):
    """The worker's re-listing of unchanged runs repaints nothing, but a run newly selected in
    the same rows still shows its own totals."""
    known = make_known_store(tmp_path / "s.sqlite")
    store = open_store(known.path)
    store.conn.execute("INSERT INTO runs(id, kind, name, config, status, started_at, calls) VALUES"
                       " ('r0', 'build', 'r0', '{}', 'done', '2020-01-01T00:00:00', 7)")
    store.commit()
    store.close()
    app = UnspecificApp(known.path, stages={})
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        runs = app.screen.query_one("#runs")
        assert runs.row_count == 2 and "calls 12" in text_of(app.screen.query_one("#run-totals"))
        runs.focus()
        runs.move_cursor(row=runs.get_row_index("r0"))
        await goto(app, pilot, "enter")
        assert app.run_id == "r0"
        assert "calls 7" in text_of(app.screen.query_one("#run-totals"))


def test_the_app_starts_without_the_tables_its_first_screen_never_reads():
    code = ("import sys\nimport unspecific_tui.app, unspecific_tui.screens.build\n"
            "print(','.join(m for m in ('pipeline.store.validation', 'pipeline.store.annotations',"
            " 'pipeline.store.verdicts', 'numpy', 'sqlite_utils', 'plotext') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
