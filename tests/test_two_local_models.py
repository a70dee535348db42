"""Two local models in one store: a GGUF by path in the config, one llama.cpp server holding both
(the embedded model first), the demo evaluating both shipped models under their own names, and a
server that lacks a model refused before it answers with another."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.core.config import LOCAL, default_config, parse_config
from pipeline.core.errors import ConfigError, LocalModelError
from pipeline.llm import local_model as lm
from pipeline.llm.model_file import EMBEDDED_NAME, MODEL_ALIAS, SMALL_NAME, shipped_model
from pipeline.stages.demo import DemoOptions, demo_config, run_demo_blocking
from tests.fakes.fake_server import FakeOpenAIServer
from tests.fakes.responders import ScriptedModel

SMALL_DEMO = DemoOptions(pairs=1, constraints=6, articles=30, embedder="hash", judge_check=False)


def test_a_gguf_by_path_is_a_further_local_model(tmp_path):
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    config = parse_config({"endpoints": {"tiny": {"base_url": "local", "model": "tiny-q4", "gguf": str(gguf),
                                                   "chat_format": "gemma"}},
                           "roles": {"models_under_test": ["local", "tiny"]}})
    (served,) = lm.served_models(config)
    assert served == lm.ServedModel("tiny-q4", gguf.resolve(), "gemma")


@pytest.mark.parametrize("spec, key", [
    ({"base_url": "local", "model": "x", "gguf": "/no/such/file.gguf"}, "endpoints.tiny.gguf"),
    ({"base_url": "http://127.0.0.1:1/v1", "model": "x", "gguf": "/tmp"}, "endpoints.tiny.gguf"),
    ({"base_url": "local", "model": "x", "chat_format": 3}, "endpoints.tiny.chat_format"),
])
def test_a_bad_local_model_names_its_key(spec, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        parse_config({"endpoints": {"tiny": spec}})


def test_a_missing_gguf_exits_2_naming_the_key(tmp_path, capsys):
    from pipeline.cli import main

    config = tmp_path / "unspecific.toml"
    config.write_text('[endpoints.tiny]\nbase_url = "local"\nmodel = "x"\ngguf = "missing.gguf"\n')
    assert main(["--config", str(config), "config"]) == 2
    assert "endpoints.tiny.gguf" in capsys.readouterr().err


def test_a_local_model_neither_shipped_nor_given_by_path_names_its_endpoint():
    config = parse_config({"endpoints": {"mystery": {"base_url": "local", "model": "mystery-7b"}},
                           "roles": {"models_under_test": ["mystery"]}})
    with pytest.raises(LocalModelError, match="endpoint 'mystery'.*gguf"):
        lm.served_models(config)


def test_one_server_holds_both_models_the_embedded_one_first(tmp_path, monkeypatch):
    monkeypatch.setenv("UNSPECIFIC_CACHE", str(tmp_path / "cache"))
    small = lm.ServedModel("small-q4", tmp_path / "small.gguf", "chatml")
    server = lm.LocalServer(model=tmp_path / "big.gguf", port=1234, others=(small,))
    cmd = server.command()
    assert "--config_file" in cmd and "--model" not in cmd
    settings = json.loads(Path(cmd[cmd.index("--config_file") + 1]).read_text())
    assert [m["model_alias"] for m in settings["models"]] == [MODEL_ALIAS, "small-q4"]
    assert settings["models"][1]["model"] == str(tmp_path / "small.gguf") and settings["port"] == 1234
    assert all(m["n_ctx"] == lm.N_CTX and m["n_threads"] == lm.N_THREADS for m in settings["models"])
    assert server.aliases == (MODEL_ALIAS, "small-q4")


def test_the_demo_names_both_shipped_models_and_keeps_a_configs_own():
    config = demo_config(default_config())
    assert config.roles.models_under_test == (EMBEDDED_NAME, SMALL_NAME)
    assert config.endpoint(EMBEDDED_NAME).model == MODEL_ALIAS  # the embedded model's cache is shared
    assert config.endpoint(SMALL_NAME).model == shipped_model(SMALL_NAME).alias
    assert all(config.endpoint(n).is_local for n in config.roles.models_under_test)
    # The small model loops when greedy: its requests carry its own repeat penalty; the embedded one's do not.
    assert config.endpoint(SMALL_NAME).extra_body == {
        "repeat_penalty": shipped_model(SMALL_NAME).repeat_penalty}
    assert config.endpoint(EMBEDDED_NAME).extra_body == {}
    assert config.roles.judges == (LOCAL,) and config.roles.summarizer == LOCAL
    own = parse_config({"endpoints": {"other": {"base_url": "http://127.0.0.1:1/v1", "model": "m"}},
                        "roles": {"models_under_test": ["other"]}})
    assert demo_config(own) is own


def test_the_demo_evaluates_both_models_on_one_local_server(tmp_path, monkeypatch):
    small_alias = shipped_model(SMALL_NAME).alias
    with FakeOpenAIServer(ScriptedModel(), models=(MODEL_ALIAS, small_alias)) as server:
        monkeypatch.setenv("UNSPECIFIC_LOCAL_URL", server.base_url)
        # The scripted world's constraints are flawed on purpose: the gate would refuse them all
        # (tests/fakes/responders.fake_config); the gate's own demo tests are in test_gate_build.
        config = replace(default_config(), settings={"build": {"gate": False}})
        result = run_demo_blocking(str(tmp_path / "demo.sqlite"), config, SMALL_DEMO)
        assert result.failed == [] and len(result.auditable) == 2
        asked = [r.get("model") for r in server.requests]
    # The small model wrote only responses; the embedded model everything else.
    assert asked.count(small_alias) == 2 and set(asked) == {MODEL_ALIAS, small_alias}
    conn = sqlite3.connect(tmp_path / "demo.sqlite")
    try:
        responses = conn.execute("SELECT model, count(*) FROM generations WHERE kind = "
                                 "'response' GROUP BY model")
        assert dict(responses.fetchall()) == {EMBEDDED_NAME: 2, SMALL_NAME: 2}
        judged = conn.execute(
            "SELECT r.model, count(*) FROM verdicts v JOIN generations g ON g.id = v.generation_id"
            " JOIN generations r ON r.id = coalesce(g.parent_id, g.id) WHERE r.kind = 'response'"
            " GROUP BY r.model").fetchall()
    finally:
        conn.close()
    # Each model's response and its summary judged on every active constraint, the same way.
    counts = dict(judged)
    assert counts[EMBEDDED_NAME] == counts[SMALL_NAME] > 0


def test_a_server_without_the_second_model_is_refused(tmp_path, monkeypatch):
    with FakeOpenAIServer(ScriptedModel(), models=(MODEL_ALIAS,)) as server:
        monkeypatch.setenv("UNSPECIFIC_LOCAL_URL", server.base_url)
        with pytest.raises(LocalModelError, match=f"does not serve {shipped_model(SMALL_NAME).alias}"):
            run_demo_blocking(str(tmp_path / "demo.sqlite"), default_config(), SMALL_DEMO)
        assert not any(r.get("model") == shipped_model(SMALL_NAME).alias for r in server.requests)
