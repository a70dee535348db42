"""Endpoint pools: one role, several servers. Requests go to the member with the fewest
outstanding requests for its concurrency; a member that keeps failing is set aside and tried
again later; the cache key is the pool's model and prompt, so the pool never pays twice."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from pipeline.core.config import parse_config
from pipeline.core.errors import ConfigError
from pipeline.llm.client import LLMClient, cache_key
from tests.fakes.fake_server import FakeOpenAIServer, Reply, dead_url, last_user_message


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def client_for(config, store) -> LLMClient:
    return LLMClient(config, store, backoff_base_s=0.01, backoff_cap_s=0.05)


def pool_config(urls: list[str], *, concurrency: int = 2, drain_after: int = 2, drain_s: float = 30.0,
                models: list[str] | None = None, **pool: Any):
    endpoints: dict[str, Any] = {}
    for i, url in enumerate(urls):
        endpoints[f"m{i}"] = {"base_url": url, "model": (models or ["fake-model"] * len(urls))[i],
                              "concurrency": concurrency, "max_retries": 0, "timeout_s": 5.0}
    endpoints["fleet"] = {"pool": [f"m{i}" for i in range(len(urls))], "drain_after": drain_after,
                          "drain_s": drain_s, **pool}
    return parse_config({"endpoints": endpoints, "roles": {"generator": "fleet"}})


class InFlight:
    """A responder that answers after ``delay`` and records the most requests it held at once."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.now = 0
        self.peak = 0
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(self.delay)
        with self.lock:
            self.now -= 1
        return Reply(text="echo: " + last_user_message(request))


async def test_requests_spread_over_members_within_each_members_concurrency(store):
    responders = [InFlight(0.05) for _ in range(3)]
    servers = [FakeOpenAIServer(r).start() for r in responders]
    try:
        config = pool_config([s.base_url for s in servers], concurrency=2)
        assert config.endpoint("fleet").concurrency == 6  # the stages' parallelism follows the pool
        client = client_for(config, store)
        results = await asyncio.gather(*(client.chat("fleet", user(f"q{i}")) for i in range(30)))
        await client.aclose()
    finally:
        for s in servers:
            s.stop()
    assert [text for text, _ in results] == [f"echo: q{i}" for i in range(30)]
    assert sum(s.calls for s in servers) == 30
    assert all(s.calls >= 8 for s in servers), [s.calls for s in servers]  # even: 10 each
    assert all(r.peak <= 2 for r in responders), [r.peak for r in responders]  # each member's own limit
    assert client.usage.calls == 30 and client.usage_by_endpoint["fleet"].calls == 30
    assert sum(client.usage_by_endpoint[f"m{i}"].calls for i in range(3)) == 30


async def test_a_slow_member_gets_less_work(store):
    slow, fast1, fast2 = InFlight(0.4), InFlight(0.02), InFlight(0.02)
    servers = [FakeOpenAIServer(r).start() for r in (slow, fast1, fast2)]
    try:
        client = client_for(pool_config([s.base_url for s in servers], concurrency=2), store)
        await asyncio.gather(*(client.chat("fleet", user(f"q{i}")) for i in range(60)))
        await client.aclose()
    finally:
        for s in servers:
            s.stop()
    calls = [s.calls for s in servers]
    assert sum(calls) == 60
    # Least outstanding: the slow member holds its requests longer, so it is offered fewer.
    assert calls[0] < calls[1] and calls[0] < calls[2], calls
    assert calls[0] <= 12, calls


async def test_a_dead_member_is_drained_and_the_pool_goes_on(store):
    live = FakeOpenAIServer().start()
    try:
        config = pool_config([dead_url(), live.base_url], concurrency=2, drain_after=2, drain_s=30.0)
        client = client_for(config, store)
        results = await asyncio.gather(*(client.chat("fleet", user(f"q{i}")) for i in range(20)))
        status = client.pool_status("fleet")
        await client.aclose()
    finally:
        live.stop()
    assert len(results) == 20 and live.calls == 20
    assert status["m0"]["drained"] and status["m0"]["drains"] == 1
    assert client.usage.failures == 0  # a member's failure is not a failed call
    assert client.usage.calls == 20
    # Two strikes, then aside: the dead member was tried at most drain_after times per concurrent wave.
    assert client.usage.retries <= 4


async def test_a_member_answering_429_and_500_is_drained_then_tried_again(store):
    flaky = FakeOpenAIServer().start()
    good = FakeOpenAIServer().start()
    flaky.push(Reply.error(429, retry_after=0.01), Reply.error(500), Reply.error(500), Reply.error(500))
    try:
        config = pool_config([flaky.base_url, good.base_url], concurrency=1, drain_after=2, drain_s=0.3)
        client = client_for(config, store)
        for i in range(4):
            await client.chat("fleet", user(f"first {i}"))
        status = client.pool_status("fleet")
        assert status["m0"]["drains"] >= 1
        flaky_before = flaky.calls
        await asyncio.sleep(0.35)  # the pause is over: the member is tried again, and now it answers
        await asyncio.gather(*(client.chat("fleet", user(f"later {i}")) for i in range(6)))
        await client.aclose()
    finally:
        flaky.stop()
        good.stop()
    assert flaky.calls > flaky_before  # it came back
    assert client.usage.failures == 0 and client.usage.calls == 10


async def test_a_member_with_a_bad_key_is_removed_for_good(store):
    refusing = FakeOpenAIServer(lambda r: Reply.error(401, "bad key")).start()
    good = FakeOpenAIServer().start()
    try:
        client = client_for(pool_config([refusing.base_url, good.base_url], concurrency=1), store)
        for i in range(5):
            await client.chat("fleet", user(f"q{i}"))
        status = client.pool_status("fleet")
        await client.aclose()
    finally:
        refusing.stop()
        good.stop()
    assert refusing.calls == 1 and good.calls == 5
    assert status["m0"]["dead"]


async def test_every_member_down_fails_the_call_and_caches_nothing(store):
    config = pool_config([dead_url(), dead_url()], concurrency=1, drain_after=1, drain_s=0.01, max_retries=3)
    client = client_for(config, store)
    from pipeline.core.errors import EndpointError

    with pytest.raises(EndpointError, match="gave up after 4 attempt"):
        await client.chat("fleet", user("nobody home"))
    await client.aclose()
    assert store.scalar("SELECT count(*) FROM llm_calls") == 0
    assert client.usage.failures == 1


async def test_the_cache_key_is_the_model_and_prompt_not_the_member(store):
    a, b, c = (FakeOpenAIServer().start() for _ in range(3))
    try:
        first = client_for(pool_config([a.base_url, b.base_url]), store)
        await asyncio.gather(*(first.chat("fleet", user(f"q{i}")) for i in range(10)))
        await first.aclose()
        # Another pool of other servers for the same model: every call is already paid for.
        second = client_for(pool_config([c.base_url, b.base_url]), store)
        results = await asyncio.gather(*(second.chat("fleet", user(f"q{i}")) for i in range(10)))
        await second.aclose()
    finally:
        for s in (a, b, c):
            s.stop()
    assert a.calls + b.calls == 10 and c.calls == 0
    assert all(comp.cached for _, comp in results)
    assert second.usage.calls == 0 and second.usage.cache_hits == 10
    ep1 = pool_config(["http://x:1/v1", "http://y:1/v1"]).endpoint("fleet")
    ep2 = pool_config(["http://z:1/v1"]).endpoint("fleet")
    assert cache_key(ep1, user("p"), {}, "t") == cache_key(ep2, user("p"), {}, "t")
    other = pool_config(["http://z:1/v1"], models=["other-model"]).endpoint("fleet")
    assert cache_key(ep1, user("p"), {}, "t") != cache_key(other, user("p"), {}, "t")


def test_pool_config_forms_and_errors(monkeypatch):
    short = parse_config({"endpoints": {"gpus": {"base_url": ["http://a:8000/v1", "http://b:8000/v1"],
                                                  "model": "qwen", "concurrency": 16, "drain_s": 5}},
                          "roles": {"judges": ["gpus"]}})
    pool = short.endpoint("gpus")
    assert pool.members == ("gpus[1]", "gpus[2]") and pool.concurrency == 32 and pool.drain_s == 5.0
    assert short.endpoint("gpus[2]").base_url == "http://b:8000/v1"
    assert short.endpoint("gpus[1]").concurrency == 16
    with pytest.raises(ConfigError, match="members serve"):
        pool_config(["http://a:1/v1", "http://b:1/v1"], models=["one", "two"])
    named = pool_config(["http://a:1/v1", "http://b:1/v1"], models=["one", "two"], model="shared")
    assert named.endpoint("fleet").model == "shared"
    with pytest.raises(ConfigError, match="no endpoint named 'nope'"):
        parse_config({"endpoints": {"p": {"pool": ["nope"]}}})
    with pytest.raises(ConfigError, match="not a pool field"):
        parse_config({"endpoints": {"a": {"base_url": "http://a:1/v1", "model": "m"},
                                    "p": {"pool": ["a"], "concurrency": 3}}})
    with pytest.raises(ConfigError, match="'inner' is a pool"):
        parse_config({"endpoints": {"a": {"base_url": "http://a:1/v1", "model": "m"},
                                    "inner": {"pool": ["a"]},
                                    "outer": {"pool": ["inner"]}}})
    with pytest.raises(ConfigError, match="embedded local model"):
        parse_config({"endpoints": {"p": {"pool": ["local"]}}})
