"""Judging against the fake server: reply parsing, follow-ups for missing lines, duplicates,
hallucinated quotes, per-constraint mode, two judges disagreeing, skip of stored verdicts."""

from __future__ import annotations

import json
import re

import pytest

from pipeline.core.config import parse_config
from pipeline.core.text import find_quote
from pipeline.llm.client import LLMClient
from pipeline.stages.judging import judge_generation, judge_text, parse_batched_reply, prompt_hash
from tests.fakes.fake_server import FakeOpenAIServer, Reply, last_user_message
from tests.fakes.responders import store_response

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
    endpoints = {name: {"base_url": server.base_url, "model": f"model-{name}", "concurrency": 4,
                        "max_retries": retries}
                 for name in judges}
    return parse_config({"endpoints": endpoints, "roles": {"judges": list(judges)}})


def _generation(store) -> tuple[int, list[tuple[int, str]]]:
    return store_response(store, TEXT, CONSTRAINTS)


def _verdicts(store, gid: int, judge: str = "ja") -> list[dict]:
    return store.query("SELECT * FROM verdicts WHERE generation_id = ? AND judge = ? ORDER BY constraint_id",
                       [gid, judge])


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
        assert (_n_in_prompt(server.requests[1]) == 1 and CONSTRAINTS[1] in follow_up
                and CONSTRAINTS[0] not in follow_up)
    assert result.judged == 3 and result.unanswered == 0
    rows = _verdicts(store, gid)
    assert [r["verdict"] for r in rows] == [1, 1, 1]
    # first line kept, not the duplicate
    assert rows[0]["quote_found"] == "exact" and "Tuesday" in rows[0]["quote"]
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
        {"id": 1, "verdict": "yes",
         "quote": "the town council met on tuesday to argue over a budget shortfal"},
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

    from pipeline.llm.prompts import prompts_dir

    with FakeOpenAIServer(lambda r: "\n".join(f"{i}. No - absent"
                                              for i in range(1, _n_in_prompt(r) + 1))) as server:
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
    from pipeline.core.errors import EndpointError

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
        config = parse_config({"endpoints": {"ja": {"base_url": server.base_url, "model": "m",
                                                    "max_retries": 0,
                                                    "judge_format": "lines"}}, "roles": {"judges": ["ja"]}})
        client = LLMClient(config, store)
        gid, constraints = _generation(store)
        result = await judge_generation(store, client, "ja", gid, constraints)
        again = await judge_generation(store, client, "ja", gid, constraints)  # stored: no call
        await client.aclose()
        assert server.calls == 1
        request = server.requests[0]
    assert "response_format" not in request and "grammar" not in request  # gbnf is off for this endpoint
    system = request["messages"][0]["content"]
    assert "one line per constraint" in system and "JSON" not in system
    assert result.judged == 3 and again.skipped == 3
    rows = _verdicts(store, gid)
    assert [r["verdict"] for r in rows] == [1, 1, 0]
    assert all(r["prompt_hash"] == prompt_hash("batched", "lines") != prompt_hash("batched") for r in rows)


def test_the_local_model_judges_in_lines_and_a_bad_format_is_refused():
    from pipeline.core.errors import ConfigError

    assert parse_config({}).endpoint("local").judge_format == "lines"
    with pytest.raises(ConfigError, match="judge_format: one of json, lines"):
        parse_config({"endpoints": {"x": {"base_url": "http://127.0.0.1:1/v1", "model": "m",
                                          "judge_format": "xml"}}})


# -- the lines grammar (an endpoint with gbnf: llama.cpp's server) ---------------------------------

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "[": "[", "]": "]", "-": "-", "^": "^"}


def _gbnf_char(body: str, i: int) -> tuple[str, int]:
    if body[i] != "\\":
        return body[i], i + 1
    if body[i + 1] not in _ESCAPES:
        raise AssertionError(f"unknown escape \\{body[i + 1]} at {i}")
    return _ESCAPES[body[i + 1]], i + 2


def gbnf_to_regex(grammar: str) -> str:
    """A tiny check of the GBNF subset lines_grammar writes (literals, char classes, rule names,
    alternatives, groups, *, +, ?, {m,n}): every literal and class closed, every rule referenced
    defined, no recursion; returns root as a Python regex, so replies can be matched against it."""
    rules: dict[str, str] = {}
    for line in grammar.splitlines():
        if line.strip():
            name, sep, body = line.partition(" ::= ")
            assert sep and re.fullmatch(r"[a-z][a-z0-9-]*", name), f"not a rule: {line!r}"
            assert name not in rules, f"rule {name} defined twice"
            rules[name] = body

    def convert(name: str, seen: tuple[str, ...]) -> str:
        assert name in rules, f"rule {name!r} is referenced but not defined"
        assert name not in seen, f"recursive rule {name}"
        body, out, i = rules[name], [], 0
        while i < len(body):
            ch = body[i]
            if ch.isspace():
                i += 1
            elif ch == '"':
                i, lit = i + 1, []
                while True:
                    assert i < len(body), f"unterminated literal in {name}"
                    if body[i] == '"':
                        break
                    c, i = _gbnf_char(body, i)
                    lit.append(c)
                out.append(re.escape("".join(lit)))
                i += 1
            elif ch == "[":
                i, parts = i + 1, []
                if body[i:i + 1] == "^":
                    parts.append("^")
                    i += 1
                while True:
                    assert i < len(body), f"unterminated character class in {name}"
                    if body[i] == "]":
                        break
                    c, i = _gbnf_char(body, i)
                    parts.append(re.escape(c))
                out.append("[" + "".join(parts) + "]")
                i += 1
            elif m := re.match(r"\{\d+(,\d*)?\}|[*+?|()]", body[i:]):
                out.append({"(": "(?:"}.get(m.group(), m.group()))
                i += len(m.group())
            elif m := re.match(r"[a-z][a-z0-9-]*", body[i:]):
                out.append("(?:" + convert(m.group(), (*seen, name)) + ")")
                i += len(m.group())
            else:
                raise AssertionError(f"unexpected {body[i:i + 10]!r} in rule {name}")
        pattern = "".join(out)
        re.compile(pattern)
        return pattern

    return convert("root", ())


def test_the_lines_grammar_for_three_constraints_is_exact_and_well_formed():
    from pipeline.stages.judging import QUOTE_CAP, lines_grammar

    grammar = lines_grammar(3)
    assert grammar == (
        'root ::= "1. " verdict "\\n" "2. " verdict "\\n" "3. " verdict "\\n"\n'
        'verdict ::= "Yes - \\"" [^"\\n]{1,80} "\\"" | "No"\n'
    )
    assert QUOTE_CAP == 80 and "{1,80}" in grammar
    root = re.compile(gbnf_to_regex(grammar))
    good = '1. Yes - "council met on Tuesday"\n2. No\n3. Yes - "Residents crowded the hall"\n'
    assert root.fullmatch(good)
    assert not root.fullmatch(good.rstrip("\n"))  # every line ends in a newline
    assert not root.fullmatch(good.replace("3. ", "4. "))  # numbered 1..n, nothing else
    assert not root.fullmatch(good.replace("council met on Tuesday", "x" * (QUOTE_CAP + 1)))
    assert root.fullmatch(good.replace("council met on Tuesday", "x" * QUOTE_CAP))
    assert not root.fullmatch(good.replace("2. No",
                                           "2. No - no officer named"))  # a No has no reason to write
    assert not root.fullmatch(good.replace('"council met on Tuesday"', '"a "quote" inside"'))
    assert not root.fullmatch(good + "Anything else.\n")
    # The checker catches what would crash the server: an undefined rule, an open literal.
    with pytest.raises(AssertionError, match="not defined"):
        gbnf_to_regex(grammar.replace("verdict ::=", "verdicts ::="))
    with pytest.raises(AssertionError, match="unterminated literal"):
        gbnf_to_regex(grammar.replace('"No"', '"No'))
    for n in (1, 2, 39, 120):
        body = "".join(f"{i}. No\n" for i in range(1, n + 1))
        assert re.fullmatch(gbnf_to_regex(lines_grammar(n)), body)
    # What the grammar lets through parses: a No without a reason is a No, not a missing verdict.
    items = parse_batched_reply(good, 3, quote_cap=QUOTE_CAP)
    assert items[2] == {"verdict": False, "quote": "", "reason": ""}
    assert [items[k]["verdict"] for k in (1, 2, 3)] == [True, False, True]
    with pytest.raises(ValueError):
        lines_grammar(0)


GLUED_TEXT = ("Residents said the closure of the old mill changed our daily habits, and its "
              "impact on the town was significant for years. Nobody mentioned a dragon.")
# What the model wrote under the 80-character cap (the case seen): the token " significant", leading
# space included, would pass the cap, so the word came out glued on.
GLUED = "the old mill changed our daily habits, and its impact on the town wassignificant"


def test_a_quote_stopped_at_the_cap_drops_its_glued_last_word_and_is_then_found_verbatim():
    from pipeline.stages.judging import QUOTE_CAP

    assert len(GLUED) == QUOTE_CAP
    reply = f'1. Yes - "{GLUED}"\n2. Yes - "Nobody mentioned a dragon"\n3. No - {"z" * 40}\n'
    assert find_quote(GLUED, GLUED_TEXT).found != "exact"  # as written, not a piece of the text
    items = parse_batched_reply(reply, 3, quote_cap=QUOTE_CAP)
    assert items[1]["quote"] == "the old mill changed our daily habits, and its impact on the town"
    assert find_quote(items[1]["quote"], GLUED_TEXT).found == "exact"
    assert items[2]["quote"] == "Nobody mentioned a dragon"  # under the cap: kept as it is
    assert items[3] == {"verdict": False, "quote": "", "reason": "z" * 40}
    # A word cut part-way at the cap goes the same way.
    cut = "Residents said the closure of the old mill changed our daily habits, and its imp"
    assert len(cut) == QUOTE_CAP
    assert parse_batched_reply(f'1. Yes - "{cut}"', 1, quote_cap=QUOTE_CAP)[1]["quote"] == cut[:-4]
    assert find_quote(cut[:-4], GLUED_TEXT).found == "exact"
    # Cut right after a whole word: nothing to drop. Without a grammar (no cap) nothing changes.
    whole = GLUED[:-4] + " " * 4
    assert parse_batched_reply(f'1. Yes - "{whole}"', 1, quote_cap=QUOTE_CAP)[1]["quote"] == whole.strip()
    assert parse_batched_reply(f'1. Yes - "{GLUED}"', 1)[1]["quote"] == GLUED
    one_word = "w" * QUOTE_CAP  # nothing to drop it back to: kept (and checked as any quote)
    assert parse_batched_reply(f'1. Yes - "{one_word}"', 1, quote_cap=QUOTE_CAP)[1]["quote"] == one_word


def _lines_config(server: FakeOpenAIServer, **judges: dict) -> object:
    endpoints = {name: {"base_url": server.base_url, "model": f"model-{name}", "max_retries": 0, **spec}
                 for name, spec in judges.items()}
    return parse_config({"endpoints": endpoints, "roles": {"judges": list(judges)}})


async def test_a_gbnf_lines_judge_sends_the_grammar_per_ask_and_stores_the_clean_quote(store):
    """On a gbnf endpoint in lines format each ask carries lines_grammar for its own constraints,
    numbered from 1 (the follow-up for a left-out constraint too); a quote stopped at the cap is
    stored without its glued word and found exactly."""
    from pipeline.stages.judging import QUOTE_CAP, lines_grammar

    with FakeOpenAIServer() as server:
        server.push(f'1. Yes - "{GLUED}"\n3. No - no dragon\n',  # line 2 left out
                    '1. No - no officer in it\n')  # the follow-up: constraint 2 alone
        client = LLMClient(_lines_config(server, ja={"judge_format": "lines", "gbnf": True}), store)
        judgements = await judge_text(client, "ja", GLUED_TEXT, CONSTRAINTS)
        await client.aclose()
        first, follow_up = server.requests
    assert first["grammar"] == lines_grammar(3) and follow_up["grammar"] == lines_grammar(1)
    assert _n_in_prompt(follow_up) == 1 and "response_format" not in first
    assert [j.verdict for j in judgements] == [True, False, False]
    assert len(GLUED) == QUOTE_CAP and judgements[0].quote == GLUED.rsplit(" ", 1)[0]
    assert judgements[0].quote_found == "exact"
    start, end = judgements[0].quote_span
    assert GLUED_TEXT[start:end] == judgements[0].quote


async def test_the_grammar_goes_only_to_a_gbnf_endpoint_judging_in_lines(store):
    """No grammar for a lines judge whose server does not take GBNF, nor for a JSON judge on one
    that does (it has its schema), nor for a per-constraint judge."""
    plain_lines = '1. Yes - "council met on Tuesday to argue"\n2. No - none\n3. No - none\n'
    as_json = json.dumps({"verdicts": [{"id": i, "verdict": "no", "reason": "none"} for i in (1, 2, 3)]})
    with FakeOpenAIServer() as server:
        server.push(plain_lines, as_json, *[json.dumps({"verdict": "no", "reason": "none"})] * 3)
        config = _lines_config(server, lines={"judge_format": "lines"},
                               js={"judge_format": "json", "gbnf": True})
        client = LLMClient(config, store)
        assert not config.endpoint("lines").gbnf
        await judge_text(client, "lines", TEXT, CONSTRAINTS)
        await judge_text(client, "js", TEXT, CONSTRAINTS)
        await judge_text(client, "js", TEXT, CONSTRAINTS, mode="per_constraint")
        await client.aclose()
        assert server.calls == 5
        assert not any("grammar" in r for r in server.requests)
        assert "response_format" in server.requests[1]


async def test_the_local_endpoint_judges_under_the_grammar(store):
    """The embedded model's defaults: lines, with the grammar (its llama.cpp server takes GBNF)."""
    from pipeline.stages.judging import lines_grammar

    local = parse_config({}).endpoint("local")
    assert (local.judge_format, local.gbnf) == ("lines", True)
    with FakeOpenAIServer() as server:
        server.push('1. Yes - "Residents crowded the hall"\n2. No - none\n3. No - none\n')
        client = LLMClient(parse_config({}), store, local_base_url=server.base_url)
        await judge_text(client, "local", TEXT, CONSTRAINTS)
        await client.aclose()
        assert server.requests[0]["grammar"] == lines_grammar(3)


async def test_the_scripted_model_answers_a_lines_judge_with_a_grammar_within_it(store):
    """The fake model answers judge_lines with a grammar field present, within the grammar (its
    sentence quotes cut at the cap, as the real model is): every line parses, every Yes quote is
    found exactly in the text."""
    from pipeline.stages.judging import lines_grammar
    from tests.fakes.responders import ScriptedModel

    text = ("The council met and argued about money. Then we come to angle number 1, where the "
            "long-running dispute over the "
            "harbour walls and the fishing quotas finally reached the council chamber. It "
            "ends on angle number 3.")
    constraints = ["Discuss the harbour from angle number 1.", "Discuss fees from angle number 2.",
                   "Discuss the quotas from angle number 3.", "Keep it short (easy)."]
    model = ScriptedModel()
    with FakeOpenAIServer(model) as server:
        client = LLMClient(_lines_config(server, ja={"judge_format": "lines", "gbnf": True}), store)
        judgements = await judge_text(client, "ja", text, constraints)
        await client.aclose()
        (request,) = server.requests
        assert request["grammar"] == lines_grammar(4)
        reply = model({**request})
    assert re.fullmatch(gbnf_to_regex(lines_grammar(4)), reply.text)
    assert [j.verdict for j in judgements] == [True, False, True, True]
    assert all(j.quote_found == "exact" for j in judgements if j.verdict)
    assert judgements[0].quote.startswith("Then we come to angle number 1") and len(judgements[0].quote) < 80


def test_the_grammar_bench_imports_shows_help_and_runs_against_a_fake_server(capsys, tmp_path, monkeypatch):
    """bench/judge_grammar.py (run by hand on the real model): --help starts nothing, and its path
    runs end to end against a fake llama.cpp-like server given with --base-url."""

    from bench import judge_grammar as bench
    from pipeline.stages.judging import QUOTE_CAP, lines_grammar
    with pytest.raises(SystemExit) as exc:
        bench.main(["--help"])
    assert exc.value.code == 0 and "--repeats" in capsys.readouterr().out
    assert 230 <= len(bench.RESPONSE.split()) <= 270 and len(bench.CONSTRAINTS) == 20
    sentence = bench.RESPONSE.split(". ")[2]  # longer than the cap

    def responder(request: dict) -> Reply:
        if request.get("max_tokens") == 1:
            return Reply(text="1")  # the warm-up
        n = len(CONSTRAINTS_IN(request))
        quote = sentence[:QUOTE_CAP] if "grammar" in request else sentence
        return Reply(text="".join(f'{i}. Yes - "{quote}"\n' if i % 2 else f"{i}. No - not there\n"
                                  for i in range(1, n + 1)))

    CONSTRAINTS_IN = lambda request: re.findall(  # noqa: E731
        r"^\d+\. ", last_user_message(request).split("<<<CONSTRAINTS")[1], re.M)
    with FakeOpenAIServer(responder) as server:
        out_json = tmp_path / "r.json"
        assert bench.main(["--base-url", server.base_url, "--constraints", "6", "--json", str(out_json)]) == 0
        judged = [r for r in server.requests if r.get("max_tokens") != 1]
        assert len(server.requests) == 4 and len(judged) == 2
        assert "grammar" not in judged[0] and judged[1]["grammar"] == lines_grammar(6)
    out = capsys.readouterr().out
    (result,) = json.loads(out_json.read_text())
    assert result["agreement"] == [6, 6] and result["free"]["yes"] == result["grammar"]["yes"] == 3
    # the cut word dropped
    assert result["free"]["quotes_exact"] == 3 and result["grammar"]["quotes_exact"] == 3
    assert result["grammar"]["quotes_at_cap"] == 3 and "agreement 6/6" in out
