"""Read-only viewing while another connection writes the same store (WAL), and the CLI entry."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import pytest

from tests.fakes.synthetic import STAMP, SyntheticSpec, build_synthetic_store
from tests.support.app import goto, settle, store_rows
from unspecific_tui.app import UnspecificApp


def writer(path, stop: threading.Event, counter: list[int]) -> None:
    """A build writing as stages do: small transactions, one unit at a time, and now and then a new
    run. ``counter[0]``: the runs written so far."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA busy_timeout = 10000")
    i = 0
    while not stop.is_set():
        i += 1
        run = f"w{i // 20}"
        conn.execute("INSERT OR IGNORE INTO runs(id, kind, name, config, status, started_at) "
                     "VALUES (?, 'build', ?,"
                     " '{}', 'running', ?)", (run, run, STAMP))
        cur = conn.execute("INSERT INTO instructions(run_id, domain, condition, "
                           "main_task, status, created_at)"
                           " VALUES (?, 'news', 'eval', 'task', 'synthesized', ?)", (run, STAMP))
        conn.executemany("INSERT INTO constraints(instruction_id, position, text, origin, active, created_at)"
                         " VALUES (?, ?, ?, 'synthesized', 1, ?)",
                         [(cur.lastrowid, p, f"constraint {p} of {run}", STAMP) for p in range(1, 40)])
        conn.commit()
        counter[0] = i // 20 + 1
        time.sleep(0.01)
    conn.close()


async def wait_for_more_runs(counter: list[int], seen: int) -> None:
    for _ in range(500):
        if counter[0] > seen:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the writer thread started no new run in 5 s")


@pytest.mark.parametrize("readonly", [True, False])
async def test_viewing_while_a_build_writes(tmp_path, readonly):
    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=12, seed=1))
    stop, counter = threading.Event(), [0]
    thread = threading.Thread(target=writer, args=(path, stop, counter), daemon=True)
    thread.start()
    try:
        app = UnspecificApp(path, stages={}, readonly=readonly, annotator="ann")
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(app, pilot)
            for keys in (["2"], ["3", "j", "j", "f", "escape", "x", "k"],
                         ["4", "right_square_bracket"], ["6"], ["1"]):
                await pilot.press(*keys)
                await settle(app, pilot)
                await pilot.press("ctrl+r")  # reload while the writer keeps going
                await settle(app, pilot)
            if not readonly:
                await goto(app, pilot, "5")
                if app.screen.queue.items:
                    await pilot.press("s")
                    await pilot.pause()
                    assert store_rows(app, "SELECT count(*) FROM annotations")[0][0] == 1
            await wait_for_more_runs(counter, 0)
            await pilot.press("1")  # showing the Build screen again re-reads the run list
            await settle(app, pilot)
            runs = app.screen.query_one("#runs").row_count
            assert runs > 1
            await wait_for_more_runs(counter, counter[0])
            await pilot.press("ctrl+r")  # and so does ctrl+r on it
            await settle(app, pilot)
            assert app.screen.query_one("#runs").row_count > runs
            assert app.return_code is None  # still running, nothing crashed
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_cli_tui_refuses_a_missing_store(tmp_path, capsys):
    from pipeline.cli import main

    code = main(["tui", "--store", str(tmp_path / "nope.sqlite")])
    assert code == 2
    assert "no store here" in capsys.readouterr().err


def test_no_command_and_tui_command_open_the_app(tmp_path, monkeypatch):
    from pipeline.cli import main

    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=4))
    seen = []
    monkeypatch.setattr(UnspecificApp, "run", lambda self: seen.append((self.store_path, self.readonly,
                                                                         self.annotator, self.run_id)))
    assert main(["--store", str(path)]) == 0
    assert main(["tui", "--store", str(path), "--read-only", "--annotator", "bob", "--run", "synthetic"]) == 0
    assert seen == [(path, False, seen[0][2], "synthetic"), (path, True, "bob", "synthetic")]
