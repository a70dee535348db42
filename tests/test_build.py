"""The build over all four conditions with a scripted model: counts, sharing, lineage, flags,
failures, usage per condition, step mode, and the CLI report."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from pipeline.core.config import Config
from pipeline.core.progress import StopFlag
from pipeline.llm.client import LLMClient
from pipeline.stages.build import (
    BuildOptions,
    run_base,
    run_build,
    run_revise,
    run_synthesize,
    start_build_run,
)
from pipeline.store.database import Store
from tests.fakes.fake_server import FakeOpenAIServer
from tests.fakes.responders import (
    DUPLICATE,
    LEAKY,
    NEAR_DUPLICATE,
    ScriptedModel,
    config_toml,
    fake_config,
    make_store,
)

N = 10


async def _build(tmp_path, model, *, n_pairs=2, conditions=("single", "none", "direct", "eval"), **opts):
    store = make_store(tmp_path / "store.sqlite", n_pairs)
    server = FakeOpenAIServer(model).start()
    config = fake_config(server.base_url)
    client = LLMClient(config, store, backoff_base_s=0.01)
    options = BuildOptions.from_config(config, n=n_pairs, conditions=conditions, n_constraints=N,
                                       words=60, **opts)
    try:
        summary = await run_build(store, config, client, options)
    finally:
        await client.aclose()
        server.stop()
    return store, server, summary


Served = tuple[FakeOpenAIServer, Config, LLMClient]


@asynccontextmanager
async def _served(store: Store, model: ScriptedModel) -> AsyncIterator[Served]:
    """``model`` behind a fake server, a config of it, and a client on ``store`` (closed after)."""
    with FakeOpenAIServer(model) as server:
        config = fake_config(server.base_url)
        client = LLMClient(config, store)
        try:
            yield server, config, client
        finally:
            await client.aclose()


def _instructions(store, condition):
    return store.query("SELECT * FROM instructions WHERE condition = ? ORDER BY id", [condition])


def _active(store, instruction_id):
    return store.query("SELECT * FROM constraints WHERE instruction_id = ? AND active = 1 ORDER BY position",
                       [instruction_id])


async def test_all_four_conditions_counts_sharing_and_calls(tmp_path) -> None:
    model = ScriptedModel()
    store, server, summary = await _build(tmp_path, model, contradictions=True)
    assert summary.complete
    for cond in ("single", "none", "direct", "eval"):
        rows = _instructions(store, cond)
        assert len(rows) == 2 and all(r["status"] == "done" for r in rows), cond
        for r in rows:
            active = _active(store, r["id"])
            assert [c["position"] for c in active] == list(range(1, N + 1))
            assert r["main_task"]
    # the common synthesis happened once per pair; single once per pair; base once per pair
    assert model.kinds["synthesize_common"] == 2
    assert model.kinds["synthesize_single"] == 2
    assert model.kinds["base_article"] == 2
    assert model.kinds["judge_batched"] == 2
    assert model.kinds["revise_direct"] == 2
    assert model.kinds["revise_eval"] == 2
    assert model.kinds["contradictions"] == 8
    assert store.scalar("SELECT count(*) FROM instructions WHERE condition = 'common'") == 0  # none holds it
    assert store.scalar("SELECT count(*) FROM generations WHERE kind = 'base'") == 2
    # direct and eval start from the same constraints as none, copied with a pointer back
    by_pair = lambda cond: sorted(_instructions(store, cond), key=lambda r: r["pair_id"])  # noqa: E731
    for none, direct, ev in zip(by_pair("none"), by_pair("direct"), by_pair("eval")):
        originals = {c["id"]: c["text"] for c in _active(store, none["id"])}
        for inst in (direct, ev):
            copies = store.query("SELECT * FROM constraints WHERE instruction_id = ? AND "
                                 "origin = 'synthesized'", [inst["id"]])
            assert len(copies) == N
            assert all(originals[c["source_id"]] == c["text"] for c in copies)
            assert inst["main_task"] == none["main_task"]
    report = {r.condition: r for r in summary.conditions}
    assert report["direct"].replaced == 2 * N and report["direct"].replaced_share == 1.0
    assert report["none"].replaced == 0
    assert report["common"].usage.calls == 2
    assert report["single"].usage.calls == 2 + 2  # synthesis, contradictions
    assert report["none"].usage.calls == 2  # contradictions only: its synthesis is the shared one
    assert report["direct"].usage.calls == 2 + 2  # revision, contradictions
    assert report["eval"].usage.calls == 2 + 2 + 2 + 2  # base, judge, revise, contradictions
    assert summary.usage.calls == server.calls
    run = store.one("SELECT * FROM runs WHERE id = ?", [summary.run_id])
    assert run["status"] == "done" and run["calls"] == server.calls and run["prompt_tokens"] > 0


async def test_eval_replaces_only_what_the_base_article_satisfies_with_lineage(tmp_path) -> None:
    model = ScriptedModel()
    store, server, summary = await _build(tmp_path, model, n_pairs=1, conditions=("eval",))
    inst = _instructions(store, "eval")[0]
    # the holder of the shared synthesis is a 'common' instruction when none is not built
    holder = store.one("SELECT * FROM instructions WHERE condition = 'common'")
    assert holder["status"] == "source"
    originals = store.query("SELECT * FROM constraints WHERE instruction_id = ? AND origin = 'synthesized'",
                            [inst["id"]])
    easy = [c for c in originals if "(easy)" in c["text"]]
    assert easy, "the script marks some constraints easy"
    gen = store.one("SELECT * FROM generations WHERE kind = 'base'")
    assert gen["instruction_id"] == inst["id"] and inst["base_generation_id"] == gen["id"]
    assert store.scalar("SELECT count(*) FROM verdicts WHERE generation_id = ?", [gen["id"]]) == N
    for c in originals:
        assert c["base_verdict"] == (1 if c in easy else 0)
        assert c["active"] == (0 if c in easy else 1)
        if c in easy:
            assert c["position"] is None
    revised = store.query("SELECT * FROM constraints WHERE instruction_id = ? AND origin = 'revised'",
                          [inst["id"]])
    assert len(revised) == len(easy)
    by_old = {c["id"]: c for c in easy}
    old_positions = {r["replaces_id"] for r in revised}
    assert old_positions == set(by_old)
    for r in revised:
        old = by_old[r["replaces_id"]]
        assert r["active"] == 1 and r["text"].startswith("Harder:")
        assert r["replaced_reason"].startswith("too easy")
        # The new constraint was never judged on the base article: no verdict of its own, and
        # the old row keeps the Yes and quote that made it too easy.
        assert r["base_verdict"] is None and r["base_quote"] is None
        assert old["base_verdict"] == 1 and old["base_quote"] == "The council met and argued about money"
    assert len(_active(store, inst["id"])) == N
    report = {r.condition: r for r in summary.conditions}
    assert report["eval"].replaced == len(easy)
    assert report["eval"].replaced_share == pytest.approx(len(easy) / N)


async def test_eval_keeps_a_base_yes_whose_quote_is_not_in_the_base_article(tmp_path) -> None:
    # The embedded judge quoted the constraint itself for 27 of its 31 Yes on one base article.
    store, server, summary = await _build(tmp_path, ScriptedModel(easy_every=3, unshown_every=4), n_pairs=1,
                                          conditions=("eval",))
    inst = _instructions(store, "eval")[0]
    originals = store.query("SELECT * FROM constraints WHERE instruction_id = ? AND origin = 'synthesized'",
                            [inst["id"]])
    unshown = [c for c in originals if "(unshown)" in c["text"]]
    easy = [c for c in originals if "(easy)" in c["text"]]
    assert unshown and easy
    for c in unshown:  # judged Yes, quote checked and not found: kept, its verdict recorded
        assert (c["active"], c["base_verdict"]) == (1, 1)
        assert store.scalar("SELECT quote_found FROM verdicts WHERE constraint_id = ?",
                            [c["id"]]) == "missing"
    assert all(c["active"] == 0 for c in easy)
    assert {r.condition: r for r in summary.conditions}["eval"].replaced == len(easy)


async def test_eval_on_an_endpoint_with_list_items_lists_that_many_too_easy_ids_first(tmp_path) -> None:
    """The generator's ``list_items`` (the embedded model: 15) bounds the first revise ask too;
    the other too-easy constraints are asked for in the rounds after it, and all are replaced."""
    from dataclasses import replace

    from tests.fakes.responders import block, kind_of, numbered_items

    store = make_store(tmp_path / "s.sqlite", 1)
    model = ScriptedModel(easy_every=2)
    async with _served(store, model) as (server, config, client):
        options = start_build_run(store, config, BuildOptions.from_config(config, n=1, conditions=("eval",),
                                                                          n_constraints=N))
        await run_synthesize(store, config, client, options)
        await run_base(store, config, client, options)
        # from here on the generator lists at most 2 items an ask
        config.endpoints["fake"] = replace(config.endpoint("fake"), list_items=2)
        await run_revise(store, config, client, options)
    inst = _instructions(store, "eval")[0]
    easy = store.query("SELECT * FROM constraints WHERE instruction_id = ? AND origin = "
                       "'synthesized' AND active = 0", [inst["id"]])
    assert len(easy) >= 3
    revise = [r for r in server.requests if kind_of(r) == "revise_eval"]
    too_easy = block(revise[0]["messages"][-1]["content"], "TOO_EASY")
    assert len(revise) == 1 and len(numbered_items(too_easy)) == 2
    # the ids alone: shown the base article's words, a small model pastes them into its replacements
    assert "base article" not in too_easy.lower() and len(too_easy.splitlines()) == 2
    assert model.kinds["revise_missing"] == -(-(len(easy) - 2) // 2)
    assert inst["status"] == "done" and len(_active(store, inst["id"])) == N
    revised = store.query("SELECT * FROM constraints WHERE instruction_id = ? AND origin = 'revised'",
                          [inst["id"]])
    assert {r["replaces_id"] for r in revised} == {c["id"] for c in easy}


async def test_flags_raised_on_the_planted_constraints(tmp_path) -> None:
    store, server, summary = await _build(tmp_path, ScriptedModel(easy_every=0), n_pairs=1,
                                          conditions=("none",))
    inst = _instructions(store, "none")[0]
    rows = {c["text"]: c["id"] for c in _active(store, inst["id"])}
    flags = {(r["constraint_id"], r["flag"]): json.loads(r["detail"])
             for r in store.query("SELECT * FROM constraint_flags")}
    leaky = rows[LEAKY]
    assert (leaky, "proper_noun") in flags
    words = {w["word"] for w in flags[(leaky, "proper_noun")]["words"]}
    assert "Dawson" in words
    assert "Councillor" not in words  # starts a sentence in the reference: not evidence of a name
    copied = flags[(leaky, "copied_ngram")]["spans"]
    assert copied[0]["reference"] == "a" and copied[0]["words"] >= 5
    s, e = copied[0]["constraint_span"]
    assert LEAKY[s:e].lower() in "the gap of two hundred thousand pounds came from rising heating costs"
    assert (leaky, "specificity_leak") in flags and flags[(leaky, "specificity_leak")]["closer_to"] == "a"
    dup = flags[(rows[DUPLICATE], "duplicate")]
    assert dup["with"][0]["constraint_id"] == rows[NEAR_DUPLICATE]
    assert (rows[NEAR_DUPLICATE], "duplicate") in flags
    generic = [cid for text, cid in rows.items() if text.startswith("Discuss")]
    assert not any((cid, f) in flags for cid in generic for f in ("proper_noun", "copied_ngram", "duplicate"))
    report = {r.condition: r for r in summary.conditions}
    assert report["none"].flags["proper_noun"] == 1 and report["none"].flags["duplicate"] == 2


async def test_contradictions_stored_and_flagged(tmp_path) -> None:
    store, server, summary = await _build(tmp_path, ScriptedModel(contradict=(2, 5)), n_pairs=1,
                                          conditions=("none",),
                                          contradictions=True)
    inst = _instructions(store, "none")[0]
    active = _active(store, inst["id"])
    row = store.one("SELECT * FROM contradictions")
    assert (row["constraint_a"], row["constraint_b"]) == (active[1]["id"], active[4]["id"])
    flagged = {r["constraint_id"]
               for r in store.query("SELECT * FROM constraint_flags WHERE flag = 'contradiction'")}
    assert flagged == {active[1]["id"], active[4]["id"]}


async def test_37_of_39_repaired_inside_a_build(tmp_path) -> None:
    model = ScriptedModel(short_by=2)
    store = make_store(tmp_path / "s.sqlite", 1)
    async with _served(store, model) as (server, config, client):
        options = BuildOptions.from_config(config, n=1, conditions=("single", "none"), n_constraints=39)
        await run_build(store, config, client, options)
    assert model.kinds["constraints_more"] == 2  # one per synthesis (single and common)
    asks = [r["messages"][-1]["content"] for r in server.requests
            if "more constraints" in r["messages"][-1]["content"]]
    assert all("Write EXACTLY 2 more" in a for a in asks)
    for cond in ("single", "none"):
        inst = _instructions(store, cond)[0]
        assert inst["status"] == "done" and len(_active(store, inst["id"])) == 39


async def test_repeated_bad_replies_recorded_as_failed_instructions(tmp_path) -> None:
    store, server, summary = await _build(tmp_path, ScriptedModel(always_bad=True), n_pairs=1)
    for cond in ("single", "none", "direct", "eval"):
        inst = _instructions(store, cond)[0]
        assert inst["status"] == "failed" and inst["error"], cond
        assert store.scalar("SELECT count(*) FROM constraints WHERE instruction_id = ?", [inst["id"]]) == 0
    assert "no usable list" in _instructions(store, "single")[0]["error"]
    assert "common synthesis failed" in _instructions(store, "eval")[0]["error"]
    assert {r.condition: r.failed for r in summary.conditions if r.condition != "common"} == {
        "single": 1, "none": 1, "direct": 1, "eval": 1}
    assert server.calls == 4  # two tries for single, two for common; nothing after


async def test_short_revision_asks_only_missing_ids_then_fails(tmp_path) -> None:
    class DropOne(ScriptedModel):
        def __call__(self, request):
            reply = super().__call__(request)
            from tests.fakes.responders import kind_of

            if kind_of(request) in ("revise_direct", "revise_missing"):
                data = json.loads(reply.text)
                data["replacements"] = [r for r in data["replacements"] if r["id"] != 4]
                reply.text = json.dumps(data)
            return reply

    model = DropOne(easy_every=0)
    store, server, summary = await _build(tmp_path, model, n_pairs=1, conditions=("direct",))
    missing = [r for r in server.requests if "<<<MISSING" in r["messages"][-1]["content"]]
    assert len(missing) == 1 and "ids 4 only" in missing[0]["messages"][-1]["content"]
    inst = _instructions(store, "direct")[0]
    assert inst["status"] == "failed" and "missing ids [4]" in inst["error"]
    # nothing half-written: the copied constraints are all still active, none revised
    assert len(_active(store, inst["id"])) == N
    assert store.scalar("SELECT count(*) FROM constraints WHERE origin = 'revised'") == 0


async def test_stages_one_at_a_time_with_max_units_and_stop(tmp_path) -> None:
    store = make_store(tmp_path / "s.sqlite", 3)
    model = ScriptedModel()
    async with _served(store, model) as (server, config, client):
        options = start_build_run(store, config, BuildOptions.from_config(config, n=3, conditions=("eval",),
                                                                          n_constraints=N))
        s1 = await run_synthesize(store, config, client, options, max_units=2)
        assert (s1.processed, s1.remaining) == (2, 1)
        assert store.scalar("SELECT count(*) FROM instructions WHERE condition = 'eval' AND "
                            "status = 'synthesized'") == 2
        stopped = StopFlag()
        stopped.stop("pause")
        s_stop = await run_synthesize(store, config, client, options, stop=stopped)
        assert s_stop.processed == 0 and s_stop.stopped
        await run_synthesize(store, config, client, options)
        b = await run_base(store, config, client, options)
        assert b.processed == 3
        assert store.scalar("SELECT count(*) FROM instructions WHERE status = 'base_judged'") == 3
        r = await run_revise(store, config, client, options)
        assert r.processed == 3
        again = await run_build(store, config, client, options)  # nothing left: no new call
    assert again.complete and sum(s.processed for s in again.stages) == 0
    assert model.kinds["synthesize_common"] == 3 and model.kinds["base_article"] == 3


def test_cli_build_prints_per_condition_report(tmp_path, capsys, monkeypatch) -> None:
    from pipeline.cli import main

    monkeypatch.setenv("COLUMNS", "200")
    store = make_store(tmp_path / "store.sqlite", 1)
    store.close()
    with FakeOpenAIServer(ScriptedModel()) as server:
        (tmp_path / "c.toml").write_text(config_toml(server.base_url))
        code = main(["--store", str(tmp_path / "store.sqlite"), "--config", str(tmp_path / "c.toml"), "build",
                     "--n", "1", "--constraints", "6", "--words", "50", "--new-run", "r1"])
    out = capsys.readouterr().out
    assert code == 0
    for word in ("single", "none", "direct", "eval", "common (shared synthesis)", "cache hits", "replaced"):
        assert word in out
    assert "6/6 (100%)" in out  # direct: all replaced
    with FakeOpenAIServer(ScriptedModel()) as server2:
        (tmp_path / "c.toml").write_text(config_toml(server2.base_url))
        main(["--store", str(tmp_path / "store.sqlite"), "--config", str(tmp_path / "c.toml"),
              "build", "--run", "r1"])
    assert server2.calls == 0  # the same run again, its options from the store: all stored
    assert "6 constraints" in capsys.readouterr().out  # not the default 39: the run's own options


@pytest.mark.real_model
# measured 5-7 min on 2 shared cores (5 calls, ~4.3k prompt + ~0.9k completion tokens)
@pytest.mark.timeout(3000)
async def test_real_local_model_eval_build(tmp_path, local_server_url) -> None:
    """1 pair, condition eval, 10 constraints, ~150-word articles, on the embedded model; then the same
    store through evaluate and report (measured: build 306 s, evaluate 303 s on 2 shared cores)."""
    import time

    from pipeline.core.config import parse_config

    extra_a = (" The library's manager said staff had been moved to other branches for now. A local "
               "charity offered to run"
               " a homework club in a church hall. Some councillors argued that the fees would hit "
               "the poorest families hardest, while others said the pool was losing money every month.")
    extra_b = (" Staff at the centre have been told their jobs are safe until spring. A youth group "
               "that met there twice a"
               " week has moved to a school gym. Some board members said parking charges would "
               "drive shoppers away, while others warned that bus cuts would leave villages cut off.")
    store = make_store(tmp_path / "store.sqlite", 1)
    # the pair's articles, lengthened to about 150 words each
    for row, extra in zip(store.query("SELECT id, text_hash FROM articles ORDER BY id"), (extra_a, extra_b)):
        body = store.get_text(row["text_hash"]) + extra
        store.db["articles"].update(row["id"],
                                    {"text_hash": store.put_text(body), "words": len(body.split())})
    store.commit()
    config = parse_config({})  # every role on the embedded model
    client = LLMClient(config, store, local_base_url=local_server_url)
    # repair rounds as the demo gives the 1.5B model: one round left 1 of 5 replacements missing here
    # without the gate: this test counts exactly 10 constraints and a replacement for every too-easy one
    # (the gate on the embedded model: tests/test_gate.py::test_real_gate_on_the_embedded_model)
    options = BuildOptions.from_config(config, n=1, conditions=("eval",), n_constraints=10, words=150,
                                       repair_rounds=4, gate=False)
    started = time.monotonic()
    summary = await run_build(store, config, client, options)
    elapsed = time.monotonic() - started
    await client.aclose()
    inst = store.one("SELECT * FROM instructions WHERE condition = 'eval'")
    report = {r.condition: r for r in summary.conditions}
    u = summary.usage
    print(f"\nreal eval build: {elapsed:.1f}s, {u.calls} calls, {u.prompt_tokens} prompt + "
          f"{u.completion_tokens} completion "
          f"tokens, status {inst['status']}, replaced "
          f"{report['eval'].replaced}/{report['eval'].constraints}, "
          f"flags {report['eval'].flags}, error {inst['error']}")
    # No early return: a build the embedded model could not finish fails this test, with its reason,
    # instead of passing without testing the rest of the method.
    assert inst["status"] == "done", f"the embedded model did not finish the build: {inst['error']}"
    assert inst["main_task"]
    active = _active(store, inst["id"])
    assert len(active) == 10 and [c["position"] for c in active] == list(range(1, 11))
    gen = store.one("SELECT * FROM generations WHERE kind = 'base' AND instruction_id = ?", [inst["id"]])
    assert gen is not None and gen["words"] >= 45
    originals = store.query("SELECT * FROM constraints WHERE instruction_id = ? AND origin = 'synthesized'",
                            [inst["id"]])
    assert len(originals) == 10 and all(c["base_verdict"] in (0, 1) for c in originals)
    assert store.scalar("SELECT count(*) FROM verdicts WHERE generation_id = ?", [gen["id"]]) == 10
    # too easy: revision's own rule on the stored verdicts (a Yes quoting elsewhere is kept)
    from pipeline.stages.revision import too_easy
    from pipeline.store.verdicts import BaseVerdict

    base = {r["constraint_id"]: BaseVerdict(r["verdict"], r["quote"], r["quote_found"])
            for r in store.query("SELECT * FROM verdicts WHERE generation_id = ?", [gen["id"]])}
    satisfied = [c for c in originals if c["base_verdict"] == 1 and too_easy(base.get(c["id"]))]
    revised = store.query("SELECT * FROM constraints WHERE instruction_id = ? AND origin = 'revised'",
                          [inst["id"]])
    assert len(revised) == len(satisfied) == report["eval"].replaced
    assert all(r["replaces_id"] in {c["id"] for c in satisfied} for r in revised)
    assert store.scalar("SELECT count(*) FROM llm_calls") == u.calls
    await _evaluate_and_report_for_real(store, inst["id"], summary.run_id, local_server_url, tmp_path)


async def _evaluate_and_report_for_real(store, instruction_id: int, run_id: str, local_server_url: str,
                                        tmp_path) -> None:
    """The same store on through evaluate (the demo's two models under test, ratio 0.25, the embedded judge's
    own yes_no mode, a text's constraints in one request) and the report: the method end to end on both
    shipped models, nothing inserted by hand."""
    import time

    from rich.console import Console

    from pipeline.core.config import parse_config
    from pipeline.llm.model_file import EMBEDDED_NAME, SMALL_NAME
    from pipeline.outputs.report import ReportOptions, build_report, render, write_outputs
    from pipeline.stages.demo import demo_config
    from pipeline.stages.evaluate import EvaluateOptions, run_evaluate

    config = demo_config(parse_config({"evaluate": {"response_words": 150, "ratios": [0.25]}}))
    client = LLMClient(config, store, local_base_url=local_server_url)
    started = time.monotonic()
    try:
        result = await run_evaluate(store, config, client, EvaluateOptions(build_run=run_id))
    finally:
        await client.aclose()
    elapsed = time.monotonic() - started
    assert result.failed == 0, result.failures
    for model in (EMBEDDED_NAME, SMALL_NAME):  # each model's response, its summary, both judged the same way
        response = store.one("SELECT * FROM generations WHERE kind = 'response' AND "
                             "instruction_id = ? AND model = ?",
                             [instruction_id, model])
        assert response is not None and response["words"] > 40, model
        summary = store.one("SELECT * FROM generations WHERE kind = 'summary' AND parent_id = ?",
                            [response["id"]])
        assert summary is not None and 0 < summary["achieved_ratio"] < 1, model
        # One token per constraint on the response and on its summary, its P(Yes) kept beside the verdict
        # (read at 0.5 before any calibration).
        rows = store.query("SELECT judging_mode, verdict, p_yes FROM verdicts WHERE generation_id IN (?, ?)",
                           [response["id"], summary["id"]])
        assert len(rows) == 2 * 10 and {r["judging_mode"] for r in rows} == {"yes_no"}, model
        assert all(r["p_yes"] is not None and 0 <= r["p_yes"] <= 1 and r["verdict"] == (r["p_yes"] >= 0.5)
                   for r in rows)
    response = store.one("SELECT * FROM generations WHERE kind = 'response' AND model = ?", [EMBEDDED_NAME])
    summary = store.one("SELECT * FROM generations WHERE kind = 'summary' AND parent_id = ?",
                        [response["id"]])
    report = build_report(store, ReportOptions(n_resamples=200))
    console = Console(record=True, width=160)
    render(report, console)
    shown = console.export_text(clear=False)
    assert (EMBEDDED_NAME in shown and SMALL_NAME in shown
            and "yes_no (one token, verdict from P(Yes))" in shown)
    assert "Models compared" in shown
    assert write_outputs(report, tmp_path / "report")
    print(f"\nreal evaluate: {elapsed:.1f}s, {client.usage.as_dict()}; response "
          f"{response['words']} words, summary "
          f"{summary['words']} (achieved {summary['achieved_ratio']:.2f})\n{console.export_text()}")


async def test_an_identical_build_resumes_its_run_instead_of_duplicating_it(tmp_path) -> None:
    # The same command twice: one run, the same instructions, and no second call for any of them.
    store = make_store(tmp_path / "s.sqlite", 2)
    model = ScriptedModel()
    async with _served(store, model) as (server, config, client):
        first = await run_build(store, config, client, BuildOptions.from_config(config, n=2, n_constraints=N))
        calls = dict(model.kinds)
        second = await run_build(store, config, client,
                                 BuildOptions.from_config(config, n=2, n_constraints=N))
        assert dict(model.kinds) == calls  # the second command asked the model nothing
        # A different build (another size) is another run.
        other = await run_build(store, config, client, BuildOptions.from_config(config, n=1, n_constraints=N))
    assert first.run_id == second.run_id != other.run_id
    assert first.run_id.startswith("build-news-")
    assert store.scalar("SELECT count(*) FROM runs WHERE id = ?", [first.run_id]) == 1
    assert store.scalar("SELECT count(*) FROM instructions WHERE run_id = ?", [first.run_id]) == 2 * 4
    assert sum(s.processed for s in second.stages) == 0 and second.complete
