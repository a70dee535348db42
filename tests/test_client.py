"""The LLM client against the scripted fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

from pipeline.core.config import parse_config
from pipeline.core.errors import EndpointError, ParseError
from pipeline.llm.client import LLMClient, Params, cache_key, parse_json_lenient
from tests.fakes.fake_server import FakeOpenAIServer, Reply, last_user_message

SECRET = "sk-test-SECRET-value-1234567890"


def make_config(base_url: str, **endpoint: Any):
    spec = {"base_url": base_url, "model": "fake-model", "concurrency": 4, "max_retries": 3,
            "timeout_s": 10.0}
    spec.update(endpoint)
    return parse_config({"endpoints": {"fake": spec}, "roles": {"generator": "fake"}})


def make_client(config, store, **kw: Any) -> LLMClient:
    kw.setdefault("backoff_base_s", 0.01)
    kw.setdefault("backoff_cap_s", 0.05)
    return LLMClient(config, store, **kw)


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def cached_rows(store) -> int:
    return store.scalar("SELECT count(*) FROM llm_calls")


def expected_tokens(messages: list[dict[str, str]], reply: str) -> tuple[int, int]:
    """What the fake server reports: about four characters a token."""
    chars = sum(len(m["content"]) for m in messages)
    return max(1, chars // 4), max(1, len(reply) // 4)


# -- cache ---------------------------------------------------------------------------------


async def test_second_identical_call_is_a_cache_hit(fake_server, store):
    client = make_client(make_config(fake_server.base_url), store)
    text1, c1 = await client.chat("fake", user("hello there"))
    text2, c2 = await client.chat("fake", user("hello there"))
    await client.aclose()
    assert fake_server.calls == 1
    assert text1 == text2 == "echo: hello there"
    assert (c1.cached, c2.cached) == (False, True)
    assert c2.call_id == c1.call_id
    assert client.usage.calls == 1 and client.usage.cache_hits == 1
    assert cached_rows(store) == 1


async def test_cache_key_covers_model_params_and_template(fake_server, store):
    config = make_config(fake_server.base_url)
    client = make_client(config, store)
    await client.chat("fake", user("same"))
    await client.chat("fake", user("same"), params=Params(temperature=0.7))
    await client.chat("fake", user("same"), params=Params(max_tokens=12))
    await client.aclose()
    assert fake_server.calls == 3
    ep = config.endpoint("fake")
    assert cache_key(ep, user("x"), {}, "a") != cache_key(ep, user("x"), {}, "b")
    other_model = make_config(fake_server.base_url, model="other").endpoint("fake")
    assert cache_key(ep, user("x"), {}, "") != cache_key(other_model, user("x"), {}, "")


async def test_a_grammar_is_a_top_level_body_field_and_part_of_the_cache_key(fake_server, store):
    """Params.grammar reaches the server as the body's own `grammar` field (llama.cpp's server
    reads it there), and a call with a grammar is not the same call as one without."""
    config = make_config(fake_server.base_url, gbnf=True)
    client = make_client(config, store)
    grammar = 'root ::= "yes" | "no"\n'
    await client.chat("fake", user("same"), params=Params(max_tokens=5))
    await client.chat("fake", user("same"), params=Params(max_tokens=5, grammar=grammar))
    await client.chat("fake", user("same"), params=Params(max_tokens=5, grammar=grammar))  # cached
    await client.chat("fake", user("same"), params=Params(max_tokens=5, grammar=grammar + "\n"))
    await client.aclose()
    assert fake_server.calls == 3 and client.usage.cache_hits == 1
    plain, with_grammar, other = fake_server.requests
    assert ("grammar" not in plain and with_grammar["grammar"] == grammar
            and other["grammar"] == grammar + "\n")
    assert with_grammar["max_tokens"] == 5 and with_grammar["model"] == "fake-model"
    assert Params(grammar=grammar).as_dict() == {"temperature": 0.0, "grammar": grammar}
    ep = config.endpoint("fake")
    assert cache_key(ep, user("x"), Params().as_dict(),
                     "") != cache_key(ep, user("x"), Params(grammar=grammar).as_dict(), "")
    stored = [json.loads(r[0])["params"]
              for r in store.conn.execute("SELECT request FROM llm_calls ORDER BY id")]
    assert [p.get("grammar") for p in stored] == [None, grammar, grammar + "\n"]


async def test_cache_survives_a_new_client(fake_server, store):
    config = make_config(fake_server.base_url)
    first = make_client(config, store)
    await first.chat("fake", user("persist me"))
    await first.aclose()
    second = make_client(config, store)
    _, c = await second.chat("fake", user("persist me"))
    await second.aclose()
    assert c.cached and fake_server.calls == 1


async def test_errors_are_not_cached(fake_server, store):
    client = make_client(make_config(fake_server.base_url, max_retries=1), store)
    fake_server.push(Reply.error(500), Reply.error(500))
    with pytest.raises(EndpointError, match="gave up after 2 attempt"):
        await client.chat("fake", user("fails"))
    assert cached_rows(store) == 0
    text, c = await client.chat("fake", user("fails"))  # asked again, not served from a cache
    await client.aclose()
    assert not c.cached and text == "echo: fails"
    assert fake_server.calls == 3
    assert client.usage.failures == 1


async def test_empty_replies_are_retried_and_never_cached(fake_server, store):
    client = make_client(make_config(fake_server.base_url, max_retries=2), store)
    fake_server.push(Reply(text=""), Reply(text="   "), Reply(text=""))
    with pytest.raises(EndpointError, match="empty reply"):
        await client.chat("fake", user("say something"))
    assert fake_server.calls == 3
    assert cached_rows(store) == 0
    fake_server.push(Reply(text=""), "something")
    text, _ = await client.chat("fake", user("say something"))
    await client.aclose()
    assert text == "something"
    assert cached_rows(store) == 1


async def test_rejected_replies_are_not_cached(fake_server, store):
    client = make_client(make_config(fake_server.base_url), store)

    def accept(text: str) -> int:
        return int(text)  # ValueError on prose

    fake_server.push("not a number")
    with pytest.raises(ValueError):
        await client.chat("fake", user("a number please"), accept=accept)
    assert cached_rows(store) == 0 and client.usage.rejected == 1
    fake_server.push("42")
    value, _ = await client.chat("fake", user("a number please"), accept=accept)
    await client.aclose()
    assert value == 42 and cached_rows(store) == 1


# -- retries and hard stops -------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_retry_after_transient_error_succeeds(fake_server, store, status):
    client = make_client(make_config(fake_server.base_url), store)
    fake_server.push(Reply.error(status, retry_after=0.01 if status == 429 else None))
    text, c = await client.chat("fake", user("try again"))
    await client.aclose()
    assert text == "echo: try again"
    assert fake_server.calls == 2
    assert client.usage.retries == 1 and client.usage.calls == 1


async def test_retry_after_truncated_body(fake_server, store):
    client = make_client(make_config(fake_server.base_url), store)
    fake_server.push(Reply(body=b'{"id": "x", "choices": [{"message": {"content": "cut of'))
    text, _ = await client.chat("fake", user("whole please"))
    await client.aclose()
    assert text == "echo: whole please" and fake_server.calls == 2


async def test_retry_honours_retry_after(fake_server, store):
    client = make_client(make_config(fake_server.base_url), store, backoff_cap_s=1.0)
    fake_server.push(Reply.error(429, retry_after=0.4))
    t0 = time.monotonic()
    await client.chat("fake", user("patience"))
    await client.aclose()
    assert time.monotonic() - t0 >= 0.4


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_gives_up_immediately_on_auth_and_not_found(fake_server, store, status):
    client = make_client(make_config(fake_server.base_url, max_retries=5), store)
    fake_server.push(Reply.error(status, "no entry"))
    with pytest.raises(EndpointError, match=f"HTTP {status}, not retried"):
        await client.chat("fake", user("let me in"))
    await client.aclose()
    assert fake_server.calls == 1
    assert cached_rows(store) == 0


async def test_timeout_is_retried_then_reported(store):
    with FakeOpenAIServer(hang_s=3.0) as server:
        client = make_client(make_config(server.base_url, timeout_s=0.3, max_retries=1), store)
        server.push(Reply(hang=True), Reply(hang=True))
        t0 = time.monotonic()
        with pytest.raises(EndpointError) as err:
            await client.chat("fake", user("slow"))
        assert f"no reply from {server.base_url} within the timeout" in str(err.value)
        assert time.monotonic() - t0 < 2.5  # the client's timeout, not the server's hang
        assert server.calls == 2
        server.push(Reply(hang=True))
        text, _ = await client.chat("fake", user("slow"))
        await client.aclose()
        assert text == "echo: slow" and server.calls == 4
        assert cached_rows(store) == 1


async def test_a_refused_connection_says_refused_with_the_url(store):
    from tests.fakes.fake_server import dead_url

    url = dead_url()
    client = make_client(make_config(url, max_retries=2), store)
    with pytest.raises(EndpointError) as err:
        await client.chat("fake", user("anyone there?"))
    await client.aclose()
    message = str(err.value)
    assert f"connection refused at {url}" in message and "gave up after 3 attempt(s)" in message
    assert "timed out" not in message.lower() and "timeout" not in message.lower()
    assert cached_rows(store) == 0


# -- structured output -------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}


def validate_answer(value: Any) -> int:
    if not isinstance(value, dict) or not isinstance(value.get("answer"), int):
        raise ValueError("expected an object with an integer 'answer'")
    return value["answer"]


async def test_chat_json_sends_schema_and_parses(fake_server, store):
    client = make_client(make_config(fake_server.base_url), store)
    fake_server.push('```json\n{"answer": 7}\n```')
    value, c = await client.chat_json("fake", user("7?"), schema=SCHEMA, validate=validate_answer)
    await client.aclose()
    assert value == 7
    # llama.cpp's form, sent in the body: {"type": "json_object", "schema": ...}
    assert fake_server.requests[0]["response_format"] == {"type": "json_object", "schema": SCHEMA}


async def test_chat_json_openai_form(fake_server, store):
    client = make_client(make_config(fake_server.base_url, structured="json_schema"), store)
    fake_server.push('{"answer": 1}')
    await client.chat_json("fake", user("1?"), schema=SCHEMA, validate=validate_answer)
    await client.aclose()
    rf = fake_server.requests[0]["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["schema"] == SCHEMA


@pytest.mark.parametrize(("bad", "said"), [
    ("Sure! The answer is seven.", ("could not be used", '"answer"')),  # no JSON at all
    ('{"answer": "seven"}', ("integer 'answer'",)),  # JSON of the wrong shape
], ids=["malformed", "invalid shape"])
async def test_a_reply_that_breaks_the_json_contract_is_repaired(fake_server, store, bad, said):
    client = make_client(make_config(fake_server.base_url), store)
    fake_server.push(bad, '{"answer": 7}')
    value, _ = await client.chat_json("fake", user("7?"), schema=SCHEMA, validate=validate_answer)
    await client.aclose()
    assert value == 7
    assert fake_server.calls == 2
    repair = fake_server.requests[1]["messages"]
    assert repair[1] == {"role": "assistant", "content": bad}
    assert all(part in repair[-1]["content"] for part in said) and len(repair) == 3
    assert cached_rows(store) == 1  # only the accepted reply


async def test_unrepairable_json_is_reported(fake_server, store):
    client = make_client(make_config(fake_server.base_url), store)
    fake_server.push("no json here", "still none")
    with pytest.raises(ParseError, match="after 1 repair round"):
        await client.chat_json("fake", user("7?"), schema=SCHEMA, validate=validate_answer)
    await client.aclose()
    assert fake_server.calls == 2
    assert cached_rows(store) == 0
    assert client.usage.rejected == 2


def test_parse_json_lenient_handles_model_habits():
    assert parse_json_lenient('Here you go: {"a": 1} hope it helps') == {"a": 1}
    assert parse_json_lenient('{"a": "line one\nline two"}') == {"a": "line one\nline two"}
    assert parse_json_lenient('```\n[1, 2]\n```') == [1, 2]
    with pytest.raises(ValueError):
        parse_json_lenient("nothing at all")


# -- concurrency and accounting ------------------------------------------------------------------


async def test_per_endpoint_concurrency_is_respected(store):
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def responder(request: dict[str, Any]) -> str:
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.08)
        with lock:
            state["now"] -= 1
        return "done " + last_user_message(request)

    with FakeOpenAIServer(responder) as server:
        client = make_client(make_config(server.base_url, concurrency=3), store)
        results = await asyncio.gather(*(client.chat("fake", user(f"job {i}")) for i in range(12)))
        await client.aclose()
    assert [r[0] for r in results] == [f"done job {i}" for i in range(12)]
    assert state["max"] == 3


async def test_requests_per_minute_paces_calls(fake_server, store):
    client = make_client(make_config(fake_server.base_url, requests_per_minute=600), store)  # one per 0.1 s
    t0 = time.monotonic()
    await asyncio.gather(*(client.chat("fake", user(f"p{i}")) for i in range(4)))
    await client.aclose()
    assert time.monotonic() - t0 >= 0.3


async def test_tokens_and_cost_per_call_and_per_client(fake_server, store):
    config = make_config(fake_server.base_url, price_prompt_per_mtok=3.0, price_completion_per_mtok=15.0)
    client = make_client(config, store, run_id="run-1")
    totals = [0, 0, 0.0]
    for prompt in ("first prompt, a little longer than the second", "second"):
        messages = user(prompt)
        text, c = await client.chat("fake", messages)
        pt, ct = expected_tokens(messages, text)
        assert (c.prompt_tokens, c.completion_tokens) == (pt, ct)
        assert c.cost == pytest.approx((pt * 3.0 + ct * 15.0) / 1e6)
        row = store.one("SELECT prompt_tokens, completion_tokens, cost, run_id FROM llm_calls WHERE id = ?",
                        [c.call_id])
        assert row == {"prompt_tokens": pt, "completion_tokens": ct, "cost": pytest.approx(c.cost),
                       "run_id": "run-1"}
        totals[0] += pt
        totals[1] += ct
        totals[2] += c.cost
    _, hit = await client.chat("fake", user("second"))  # a cache hit costs nothing
    await client.aclose()
    assert hit.cached and hit.cost == 0.0
    u = client.usage
    assert (u.calls, u.cache_hits, u.prompt_tokens, u.completion_tokens) == (2, 1, totals[0], totals[1])
    assert u.cost == pytest.approx(totals[2])
    assert client.usage_by_endpoint["fake"].as_dict() == u.as_dict()


async def test_prompt_tokens_the_endpoint_cached_are_stored_and_priced_as_it_prices_them(fake_server, store):
    """usage.prompt_tokens_details.cached_tokens (OpenAI's, llama.cpp's): stored per call and priced at
    the endpoint's cached price; a reply that does not say stores NULL (missing, not 0) and pays the
    prompt price; 0 said is 0 stored."""
    config = make_config(fake_server.base_url, price_prompt_per_mtok=3.0, price_completion_per_mtok=15.0,
                         price_cached_prompt_per_mtok=0.3)
    client = make_client(config, store)
    prompt = "a prompt long enough to have a cached part " * 10
    fake_server.push(Reply(text="yes it is", cached_tokens=40), Reply(text="yes it is"),
                     Reply(text="yes it is", cached_tokens=0), Reply(text="yes it is", cached_tokens=10**6))
    said = []
    for n in range(4):
        messages = user(f"{prompt}{n}")
        text, c = await client.chat("fake", messages)
        pt, ct = expected_tokens(messages, text)
        said.append(c.cached_prompt_tokens)
        cached = c.cached_prompt_tokens or 0
        assert c.cost == pytest.approx(((pt - cached) * 3.0 + cached * 0.3 + ct * 15.0) / 1e6)
        stored = store.scalar("SELECT cached_prompt_tokens FROM llm_calls WHERE id = ?", [c.call_id])
        assert stored == c.cached_prompt_tokens
    assert said == [40, None, 0, pt]  # never more than the prompt
    _, hit = await client.chat("fake", user(f"{prompt}0"))
    assert hit.cached and hit.cached_prompt_tokens == 40
    await client.aclose()
    u = client.usage
    assert (u.cached_reported, u.cached_prompt_tokens) == (3, 40 + pt)

    # An endpoint with no cached price: a cached token costs the prompt price.
    plain = make_client(make_config(fake_server.base_url, price_prompt_per_mtok=3.0), store, use_cache=False)
    fake_server.push(Reply(text="yes", cached_tokens=40))
    messages = user(prompt)
    _, c = await plain.chat("fake", messages)
    await plain.aclose()
    assert c.cached_prompt_tokens == 40
    assert c.cost == pytest.approx(expected_tokens(messages, "yes")[0] * 3.0 / 1e6)


async def test_a_server_with_one_prompt_cache_reports_the_shared_start(store):
    """The fake's llama.cpp-like prompt cache: a second prompt sharing a long start with the first reports
    that start as cached; the first, and one sharing nothing, report 0 (said, not missing)."""
    with FakeOpenAIServer(prompt_cache=True) as server:
        client = make_client(make_config(server.base_url), store)
        start = "The same long instructions, word for word, in every call. " * 8
        _, first = await client.chat("fake", user(start + "Then the first text."))
        _, second = await client.chat("fake", user(start + "Then another text."))
        _, other = await client.chat("fake", user("Nothing in common."))
        await client.aclose()
    assert first.cached_prompt_tokens == 0 and other.cached_prompt_tokens == 0
    assert second.cached_prompt_tokens == len(start + "Then ") // 4


# -- secrets ----------------------------------------------------------------------------------


async def test_api_key_is_sent_but_never_stored(fake_server, store, store_path, monkeypatch):
    monkeypatch.setenv("FAKE_API_KEY", SECRET)
    config = make_config(fake_server.base_url, api_key_env="FAKE_API_KEY")
    client = make_client(config, store, run_id="secret-run")
    from pipeline.stages.runs import create_run

    create_run(store, "build", config, run_id="secret-run")
    await client.chat("fake", user("hello"))
    fake_server.push(Reply.error(401, "bad key"))
    with pytest.raises(EndpointError) as err:
        await client.chat("fake", user("again"))
    await client.aclose()
    assert SECRET not in str(err.value)
    assert fake_server.requests[0]["_headers"]["authorization"] == f"Bearer {SECRET}"
    for (table,) in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        for row in store.conn.execute(f"SELECT * FROM [{table}]"):
            assert SECRET not in json.dumps(row, default=str), f"key found in table {table}"
    store.close()
    for path in store_path.parent.iterdir():  # the file itself, WAL included
        assert SECRET.encode() not in path.read_bytes(), f"key found in {path.name}"
    assert SECRET not in json.dumps(config.public_dict(), default=str)


async def test_local_endpoint_without_server_is_a_clear_error(store):
    config = parse_config({})
    client = make_client(config, store)
    with pytest.raises(EndpointError, match="embedded server is not running"):
        await client.chat("local", user("hi"))
    await client.aclose()
