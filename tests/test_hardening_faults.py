"""Faults through the whole pipeline: a build and an evaluation against a fake server that
answers a share of requests with 429, 500, a hang past the client's timeout, a truncated
body, prose instead of the contract, or an empty reply. Every expected result row must exist
exactly once, and (faults being transient) the verdicts must equal a fault-free run's."""

from __future__ import annotations

import tomllib

from pipeline.build import BuildOptions, run_build
from pipeline.config import parse_config
from pipeline.evaluate import EvaluateOptions, run_evaluate
from pipeline.fake_responders import ScriptedModel, audit_rows, make_store, multi_config_toml, result_fingerprint
from pipeline.fake_server import FAULT_KINDS, FakeOpenAIServer
from pipeline.llm import LLMClient

PAIRS, N, MODELS, JUDGES = 3, 8, 2, 2
CONDITIONS = ("single", "none", "direct", "eval")


async def build_and_evaluate(tmp_path, name: str, server: FakeOpenAIServer, *, passes: int = 4) -> tuple:
    """Build, then evaluate, each run again while anything is unfinished (the documented way to
    resume after failures). Returns (store, passes used by build, passes used by evaluate)."""
    store = make_store(tmp_path / f"{name}.sqlite", PAIRS)
    raw = tomllib.loads(multi_config_toml(server.base_url, models=MODELS, judges=JUDGES, timeout_s=0.5,
                                          evaluate={"response_words": 60}))
    config = parse_config(raw)
    client = LLMClient(config, store, backoff_base_s=0.005, backoff_cap_s=0.05)
    options = BuildOptions.from_config(config, n=PAIRS, n_constraints=N, words=60, run_id="b1", conditions=CONDITIONS)
    try:
        for build_passes in range(1, passes + 1):
            summary = await run_build(store, config, client, options)
            if summary.complete and not any(r.failed for r in summary.conditions):
                break
            # failed instructions are retried by the next build of the same run
        for eval_passes in range(1, passes + 1):
            result = await run_evaluate(store, config, client, EvaluateOptions(build_run="b1"))
            if not result.failed and complete(store):
                break
    finally:
        await client.aclose()
    return store, build_passes, eval_passes


def rows(store) -> list:
    return audit_rows(store, build_run="b1", n_pairs=PAIRS, conditions=CONDITIONS, n_constraints=N, models=MODELS,
                      judges=JUDGES)


def complete(store) -> bool:
    return all(r.complete for r in rows(store))


async def test_twenty_percent_faults_every_row_once_and_same_verdicts(tmp_path) -> None:
    with FakeOpenAIServer(ScriptedModel(answer_repairs=True)) as clean:
        reference, _, _ = await build_and_evaluate(tmp_path, "clean", clean)
        needed = clean.calls
    assert complete(reference), rows(reference)

    with FakeOpenAIServer(ScriptedModel(answer_repairs=True), fault_rate=0.2, seed=7, hang_s=1.0) as faulty:
        store, build_passes, eval_passes = await build_and_evaluate(tmp_path, "faulty", faulty)
        made, served = faulty.calls, dict(faulty.faults_served)

    table = rows(store)
    print(f"\ncalls {made} / {needed} needed; faults served {served}; passes build {build_passes}, evaluate {eval_passes}")
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
    prose = {h for (h,) in store.conn.execute("SELECT hash FROM texts WHERE body LIKE '%as a language model%'")}
    tainted = {k for k, h in got["generations"].items() if h in prose}
    tainted |= {k for k in got["generations"] if any(k.endswith("/" + t) for t in tainted)}  # their summaries
    differing = {k for k in ref["generations"] if got["generations"].get(k) != ref["generations"][k]}
    assert differing == tainted, (sorted(differing - tainted)[:5], sorted(tainted - differing)[:5])
    assert len(tainted) <= served.get("wrong_format", 0) * 2
    same = {k: v for k, v in got["verdicts"].items() if k.split("|")[0] not in tainted}
    assert same == {k: v for k, v in ref["verdicts"].items() if k.split("|")[0] not in tainted}
    assert len(same) >= len(ref["verdicts"]) - len(tainted) * N * JUDGES
    # No failed call was cached: no empty reply, and prose only where it was taken as a text.
    assert not store.scalar("SELECT count(*) FROM llm_calls WHERE trim(response) = ''")
    prose_generations = sum(1 for h in got["generations"].values() if h in prose)
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE response LIKE '%as a language model%'") == prose_generations
    print(f"  {len(tainted)} texts were the wrong-format prose taken as an answer (set aside); the rest equal the clean run")
    reference.close()
    store.close()
