"""Faults through the whole pipeline: a build and an evaluation against a fake server that
answers a share of requests with 429, 500, a hang past the client's timeout, a truncated
body, prose instead of the contract, or an empty reply. Every expected result row must exist
exactly once, and (faults being transient) the verdicts must equal a fault-free run's."""

from __future__ import annotations

from pipeline.core.config import parse_config
from pipeline.llm.client import LLMClient
from tests.fakes.fake_server import FAULT_KINDS, FakeOpenAIServer
from tests.fakes.responders import ScriptedModel, Workload, make_store, result_fingerprint

WORK = Workload(pairs=3, constraints=8, models=2, judges=2)


async def run_all(tmp_path, name: str, server: FakeOpenAIServer) -> tuple:
    store = make_store(tmp_path / f"{name}.sqlite", WORK.pairs)
    config = WORK.config(server.base_url, timeout_s=0.5, evaluate={"response_words": 60})
    passes = await WORK.run(store, config)
    return store, *passes


def complete(store) -> bool:
    return all(r.complete for r in WORK.rows(store))


async def test_twenty_percent_faults_every_row_once_and_same_verdicts(tmp_path) -> None:
    with FakeOpenAIServer(ScriptedModel(answer_repairs=True)) as clean:
        reference, _, _ = await run_all(tmp_path, "clean", clean)
        needed = clean.calls
    assert complete(reference), WORK.rows(reference)

    with FakeOpenAIServer(ScriptedModel(answer_repairs=True), fault_rate=0.2, seed=7, hang_s=1.0) as faulty:
        store, build_passes, eval_passes = await run_all(tmp_path, "faulty", faulty)
        made, served = faulty.calls, dict(faulty.faults_served)

    table = WORK.rows(store)
    print(f"\ncalls {made} / {needed} needed; faults served {served}; passes build {build_passes}, "
          f"evaluate {eval_passes}")
    for r in table:
        print(f"  {r.kind:<20} {r.present}/{r.expected} present, {r.duplicates} duplicates")
    assert set(served) == set(FAULT_KINDS), served  # every kind of fault was exercised
    assert all(r.complete for r in table), table
    assert made > needed  # faults cost retries, and they happened
    # Transient faults must not change results. The one fault a text call cannot tell from an
    # answer is prose in place of prose: the "wrong format" reply taken as a response or summary
    # (a model under test may really answer that way, and the metrics must see it). Those texts,
    # their summaries and their verdicts are set aside; everything else equals the clean run.
    ref, got = result_fingerprint(reference, "b1"), result_fingerprint(store, "b1")
    assert got["instructions"] == ref["instructions"]
    assert got["constraints"] == ref["constraints"]
    prose = {h
             for (h,) in store.conn.execute("SELECT hash FROM texts WHERE body LIKE '%as a language model%'")}
    tainted = {k for k, h in got["generations"].items() if h in prose}
    tainted |= {k for k in got["generations"] if any(k.endswith("/" + t) for t in tainted)}  # their summaries
    differing = {k for k in ref["generations"] if got["generations"].get(k) != ref["generations"][k]}
    assert differing == tainted, (sorted(differing - tainted)[:5], sorted(tainted - differing)[:5])
    assert len(tainted) <= served.get("wrong_format", 0) * 2
    same = {k: v for k, v in got["verdicts"].items() if k.split("|")[0] not in tainted}
    assert same == {k: v for k, v in ref["verdicts"].items() if k.split("|")[0] not in tainted}
    assert len(same) >= len(ref["verdicts"]) - len(tainted) * WORK.constraints * WORK.judges
    # No failed call was cached: no empty reply, and prose only where it was taken as a text.
    assert not store.scalar("SELECT count(*) FROM llm_calls WHERE trim(response) = ''")
    prose_generations = sum(1 for h in got["generations"].values() if h in prose)
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE response LIKE "
                        "'%as a language model%'") == prose_generations
    print(f"  {len(tainted)} texts were the wrong-format prose taken as an answer (set aside); the "
          "rest equal the clean run")
    reference.close()
    store.close()


async def test_a_verdict_the_judge_never_gave_is_missing_and_asked_again_by_the_next_run(store) -> None:
    """A judge reply that stays unusable through the repair round is stored as missing (never
    No), and the next run asks again: the cause (a drifting model, a cut reply) is often transient."""
    from pipeline.stages.judging import UNANSWERED, judge_generation

    store.db["instructions"].insert({"id": 1, "run_id": "b", "domain": "news", "condition": "eval",
                                     "main_task": "t",
                                     "n_constraints": 2, "status": "done", "created_at": "x"})
    constraints = [(store.db["constraints"].insert({"instruction_id": 1, "position": p, "text": t,
                                                    "origin": "synthesized",
                                                    "active": 1}).last_pk, t)
                   for p, t in enumerate(["Cover angle number 1.", "Cover angle number 2."], 1)]
    text = "This part of the story turns to angle number 1 and what it meant for the town."
    gid = store.db["generations"].insert({"kind": "response", "instruction_id": 1, "model": "m",
                                          "mode": "direct",
                                          "text_hash": store.put_text(text), "words": 16}).last_pk
    store.commit()
    with FakeOpenAIServer(ScriptedModel(answer_repairs=True)) as server:
        server.push("I would rather write a poem.", "Still a poem.")  # the ask and its repair round
        config = parse_config({"endpoints": {"j": {"base_url": server.base_url, "model": "mj",
                                                   "max_retries": 0}},
                               "roles": {"judges": ["j"]}})
        client = LLMClient(config, store)
        first = await judge_generation(store, client, "j", gid, constraints)
        stored = store.query("SELECT verdict, reason, call_id FROM verdicts ORDER BY constraint_id")
        assert [r["verdict"] for r in stored] == [None, None]
        second = await judge_generation(store, client, "j", gid, constraints)
        third = await judge_generation(store, client, "j", gid, constraints)
        await client.aclose()
        calls = server.calls
    assert first.unanswered == 2 and [r["reason"] for r in stored] == [UNANSWERED] * 2
    assert second.judged == 2 and second.unanswered == 0
    assert [r["verdict"]
            for r in store.query("SELECT verdict FROM verdicts ORDER BY constraint_id")] == [1, 0]
    assert third.judged == 0 and third.skipped == 2 and calls == 3  # answered now: never asked again
    assert store.scalar("SELECT count(*) FROM verdicts") == 2
