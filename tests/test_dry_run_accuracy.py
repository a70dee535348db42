"""The dry run prices what the real run does (issue 29): with one, two or three models under test,
on build, evaluate and naturalness, its calls and cost are within 15% of what the same command
then spends on the scripted fake server; its placeholders differ per model and per request, so no
later call collapses into a cache hit; and prompt tokens are counted on what the model reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.core.config import parse_config
from pipeline.core.errors import BatchPending
from pipeline.llm.placeholders import placeholder_reply
from pipeline.stages.estimate import Pricer, TokenCounter, local_tokenizer
from pipeline.store.database import open_store
from pipeline.store.llm_calls import NewCall, put_call
from tests.fakes.fake_server import FakeOpenAIServer
from tests.fakes.responders import ScriptedModel, make_store, multi_config_toml

TOLERANCE = 0.15
PRICES = "price_prompt_per_mtok = 1.0\nprice_completion_per_mtok = 4.0\n"
COMMANDS = (
    ("build", ["build", "--n", "3", "--constraints", "8", "--words", "60"]),
    ("evaluate", ["evaluate", "--ratios", "0.5,0.25"]),
    ("naturalness", ["naturalness"]),
)


def _last_run(path: Path) -> tuple[int, float]:
    store = open_store(path)
    try:
        calls, cost = store.conn.execute("SELECT calls, cost FROM runs ORDER "
                                         "BY rowid DESC LIMIT 1").fetchone()
    finally:
        store.close()
    return int(calls), float(cost)


@pytest.mark.parametrize("models", [1, 2, 3])
def test_the_estimate_is_within_15_percent_of_the_spend(tmp_path, capsys, monkeypatch, models: int) -> None:
    from pipeline.cli import main

    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "store.sqlite"
    make_store(path, 3).close()
    ratios, seen = [], []
    with FakeOpenAIServer(ScriptedModel()) as server:
        cfg = tmp_path / "c.toml"
        cfg.write_text(multi_config_toml(server.base_url, models=models, judges=1, max_retries=1)
                       .replace("timeout_s = 30.0\n", "timeout_s = 30.0\n" + PRICES))
        base = ["--store", str(path), "--config", str(cfg)]
        for name, command in COMMANDS:
            assert main([*base, *command, "--dry-run"]) == 0
            estimates = json.loads((tmp_path / "store.sqlite.estimates.json").read_text())
            estimate = next(v for k, v in estimates.items() if k.startswith(name + ":"))
            sent_before = len(server.requests)
            assert main([*base, *command]) == 0
            calls, cost = _last_run(path)
            assert calls == len(server.requests) - sent_before > 0
            ratios.append((name, estimate["calls"] / calls, estimate["cost"] / cost))
            seen.append(f"{name} {estimate['calls']}/{calls} calls ${estimate['cost']:.4f}/${cost:.4f}")
    capsys.readouterr()
    print(f"{models} model(s), estimated/spent: " + "; ".join(seen))
    for name, calls_ratio, cost_ratio in ratios:
        assert abs(calls_ratio - 1) <= TOLERANCE, (name, calls_ratio)
        assert abs(cost_ratio - 1) <= TOLERANCE, (name, cost_ratio)


def _respond_request(model: str) -> dict:
    prompt = ("Task: Write a news article about a budget gap.\nWrite about 60 words.\n<<<REQUIREMENTS\n"
              "1. Discuss the people affected from angle number 1.\nREQUIREMENTS>>>")
    return {"model": model, "messages": [{"role": "user", "content": prompt}]}


def test_placeholders_differ_per_model_and_per_request() -> None:
    a = placeholder_reply(_respond_request("model-a"), quote_cap=80, seed="aaaaaaaa11")
    b = placeholder_reply(_respond_request("model-b"), quote_cap=80, seed="bbbbbbbb22")
    assert a and b and a != b and "model-a" in a
    # The seed alone tells two requests apart: two base articles for two keys differ.
    base = {"messages": [{"role": "user", "content": "<<<TASK\nWrite it.\nTASK>>>\nWrite about 40 words."}]}
    first, second = (placeholder_reply(base, quote_cap=80, seed=s) for s in ("1111111199", "2222222299"))
    assert first and second and first != second and "The council met and argued about money" in first


def _config(base_url: str = "http://127.0.0.1:9/v1"):
    return parse_config({
        "endpoints": {"e": {"base_url": base_url, "model": "m"}},
        "roles": {"generator": "e", "judges": ["e"], "summarizer": "e", "naturalness_judge": "e",
                  "models_under_test": ["e"]},
    })


def test_prompt_tokens_count_what_the_model_reads_not_the_schema(tmp_path) -> None:
    config = _config()
    store = make_store(tmp_path / "s.sqlite", 1)
    try:
        pricer = Pricer(config, store, "build")
        messages = [{"role": "system", "content": "s" * 40}, {"role": "user", "content": "u\n" * 180}]
        schema = {"type": "json_object",
                  "schema": {"properties": {f"field{i}": {"type": "string"} for i in range(50)}}}
        with pytest.raises(BatchPending):  # no placeholder for this prompt: priced, then the unit stops
            pricer.answer("k1", config.endpoint("e"), None, messages,
                          {"temperature": 0, "response_format": schema})
        assert pricer.estimate.endpoints["e"].prompt_tokens == 400 // 4  # 400 characters read, at 4 a token
        assert "guessed at 4 characters a token" in pricer.estimate.method
    finally:
        store.close()


def test_prompt_tokens_use_the_rate_measured_in_the_cache_then_a_tokenizer(tmp_path) -> None:
    config = _config()
    store = make_store(tmp_path / "s.sqlite", 1)
    try:
        request = json.dumps({"messages": [{"role": "user", "content": "x" * 300}],
                              "params": {"temperature": 0}})
        put_call(store, NewCall("old", "e", "m", "summarize", "h", request, "reply", 100, 10, 0.0, 0.1, None,
                                "2026-01-01T00:00:00", "online"))
        store.commit()
        messages = [{"role": "user", "content": "y" * 600}]
        counter = TokenCounter(config, store)
        assert counter.prompt(config.endpoint("e"), messages) == 200  # 3 characters a token, as measured
        assert "3.00 characters a token" in counter.how(config.endpoint("e"))
        # A known tokenizer wins over any rate.
        counter = TokenCounter(config, store, tokenizers={"e": lambda ms: 7 * len(ms)})
        pricer = Pricer(config, store, "evaluate", tokens=counter)
        with pytest.raises(BatchPending):
            pricer.answer("k2", config.endpoint("e"), None, messages, {})
        assert pricer.estimate.endpoints["e"].prompt_tokens == 7
        assert "by its own tokenizer" in pricer.estimate.method
    finally:
        store.close()


def test_the_embedded_models_tokenizer_counts_its_chat_template() -> None:
    from pipeline.llm import local_model, model_file

    if not (local_model.llama_cpp_available() and model_file.model_ready()):
        pytest.skip("llama.cpp or the embedded model is not on this machine")
    count = local_tokenizer()
    assert count is not None
    def chat(system: str, user: str) -> list[dict[str, str]]:
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    # The chat format's own tokens are counted (<|im_start|>system ... <|im_end|>, the assistant's cue),
    # and the text's beside them.
    template_only = count(chat("", ""))
    assert template_only >= 8
    assert 4 <= count(chat("You judge.", "Hello there")) - template_only <= 8
    # What the embedded server reported as prompt_tokens for this request (measured against it, issue 29).
    assert count([{"role": "user", "content": "Hello there"}]) == 15


def test_reply_lengths_are_measured_against_the_placeholders(tmp_path) -> None:
    """A model that wrote half of what the placeholder writes for the same request: its next
    replies of that template are priced at half the placeholder's length."""
    config = _config()
    store = make_store(tmp_path / "s.sqlite", 1)
    try:
        old = _respond_request("m")
        counter = TokenCounter(config, store)
        full = counter.text(config.endpoint("e"), placeholder_reply(old, quote_cap=80, seed="old-key") or "")
        request = json.dumps({"messages": old["messages"], "params": {"temperature": 0}})
        put_call(store, NewCall("old-key", "e", "m", "respond_direct", "h", request, "reply", 50,
                                full // 2, 0.0, 0.1,
                                None, "2026-01-01T00:00:00", "online"))
        store.commit()
        pricer = Pricer(config, store, "evaluate")

        class RespondTemplate:
            name = "respond_direct"

        pricer.answer("new-key", config.endpoint("e"), RespondTemplate(),  # type: ignore[arg-type]
                      old["messages"], {})
        assert abs(pricer.estimate.endpoints["e"].completion_tokens - full / 2) <= 1
        assert "respond_direct from their calls in the cache" in pricer.estimate.method
    finally:
        store.close()
