"""One writer per store, and a store is created only on purpose (issue 29, items 3 and 4).

A second command that writes a store refuses at once (exit 2), naming the first one's PID and
command; readers go on; the lock of a killed writer is taken over. A command that is not made to
create a store says "no store here" on a missing one and leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.core.errors import StoreError
from pipeline.store.database import claim_writer, open_store, writer_lock_path
from tests.fakes.fake_server import FakeOpenAIServer
from tests.support.evaluate_world import config_file, make_instructions, world

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
CLI = [sys.executable, "-c", "import sys; from pipeline.cli import main; sys.exit(main())"]


def _holder(path: Path, command: str = "unspecific evaluate --models fa") -> subprocess.Popen[str]:
    """A child process that holds the store's writer lock until killed (it says "ready" first)."""
    code = ("import sys, time; from pipeline.store.database import claim_writer; "
            f"claim_writer({str(path)!r}, {command!r}); print('ready', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code], env=ENV, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


# -- one writer per store ---------------------------------------------------------------------


def test_a_second_evaluate_is_refused_at_once_and_nothing_is_paid_twice(store_path, tmp_path, capsys):
    s = open_store(store_path)
    make_instructions(s, n=3, k=2)
    s.close()
    with FakeOpenAIServer(world, latency_s=0.2) as server:
        cfg = config_file(tmp_path, server.base_url, each="concurrency = 1\n")
        argv = ["--store", str(store_path), "--config", str(cfg)]
        first = subprocess.Popen([*CLI, *argv, "evaluate"], env=ENV, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while server.calls < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.calls >= 1
            started = time.monotonic()
            assert main([*argv, "evaluate"]) == 2
            assert time.monotonic() - started < 5  # at once, not after waiting for the first
            err = " ".join(capsys.readouterr().err.split())
            assert f"PID {first.pid}" in err and "evaluate" in err and f"kill {first.pid}" in err
            assert "another command is writing this store" in err and "Wait for it to finish" in err
            # Readers go on meanwhile.
            assert main([*argv, "report", "--no-copy", "--resamples", "10"]) in (0, 1)
            assert "writing this store" not in capsys.readouterr().err
            assert main(["--store", str(store_path), "corpus", "list"]) == 0
            assert first.wait(120) == 0, first.stderr.read() if first.stderr else ""
        finally:
            _stop(first)
        paid = server.calls
        # The first has finished, so its lock is free: a new evaluate runs and finds nothing to pay for.
        assert main([*argv, "evaluate"]) == 0
        assert server.calls == paid
    s = open_store(store_path, readonly=True)
    # the refused one recorded nothing
    assert s.scalar("SELECT count(*) FROM runs WHERE kind = 'evaluate'") == 2
    s.close()


def test_every_writing_command_is_refused_while_another_writes(store_path, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    open_store(store_path).close()
    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "a", "text": "word " * 400}) + "\n")
    holder = _holder(store_path)
    try:
        base = ["--store", str(store_path)]
        for argv in (["init"], ["corpus", "add", "a.jsonl", "--domain", "news"], ["build", "--n", "1"],
                     ["pair", "--model", "hash"], ["cache", "clear", "--yes"],
                     ["validate", "plan", "--name", "p"]):
            assert main([*base, *argv]) == 2, argv
            err = " ".join(capsys.readouterr().err.split())
            assert f"PID {holder.pid}" in err and "unspecific evaluate --models fa" in err, argv
        # Readers: the cache listing, an export, a read-only open.
        assert main([*base, "cache", "stats"]) == 0
        assert main([*base, "export", "--out", str(tmp_path / "out.csv")]) in (0, 1)
        assert "writing this store" not in capsys.readouterr().err
        open_store(store_path, readonly=True).close()
    finally:
        _stop(holder)


def test_a_killed_writers_lock_is_taken_over(store_path, capsys):
    open_store(store_path).close()
    holder = _holder(store_path)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(10)
    # Its lock file is still there, naming it; the lock itself went with the process.
    assert json.loads(writer_lock_path(store_path).read_text())["pid"] == holder.pid
    with claim_writer(store_path, "unspecific pair"):
        assert json.loads(writer_lock_path(store_path).read_text())["pid"] == os.getpid()
    assert main(["--store", str(store_path), "cache", "clear", "--yes"]) == 0


def test_claims_nest_within_a_process_and_end_with_the_command(store_path):
    open_store(store_path).close()
    outer = claim_writer(store_path, "outer")
    inner = open_store(store_path, writer="inner")  # the app's threads, a command running another
    inner.close()
    with pytest.raises(subprocess.CalledProcessError):  # still held by `outer`
        subprocess.run([sys.executable, "-c", f"from pipeline.store.database import claim_writer; "
                        f"claim_writer({str(store_path)!r}, 'x')"], env=ENV, check=True, capture_output=True)
    outer.release()
    outer.release()  # once is enough
    # A command run in-process gives its claim up when it returns: another process can write.
    assert main(["--store", str(store_path), "cache", "clear", "--yes"]) == 0
    subprocess.run([sys.executable, "-c", f"from pipeline.store.database import claim_writer; "
                    f"claim_writer({str(store_path)!r}, 'x')"], env=ENV, check=True)


def test_the_refusal_is_a_store_error_even_before_the_holder_names_itself(store_path):
    open_store(store_path).close()
    import fcntl

    fd = os.open(writer_lock_path(store_path), os.O_RDWR | os.O_CREAT)
    try:
        # Another process's open file description: flock conflicts with it even in this process.
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(StoreError, match="another command is writing this store: another process"):
            claim_writer(store_path, "me")
    finally:
        os.close(fd)


# -- a store is created only on purpose -------------------------------------------------------

NOT_CREATING = [
    ["build", "--n", "1"],
    ["evaluate"],
    ["evaluate", "--dry-run"],
    ["naturalness"],
    ["pair", "--model", "hash"],
    ["batch", "status", "--no-refresh"],
    ["validate", "plan", "--name", "p"],
    ["cache", "stats"],
    ["report"],
    ["export", "--out", "x.csv"],
    ["corpus", "list"],
]


@pytest.mark.parametrize("argv", NOT_CREATING, ids=[" ".join(a) for a in NOT_CREATING])
def test_a_missing_store_is_not_created(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "typo.sqlite"
    assert main(["--store", str(path), *argv]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{path}: no store here" in err and "unspecific init" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no store, no lock, no -wal


def test_create_makes_the_store_on_purpose(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "new.sqlite"
    assert main(["--store", str(path), "evaluate", "--create", "--dry-run"]) == 0
    assert path.exists()
    assert main(["--store", str(tmp_path / "made.sqlite"), "init"]) == 0
    assert (tmp_path / "made.sqlite").exists()


# -- the demo: the app opens, its child writes ------------------------------------------------


def test_the_demo_leaves_the_lock_to_its_child_and_refuses_while_another_writes(store_path,
                                                                                monkeypatch, capsys):
    from unspecific_tui.app import UnspecificApp

    child_could_write = []

    def fake_run(self) -> None:  # the app, while open, holds no lock: its demo child can take it
        done = subprocess.run([sys.executable, "-c", f"from pipeline.store.database import claim_writer; "
                               f"claim_writer({str(store_path)!r}, 'demo child')"], env=ENV,
                              capture_output=True)
        child_could_write.append(done.returncode == 0)

    monkeypatch.setattr(UnspecificApp, "run", fake_run)
    assert main(["--store", str(store_path), "demo"]) == 0
    assert child_could_write == [True]
    holder = _holder(store_path)
    try:
        # Refused before the app opens, and headless (the child's own command) too.
        assert main(["--store", str(store_path), "demo"]) == 2
        assert main(["--store", str(store_path), "demo", "--no-app", "--events"]) == 2
        assert f"PID {holder.pid}" in " ".join(capsys.readouterr().err.split())
        assert child_could_write == [True]
    finally:
        _stop(holder)
