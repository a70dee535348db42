"""`unspecific demo`: the steps it runs, and what a failed step does to the rest."""

from __future__ import annotations

import argparse

import pipeline.cli as cli
from pipeline.cli import demo_cmd


def _args(**kw) -> argparse.Namespace:
    base = {"store": "d.sqlite", "config": None, "pairs": 2, "constraints": 39, "articles": 120, "no_app": True}
    return argparse.Namespace(**(base | kw))


def test_steps_are_the_cli_commands_in_order() -> None:
    steps = demo_cmd.steps(_args())
    assert [argv[2] for _title, argv in steps] == ["corpus", "pair", "build", "evaluate", "report"]
    build = steps[2][1]
    assert build[:2] == ["--store", "d.sqlite"]
    assert build[build.index("--constraints") + 1] == "39" and build[build.index("--conditions") + 1] == "eval,single"


def _run_with_codes(monkeypatch, codes: dict[str, int]) -> tuple[int, list[str]]:
    ran: list[str] = []

    def fake_main(argv: list[str]) -> int:
        command = argv[2] if argv[0] == "--store" else argv[0]
        ran.append(command)
        return codes.get(command, 0)

    monkeypatch.setattr(cli, "main", fake_main)
    return demo_cmd.run(_args()), ran


def test_units_that_failed_do_not_stop_the_demo(monkeypatch) -> None:
    code, ran = _run_with_codes(monkeypatch, {"build": 1})  # 1: some units failed, recorded
    assert code == 0 and ran == ["corpus", "pair", "build", "evaluate", "report"]


def test_an_error_stops_the_demo(monkeypatch) -> None:
    code, ran = _run_with_codes(monkeypatch, {"pair": 2})  # 2: bad input or config
    assert code == 2 and ran == ["corpus", "pair"]
