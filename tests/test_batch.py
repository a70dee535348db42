"""Batch mode against the fake Files and Batches API: a stage run with --batch defers its calls,
sends them as batches, collects them, and ends with what an online run stores; state
transitions, partial failures and the error file, an expired batch, kills between submit and
collect and during collect, duplicate and malformed lines, the file limits, vLLM export/ingest
and batch prices."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pipeline.core.config import Config, parse_config
from pipeline.core.errors import BatchPending, ConfigError
from pipeline.llm import batch as B
from pipeline.llm.client import LLMClient
from pipeline.stages.build import BuildOptions, run_build
from pipeline.stages.evaluate import EvaluateOptions, evaluate
from pipeline.store.database import Store, open_store
from tests.fakes.fake_server import FakeOpenAIServer
from tests.fakes.responders import ScriptedModel, make_store, result_fingerprint

PRICES = {"price_prompt_per_mtok": 2.0, "price_completion_per_mtok": 8.0}


def config_for(url: str, **endpoint: Any):
    spec = {"base_url": url, "model": "fake-model", "concurrency": 4, "max_retries": 1, **PRICES, **endpoint}
    return parse_config({"endpoints": {"fake": spec},
                         "roles": {"generator": "fake", "judges": ["fake"], "summarizer": "fake",
                                   "naturalness_judge": "fake", "models_under_test": ["fake"]},
                         # the scripted world's flawed constraints (tests/fakes/responders.fake_config)
                         "build": {"gate": False}})


@pytest.fixture
def server():
    with FakeOpenAIServer(ScriptedModel()) as s:
        s.batch_polls = 1
        yield s


async def built_store(path: Path, config, n_pairs: int = 2):
    """A store with a finished small build (online), ready for evaluation."""
    store = make_store(path, n_pairs)
    client = LLMClient(config, store)
    options = BuildOptions.from_config(config, n=n_pairs, n_constraints=6, words=60, run_id="b1",
                                       conditions=("single", "eval"))
    await run_build(store, config, client, options)
    await client.aclose()
    return store


async def sent_in_batches(server: FakeOpenAIServer, path: Path, n_pairs: int = 2) -> tuple[Config, Store]:
    """A built store whose evaluation sent its first step's calls in a batch; its config."""
    config = config_for(server.base_url)
    store = await built_store(path, config, n_pairs)
    await evaluate(store, config, EvaluateOptions(build_run="b1"), batch=True)
    return config, store


async def until_collected(store, config, rounds: int = 8, **kw: Any) -> B.Collected:
    total = B.Collected()
    for _ in range(rounds):
        got = await B.collect(store, config, **kw)
        total.ingested.add(got.ingested)
        total.batches.update(got.batches)
        total.online += got.online
        total.rebatched += got.rebatched
        if not store.scalar("SELECT count(*) FROM batches WHERE kind = 'provider' AND collected_at IS NULL"):
            break
    return total


async def evaluate_in_batches(store, config, rounds: int = 10) -> list[Any]:
    results = []
    for _ in range(rounds):
        result = await evaluate(store, config, EvaluateOptions(build_run="b1"), batch=True)
        results.append(result)
        if not result.deferred:
            return results
        await until_collected(store, config)
    raise AssertionError("batch evaluation did not finish")


async def test_a_batch_evaluation_stores_what_an_online_one_does_at_half_the_price(server, tmp_path):
    config = config_for(server.base_url)
    store = await built_store(tmp_path / "a.sqlite", config)
    store.close()
    shutil.copy(tmp_path / "a.sqlite", tmp_path / "online.sqlite")
    online = open_store(tmp_path / "online.sqlite")
    before = server.calls
    online_result = await evaluate(online, config, EvaluateOptions(build_run="b1"))
    online_calls = server.calls - before
    assert not online_result.failed

    store = open_store(tmp_path / "a.sqlite")
    before = server.calls
    results = await evaluate_in_batches(store, config)
    assert server.calls == before  # nothing went online
    # respond, then summarize (with judging of responses), then the judging of the summaries
    assert len(results) == 4 and results[0].stages["respond"].deferred == 4
    assert len(server.batch_calls) == online_calls == len(set(server.batch_calls))  # nothing asked twice
    assert result_fingerprint(store, "b1") == result_fingerprint(online, "b1")
    assert all(not r.failed for r in results)
    # Every answer went through the cache as an online one would, and was paid at batch prices.
    info = B.status(store)
    assert info["requests"] == {}  # each taken by the stage, then gone from the batch queue
    online_paid = online.scalar("SELECT sum(cost) FROM llm_calls WHERE run_id IN (SELECT id FROM runs "
                                "WHERE kind = 'evaluate')")
    batch_paid = info["paid"]["batch"]["cost"]
    assert info["paid"]["batch"]["calls"] == online_calls
    assert batch_paid == pytest.approx(0.5 * online_paid)
    runs = store.query("SELECT batch_calls, batch_cost, cost FROM runs WHERE kind = 'evaluate'")
    assert sum(r["batch_calls"] for r in runs) == online_calls
    assert sum(r["batch_cost"] for r in runs) == pytest.approx(batch_paid)
    assert all(r["batch_cost"] == pytest.approx(r["cost"]) for r in runs)  # nothing paid online
    # Run again: everything is cached, no batch is sent.
    again = await evaluate(store, config, EvaluateOptions(build_run="b1"), batch=True)
    assert not again.deferred and not again.batches
    store.close()
    online.close()


async def test_state_transitions_are_recorded(server, tmp_path):
    server.batch_polls = 2
    config, store = await sent_in_batches(server, tmp_path / "s.sqlite", n_pairs=1)
    seen = [B.status(store)["batches"][0]["state"]]
    for _ in range(6):
        await B.refresh(store, config)
        seen.append(B.status(store)["batches"][0]["state"])
    assert seen[:5] == ["validating", "in_progress", "in_progress", "finalizing", "completed"]
    got = await B.collect(store, config)
    assert got.ingested.done == 2 and B.status(store)["requests"] == {"done": 2}
    store.close()


async def test_partial_failures_wait_for_the_users_choice(server, tmp_path):
    server.batch_fail_every = 2
    config, store = await sent_in_batches(server, tmp_path / "p.sqlite")
    got = await until_collected(store, config)
    assert (got.ingested.done, got.ingested.failed) == (2, 2)  # every second request in the error file
    failed = store.query("SELECT error FROM batch_requests WHERE status = 'failed'")
    assert all("HTTP 500" in r["error"] for r in failed)
    # Kept: the stage's units wait on them; nothing fails, nothing is sent again by itself.
    result = await evaluate(store, config, EvaluateOptions(build_run="b1"), batch=True)
    assert result.stages["respond"].waiting_failed == 2 and not result.failed
    assert server.batch_creates == 2  # the summaries' batch; the failed items were not re-sent
    # Rebatched: a new batch with exactly the failed ones.
    server.batch_fail_every = 0
    creates = server.batch_creates
    got = await B.collect(store, config, failed="rebatch")
    assert got.rebatched == 2 and server.batch_creates == creates + 1
    last = store.query("SELECT requests FROM batches ORDER BY created_at DESC, rowid DESC LIMIT 1")[0]
    assert last["requests"] == 2
    await until_collected(store, config)
    assert store.scalar("SELECT count(*) FROM batch_requests WHERE status = 'failed'") == 0
    store.close()


async def test_failed_items_sent_online_by_the_next_run(server, tmp_path):
    server.batch_expire = True  # half the requests answered, the rest expired
    config, store = await sent_in_batches(server, tmp_path / "e.sqlite")
    got = await until_collected(store, config, failed="online")
    assert got.batches and set(got.batches.values()) == {"expired"}
    assert (got.ingested.done, got.ingested.failed) == (2, 2)
    assert got.online == 2
    before = server.calls
    result = await evaluate(store, config, EvaluateOptions(build_run="b1"), batch=True)
    assert server.calls - before == 2  # exactly the expired ones went online
    assert result.stages["respond"].done == 4
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE via = 'online' AND "
                        "template LIKE 'respond%'") == 2
    # the next step's calls; none left online or failed
    assert set(B.status(store)["requests"]) == {"submitted"}
    store.close()


async def test_a_kill_between_creating_a_batch_and_recording_it_never_submits_twice(server,
                                                                                    tmp_path, monkeypatch):
    config = config_for(server.base_url)
    store = await built_store(tmp_path / "k.sqlite", config)
    real_set = B._set

    def killed(store_, batch_id, **values):
        if "remote_id" in values:
            raise KeyboardInterrupt  # the process dies after the provider created the batch
        real_set(store_, batch_id, **values)

    monkeypatch.setattr(B, "_set", killed)
    with pytest.raises(KeyboardInterrupt):
        await evaluate(store, config, EvaluateOptions(build_run="b1"), batch=True)
    monkeypatch.setattr(B, "_set", real_set)
    assert server.batch_creates == 1
    row = store.query("SELECT * FROM batches")[0]
    assert row["state"] == "preparing" and row["remote_id"] is None and row["input_file_id"]
    store.conn.execute("UPDATE batches SET pid = 999999999")  # its process is gone
    store.commit()
    # Another process: finds the batch by its metadata instead of creating another.
    sent = await B.submit_pending(store, config)
    assert len(sent) == 1 and sent[0].recovered and server.batch_creates == 1
    results = await evaluate_in_batches(store, config)
    assert not results[-1].deferred
    assert len(server.batch_calls) == len(set(server.batch_calls))
    store.close()


async def test_a_kill_during_collect_resumes_without_filing_twice(server, tmp_path, monkeypatch):
    server.batch_duplicate = True
    config, store = await sent_in_batches(server, tmp_path / "c.sqlite")
    for _ in range(3):
        await B.refresh(store, config)
    real = B.ingest_lines

    def dies_after_two(store_, config_, lines, batch_id=None, commit_every=2000):
        def gen():
            for i, line in enumerate(lines):
                if i == 2:
                    raise KeyboardInterrupt
                yield line
        return real(store_, config_, gen(), batch_id, commit_every=1)

    monkeypatch.setattr(B, "ingest_lines", dies_after_two)
    with pytest.raises(KeyboardInterrupt):
        await B.collect(store, config)
    monkeypatch.setattr(B, "ingest_lines", real)
    assert B.status(store)["requests"] == {"done": 2, "submitted": 2}
    got = await B.collect(store, config)
    # Resumed: the two filed before the kill are duplicates now, as is the repeated line.
    assert got.ingested.done == 2 and got.ingested.duplicates == 3
    assert B.status(store)["requests"] == {"done": 4}
    store.close()


async def test_malformed_lines_and_lines_of_another_store(server, tmp_path):
    server.batch_malformed = 2
    config, store = await sent_in_batches(server, tmp_path / "m.sqlite")
    got = await until_collected(store, config)
    assert got.ingested.malformed == 2 and got.ingested.done == 4
    foreign = json.dumps({"custom_id": "1-000000000000", "response": {"status_code": 200, "body": {}}})
    assert B.ingest_lines(store, config, [foreign]).unknown == 1
    store.close()


async def test_a_duplicate_custom_id_fails_the_batch_and_its_items(server, tmp_path):
    config = config_for(server.base_url)
    store = await built_store(tmp_path / "d.sqlite", config)
    client = LLMClient(config, store, batch=True)
    with pytest.raises(BatchPending):
        await client.chat("fake", [{"role": "user", "content": "once"}])
    await client.aclose()
    batch_id, lines = B._claim(store, "fake", "provider", 10, 10**6, config)
    await B._send_batch(store, config.endpoint("fake"), batch_id, lines + lines, {})
    got = await until_collected(store, config)
    assert got.batches[batch_id] == "failed" and got.ingested.missing == 1
    error = store.scalar("SELECT error FROM batch_requests")
    assert "duplicate_custom_id" in error
    store.close()


def test_files_split_at_the_request_and_byte_limits():
    lines = [(i, "x" * 99) for i in range(10)]  # 100 bytes a line with its newline
    assert [len(c) for c in B.chunks(lines, 4, 10**6)] == [4, 4, 2]
    assert [len(c) for c in B.chunks(lines, 100, 350)] == [3, 3, 3, 1]
    with pytest.raises(Exception, match="over the 50-byte limit"):
        list(B.chunks(lines, 100, 50))


async def test_submit_splits_into_several_batches(server, tmp_path):
    config = config_for(server.base_url)
    store = await built_store(tmp_path / "n.sqlite", config)
    client = LLMClient(config, store, batch=True)
    for i in range(7):
        with pytest.raises(BatchPending):
            await client.chat("fake", [{"role": "user", "content": f"q{i}"}])
    with pytest.raises(BatchPending):  # asked again in the same process: one request, not two
        await client.chat("fake", [{"role": "user", "content": "q0"}])
    await client.aclose()
    assert store.scalar("SELECT count(*) FROM batch_requests") == 7
    sent = await B.submit_pending(store, config, max_requests=3)
    assert [s.requests for s in sent] == [3, 3, 1] and server.batch_creates == 3
    assert await B.submit_pending(store, config) == []  # nothing pending: nothing sent
    store.close()


async def test_local_and_pool_endpoints_have_no_batch_api(tmp_path):
    store = open_store(tmp_path / "x.sqlite")
    config = parse_config({"endpoints": {"a": {"base_url": "http://a:1/v1", "model": "m"},
                                         "p": {"pool": ["a"]}}})
    with pytest.raises(ConfigError, match="no batch API"):
        B._batchable(config, "local")
    with pytest.raises(ConfigError, match="is a pool"):
        B._batchable(config, "p")
    store.close()


async def test_vllm_export_and_ingest(server, tmp_path):
    """The same JSONL through an offline runner: export, answer each line as vLLM's run_batch
    does (here the fake model), ingest, and the stage goes on from the results."""
    config = config_for(server.base_url)
    store = await built_store(tmp_path / "v.sqlite", config)
    result = await evaluate(store, config, EvaluateOptions(build_run="b1"), batch=True)
    assert server.batch_creates == 1  # evaluate --batch sends to the provider: take them back for this test
    store.conn.execute("UPDATE batch_requests SET status = 'pending', batch_id = NULL")
    store.conn.execute("DELETE FROM batches")
    store.commit()
    written = B.export(store, config, tmp_path / "out", max_requests=3)
    assert [n for _, n in written] == [3, 1]
    assert B.export(store, config, tmp_path / "out") == []  # exported once
    outputs = []
    model = ScriptedModel()
    from tests.fakes.fake_server import _envelope

    for path, _ in written:
        out_path = path.with_name(path.stem + ".out.jsonl")
        rows = []
        for line in path.read_text().splitlines():
            req = json.loads(line)
            assert (req["method"] == "POST" and req["url"] == "/v1/chat/completions"
                    and req["body"]["model"] == "fake-model")
            text = model(req["body"]).text
            rows.append(json.dumps({"id": "vllm-1", "custom_id": req["custom_id"],
                                    "response": {"status_code": 200, "request_id": "x",
                                                 "body": _envelope(req["body"], text)}, "error": None}))
        out_path.write_text("\n".join(rows) + "\n")
        outputs.append(out_path)
    got = B.ingest(store, config, outputs[:1])
    assert got.done == 3
    assert B.status(store)["requests"] == {"done": 3, "submitted": 1}
    got = B.ingest(store, config, outputs)
    assert (got.done, got.duplicates) == (1, 3)
    assert all(b["collected_at"] for b in B.status(store)["batches"])
    result = await evaluate(store, config, EvaluateOptions(build_run="b1"), batch=True)
    assert result.stages["respond"].done == 4
    store.close()


async def test_a_batch_reply_that_breaks_the_format_is_not_cached_and_goes_to_repair(server, tmp_path):
    config = config_for(server.base_url)
    store = open_store(tmp_path / "r.sqlite")
    client = LLMClient(config, store, batch=True)

    def accept(text: str) -> str:
        if "echo" not in text:
            raise ValueError("no echo")
        return text

    calls: list[str] = []

    def responder(body: dict) -> str:
        calls.append(body["messages"][-1]["content"])
        return "junk" if len(body["messages"]) == 1 else "echo: fixed"

    server.responder = responder
    msgs = [{"role": "user", "content": "say echo"}]
    with pytest.raises(BatchPending):
        await client.chat_repaired("fake", msgs, accept=accept, schema=None)
    await client.aclose()
    await B.submit_pending(store, config)
    await until_collected(store, config)
    client = LLMClient(config, store, batch=True)
    with pytest.raises(BatchPending):  # the junk reply is refused: the repair round is deferred
        await client.chat_repaired("fake", msgs, accept=accept, schema=None)
    await client.aclose()
    assert store.scalar("SELECT count(*) FROM llm_calls") == 0
    await B.submit_pending(store, config)
    await until_collected(store, config)
    client = LLMClient(config, store, batch=True)
    value, completion = await client.chat_repaired("fake", msgs, accept=accept, schema=None)
    await client.aclose()
    assert value == "echo: fixed" and completion.via == "batch"
    assert store.scalar("SELECT count(*) FROM llm_calls") == 1 and len(calls) == 2
    store.close()


async def test_a_build_in_batches_writes_what_an_online_build_does(server, tmp_path):
    config = config_for(server.base_url)
    online = await built_store(tmp_path / "online.sqlite", config)
    online_calls = server.calls
    store = make_store(tmp_path / "b.sqlite", 2)
    options = BuildOptions.from_config(config, n=2, n_constraints=6, words=60, run_id="b1",
                                       conditions=("single", "eval"))
    for rounds in range(1, 15):
        client = LLMClient(config, store, batch=True)
        summary = await run_build(store, config, client, options)
        await client.aclose()
        if summary.complete:
            break
        assert sum(s.deferred for s in summary.stages) > 0 and not any(s.failed for s in summary.stages)
        await B.submit_stage(store, config)
        await until_collected(store, config)
    assert summary.complete and rounds > 2
    assert server.calls == online_calls  # nothing went online
    assert len(server.batch_calls) == len(set(server.batch_calls)) == store.scalar("SELECT count(*) FROM "
                                                                                   "llm_calls")
    assert result_fingerprint(store, "b1") == result_fingerprint(online, "b1")
    store.close()
    online.close()


def test_the_command_line_round_trip(server, tmp_path, capsys):
    """evaluate --batch, batch status, batch collect, evaluate --batch again ... until done."""
    import asyncio

    from pipeline.cli import main
    from tests.fakes.responders import config_toml

    cfg = tmp_path / "unspecific.toml"
    cfg.write_text(config_toml(server.base_url, concurrency=2).replace(
        'model = "fake-model"',
        'model = "fake-model"\nprice_prompt_per_mtok = 1.0\nprice_completion_per_mtok = 4.0'))
    from pipeline.core.config import load_config

    store = asyncio.run(built_store(tmp_path / "cli.sqlite", load_config(cfg), n_pairs=1))
    store.close()
    base = ["--store", str(tmp_path / "cli.sqlite"), "--config", str(cfg)]
    capsys.readouterr()
    for _ in range(8):
        assert main([*base, "evaluate", "--batch", "--run", "b1"]) == 0
        out = capsys.readouterr().out
        if "wait on a batch" not in out:
            break
        assert main([*base, "batch", "status", "--json"]) == 0
        info = json.loads(capsys.readouterr().out)
        assert info["batches"] and info["requests"].get("submitted")
        for _ in range(4):
            assert main([*base, "batch", "collect"]) == 0
        assert "answered" in capsys.readouterr().out
    assert "batch $" in out  # the run's cost, split online / batch
    assert main([*base, "batch", "status", "--no-refresh"]) == 0
    out = capsys.readouterr().out
    assert "paid batch:" in out
    assert main([*base, "batch", "status", "--no-refresh", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {b["state"] for b in info["batches"]} == {"completed"} and all(b["collected_at"]
                                                                          for b in info["batches"])
    assert main([*base, "report", "--no-copy", "--resamples", "20"]) == 0
    out = capsys.readouterr().out
    flat = " ".join(out.split())  # piped text wraps between words at COLUMNS (issue 47)
    assert "paid for the cached LLM calls" in flat and "batch $" in flat and "online $" in flat
    store = open_store(tmp_path / "cli.sqlite")
    assert store.scalar("SELECT count(*) FROM verdicts") > 0
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE via = 'batch'") == len(server.batch_calls)
    store.close()


async def test_an_endpoint_with_batch_files_waits_for_export(server, tmp_path):
    config = config_for(server.base_url, batch="files")
    store = await built_store(tmp_path / "f.sqlite", config)
    result = await evaluate(store, config, EvaluateOptions(build_run="b1"), batch=True)
    assert result.deferred == 4 and result.batches == [] and server.batch_creates == 0
    assert B.status(store)["requests"] == {"pending": 4}
    with pytest.raises(ConfigError, match="batch export"):
        await B.submit_pending(store, config)
    assert [n for _, n in B.export(store, config, tmp_path / "x")] == [4]
    with pytest.raises(ConfigError, match="batch: one of api, files"):
        config_for(server.base_url, batch="yes")
    store.close()


async def test_a_reply_echoing_a_key_is_never_stored(server, tmp_path, monkeypatch):
    secret = "sk-test-BATCH-secret-0123456789"
    monkeypatch.setenv("UNSPECIFIC_BATCH_KEY", secret)
    config = config_for(server.base_url, api_key_env="UNSPECIFIC_BATCH_KEY")
    server.responder = lambda body: f"Incorrect API key provided: {secret}."
    store = open_store(tmp_path / "k.sqlite")
    client = LLMClient(config, store, batch=True)
    with pytest.raises(BatchPending):
        await client.chat("fake", [{"role": "user", "content": "hello"}])
    await client.aclose()
    await B.submit_pending(store, config)
    await until_collected(store, config)
    dump = "\n".join(store.conn.iterdump())
    assert secret not in dump and "[REDACTED]" in dump
    store.close()


async def test_an_export_killed_before_its_file_was_written_is_written_by_the_next(server,
                                                                                   tmp_path, monkeypatch):
    config = config_for(server.base_url, batch="files")
    store = await built_store(tmp_path / "x.sqlite", config)
    await evaluate(store, config, EvaluateOptions(build_run="b1"), batch=True)
    real = B._set

    def killed(store_, batch_id, **values):
        if values.get("state") == "exported":
            raise KeyboardInterrupt
        real(store_, batch_id, **values)

    monkeypatch.setattr(B, "_set", killed)
    with pytest.raises(KeyboardInterrupt):
        B.export(store, config, tmp_path / "out")
    monkeypatch.setattr(B, "_set", real)
    store.conn.execute("UPDATE batches SET pid = 999999999")
    store.commit()
    written = B.export(store, config, tmp_path / "out")
    assert [n for _, n in written] == [4] and len(list((tmp_path / "out").glob("*.jsonl"))) == 1
    assert B.status(store)["requests"] == {"submitted": 4}
    store.close()
