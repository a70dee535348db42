"""Nothing outlives its parent (issue 29 item 6): the app killed with its terminal (SIGHUP) or by
SIGKILL, `local serve` on SIGHUP or SIGTERM, and a stage killed any way leave no demo child and
no llama.cpp server behind, within 5 seconds.

The server is a stand-in (tests/fakes/fake_llama.py, mode hold): a fake ``llama_cpp.server`` package on
PYTHONPATH, started through the real bootstrap (so its watch of its parent is the one under test). It answers
the proof prompt and then holds every other request, as a server busy generating would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pipeline.core import processes
from pipeline.llm import local_model as lm
from pipeline.llm import model_file
from tests.fakes import fake_llama
from tests.support.model_parts import stamp_as_verified

ROOT = Path(__file__).resolve().parent.parent
GONE_WITHIN_S = 5.0



@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """An environment whose `python` finds the fake llama_cpp.server and whose cache holds a
    (sparse) model file of the right size, stamped as checked, so nothing real is loaded or hashed."""
    fake = tmp_path / "fake_site"
    server_pkg = fake / "llama_cpp" / "server"
    server_pkg.mkdir(parents=True)
    (fake / "llama_cpp" / "__init__.py").write_text("")
    (server_pkg / "__init__.py").write_text("")
    (server_pkg / "__main__.py").write_text(fake_llama.SOURCE.read_text())
    cache = tmp_path / "cache"
    model = cache / "models" / model_file.MODEL_FILE
    model.parent.mkdir(parents=True)
    with model.open("wb") as fh:
        fh.write(model_file.GGUF_MAGIC)
        fh.truncate(model_file.MODEL_BYTES)
    stamp_as_verified(model_file.shipped_model(model_file.EMBEDDED_NAME),
                      model)  # taken as checked: never hashed
    pids = tmp_path / "server_pids"
    pids.mkdir()
    # Without the real server a real-model test of this session may have left in the environment
    # (conftest's local_server_url): the processes here must start the stand-in themselves.
    inherited = {k: v for k, v in os.environ.items() if k != "UNSPECIFIC_LOCAL_URL"}
    return {**inherited, "PYTHONPATH": f"{fake}{os.pathsep}{ROOT}", "UNSPECIFIC_CACHE": str(cache),
            "FAKE_LLAMA_PIDS": str(pids), "FAKE_LLAMA_MODE": "hold", "HF_HUB_OFFLINE": "1"}


def _alive(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie may wait for an init that never reaps)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def _server_pids(env: dict[str, str], timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    folder = Path(env["FAKE_LLAMA_PIDS"])
    while time.monotonic() < deadline:
        pids = [int(p.name) for p in folder.iterdir() if p.name.isdigit()]
        if pids:
            return pids
        time.sleep(0.1)
    raise AssertionError("the stand-in server never started")


def _wait_busy(env: dict[str, str], timeout_s: float) -> None:
    """Until the server holds a real request: the demo then waits on it, writing nothing (a
    child that writes to a dead app dies of the broken pipe, which would hide a missing watch)."""
    marker = Path(env["FAKE_LLAMA_PIDS"]) / "busy"
    deadline = time.monotonic() + timeout_s
    while not marker.exists():
        assert time.monotonic() < deadline, "the demo never sent the server a request"
        time.sleep(0.1)
    time.sleep(0.5)


def _assert_all_gone(pids: list[int]) -> float:
    t0 = time.monotonic()
    while any(_alive(p) for p in pids):
        left = [p for p in pids if _alive(p)]
        if time.monotonic() - t0 > GONE_WITHIN_S:
            for p in left:  # leave nothing behind even when failing
                os.kill(p, signal.SIGKILL)
            raise AssertionError(f"still running {GONE_WITHIN_S:.0f}s after the parent was stopped: {left}")
        time.sleep(0.05)
    return time.monotonic() - t0


@contextmanager
def _spawned(argv: list[str], env: dict[str, str], cwd: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The parent under test, killed on the way out if the test left it running."""
    # Its own session: the test plays the terminal, and the signal reaches only what it would.
    # SIGHUP back to its default: a suite started under nohup ignores it, and children inherit that.
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(cwd / "parent.log", "wb"), start_new_session=True,
                            preexec_fn=_default_hangup)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _run_statuses(store: Path) -> set[str]:
    """The statuses of the runs the demo recorded in ``store``."""
    import sqlite3

    conn = sqlite3.connect(store)
    try:
        return {status for (status,) in conn.execute("SELECT status FROM runs")}
    finally:
        conn.close()


def _default_hangup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _kill_parent(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    os.killpg(proc.pid, sig)  # as a closed terminal does: the whole foreground group
    proc.wait(10)


APP = """
import sys
from unspecific_tui.app import UnspecificApp
store = sys.argv[1]
child = [sys.executable, "-m", "pipeline.cli", "--store", store, "demo", "--no-app", "--events", \
"--pairs", "1",
         "--constraints", "5", "--articles", "30", "--embedder", "hash"]
UnspecificApp(store, demo_command=child).run(headless=True)
"""


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGKILL, signal.SIGTERM])
def test_the_app_killed_leaves_no_demo_child_and_no_server(tmp_path, env, sig):
    """The reported case: the app's terminal closed while its demo child ran the local model."""
    with _spawned([sys.executable, "-c", APP, str(tmp_path / "demo.sqlite")], env, tmp_path) as app:
        servers = _server_pids(env, timeout_s=120)
        _wait_busy(env, timeout_s=60)
        family = _descendants(app.pid)
        assert set(servers) <= set(family) and len(family) >= 2  # the demo child and its server
        _kill_parent(app, sig)
        _assert_all_gone(family)


def test_the_demo_child_stops_in_order_when_its_parent_is_killed(tmp_path, env):
    """SIGKILL gives the app no say: its child notices and pauses its runs as on SIGTERM."""
    with _spawned([sys.executable, "-c", APP, str(tmp_path / "demo.sqlite")], env, tmp_path) as app:
        _server_pids(env, timeout_s=120)
        _wait_busy(env, timeout_s=60)
        family = _descendants(app.pid)
        _kill_parent(app, signal.SIGKILL)
        _assert_all_gone(family)
    assert "running" not in _run_statuses(tmp_path / "demo.sqlite")


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_the_demo_in_a_terminal_stops_in_order_with_its_server(tmp_path, env, sig):
    """`unspecific demo --no-app` whose terminal closes: runs paused, server stopped, exit 130."""
    argv = [sys.executable, "-m", "pipeline.cli", "--store", str(tmp_path / "demo.sqlite"), "demo",
            "--no-app", "--pairs", "1", "--constraints", "5", "--articles", "30", "--embedder", "hash"]
    with _spawned(argv, env, tmp_path) as demo:
        servers = _server_pids(env, timeout_s=120)
        _wait_busy(env, timeout_s=60)
        _kill_parent(demo, sig)
        _assert_all_gone(servers)
        assert demo.returncode == 130, (tmp_path / "parent.log").read_text()
    assert _run_statuses(tmp_path / "demo.sqlite") == {"paused"}


STAGE = """
import sys, time
from pathlib import Path
from pipeline.llm import local_model as lm
from tests.fakes import fake_llama
lease = lm.acquire_server(timeout_s=60)
print("serving", lease.base_url, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGKILL])
def test_a_stage_killed_leaves_no_server(tmp_path, env, sig):
    """A build or evaluate starts its server as acquire_server does here; killed any way, the
    server goes too."""
    with _spawned([sys.executable, "-c", STAGE], env, tmp_path) as stage:
        servers = _server_pids(env, timeout_s=60)
        _kill_parent(stage, sig)
        _assert_all_gone(servers)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_local_serve_stops_its_server_in_order_on_hangup_and_terminate(tmp_path, env, sig):
    state = Path(env["UNSPECIFIC_CACHE"]) / lm.STATE_FILE
    with _spawned([sys.executable, "-m", "pipeline.cli", "local", "serve"], env, tmp_path) as serve:
        servers = _server_pids(env, timeout_s=60)
        deadline = time.monotonic() + 30
        while not state.exists():
            assert time.monotonic() < deadline, (tmp_path / "parent.log").read_text()
            time.sleep(0.1)
        assert json.loads(state.read_text())["server_pid"] in servers
        os.killpg(serve.pid, sig)
        _assert_all_gone([serve.pid, *servers])
        assert serve.wait(5) == 0  # an orderly stop ...
        assert not state.exists()  # ... that removed its state file


def test_a_signal_that_interrupts_exits_anyway_when_the_orderly_stop_hangs(tmp_path):
    """The orderly stop gets ORDERLY_STOP_S; a stop that hangs (a request the server holds, a
    finally that waits) cannot keep the process, or its children, alive."""
    script = (
        "import time\nfrom pipeline.core import processes\nprocesses.interrupt_on_signals()\n"
        "try:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    print('stopping', "
        "flush=True)\n    time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            preexec_fn=_default_hangup)
    time.sleep(1.5)  # imports done, handler installed
    t0 = time.monotonic()
    proc.send_signal(signal.SIGHUP)
    assert proc.wait(10) == 130
    assert processes.ORDERLY_STOP_S - 0.5 < time.monotonic() - t0 < processes.ORDERLY_STOP_S + 2
    assert proc.stdout is not None and proc.stdout.read() == "stopping\n"


def test_a_child_following_its_parent_stops_when_the_named_parent_is_already_gone(tmp_path):
    """The parent may die before the child's watch starts: the pid it was given tells."""
    script = ("import time\nfrom pipeline.core import processes\nprocesses.interrupt_on_signals()\n"
              "try:\n    processes.follow_parent()\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    "
              "print('followed', flush=True)\n")
    env = {**os.environ, processes.PARENT_PID_ENV: str(2**22 + 4321)}  # not our parent: that one is gone
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=20)
    assert proc.stdout == "followed\n", proc.stderr
