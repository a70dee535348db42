"""Judging against the fake server: reply parsing, follow-ups for missing lines, duplicates,
hallucinated quotes, per-constraint mode, two judges disagreeing, skip of stored verdicts."""

from __future__ import annotations

import json
import re

import pytest

from pipeline.config import parse_config
from pipeline.testing.fake_server import FakeOpenAIServer, Reply, last_user_message
from pipeline.judging import find_quote, judge_generation, judge_text, parse_batched_reply, prompt_hash
from pipeline.llm import LLMClient
from pipeline.store import now

TEXT = (
    "The town council met on Tuesday to argue over a budget shortfall. Residents crowded the hall, "
    "and several of them spoke about the closing library. The treasurer warned that reserves would "
    "run out by spring unless the council raised fees or cut services."
)
CONSTRAINTS = [
    "Describe a public meeting about money.",
    "Include the view of a financial officer.",
    "Mention a dragon.",
]


def _config(server: FakeOpenAIServer, judges: tuple[str, ...] = ("ja",), retries: int = 0):
    endpoints = {name: {"base_url": server.base_url, "model": f"model-{name}", "concurrency": 4, "max_retries": retries}
                 for name in judges}
    return parse_config({"endpoints": endpoints, "roles": {"judges": list(judges)}})


def _generation(store) -> tuple[int, list[tuple[int, str]]]:
    store.db["instructions"].insert({"id": 1, "run_id": "b", "domain": "news", "condition": "eval", "main_task": "t",
                                     "n_constraints": 3, "status": "done", "created_at": now()})
    ids = []
    for pos, text in enumerate(CONSTRAINTS, 1):
        ids.append(store.db["constraints"].insert({"instruction_id": 1, "position": pos, "text": text,
                                                  "origin": "synthesized", "active": 1}).last_pk)
    gid = store.db["generations"].insert({"kind": "response", "instruction_id": 1, "model": "m", "mode": "direct",
                                          "text_hash": store.put_text(TEXT), "words": len(TEXT.split())}).last_pk
    store.commit()
    return gid, list(zip(ids, CONSTRAINTS, strict=True))


def _verdicts(store, gid: int, judge: str = "ja") -> list[dict]:
    return store.query("SELECT * FROM verdicts WHERE generation_id = ? AND judge = ? ORDER BY constraint_id", [gid, judge])


def _n_in_prompt(request: dict) -> int:
    block = last_user_message(request).split("<<<CONSTRAINTS", 1)[1].split("CONSTRAINTS>>>", 1)[0]
    return len(re.findall(r"^\d+\. ", block, re.MULTILINE))


async def test_missing_duplicate_and_hallucinated_lines(store):
    """Line 2 missing (asked again, answered), line 1 duplicated (first kept), a quote that is
    not in the text (flagged missing)."""
    with FakeOpenAIServer() as server:
        server.push(
            '1. Yes - "council met on Tuesday to argue over a budget shortfall"\n'
            "1. No - a second, contradicting line for the same constraint\n"
            '3. Yes - "a dragon circled the town hall at dusk"\n',
            '1. Yes - "The treasurer warned that reserves would run out"\n',  # the follow-up for constraint 2
        )
        client = LLMClient(_config(server), store)
        gid, constraints = _generation(store)
        result = await judge_generation(store, client, "ja", gid, constraints, mode="batched")
        await client.aclose()
        assert server.calls == 2
        follow_up = last_user_message(server.requests[1])
        assert _n_in_prompt(server.requests[1]) == 1 and CONSTRAINTS[1] in follow_up and CONSTRAINTS[0] not in follow_up
    assert result.judged == 3 and result.unanswered == 0
    rows = _verdicts(store, gid)
    assert [r["verdict"] for r in rows] == [1, 1, 1]
    assert rows[0]["quote_found"] == "exact" and "Tuesday" in rows[0]["quote"]  # first line kept, not the duplicate
    assert rows[1]["quote_found"] == "exact" and "treasurer" in rows[1]["quote"]
    assert rows[2]["quote_found"] == "missing" and rows[2]["quote_score"] < 90
    assert all(r["prompt_hash"] == prompt_hash("batched") and r["judging_mode"] == "batched" for r in rows)


async def test_still_missing_after_follow_up_is_missing_not_no(store):
    with FakeOpenAIServer() as server:
        server.push(
            '1. Yes - "Residents crowded the hall"\n3. No - no dragon anywhere\n',
            "I am not sure about that one.",  # follow-up: nothing usable
            "Still not sure.",  # the repair round: nothing usable either
        )
        client = LLMClient(_config(server), store)
        gid, constraints = _generation(store)
        result = await judge_generation(store, client, "ja", gid, constraints)
        await client.aclose()
        assert server.calls == 3
    assert result.unanswered == 1
    rows = _verdicts(store, gid)
    assert [r["verdict"] for r in rows] == [1, None, 0]  # the judge never answered 2: missing, not No
    assert rows[1]["reason"] == "no verdict from the judge" and rows[1]["quote"] is None
    assert rows[2]["reason"] == "no dragon anywhere"


async def test_json_reply_with_fuzzy_quote(store):
    reply = {"verdicts": [
        {"id": 1, "verdict": "yes", "quote": "the town council met on tuesday to argue over a budget shortfal"},
        {"id": 2, "verdict": "no", "reason": "no officer"},
        {"id": 3, "verdict": "no", "reason": "no dragon"},
    ]}
    with FakeOpenAIServer() as server:
        server.push(json.dumps(reply))
        client = LLMClient(_config(server), store)
        judgements = await judge_text(client, "ja", TEXT, CONSTRAINTS)
        await client.aclose()
    assert [j.verdict for j in judgements] == [True, False, False]
    assert judgements[0].quote_found in ("exact", "fuzzy") and judgements[0].quote_span is not None
    start, end = judgements[0].quote_span
    assert TEXT[start:end].lower().startswith("the town council")


def test_find_quote_kinds():
    assert find_quote('"Residents crowded the hall."', TEXT).found == "exact"
    assert find_quote("Residents crowdd the hall, and several of them spoke", TEXT).found == "fuzzy"
    assert find_quote("the mayor resigned in disgrace after the vote", TEXT).found == "missing"
    assert find_quote("", TEXT).found is None


def test_parse_batched_reply_drops_out_of_range_ids():
    items = parse_batched_reply("1. No - x\n7. Yes - \"y\"\n**2.** Yes - \"z z z\"", 3)
    assert sorted(items) == [1, 2] and items[2]["quote"] == "z z z"


async def test_per_constraint_mode_one_call_each(store):
    def responder(request: dict) -> str:
        constraint = last_user_message(request).split("<<<CONSTRAINT", 1)[1]
        if "dragon" in constraint:
            return json.dumps({"verdict": "yes", "quote": "a dragon slept under the bridge", "reason": ""})
        return json.dumps({"verdict": "yes", "quote": "Residents crowded the hall", "reason": ""})

    with FakeOpenAIServer(responder) as server:
        client = LLMClient(_config(server), store)
        gid, constraints = _generation(store)
        await judge_generation(store, client, "ja", gid, constraints, mode="per_constraint")
        assert server.calls == 3
        # Same judge, mode and prompt: nothing left to judge, no call.
        again = await judge_generation(store, client, "ja", gid, constraints, mode="per_constraint")
        await client.aclose()
        assert server.calls == 3 and again.skipped == 3 and again.judged == 0
    rows = _verdicts(store, gid)
    assert [r["judging_mode"] for r in rows] == ["per_constraint"] * 3
    assert [r["quote_found"] for r in rows] == ["exact", "exact", "missing"]
    assert all(r["prompt_hash"] == prompt_hash("per_constraint") for r in rows)


async def test_two_judges_disagreeing_are_both_stored(store):
    def responder(request: dict) -> str:
        n = _n_in_prompt(request)
        if request["model"] == "model-ja":
            return "\n".join(f'{i}. Yes - "Residents crowded the hall"' for i in range(1, n + 1))
        return "\n".join(f"{i}. No - not clearly there" for i in range(1, n + 1))

    with FakeOpenAIServer(responder) as server:
        client = LLMClient(_config(server, ("ja", "jb")), store)
        gid, constraints = _generation(store)
        for judge in ("ja", "jb"):
            await judge_generation(store, client, judge, gid, constraints)
        await client.aclose()
        assert server.calls == 2
    assert [r["verdict"] for r in _verdicts(store, gid, "ja")] == [1, 1, 1]
    assert [r["verdict"] for r in _verdicts(store, gid, "jb")] == [0, 0, 0]
    assert store.scalar("SELECT count(*) FROM verdicts WHERE generation_id = ?", [gid]) == 6


async def test_changed_prompt_rejudges(store, tmp_path, monkeypatch):
    """A new judge prompt (a new hash) judges anew; the old verdicts stay."""
    import shutil

    from pipeline.prompts import prompts_dir

    with FakeOpenAIServer(lambda r: "\n".join(f"{i}. No - absent" for i in range(1, _n_in_prompt(r) + 1))) as server:
        client = LLMClient(_config(server), store)
        gid, constraints = _generation(store)
        await judge_generation(store, client, "ja", gid, constraints)
        copy = tmp_path / "prompts"
        shutil.copytree(prompts_dir(), copy)
        (copy / "judge_batched.md").write_text((copy / "judge_batched.md").read_text() + "\nBe strict.\n")
        monkeypatch.setenv("UNSPECIFIC_PROMPTS", str(copy))
        await judge_generation(store, client, "ja", gid, constraints)
        await client.aclose()
        assert server.calls == 2
    hashes = {r[0] for r in store.conn.execute("SELECT prompt_hash FROM verdicts")}
    assert len(hashes) == 2


@pytest.mark.parametrize("reply", [Reply(text=""), "no verdicts here at all"])
async def test_unusable_reply_records_missing_not_no_nor_crash(store, reply):
    with FakeOpenAIServer() as server:
        server.push(reply, "nothing", "nothing", "nothing", "nothing", "nothing")
        # An empty reply is an endpoint fault: retried (once here), then the text replies refuse.
        client = LLMClient(_config(server, retries=1), store, backoff_base_s=0.01)
        gid, constraints = _generation(store)
        result = await judge_generation(store, client, "ja", gid, constraints)
        await client.aclose()
    assert result.judged == 3 and result.unanswered == 3 and result.all_missing
    assert [r["verdict"] for r in _verdicts(store, gid)] == [None, None, None]
    # The raw reply is kept for the message that stops such a judge.
    assert result.unusable_reply == "nothing"


def test_parse_bold_verdict_lines():
    """Small models bold the verdict: '1. **Yes** - "quote"' keeps the quote clean."""
    items = parse_batched_reply('1. **Yes** - "Residents crowded the hall"\n2. **No**: absent', 2)
    assert items[1]["quote"] == "Residents crowded the hall" and items[2]["reason"] == "absent"


async def test_per_constraint_failure_keeps_the_other_calls_cached(store):
    from pipeline.errors import EndpointError

    def responder(request: dict):
        if "financial officer" in last_user_message(request) and not getattr(responder, "healed", False):
            return Reply.error(500, "down")
        return json.dumps({"verdict": "no", "quote": "", "reason": "absent"})

    with FakeOpenAIServer(responder) as server:
        client = LLMClient(_config(server), store)
        gid, constraints = _generation(store)
        with pytest.raises(EndpointError):
            await judge_generation(store, client, "ja", gid, constraints, mode="per_constraint")
        assert server.calls == 3 and not _verdicts(store, gid)
        responder.healed = True
        await judge_generation(store, client, "ja", gid, constraints, mode="per_constraint")
        await client.aclose()
        assert server.calls == 4  # the two answered calls came from the cache
    assert [r["verdict"] for r in _verdicts(store, gid)] == [0, 0, 0]


async def test_a_lines_judge_asks_for_lines_without_a_grammar_and_keeps_its_own_prompt_hash(store):
    """judge_format = "lines" (the local model's default): the research code's line format, free
    text, and verdicts stored under that prompt's hash, so a JSON judge's verdicts are not reused."""
    with FakeOpenAIServer() as server:
        server.push('1. Yes - "council met on Tuesday to argue over a budget shortfall"\n'
                    '2. Yes - "The treasurer warned that reserves would run out"\n3. No - no dragon\n')
        config = parse_config({"endpoints": {"ja": {"base_url": server.base_url, "model": "m", "max_retries": 0,
                                                    "judge_format": "lines"}}, "roles": {"judges": ["ja"]}})
        client = LLMClient(config, store)
        gid, constraints = _generation(store)
        result = await judge_generation(store, client, "ja", gid, constraints)
        again = await judge_generation(store, client, "ja", gid, constraints)  # stored: no call
        await client.aclose()
        assert server.calls == 1
        request = server.requests[0]
    assert "response_format" not in request
    system = request["messages"][0]["content"]
    assert "one line per constraint" in system and "JSON" not in system
    assert result.judged == 3 and again.skipped == 3
    rows = _verdicts(store, gid)
    assert [r["verdict"] for r in rows] == [1, 1, 0]
    assert all(r["prompt_hash"] == prompt_hash("batched", "lines") != prompt_hash("batched") for r in rows)


def test_the_local_model_judges_in_lines_and_a_bad_format_is_refused():
    from pipeline.errors import ConfigError

    assert parse_config({}).endpoint("local").judge_format == "lines"
    with pytest.raises(ConfigError, match="judge_format: one of json, lines"):
        parse_config({"endpoints": {"x": {"base_url": "http://127.0.0.1:1/v1", "model": "m", "judge_format": "xml"}}})
