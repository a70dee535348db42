"""A build killed with SIGKILL half way and started again with the same --run finishes without
repeating any LLM call for work already stored: requests are counted at the fake server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

from pipeline.store.database import open_store
from tests.fakes.fake_server import FakeOpenAIServer
from tests.fakes.responders import ScriptedModel, config_toml, make_store

ARGS = ["build", "--n", "3", "--constraints", "8", "--words", "60", "--contradictions",
        "--new-run", "resume-test"]
CLI = "import sys; from pipeline.cli import main; sys.exit(main())"


def _cli(tmp_path, name: str, base_url: str) -> list[str]:
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(config_toml(base_url, concurrency=1))  # one call in flight: at most one lost to the kill
    return [sys.executable, "-c", CLI, "--store", str(tmp_path / f"{name}.sqlite"), "--config",
            str(cfg), *ARGS]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.getcwd() + os.pathsep + env.get("PYTHONPATH", "")
    env["COLUMNS"] = "200"
    return env


def _bodies(server: FakeOpenAIServer) -> list[str]:
    return [json.dumps(r["messages"], sort_keys=True) for r in server.requests]


def test_sigkill_then_resume_repeats_no_stored_call(tmp_path) -> None:
    # The reference: the same build, uninterrupted, on a fresh store.
    make_store(tmp_path / "clean.sqlite", 3).close()
    with FakeOpenAIServer(ScriptedModel()) as clean:
        done = subprocess.run(_cli(tmp_path, "clean", clean.base_url), env=_env(), capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr + done.stdout
        reference = clean.calls
    assert reference >= 20
    assert len(set(_bodies(clean))) == reference  # an uninterrupted build never asks the same twice

    make_store(tmp_path / "killed.sqlite", 3).close()
    with FakeOpenAIServer(ScriptedModel(), latency_s=0.05) as server:
        first = subprocess.Popen(_cli(tmp_path, "killed", server.base_url), env=_env(),
                                 stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while server.calls < reference // 2 and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.01)
        assert first.poll() is None, ("the build finished before it could be killed: "
                                      + (first.stderr.read() if first.stderr else ""))
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        killed_at = server.calls
        store = open_store(tmp_path / "killed.sqlite")
        half = store.scalar("SELECT count(*) FROM instructions WHERE status = 'done'")
        cached = store.scalar("SELECT count(*) FROM llm_calls")
        store.close()
        assert 0 < killed_at < reference and cached > 0

        second = subprocess.run(_cli(tmp_path, "killed", server.base_url), env=_env(),
                                capture_output=True, text=True,
                                timeout=120)
        assert second.returncode == 0, second.stderr + second.stdout
        total = server.calls
        repeats = sum(n - 1 for n in Counter(_bodies(server)).values() if n > 1)

    # At most the one call that was in flight at the kill is asked again; nothing stored is.
    assert repeats <= 1, f"{repeats} repeated calls"
    assert total <= reference + 1
    store = open_store(tmp_path / "killed.sqlite")
    statuses = Counter(r["status"] for r in store.query("SELECT status FROM instructions"))
    assert statuses == {"done": 12}, statuses
    run = store.one("SELECT * FROM runs WHERE id = 'resume-test'")
    assert run["status"] == "done"
    assert store.scalar("SELECT count(*) FROM generations WHERE kind = 'base'") == 3
    assert store.scalar("SELECT count(*) FROM llm_calls") == len(set(_bodies(server)))
    store.close()
    print(f"reference {reference} calls; killed after {killed_at} ({half} instructions done); "
          f"resumed with {total - killed_at} more; repeats {repeats}")
