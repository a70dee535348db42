"""Killed runs do not stay `running` forever: the next command that opens the store finds
their process gone and marks them `interrupted` (issue 13, item 7)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from pipeline.core.config import parse_config
from pipeline.stages.runs import create_run
from pipeline.store.database import mark_interrupted, open_store
from tests.fakes.fake_server import FakeOpenAIServer
from tests.support.evaluate_world import config_file, make_instructions, world

ROOT = Path(__file__).resolve().parents[1]


def _dead_pid() -> int:
    # The pid of a process that has exited and been reaped.
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_run_whose_process_is_gone_is_marked_interrupted_when_the_store_is_opened(store_path):
    s = open_store(store_path)
    config = parse_config({})
    mine = create_run(s, "evaluate", config)
    dead = create_run(s, "build", config)
    elsewhere = create_run(s, "build", config)
    s.conn.execute("UPDATE runs SET pid = ? WHERE id = ?", (_dead_pid(), dead))
    s.conn.execute("UPDATE runs SET pid = ?, host = ? WHERE id = ?", (_dead_pid(), "another-host", elsewhere))
    s.commit()
    s.close()
    s = open_store(store_path)
    status = {r["id"]: r for r in s.query("SELECT id, status, error, finished_at, pid, host FROM runs")}
    assert status[mine]["status"] == "running" and status[mine]["pid"] == os.getpid()
    assert status[mine]["host"] == socket.gethostname()
    assert status[dead]["status"] == "interrupted" and status[dead]["finished_at"]
    assert "its process ended without finishing it" in status[dead]["error"]
    assert status[elsewhere]["status"] == "running"  # cannot tell from here: left alone
    assert mark_interrupted(s.conn) == []  # once is enough
    s.close()


def test_a_sigkilled_evaluate_is_interrupted_for_the_next_command(store_path, tmp_path):
    s = open_store(store_path)
    make_instructions(s, n=3, k=2)
    s.close()
    with FakeOpenAIServer(world, latency_s=0.3) as server:
        cfg = config_file(tmp_path, server.base_url, each="concurrency = 1\n")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        argv = [sys.executable, "-c", "import sys; from pipeline.cli import main; sys.exit(main())",
                "--store", str(store_path), "--config", str(cfg)]
        proc = subprocess.Popen([*argv, "evaluate"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while server.calls < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.calls >= 2
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    s = open_store(store_path, readonly=True)  # a reader marks nothing
    assert s.scalar("SELECT status FROM runs") == "running"
    generations = s.scalar("SELECT count(*) FROM generations")
    s.close()
    done = subprocess.run([*argv, "report", "--no-copy", "--resamples", "10"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    s = open_store(store_path)
    run = s.one("SELECT status, error FROM runs")
    assert run["status"] == "interrupted" and "killed or crashed" in run["error"]
    assert s.scalar("SELECT count(*) FROM generations") == generations  # nothing stored was lost
    s.close()
