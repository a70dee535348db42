"""The yes_no judging mode (issue 34): one token per constraint, the verdict read from P(Yes) against the
judge's calibrated threshold; log-probabilities through the call, the cache and the batch path; an endpoint
without them said once and read by its word; calibration on a check re-reading stored verdicts; a user's
own check file; where a Yes without a quote rests."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pipeline.analysis.calibration import Scored, auc, best_threshold, fit, held_out_accuracy
from pipeline.analysis.judge_check import OWN_SOURCE, CheckEntry, CheckFileError, CheckText, load_check_file
from pipeline.analysis.support import LOCATED, locate_support
from pipeline.cli import main
from pipeline.core.config import default_config, parse_config
from pipeline.core.definitions import uncertain
from pipeline.core.errors import ConfigError
from pipeline.llm.client import LLMClient
from pipeline.llm.placeholders import yes_no_constraint, yes_no_text
from pipeline.stages.judge_check import run_judge_check
from pipeline.stages.judging import endpoint_prompt_hash, judge_generation, yes_probability
from pipeline.store.database import Store, open_store
from pipeline.store.judge_checks import all_checks, calibrations, judge_threshold
from tests.fakes.fake_server import FakeOpenAIServer, Reply, last_user_message
from tests.fakes.responders import store_response

TEXT = ("The town council met on Tuesday to argue over a budget shortfall. Residents crowded the hall. "
        "The treasurer warned that reserves would run out by spring.")
# Constraint -> the P(Yes) the scripted judge gives it.
P_YES = {"Describe a public meeting about money.": 0.9,
         "Include the treasurer's warning about reserves.": 0.62,
         "Mention a dragon.": 0.05}


def yes_no_reply(p_yes: float) -> Reply:
    """One token with its top alternatives, as llama.cpp's server sends them: spellings of Yes and No."""
    p = min(max(p_yes, 1e-4), 1 - 1e-4)
    tops = {"Yes": math.log(0.9 * p), " Yes": math.log(0.1 * p), "No": math.log(0.95 * (1 - p)),
            "no": math.log(0.05 * (1 - p))}
    return Reply(text="Yes" if p >= 0.5 else "No", logprobs=[tops])


def _responder(table: dict[str, float], *, logprobs: bool = True) -> Any:
    def respond(request: dict[str, Any]) -> Reply:
        constraint = yes_no_constraint(last_user_message(request))
        p = table.get(constraint or "", 0.9)  # the start's probe asks no constraint
        return yes_no_reply(p) if logprobs else Reply(text="Yes." if p >= 0.5 else "No")
    return respond


def _config(server: FakeOpenAIServer, **judge: Any) -> Any:
    spec = {"base_url": server.base_url, "model": "judge-a", "concurrency": 2, "max_retries": 0,
            "judging": "yes_no",
            **judge}
    return parse_config({"endpoints": {"ja": spec}, "roles": {"judges": ["ja"]}})


def _generation(store: Store, constraints: list[str]) -> tuple[int, list[tuple[int, str]]]:
    return store_response(store, TEXT, constraints)


def test_p_yes_reads_every_spelling_of_yes_and_no() -> None:
    assert yes_probability({"Yes": math.log(0.3), " yes": math.log(0.1), "No": math.log(0.2),
                            "NO": math.log(0.2),
                            "The": math.log(0.2)}) == pytest.approx(0.4 / 0.8)
    assert yes_probability({"The": -0.1, "A": -3.0}) is None


async def test_one_token_per_constraint_with_p_yes_stored_and_a_located_sentence(store: Store) -> None:
    events: list[tuple[str, str]] = []
    with FakeOpenAIServer(_responder(P_YES)) as server:
        client = LLMClient(_config(server), store, on_event=lambda k, m: events.append((k, m)))
        gid, constraints = _generation(store, list(P_YES))
        result = await judge_generation(store, client, "ja", gid, constraints)  # the judge's own mode: yes_no
        assert server.calls == 3 and result.judged == 3 and result.unanswered == 0
        for request in server.requests:
            assert request["max_tokens"] == 1 and request["logprobs"] is True and request["top_logprobs"] >= 5
            prompt = last_user_message(request)
            # The text first, the constraint last: one text's calls share the prefix up to the constraint.
            assert yes_no_text(prompt) == TEXT and prompt.rstrip().endswith(yes_no_constraint(prompt) or "?")
        again = await judge_generation(store, client, "ja", gid, constraints)
        assert server.calls == 3 and again.skipped == 3
        await client.aclose()
    assert not [e for e in events if e[0] == "notice"]
    rows = store.query("SELECT * FROM verdicts WHERE generation_id = ? ORDER BY constraint_id", [gid])
    assert [r["judging_mode"] for r in rows] == ["yes_no"] * 3
    assert [r["p_yes"] for r in rows] == pytest.approx([0.9, 0.62, 0.05], abs=1e-3)
    assert [r["verdict"] for r in rows] == [1, 1,
                                            0]  # read at the default threshold, 0.5, before a calibration
    # where the Yes rests, located
    assert rows[1]["quote_found"] == LOCATED and "treasurer" in rows[1]["quote"]
    assert rows[0]["prompt_hash"] == endpoint_prompt_hash(default_config().endpoint("local"), "yes_no")
    # The cache keeps each reply's log-probabilities: cleared verdicts are judged again from the cache, free.
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE logprobs IS NOT NULL") == 3


async def test_verdicts_judged_again_from_the_cache_keep_their_p_yes(store: Store) -> None:
    with FakeOpenAIServer(_responder(P_YES)) as server:
        client = LLMClient(_config(server), store)
        gid, constraints = _generation(store, list(P_YES))
        await judge_generation(store, client, "ja", gid, constraints)
        store.conn.execute("DELETE FROM verdicts")
        store.commit()
        await judge_generation(store, client, "ja", gid, constraints)
        await client.aclose()
        assert server.calls == 3
    assert [r["p_yes"] for r in store.query("SELECT p_yes FROM verdicts ORDER BY constraint_id")] == \
        pytest.approx([0.9, 0.62, 0.05], abs=1e-3)


async def test_an_endpoint_without_log_probabilities_is_said_once_and_its_word_read(store: Store) -> None:
    events: list[tuple[str, str]] = []
    with FakeOpenAIServer(_responder(P_YES, logprobs=False)) as server:
        client = LLMClient(_config(server), store, on_event=lambda k, m: events.append((k, m)))
        assert await client.check_logprobs("ja") is False  # what a run asks first
        gid, constraints = _generation(store, list(P_YES))
        await judge_generation(store, client, "ja", gid, constraints)
        await client.aclose()
        # the probe, then one word per constraint, asked without log-probabilities
        assert server.calls == 1 + 3
        assert all(not r.get("logprobs") for r in server.requests[1:])
    notices = [m for k, m in events if k == "notice"]
    assert len(notices) == 1 and "no log-probabilities" in notices[0] and "ja" in notices[0]
    rows = store.query("SELECT verdict, p_yes, reason FROM verdicts ORDER BY constraint_id")
    assert [r["verdict"] for r in rows] == [1, 1, 0] and all(r["p_yes"] is None for r in rows)


async def test_a_reply_with_neither_yes_nor_no_among_its_tokens_is_missing_never_no(store: Store) -> None:
    with FakeOpenAIServer(lambda request: Reply(text="The", logprobs=[{"The": -0.1, "A": -2.5}])) as server:
        client = LLMClient(_config(server), store)
        gid, constraints = _generation(store, list(P_YES))
        result = await judge_generation(store, client, "ja", gid, constraints)
        await client.aclose()
    assert result.unanswered == 3
    assert [r["verdict"] for r in store.query("SELECT verdict FROM verdicts")] == [None, None, None]


# -- calibration -----------------------------------------------------------------------------------


def test_the_threshold_maximises_sensitivity_plus_specificity_midway() -> None:
    items = [Scored(0.9, True, "a"), Scored(0.8, True, "a"), Scored(0.7, False, "b"), Scored(0.6, False, "b"),
             Scored(0.75, True, "c"), Scored(0.4, False, "c")]
    assert best_threshold(items) == pytest.approx(0.725)
    assert auc(items) == 1.0
    assert auc([Scored(0.5, True, "a"), Scored(0.5, False, "a")]) == 0.5  # a tie counts half
    assert auc([Scored(0.5, True, "a")]) is None
    result = fit(items)
    assert (result.sensitivity, result.specificity, result.n) == (1.0, 1.0, 6)
    assert held_out_accuracy(items) is not None and held_out_accuracy(items[:2]) is None
    assert best_threshold([Scored(0.9, True, "a"),
                           Scored(0.2, True, "b")]) == 0.5  # one class: nothing to choose


def test_an_uncertain_verdict_is_near_its_threshold_in_log_odds() -> None:
    assert uncertain(0.55, 0.5) and not uncertain(0.95, 0.5) and not uncertain(0.05, 0.5)
    assert uncertain(0.85, 0.9) and not uncertain(0.5, 0.9) and not uncertain(None, 0.5)


def _own_set() -> tuple[CheckText, ...]:
    """Two texts, items whose truth the scripted judge reads at P(Yes) 0.8 (true) or 0.65 (false)."""
    texts = []
    for k in (1, 2):
        entries = tuple(CheckEntry(f"t{k}.{i}",
                                   f"Constraint {k}.{i} ({'TRUE' if i % 2 else 'FALSE'}).", bool(i % 2),
                                   "direct" if i % 2 else "absent") for i in range(1, 7))
        texts.append(CheckText(f"t{k}", "own", TEXT, False, entries))
    return tuple(texts)


def _truthful(request: dict[str, Any]) -> Reply:
    constraint = yes_no_constraint(last_user_message(request)) or ""
    return yes_no_reply(P_YES.get(constraint, 0.8 if "TRUE" in constraint else 0.65))


async def test_a_check_calibrates_the_judge_and_rereads_its_stored_verdicts(store: Store) -> None:
    constraints = ["Constraint 9.1 (TRUE).", "Constraint 9.2 (FALSE)."]
    with FakeOpenAIServer(_truthful) as server:
        client = LLMClient(_config(server), store)
        gid, pairs = _generation(store, constraints)
        await judge_generation(store, client, "ja", gid, pairs)
        assert [r["verdict"]
                for r in store.query("SELECT verdict FROM verdicts ORDER BY constraint_id")] == [1, 1]
        ran = await run_judge_check(store, client, ["ja"], texts=_own_set(), source=OWN_SOURCE)
        await client.aclose()
    cal = calibrations(store)[("ja", "yes_no")]
    assert cal.threshold == pytest.approx(0.725, abs=1e-3) and cal.source == OWN_SOURCE and cal.n == 12
    assert cal.auc == 1.0 and cal.held_out_accuracy == 1.0
    assert judge_threshold(store, "ja", "yes_no") == cal.threshold and judge_threshold(store, "ja",
                                                                                       "batched") == 0.5
    assert ran.modes == {"ja": "yes_no"} and ran.rethresholded == {"ja": 1}
    # The stored benchmark verdict at P(Yes) 0.65 now reads No; nothing was asked again.
    assert [r["verdict"]
            for r in store.query("SELECT verdict FROM verdicts ORDER BY constraint_id")] == [1, 0]
    (check,) = [c for c in all_checks(store) if c.source == OWN_SOURCE]
    assert all(i.verdict == i.truth and i.p_yes is not None for i in check.items)


# -- a user's own check file -------------------------------------------------------------------------


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n",
                    encoding="utf-8")
    return path


GOOD = {"id": "mine-1", "text": TEXT, "items": [
    {"constraint": "Describe a public meeting about money.", "truth": True, "kind": "direct"},
    {"id": "b", "constraint": "Mention a dragon.", "truth": False, "kind": "absent"}]}


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "line 2: not JSON"),
    ({"id": "x", "items": GOOD["items"]}, "line 2: text must be a non-empty string"),
    ({"id": "x", "text": "t", "items": [{"constraint": "c", "truth": "yes"}]},
     "line 2: item 1: truth must be true or false"),
    ({"id": "x", "text": "t", "items": [{"truth": True}]},
     "line 2: item 1: constraint must be a non-empty string"),
    ({"id": "a.b", "text": "t", "items": GOOD["items"]}, "line 2: id must be a text's name without dots"),
    (GOOD, "line 2: text id 'mine-1' is used twice"),
])
def test_a_bad_check_file_names_its_line(tmp_path: Path, line: Any, message: str) -> None:
    path = _write(tmp_path / "mine.jsonl", [GOOD, line])
    with pytest.raises(CheckFileError, match=message.replace("(", r"\(")):
        load_check_file(str(path))


def test_a_check_file_reads_into_texts_with_keys_and_kinds(tmp_path: Path) -> None:
    (text,) = load_check_file(str(_write(tmp_path / "mine.jsonl", [GOOD, ""])))
    assert (text.key, text.domain) == ("mine-1", "own")
    assert [(e.key, e.truth, e.kind) for e in text.entries] == [("mine-1.1", True, "direct"),
                                                                ("mine-1.b", False, "absent")]
    with pytest.raises(CheckFileError, match="no such file"):
        load_check_file(str(tmp_path / "none.jsonl"))


def test_validate_judges_items_scores_every_judge_and_prints_json(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "store.sqlite"
    open_store(path).close()
    items = _write(tmp_path / "mine.jsonl", [{"id": t.key, "text": t.text, "items": [
        {"id": e.key.split(".")[1], "constraint": e.constraint, "truth": e.truth, "kind": e.kind}
        for e in t.entries]}
        for t in _own_set()])
    with FakeOpenAIServer(_truthful) as server:
        config = tmp_path / "unspecific.toml"
        config.write_text(f'[endpoints.ja]\nbase_url = "{server.base_url}"\nmodel = '
                          '"judge-a"\nmax_retries = 0\n'
                          'judging = "yes_no"\n\n[roles]\njudges = ["ja"]\n')
        argv = ["--store", str(path), "--config", str(config), "validate", "judges", "--items", str(items)]
        assert main([*argv, "--json", "--resamples", "50"]) == 0
    rows = {(r["by"], r["group"]): r for r in json.loads(capsys.readouterr().out)}
    top = rows[("all", "all")]
    assert (top["judge"], top["judging"], top["n"]) == ("ja", "yes_no", 12)
    assert (top["accuracy"] == 1.0 and top["sensitivity"] == 1.0 and top["specificity"] == 1.0
            and top["kappa"] == 1.0)
    assert top["threshold"] == pytest.approx(0.725,
                                             abs=1e-3) and top["quote_found"] is None  # located, not quoted
    assert {g for by, g in rows if by == "kind"} == {"direct", "absent"}
    bad = _write(tmp_path / "bad.jsonl", [GOOD, {"id": "z", "text": "t", "items": []}])
    assert main(["--store", str(path), "--config", str(config), "validate", "judges",
                 "--items", str(bad)]) == 2
    assert f"{bad}, line 2: items must be a non-empty list" in capsys.readouterr().err


# -- where a Yes rests, the config, the batch path -------------------------------------------------


def test_the_supporting_sentence_is_the_one_sharing_the_rarest_words() -> None:
    found = locate_support(TEXT, "Include the view of a financial officer such as the treasurer.")
    # Lexical: a paraphrase with no word in common finds nothing (it is marked located, never quoted).
    assert found is not None and found.sentence.startswith("The treasurer warned")
    assert TEXT[found.span[0]:found.span[1]] == found.sentence and 0 < found.score <= 1
    assert locate_support(TEXT, "Mention a dragon.") is None


def test_the_embedded_model_judges_yes_no_and_a_config_says_how_each_judge_judges() -> None:
    assert default_config().endpoint("local").judging == "yes_no"
    config = parse_config({"endpoints": {"gpt": {"base_url": "https://api.example.invalid/v1", "model": "m"},
                                         "local_b": {"base_url": "local",
                                                     "judge_prompt": "judge_yes_no_evidence"}}})
    assert config.endpoint("gpt").judging == "batched"
    assert (config.endpoint("local_b").judging,
            config.endpoint("local_b").judge_prompt) == ("yes_no", "judge_yes_no_evidence")
    with pytest.raises(ConfigError, match=r"endpoints\.gpt\.judging: one of batched, per_constraint, yes_no"):
        parse_config({"endpoints": {"gpt": {"base_url": "https://x.invalid/v1", "model": "m",
                                            "judging": "vibes"}}})
    with pytest.raises(ConfigError, match="judge_prompt"):
        parse_config({"endpoints": {"gpt": {"base_url": "https://x.invalid/v1", "model": "m",
                                            "judge_prompt": "a/b.md"}}})


def test_a_batch_line_keeps_its_log_probabilities() -> None:
    from pipeline.llm.batch import _line_logprobs

    body = {"choices": [{"message": {"content": "Yes"}, "logprobs": {"content": [
        {"token": "Yes", "logprob": -0.1, "top_logprobs": [{"token": "Yes", "logprob": -0.1},
                                                          {"token": "No", "logprob": -2.4}]}]}}]}
    assert _line_logprobs({"response": {"status_code": 200, "body": body}}) == [{"Yes": -0.1, "No": -2.4}]
    assert _line_logprobs({"response": {"status_code": 200, "body": {"choices": [{"message": {}}]}}}) is None


def test_the_report_says_how_each_judge_judged() -> None:
    from pipeline.analysis.calibration import judging_notes
    from pipeline.store.judge_checks import Calibration

    cal = Calibration("local", "yes_no", "builtin", 0.584, "youden", 205, 0.897, 0.844)
    notes = judging_notes([("gpt", "batched"), ("local", "yes_no"), ("local_b", "yes_no")],
                          ["gpt", "local", "local_b"],
                          {("local", "yes_no"): cal})
    assert [n.mode for n in notes] == ["batched", "yes_no", "yes_no"]
    assert "batched" in notes[0].line()
    assert ("P(Yes) >= 0.584" in notes[1].line() and "builtin check" in notes[1].line()
            and "AUC 0.90" in notes[1].line())
    assert "uncalibrated" in notes[2].line() and "validate judges --builtin" in notes[2].line()


def test_the_dry_run_answers_a_yes_no_prompt_with_one_word() -> None:
    from pipeline.llm.placeholders import placeholder_reply, prompt_kind
    from pipeline.llm.prompts import defuse, load_template

    for name in ("judge_yes_no", "judge_yes_no_evidence"):
        template = load_template(name)
        easy = {"messages": template.render(text=defuse(TEXT),
                                            constraint="Discuss the mood from angle number 3 (easy).")}
        hard = {"messages": template.render(text=defuse(TEXT),
                                            constraint="Discuss the mood from angle number 4.")}
        assert prompt_kind(easy) == "judge_yes_no"
        assert yes_no_text(easy["messages"][-1]["content"]) == TEXT
        assert (placeholder_reply(easy, quote_cap=80), placeholder_reply(hard, quote_cap=80)) == ("Yes", "No")


# -- one text's constraints in one request (judge_batch; pipeline.llm.prompt_batch on the embedded server)


async def _verdicts(store: Store, tmp_path: Path, *, listed: bool,
                    lists_taken: bool = True) -> tuple[list, Any]:
    with FakeOpenAIServer(_responder(P_YES)) as server:
        server.prompt_lists = lists_taken
        events: list[tuple[str, str]] = []
        client = LLMClient(_config(server, judge_batch=listed), store,
                           on_event=lambda k, m: events.append((k, m)))
        gid, constraints = _generation(store, list(P_YES))
        result = await judge_generation(store, client, "ja", gid, constraints)
        again = await judge_generation(store, client, "ja", gid, constraints)
        await client.aclose()
        assert result.judged == 3 and again.skipped == 3  # every constraint judged exactly once
        rows = [(r["constraint_id"], r["verdict"], r["p_yes"], r["quote"]) for r in
                store.query("SELECT * FROM verdicts WHERE generation_id = ? ORDER BY constraint_id", [gid])]
        return rows, (list(server.requests), events)


async def test_a_texts_constraints_in_one_request_give_the_verdicts_of_one_call_each(tmp_path: Path) -> None:
    one = open_store(tmp_path / "one.sqlite")
    listed = open_store(tmp_path / "listed.sqlite")
    try:
        alone, (alone_requests, _) = await _verdicts(one, tmp_path, listed=False)
        together, (requests, _) = await _verdicts(listed, tmp_path, listed=True)
    finally:
        one.close()
        listed.close()
    assert together == alone and len(together) == 3
    assert len(alone_requests) == 3 and len(requests) == 1
    (request,) = requests
    assert request["max_tokens"] == 1 and request["logprobs"] == 20 and len(request["prompt"]) == 3
    # Each prompt is the chat's messages in ChatML, the text first and its constraint last.
    assert all(p.startswith("<|im_start|>system\n") and p.endswith("<|im_start|>assistant\n")
               for p in request["prompt"])
    users = [p.split("<|im_start|>user\n")[1].split("<|im_end|>")[0] for p in request["prompt"]]
    assert [yes_no_constraint(u) for u in users] == list(P_YES)


async def test_an_endpoint_refusing_lists_is_said_once_and_judged_one_call_a_constraint(
        tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.sqlite")
    try:
        rows, (requests, events) = await _verdicts(store, tmp_path, listed=True, lists_taken=False)
    finally:
        store.close()
    assert [r[1] for r in rows] == [1, 1, 0]
    assert isinstance(requests[0].get("prompt"), list) and all("messages" in r for r in requests[1:])
    assert len(requests) == 1 + 3  # the refused list, then one call a constraint
    assert [m for k, m in events if k == "notice" and "refused a list of prompts" in m]


def test_the_embedded_judge_sends_lists_and_a_config_can_turn_it_off() -> None:
    assert default_config().endpoint("local").judge_batch is True
    config = parse_config({"endpoints": {"local2": {"base_url": "local", "judge_batch": False}}})
    assert config.endpoint("local2").judge_batch is False
    with pytest.raises(ConfigError, match="judge_batch"):
        parse_config({"endpoints": {"x": {"base_url": "local", "judge_batch": "yes"}}})
