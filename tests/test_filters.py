"""Filters that match nothing and unknown run ids are errors, not quiet successes (issue 13,
item 5): exit 2, a message naming what matched nothing, and no run row added."""

from __future__ import annotations

import pytest

from pipeline.cli import main
from pipeline.store.database import open_store
from tests.fakes.fake_server import FakeOpenAIServer
from tests.fakes.responders import ScriptedModel, config_toml, make_store
from tests.support.evaluate_world import evaluate_cli, instructions_at, make_instructions, world


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())  # rich panels: borders out, wrapped lines joined


def _snapshot(path) -> tuple[int, int, int]:
    s = open_store(path)
    try:
        return (s.scalar("SELECT count(*) FROM runs"), s.scalar("SELECT count(*) FROM instructions"),
                s.scalar("SELECT count(*) FROM generations"))
    finally:
        s.close()


@pytest.mark.parametrize(("args", "message"), [
    (["--conditions", "bogus"], "--conditions: bogus matches no instruction in"),
    (["--conditions", "eval,bogus"], "--conditions: bogus matches no instruction in"),
    (["--domain", "nosuch"], "--domain nosuch matches no instruction in"),
    (["--run", "nosuch"], "--run nosuch matches no instruction in"),
    (["--instructions", "999"], "--instructions: 999 matches no instruction"),
    (["--run", "build-1", "--conditions", "single"], "no finished instruction matches all of --run build-1, "
                                                     "--conditions: single together"),
])
def test_evaluate_filters_matching_nothing_exit_2_and_add_no_run(store_path, tmp_path, capsys, args, message):
    s = open_store(store_path)
    make_instructions(s, n=1, k=2)  # run build-1, condition eval, domain news
    make_instructions(s, n=1, k=2, condition="single", run_id="build-2")
    s.close()
    before = _snapshot(store_path)
    code, server = evaluate_cli(store_path, tmp_path, world, *args)
    assert server.calls == 0
    err = _flat(capsys.readouterr().err)
    assert code == 2, err
    assert message in err and "nothing was run" in err
    assert _snapshot(store_path) == before  # no run row, nothing else touched


def test_the_message_lists_what_there_is(store_path, tmp_path, capsys):
    instructions_at(store_path, n=1, k=2)
    evaluate_cli(store_path, tmp_path, world, "--conditions", "bogus")
    assert "(conditions here: eval)" in _flat(capsys.readouterr().err)


@pytest.mark.parametrize("command", ["evaluate", "build"])
def test_an_empty_condition_list_is_named_as_such(store_path, tmp_path, capsys, command):
    with pytest.raises(SystemExit) as caught:
        main(["--store", str(store_path), command, "--conditions", ","])
    assert caught.value.code == 2
    err = _flat(capsys.readouterr().err)
    assert "--conditions: the list is empty (',')" in err and "got none" not in err
    assert not store_path.exists()  # failed before the store was even opened


def test_build_with_an_unknown_run_alone_is_an_error_not_a_new_default_build(tmp_path, capsys):
    path = tmp_path / "store.sqlite"
    make_store(path, 1).close()
    before = _snapshot(path)
    with FakeOpenAIServer(ScriptedModel()) as server:
        (tmp_path / "c.toml").write_text(config_toml(server.base_url))
        code = main(["--store", str(path), "--config", str(tmp_path / "c.toml"), "build",
                     "--run", "build-typo"])
        assert server.calls == 0
    err = _flat(capsys.readouterr().err)
    assert code == 2
    assert "--run build-typo: no build run of that name (this store has no build run yet)" in err
    assert _snapshot(path) == before


@pytest.mark.parametrize(("args", "message"), [
    (["--run", "nosuch"], "--run nosuch: matches no instruction in"),
    (["--domain", "nosuch"], "--domain nosuch: matches no instruction in"),
    (["--condition", "bogus"], "--condition bogus: matches no instruction in"),
    (["--models", "m1,nope"], "--models: nope matches nothing in"),
    (["--judges", "nobody"], "--judges: nobody matches nothing in"),
])
def test_report_filters_matching_nothing_exit_2(tmp_path, capsys, args, message):
    from tests.support.hand_store import build_hand_store

    path = tmp_path / "s.sqlite"
    build_hand_store(path).close()
    code = main(["--store", str(path), "report", "--no-copy", "--resamples", "10", *args])
    err = _flat(capsys.readouterr().err)
    assert code == 2 and message in err, err
    assert main(["--store", str(path), "report", "--no-copy", "--resamples",
                 "10"]) == 0  # the store is as it was
