"""`unspecific demo`: opens the app at once with the demo as its child, or runs headless."""

from __future__ import annotations

import argparse
import time

import pipeline.cli as cli
from pipeline.cli import demo_cmd
from unspecific_tui.app import UnspecificApp


def _args(**kw) -> argparse.Namespace:
    base = {"store": "d.sqlite", "config": None, "pairs": 2, "constraints": 39, "articles": 60,
            "embedder": None,
            "no_app": False, "events": False}
    return argparse.Namespace(**(base | kw))


def test_the_child_command_is_the_same_demo_headless_with_events() -> None:
    argv = demo_cmd.child_argv(_args(embedder="minilm", config="c.toml"))
    assert argv[1:3] == ["-m", "pipeline.cli"]
    assert argv[3:7] == ["--store", "d.sqlite", "--config", "c.toml"]
    tail = argv[7:]
    assert tail[:3] == ["demo", "--no-app", "--events"]
    assert tail[tail.index("--constraints") + 1] == "39" and tail[tail.index("--embedder") + 1] == "minilm"


def test_demo_opens_the_app_first_on_a_new_store(tmp_path, monkeypatch) -> None:
    seen = []

    def fake_run(self) -> None:
        seen.append((self.store_path, self.demo_command, self.run_id, time.monotonic()))

    monkeypatch.setattr(UnspecificApp, "run", fake_run)
    path = tmp_path / "new.sqlite"
    t0 = time.monotonic()
    assert cli.main(["--store", str(path), "demo", "--pairs", "1"]) == 0
    (store_path, command, run_id, opened) = seen[0]
    assert store_path == path and path.exists()
    assert run_id == "demo" and "--events" in command and command[command.index("--pairs") + 1] == "1"
    assert opened - t0 < 10  # nothing heavy runs before the app opens
