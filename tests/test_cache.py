"""The LLM call cache as users manage it: list, stats, prune, clear (library and command)."""

from __future__ import annotations

import json

import pytest

from pipeline.cli import main
from pipeline.core.errors import UnspecificError
from pipeline.llm.cache import cache_stats, clear_cache, list_calls, prune_cache, stale_call_ids


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    """Rich wraps at the terminal's width; a wide one keeps asserted words whole."""
    monkeypatch.setenv("COLUMNS", "400")


def add_call(store, n: int, *, endpoint="gpt", model="m1", template="judge", template_hash="h1",
             created_at="2026-11-29T10:00:00+00:00", pt=100, ct=10, cost=0.001) -> None:
    store.db["llm_calls"].insert({
        "cache_key": f"key-{n}", "endpoint": endpoint, "model": model, "template": template,
        "template_hash": template_hash,
        "request": json.dumps({"messages": [{"role": "user", "content": f"q{n}"}]}),
        "response": f"reply {n}", "prompt_tokens": pt, "completion_tokens": ct, "cost": cost,
        "latency_s": 0.5, "run_id": "r", "created_at": created_at,
    })
    store.commit()


@pytest.fixture
def filled(store):
    add_call(store, 1)
    add_call(store, 2, pt=50, ct=5, cost=0.002)
    add_call(store, 3, template="summarize", created_at="2020-01-01T00:00:00+00:00")
    add_call(store, 4, endpoint="local", model="qwen", template=None, template_hash=None, cost=0.0)
    return store


def test_stats_group_by_endpoint_model_template(filled):
    rows = {(r["endpoint"], r["model"], r["template"]): r for r in cache_stats(filled)}
    judge = rows[("gpt", "m1", "judge")]
    assert (judge["calls"], judge["prompt_tokens"], judge["completion_tokens"]) == (2, 150, 15)
    assert judge["cost"] == pytest.approx(0.003)
    assert rows[("gpt", "m1", "summarize")]["calls"] == 1
    assert rows[("local", "qwen", "")]["calls"] == 1


def test_list_newest_first_with_filters(filled):
    assert [r["id"] for r in list_calls(filled)] == [4, 3, 2, 1]
    assert [r["id"] for r in list_calls(filled, template="judge", limit=1)] == [2]
    assert [r["id"] for r in list_calls(filled, endpoint="local")] == [4]


def test_prune_by_age_and_template(filled):
    assert prune_cache(filled, older_than_days=30) == 1  # the 2020 call
    assert prune_cache(filled, template="judge") == 2
    assert [r["id"] for r in list_calls(filled)] == [4]
    with pytest.raises(UnspecificError, match="give --older-than"):
        prune_cache(filled)


def test_prune_stale_templates(filled, tmp_path, monkeypatch):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "judge.md").write_text("### user\nJudge {{text}}\n")
    monkeypatch.setenv("UNSPECIFIC_PROMPTS", str(prompts))
    from pipeline.llm.prompts import load_template

    current = load_template("judge").hash
    filled.conn.execute("UPDATE llm_calls SET template_hash = ? WHERE id = 1", (current,))
    # call 2: judge under an older hash; call 3: a template that no longer exists; call 4: no template
    assert sorted(stale_call_ids(filled)) == [2, 3]
    assert prune_cache(filled, stale=True) == 2
    assert [r["id"] for r in list_calls(filled)] == [4, 1]


def test_clear(filled):
    assert clear_cache(filled) == 4
    assert cache_stats(filled) == []


def test_cache_commands(filled, store_path, capsys):
    base = ["--store", str(store_path), "cache"]
    assert main([*base, "stats"]) == 0
    out = capsys.readouterr().out
    assert "summarize" in out and "4 cached call(s)" in out
    assert main([*base, "list", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 4
    assert main([*base, "prune", "--older-than", "30"]) == 0
    assert "pruned 1" in capsys.readouterr().out
    assert main([*base, "clear"]) == 2  # needs --yes
    assert "--yes" in capsys.readouterr().err
    assert main([*base, "clear", "--yes"]) == 0
    assert "cleared 3" in capsys.readouterr().out
    assert main([*base, "list"]) == 0
    assert "no cached calls" in capsys.readouterr().out


def test_cached_prompt_tokens_are_shown_once_an_endpoint_said(filled, store_path, capsys):
    """The prompt tokens an endpoint read from its own prompt cache: no column (no JSON field) while no
    call says; once one does, a column, summed where said ("-" where none said)."""
    base = ["--store", str(store_path), "cache"]
    assert main([*base, "stats"]) == 0
    assert "cached prompt tokens" not in capsys.readouterr().out
    assert main([*base, "list", "--json"]) == 0
    assert all("cached_prompt_tokens" not in r for r in json.loads(capsys.readouterr().out))
    filled.conn.execute("UPDATE llm_calls SET cached_prompt_tokens = 60 WHERE id IN (1, 2)")
    filled.commit()
    rows = {(r["endpoint"], r["template"]): r for r in cache_stats(filled)}
    assert rows[("gpt", "judge")]["cached_prompt_tokens"] == 120
    assert rows[("gpt", "summarize")]["cached_prompt_tokens"] is None  # not said: missing, not 0
    assert main([*base, "stats"]) == 0
    assert "cached prompt tokens" in capsys.readouterr().out
    assert main([*base, "list", "--json"]) == 0
    assert [r["cached_prompt_tokens"] for r in json.loads(capsys.readouterr().out)] == [None, None, 60, 60]


def test_cache_on_a_missing_store(tmp_path, capsys):
    assert main(["--store", str(tmp_path / "none.sqlite"), "cache", "stats"]) == 2
    assert "no store here" in capsys.readouterr().err
