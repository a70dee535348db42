"""Naturalness: pairwise preference between constraint sets for the same reference article."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from pipeline.analysis.metrics import naturalness_rates
from pipeline.core.config import parse_config
from pipeline.core.errors import CorpusError
from pipeline.llm.client import LLMClient
from pipeline.stages.naturalness import (
    NaturalnessOptions,
    comparison_pairs,
    import_human_sets,
    run_naturalness,
)
from pipeline.store.database import now
from tests.fakes.fake_server import FakeOpenAIServer, last_user_message

# Marker words: the fake judge prefers sets by these, whatever order they are shown in.
STYLE = {"eval": "natural", "direct": "contrived", "single": "plain", "human": "homely"}
PREFERENCE = ["homely", "natural", "plain", "contrived"]  # most natural first


def _articles(store, n: int) -> list[int]:
    ids = []
    for i in range(n):
        h = store.put_text(f"article {i}")
        ids.append(store.db["articles"].insert({"corpus": "c", "domain": "news", "source_id": f"s{i}",
                                                "title": f"t{i}",
                                                "text_hash": h, "words": 2, "status": "kept"}).last_pk)
    store.commit()
    return ids


def _sets(store, articles: list[int], conditions=("eval", "direct", "single")) -> None:
    for a in articles:
        for c in conditions:
            iid = store.db["instructions"].insert({"run_id": "b1", "domain": "news",
                                                   "condition": c, "article_a": a,
                                                   "article_b": None if c == "single" else a + 1000,
                                                   "main_task": f"Write about {a}.", "n_constraints": 2,
                                                   "status": "done", "created_at": now()}).last_pk
            for pos in (1, 2):
                store.db["constraints"].insert({"instruction_id": iid, "position": pos, "active": 1,
                                                "origin": "synthesized",
                                                "text": f"A {STYLE[c]} request number {pos}."})
    store.commit()


def judge(request: dict) -> str:
    prompt = last_user_message(request)
    one = prompt.split("<<<REQUEST1", 1)[1].split("REQUEST1>>>", 1)[0]
    two = prompt.split("<<<REQUEST2", 1)[1].split("REQUEST2>>>", 1)[0]
    rank = [next(i for i, w in enumerate(PREFERENCE) if w in block) for block in (one, two)]
    return json.dumps({"preferred": 1 if rank[0] < rank[1] else 2, "reason": "reads like a person"})


def first_shown_judge(request: dict) -> str:
    return json.dumps({"preferred": 1, "reason": "always the first"})


def _config(server, judges=("na",)):
    return parse_config({"endpoints": {j: {"base_url": server.base_url, "model": f"model-{j}",
                                           "max_retries": 0}
                                       for j in judges}, "roles": {"naturalness_judge": judges[0]}})


def rates_of(store) -> dict:
    return {(r.condition, r.opponent): r for r in naturalness_rates(store)}


def first_shown_share(store) -> tuple[float, int]:
    decided = store.query("SELECT shown_first, winner FROM naturalness WHERE winner IS NOT NULL")
    return sum(r["winner"] == r["shown_first"] for r in decided) / max(1, len(decided)), len(decided)


async def _run(store, config, options):
    client = LLMClient(config, store)
    try:
        return await run_naturalness(store, config, client, options)
    finally:
        await client.aclose()


async def test_pairs_judged_in_both_orders_and_win_rates(store):
    articles = _articles(store, 12)
    _sets(store, articles)
    with FakeOpenAIServer(judge) as server:
        summary = await _run(store, _config(server), NaturalnessOptions())
        assert summary.done == 12 * 3 * 2 and server.calls == 72
        # Re-run: all stored, no call.
        again = await _run(store, _config(server), NaturalnessOptions())
        assert again.skipped == 72 and server.calls == 72
    rows = store.query("SELECT * FROM naturalness")
    # Every pair once with each set first.
    orders = Counter((r["instruction_a"], r["instruction_b"]) for r in rows)
    assert len(orders) == 36 and set(orders.values()) == {2}
    assert all({r["shown_first"] for r in rows
                if (r["instruction_a"], r["instruction_b"]) == pair} == set(pair)
               for pair in orders)
    rates = rates_of(store)
    assert rates[("eval", "direct")].rate.value == 1.0 and rates[("eval", "direct")].wins == 24
    assert rates[("direct", "single")].rate.value == 0.0 and rates[("direct", "single")].losses == 24
    assert rates[("eval", "any")].n == 48 and rates[("single", "any")].wins == 24
    # The judge prefers by content: the first-shown set wins exactly half, and both orders agree.
    share, n = first_shown_share(store)
    assert n == 72 and share == 0.5
    ed = rates[("eval", "direct")]
    assert ed.first_shown.value == 0.5 and ed.first_shown.low < 0.5 < ed.first_shown.high
    assert (ed.order_agreement.value, ed.both_orders) == (1.0, 12)


async def test_position_bias_is_visible_and_cancels(store):
    """A judge that always picks the first set shown: each condition wins exactly half the time,
    and the two orders of every pair disagree, which tells the bias apart from a preference."""
    articles = _articles(store, 5)  # few instructions: one order each would leave [0, 100] intervals
    _sets(store, articles, conditions=("eval", "direct"))
    with FakeOpenAIServer(first_shown_judge) as server:
        await _run(store, _config(server), NaturalnessOptions())
    rate = rates_of(store)[("eval", "direct")]
    assert rate.first_shown_wins == 1.0 and rate.n == 10
    assert rate.rate.value == 0.5 and rate.rate.low < 0.5 < rate.rate.high  # no preference
    assert (rate.order_agreement.value, rate.both_orders) == (0.0, 5)


async def test_a_store_judged_in_one_order_gets_the_other(store):
    articles = _articles(store, 2)
    _sets(store, articles, conditions=("eval", "direct"))
    ((a, b), _) = comparison_pairs(store, NaturalnessOptions())
    store.conn.execute("INSERT INTO naturalness(judge, instruction_a, instruction_b, shown_first, winner)"
                       " VALUES ('na', ?, ?, ?, ?)", (a, b, a, a))
    store.commit()
    with FakeOpenAIServer(judge) as server:
        summary = await _run(store, _config(server), NaturalnessOptions())
        assert (summary.skipped, summary.done, server.calls) == (1, 3, 3)
    assert store.scalar("SELECT count(*) FROM naturalness WHERE instruction_a = ? AND instruction_b = ?",
                        [a, b]) == 2


async def test_human_sets_from_jsonl(store, tmp_path):
    articles = _articles(store, 3)
    _sets(store, articles, conditions=("eval",))
    path = tmp_path / "human.jsonl"
    lines = [{"article_id": articles[0], "main_task": "Write about it.",
              "constraints": ["A homely ask.", "Another homely ask."]},
             {"source_id": "s1", "main_task": "Write.", "constraints": ["A homely one."]}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    with FakeOpenAIServer(judge) as server:
        summary = await _run(store, _config(server), NaturalnessOptions(human_file=str(path)))
        assert summary.done == 4  # two pairs, each in both orders
    assert import_human_sets(store, path) == (0, 2)  # idempotent
    rate = rates_of(store)[("human", "eval")]
    assert (rate.wins, rate.n) == (4, 4)
    assert {r["instruction_a"] for r in store.query("SELECT instruction_a FROM naturalness")} <= set(
        r[0] for r in store.conn.execute("SELECT id FROM instructions WHERE condition = 'eval'"))
    assert store.scalar("SELECT count(*) FROM instructions WHERE condition = 'human' "
                        "AND status = 'imported'") == 2


def test_human_file_errors_name_the_line(store, tmp_path):
    _articles(store, 1)
    path = tmp_path / "bad.jsonl"
    path.write_text('{"article_id": 1, "constraints": ["x"]}\n{"article_id": 99, "constraints": ["x"]}\n')
    with pytest.raises(CorpusError, match=r"bad.jsonl line 2: article_id 99"):
        import_human_sets(store, path)
    assert store.scalar("SELECT count(*) FROM instructions WHERE condition = 'human'") == 0  # all or nothing
    path.write_text('{"article_id": 1, "constraints": []}\n')
    with pytest.raises(CorpusError, match="line 1: field 'constraints'"):
        import_human_sets(store, path)
    path.write_bytes('{"article_id": 1, "constraints": ["caf\u00e9"]}\n'.encode("latin-1"))
    with pytest.raises(CorpusError, match=r"bad.jsonl: not UTF-8: byte 0xe9 at line 1"):
        import_human_sets(store, path)
    # U+2028 inside a JSON string is not a line break: the set is read whole
    path.write_text(json.dumps({"article_id": 1, "constraints": ["one\u2028two"]}, ensure_ascii=False) + "\n")
    assert import_human_sets(store, path) == (1, 0)
    assert store.scalar("SELECT text FROM constraints WHERE origin = 'human'") == "one\u2028two"


def test_comparison_pairs_filters(store):
    articles = _articles(store, 2)
    _sets(store, articles)
    assert len(comparison_pairs(store, NaturalnessOptions())) == 6
    assert len(comparison_pairs(store, NaturalnessOptions(conditions=["eval", "single"]))) == 2
    assert comparison_pairs(store, NaturalnessOptions(build_run="other")) == []


async def test_two_judges_and_ties(store):
    articles = _articles(store, 2)
    _sets(store, articles, conditions=("eval", "direct"))

    def responder(request: dict) -> str:
        if request["model"] == "model-nb":
            return json.dumps({"preferred": 0, "reason": "cannot tell"})
        return judge(request)

    with FakeOpenAIServer(responder) as server:
        await _run(store, _config(server, ("na", "nb")), NaturalnessOptions(judges=["na", "nb"]))
        assert server.calls == 8
    rate = rates_of(store)[("eval", "direct")]
    assert rate.ties == 4 and rate.wins == 4 and rate.rate.value == pytest.approx(0.75)
    assert store.scalar("SELECT count(*) FROM naturalness WHERE judge = 'nb' AND winner IS NULL") == 4
    assert rate.both_orders == 4 and rate.order_agreement.value == 1.0  # a tie in both orders agrees


def test_cli_naturalness(store_path, tmp_path, capsys):
    from pipeline.cli import main
    from pipeline.store.database import open_store

    s = open_store(store_path)
    _sets(s, _articles(s, 4))
    s.close()
    with FakeOpenAIServer(judge) as server:
        cfg = tmp_path / "unspecific.toml"
        cfg.write_text(f'[endpoints.na]\nbase_url = "{server.base_url}"\nmodel = "m"\nmax_retries = 0\n'
                       '[roles]\nnaturalness_judge = "na"\n')
        args = ["--store", str(store_path), "--config", str(cfg)]
        assert main([*args, "naturalness"]) == 0
        assert server.calls == 24
        out = capsys.readouterr().out
        assert "eval" in out and "100.0" in out and "first shown won" in out and "orders agree" in out
        assert main([*args, "evaluate", "--naturalness"]) == 0 and server.calls == 24  # all stored
        assert main([*args, "naturalness", "--show"]) == 0
    s = open_store(store_path)
    assert s.scalar("SELECT count(*) FROM runs WHERE kind = 'naturalness' AND status = 'done'") == 2
