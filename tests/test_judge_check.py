"""The built-in judge check (issue 27, item 1): the shipped set, a scripted judge with known errors
scored to the expected numbers, its items stored through pipeline.store.judge_checks, the cache
making a second run free, and the command."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pipeline.analysis.judge_check import (
    KINDS,
    NEGATIVE_KINDS,
    SOURCE,
    CheckEntry,
    check_scores,
    check_set,
    selected_texts,
)
from pipeline.cli import main
from pipeline.core.config import parse_config
from pipeline.llm.client import LLMClient
from pipeline.stages.judge_check import run_judge_check
from pipeline.store.database import Store, open_store
from pipeline.store.judge_checks import all_checks, check_counts
from tests.fakes.fake_server import FakeOpenAIServer, Reply, last_user_message
from tests.fakes.responders import block, numbered_items

ROOT = Path(__file__).parent.parent
ENTRIES = {(t.text, e.constraint): e for t in check_set() for e in t.entries}


def test_the_set_is_about_200_items_in_three_domains_with_every_kind() -> None:
    texts = check_set()
    items = [e for t in texts for e in t.entries]
    assert 190 <= len(items) <= 220
    assert len({e.key for e in items}) == len(items)
    for domain in ("news", "story", "blog"):
        mine = [e for t in texts if t.domain == domain for e in t.entries]
        assert {e.kind for e in mine} == set(KINDS), domain
        assert 0.4 <= sum(e.truth for e in mine) / len(mine) <= 0.6
    assert all(80 <= len(t.text.split()) <= 150 for t in texts)
    quick = selected_texts(quick=True)
    assert len(quick) == 3 and 36 <= sum(len(t.entries) for t in quick) <= 45
    assert {t.domain for t in quick} == {"news", "story", "blog"}


def test_the_set_ships_with_its_licence() -> None:
    folder = ROOT / "pipeline" / "analysis" / "judge_check_data"
    assert "CC BY 4.0" in (folder / "LICENSE").read_text()
    assert "judge_check_data/*.jsonl" in (ROOT / "pyproject.toml").read_text()


# -- a judge with known errors ------------------------------------------------------------------

def _lenient_on(kind: str, entry: CheckEntry) -> bool | None:
    """The scripted judge: right on everything but Yes to every ``kind`` item (a quote not in the
    text), No to every peripheral one, and silent on every ``absent`` one (missing, asked again,
    still silent)."""
    if entry.kind == "absent":
        return None
    if entry.kind == kind:
        return True
    if entry.kind == "peripheral":
        return False
    return entry.truth


def _judge(kind: str, *, silent: bool = True) -> Any:
    """``silent``: leave out the absent items (else answer them, rightly: No)."""
    def respond(request: dict[str, Any]) -> Reply:
        prompt = last_user_message(request)
        text = block(prompt, "TEXT")
        verdicts = []
        for i, constraint in numbered_items(block(prompt, "CONSTRAINTS")):
            entry = ENTRIES[(text, constraint)]
            said = _lenient_on(kind, entry) if silent or entry.kind != "absent" else False
            if said is None:
                continue
            quote = (constraint if entry.kind == kind else text.split(".")[0]) if said else ""
            verdicts.append({"id": i, "verdict": "yes" if said else "no", "quote": quote, "reason": ""})
        return Reply(text=json.dumps({"verdicts": verdicts}))

    return respond


def _config(server: FakeOpenAIServer) -> Any:
    return parse_config({"endpoints": {"ja": {"base_url": server.base_url, "model": "judge-a",
                                              "concurrency": 4,
                                              "max_retries": 0}},
                         "roles": {"judges": ["ja"]}})


def _expected(entries: list[CheckEntry], kind: str) -> dict[str, float]:
    answered = [e for e in entries if e.kind != "absent"]
    said = [(_lenient_on(kind, e), e.truth) for e in answered]
    tp = sum(1 for s, t in said if s and t)
    fn = sum(1 for s, t in said if not s and t)
    tn = sum(1 for s, t in said if not s and not t)
    fp = sum(1 for s, t in said if s and not t)
    n = tp + fn + tn + fp
    p_e = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / n**2
    return {"n": n, "missing": len(entries) - n, "accuracy": (tp + tn) / n, "sensitivity": tp / (tp + fn),
            "specificity": tn / (tn + fp), "kappa": ((tp + tn) / n - p_e) / (1 - p_e),
            "quote_found": tp / (tp + fp)}


async def _run(store: Store, server: FakeOpenAIServer, *, quick: bool = False) -> None:
    client = LLMClient(_config(server), store)
    try:
        await run_judge_check(store, client, ["ja"], quick=quick)
    finally:
        await client.aclose()


async def test_a_judge_with_known_errors_gets_the_expected_numbers(store: Store) -> None:
    kind = "off_by_one"
    with FakeOpenAIServer(_judge(kind)) as server:
        await _run(store, server)
    (check,) = all_checks(store)
    assert (check.judge, check.source) == ("ja", SOURCE)
    assert check_counts(store)["ja"].source == SOURCE
    entries = [e for t in check_set() for e in t.entries]
    assert len(check.items) == len(entries)
    scores = {(s.by, s.group): s for s in check_scores(check, n_resamples=200)}
    for (by, group), members in [(("all", "all"), entries),
                                 (("domain", "news"),
                                  [e for t in check_set() if t.domain == "news" for e in t.entries])]:
        s, want = scores[(by, group)], _expected(members, kind)
        assert (s.n, s.missing) == (want["n"], want["missing"])
        for name in ("accuracy", "sensitivity", "specificity", "quote_found"):
            assert getattr(s, name).value == pytest.approx(want[name]), (group, name)
        assert s.kappa == pytest.approx(want["kappa"])
        for name in ("accuracy", "sensitivity", "specificity"):
            iv = getattr(s, name)
            assert iv.low <= iv.value <= iv.high and iv.high - iv.low > 0, (group, name)
    # Per kind: the planted near-miss it falls for, the peripheral Yes it misses, and silence counted nowhere.
    assert scores[("kind", kind)].specificity.value == 0.0
    assert scores[("kind", "peripheral")].sensitivity.value == 0.0
    assert scores[("kind", "direct")].sensitivity.value == 1.0
    assert scores[("kind", "absent")].n == 0 and math.isnan(scores[("kind", "absent")].accuracy.value)
    assert math.isnan(scores[("kind", "direct")].kappa)  # one truth within a kind: kappa means nothing there
    assert [g for by, g in scores if by == "domain"] == ["news", "story", "blog"]
    assert all(scores[("kind", k)].specificity.value == 1.0 for k in NEGATIVE_KINDS
               if k not in (kind, "absent"))


async def test_a_second_run_makes_no_new_calls(store: Store) -> None:
    with FakeOpenAIServer(_judge("wrong_role", silent=False)) as server:
        await _run(store, server)
        first = server.calls
        assert first == len(check_set())  # one batched call per text
        await _run(store, server)
        assert server.calls == first
        await _run(store, server, quick=True)  # the quick subset is the same calls
        assert server.calls == first
    assert len(all_checks(store)[0].items) == len([e for t in check_set() for e in t.entries])


def test_the_command_runs_the_quick_check_and_says_it_is_not_gold(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "store.sqlite"
    open_store(path).close()
    with FakeOpenAIServer(_judge("changed_fact")) as server:
        config = tmp_path / "unspecific.toml"
        config.write_text(f'[endpoints.ja]\nbase_url = "{server.base_url}"\nmodel = '
                          '"judge-a"\nmax_retries = 0\n\n'
                          '[roles]\njudges = ["ja"]\n')
        argv = ["--store", str(path), "--config", str(config), "validate", "judges", "--quick"]
        assert main([*argv, "--json", "--resamples", "50"]) == 0
        quick = selected_texts(quick=True)
        # The first ask, the follow-up for the left-out items, and its repair round (it answers none).
        assert server.calls == 3 * len(quick)
        rows = {(r["by"], r["group"]): r for r in json.loads(capsys.readouterr().out)}
        entries = [e for t in quick for e in t.entries]
        assert rows[("all", "all")]["n"] == _expected(entries, "changed_fact")["n"]
        assert rows[("all", "all")]["specificity"] == pytest.approx(_expected(entries,
                                                                              "changed_fact")["specificity"])
        assert main(argv) == 0
        # Cached but the missing verdicts, asked again (a failure may have been transient), as judging does.
        assert server.calls == 5 * len(quick)
    out = capsys.readouterr().out
    assert "not human gold" in out and "specificity" in out


def test_an_unknown_judge_is_a_config_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "store.sqlite"
    open_store(path).close()
    config = tmp_path / "unspecific.toml"
    config.write_text('[roles]\njudges = ["nobody"]\n')
    assert main(["--store", str(path), "--config", str(config), "validate", "judges", "--builtin"]) == 2
    assert "nobody" in capsys.readouterr().err


def test_the_demo_ends_by_offering_the_quick_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from pipeline.cli import demo_cmd

    args = argparse.Namespace(store="d.sqlite", config="c.toml")
    assert demo_cmd.judge_check_argv(args) == ["--store", "d.sqlite", "--config", "c.toml",
                                               "validate", "judges",
                                               "--quick"]
    assert demo_cmd.offer_judge_check(args) is False  # no terminal: named, not run
    assert "unspecific --store d.sqlite --config c.toml validate judges --quick" in capsys.readouterr().out
    ran: list[list[str]] = []
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    monkeypatch.setattr("pipeline.cli.main", lambda argv: ran.append(argv) or 0)
    assert demo_cmd.offer_judge_check(args) is True and ran == [demo_cmd.judge_check_argv(args)]


async def test_a_full_check_drops_items_no_longer_in_the_set(store: Store) -> None:
    from pipeline.store.judge_checks import CheckItem, put_check_items

    put_check_items(store, "ja", SOURCE, [CheckItem("news", "news-99.1", 1, 0)])
    with FakeOpenAIServer(_judge("absent", silent=False)) as server:
        await _run(store, server, quick=True)
        assert "news-99.1" in {i.item_key for i in all_checks(store)[0].items}  # quick: its items only
        await _run(store, server)
    keys = {i.item_key for i in all_checks(store)[0].items}
    assert keys == {e.key for t in check_set() for e in t.entries}


def test_a_run_wide_judging_mode_that_overrides_a_judges_own_is_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A config from an older `unspecific init` sets [evaluate] judging = "batched": the check runs the
    judge in it, and says that it overrides the judge's own mode."""
    path = tmp_path / "store.sqlite"
    open_store(path).close()
    with FakeOpenAIServer(_judge("changed_fact", silent=False)) as server:
        config = tmp_path / "unspecific.toml"
        config.write_text(f'[endpoints.ja]\nbase_url = "{server.base_url}"\nmodel = '
                          '"judge-a"\nmax_retries = 0\n'
                          'judging = "yes_no"\n\n[roles]\njudges = '
                          '["ja"]\n\n[evaluate]\njudging = "batched"\n')
        assert main(["--store", str(path), "--config", str(config), "validate", "judges", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "ja (batched)" in out and "overrides the own mode of ja (yes_no)" in " ".join(out.split())
