"""The evaluation stage end to end on the fake server: respond -> summarize -> judge, resume,
rejudge, failures that do not stop the run, the CLI, and one small real run."""

from __future__ import annotations

from collections import Counter

import pytest

from pipeline.core.config import parse_config
from pipeline.core.errors import StageError
from pipeline.core.progress import StopFlag
from pipeline.stages.evaluate import EvaluateOptions, evaluate, resolve
from tests.fakes.fake_server import FakeOpenAIServer, Reply, last_user_message
from tests.support.evaluate_world import (
    config_file,
    evaluate_with,
    make_config,
    make_instructions,
    role_of,
    roles_called,
    world,
)


async def test_full_run_and_resume_without_repeated_calls(store):
    ids = make_instructions(store, n=2, k=4)
    with FakeOpenAIServer(world) as server:
        config = make_config(server, extra={"ratios": [0.5, 0.25]})
        result = await evaluate_with(store, config)
        calls = roles_called(server)
        # 2 instructions x 2 models; 4 responses x 2 ratios; 12 texts x 2 judges, one batched call each.
        assert calls == Counter(respond_direct=4, summarize=8, judge_batched=24)
        assert result.failed == 0 and not result.stopped
        assert result.stages["judge"].done == 24
        n_calls = server.calls
        again = await evaluate_with(store, config)
        assert server.calls == n_calls  # nothing paid twice
        assert again.stages["respond"].skipped == 4 and again.stages["summarize"].skipped == 8
        assert again.stages["judge"].skipped == 24 and again.stages["judge"].done == 0
    responses = store.query("SELECT * FROM generations WHERE kind = 'response' ORDER BY id")
    assert {(r["instruction_id"], r["model"], r["mode"]) for r in responses} == {(i, m, "direct") for i in ids
                                                                                 for m in ("ma", "mb")}
    summaries = store.query("SELECT * FROM generations WHERE kind = 'summary'")
    assert sorted({s["ratio"] for s in summaries}) == [0.25, 0.5]
    for s in summaries:
        parent_words = store.scalar("SELECT words FROM generations WHERE id = ?", [s["parent_id"]])
        assert s["achieved_ratio"] == pytest.approx(s["words"] / parent_words, abs=1e-4)
    # 12 texts x 2 judges x 4 constraints.
    assert store.scalar("SELECT count(*) FROM verdicts") == 96
    # The report's per-text totals were kept current as the verdicts arrived.
    assert store.scalar("SELECT count(*) FROM text_scores_stale") == 0
    assert store.scalar("SELECT count(DISTINCT gid) FROM text_scores") == 12
    # The response mentions every keyword: judge ja says yes to all on the full response...
    full = store.query("SELECT v.verdict, v.quote_found FROM verdicts v JOIN generations g ON "
                       "g.id = v.generation_id WHERE g.kind = 'response' AND v.judge = 'ja'")
    assert all(r["verdict"] == 1 and r["quote_found"] == "exact" for r in full)
    # ...and the 25% summary keeps only the first sentence: later constraints are superficial.
    short = store.query("SELECT c.position, v.verdict FROM verdicts v JOIN generations g ON "
                        "g.id = v.generation_id"
                        " JOIN constraints c ON c.id = v.constraint_id WHERE g.kind = "
                        "'summary' AND g.ratio = 0.25"
                        " AND v.judge = 'ja' ORDER BY c.position")
    assert {r["position"] for r in short if r["verdict"] == 1} == {1}
    assert any(r["verdict"] == 0 for r in short)
    # The two judges disagree on the first keyword's constraint: both rows kept.
    disagree = store.scalar(
        "SELECT count(*) FROM verdicts a JOIN verdicts b ON a.generation_id = b.generation_id"
        " AND a.constraint_id = b.constraint_id AND a.judge = 'ja' AND b.judge = 'jb' AND "
        "a.verdict != b.verdict")
    assert disagree > 0
    # The suspicion ranking's evidence came with it: copy evidence per (response, constraint), and the
    # constraint's echo per (response or summary, constraint) by the configured embedder (hash here).
    assert store.scalar("SELECT count(*) FROM copy_evidence") == 4 * 4
    assert store.scalar("SELECT count(*) FROM constraint_echo WHERE method = 'hash-256'") == 12 * 4


async def test_step_mode_and_stop_resume_to_the_same_result(store):
    make_instructions(store, n=2, k=3)
    with FakeOpenAIServer(world) as server:
        config = make_config(server, models=("ma",), judges=("ja",))
        first = await evaluate_with(store, config, max_units=3)
        assert first.stopped and server.calls == 3
        assert first.stages["respond"].done == 2 and first.stages["summarize"].done == 1
        stop = StopFlag()
        stop.stop("pause")
        paused = await evaluate_with(store, config, stop=stop)
        assert paused.stopped and server.calls == 3
        await evaluate_with(store, config)
        # 2 responses + 2 summaries + 4 judgings, each paid once.
        assert server.calls == 8 and roles_called(server) == Counter(respond_direct=2, summarize=2,
                                                                     judge_batched=4)


async def test_rejudge_calls_only_the_judge(store):
    make_instructions(store, n=2, k=3)
    with FakeOpenAIServer(world) as server:
        config = make_config(server, models=("ma",), judges=("ja",))
        await evaluate_with(store, config)
        before = server.calls
        new = make_config(server, models=("ma",), judges=("ja", "jb"))
        result = await evaluate_with(store, new, EvaluateOptions(rejudge=True, judges=["jb"]))
        later = server.requests[before:]
        assert {role_of(r) for r in later} == {"judge_batched"} and {r["model"]
                                                                     for r in later} == {"model-jb"}
        assert len(later) == 4 and set(result.stages) == {"judge"}
        # per-constraint judging is another mode: stored texts judged again, one call per constraint.
        before = server.calls
        await evaluate_with(store, new,
                            EvaluateOptions(rejudge=True, judges=["ja"], judging="per_constraint"))
        assert server.calls - before == 4 * 3
        assert {role_of(r) for r in server.requests[before:]} == {"judge_single"}
    modes = Counter((r["judge"], r["judging_mode"])
                    for r in store.query("SELECT judge, judging_mode FROM verdicts"))
    assert modes == Counter({("ja", "batched"): 12, ("jb", "batched"): 12, ("ja", "per_constraint"): 12})


async def test_changed_judge_prompt_rejudges_without_regenerating(store, tmp_path, monkeypatch):
    import shutil

    from pipeline.llm.prompts import prompts_dir

    make_instructions(store, n=2, k=3)
    with FakeOpenAIServer(world) as server:
        config = make_config(server, models=("ma",), judges=("ja",))
        await evaluate_with(store, config)
        before = server.calls
        copy = tmp_path / "prompts"
        shutil.copytree(prompts_dir(), copy)
        (copy / "judge_batched.md").write_text((copy / "judge_batched.md").read_text() + "\nQuote exactly.\n")
        monkeypatch.setenv("UNSPECIFIC_PROMPTS", str(copy))
        result = await evaluate_with(store, config)  # a plain re-run: texts are stored, verdicts are not
        assert {role_of(r)
                for r in server.requests[before:]} == {"judge_batched"} and server.calls - before == 4
        assert result.stages["respond"].skipped == 2 and result.stages["summarize"].skipped == 2
    assert store.scalar("SELECT count(DISTINCT prompt_hash) FROM verdicts") == 2


async def test_edit_mode_and_filters(store):
    ids = make_instructions(store, n=2, k=2)
    other = make_instructions(store, n=1, k=2, condition="single", run_id="build-2")
    with FakeOpenAIServer(world) as server:
        config = make_config(server, models=("ma",), judges=("ja",))
        await evaluate_with(store, config, EvaluateOptions(mode="edit", conditions=["eval"], ratios=[0.1]))
        assert roles_called(server)["respond_edit"] == 2 and "respond_direct" not in roles_called(server)
        edit_prompts = [last_user_message(r) for r in server.requests if role_of(r) == "respond_edit"]
        assert all("A plain draft number" in p for p in edit_prompts)
        await evaluate_with(store, config, EvaluateOptions(build_run="build-2"))
    rows = store.query("SELECT instruction_id, mode FROM generations WHERE kind = 'response' "
                       "ORDER BY instruction_id")
    assert rows == [{"instruction_id": ids[0], "mode": "edit"}, {"instruction_id": ids[1], "mode": "edit"},
                    {"instruction_id": other[0], "mode": "direct"}]
    assert store.scalar("SELECT count(*) FROM generations WHERE kind = 'summary' AND ratio = 0.1") == 2


async def test_a_failed_instruction_does_not_stop_the_run(store):
    ids = make_instructions(store, n=3, k=2)

    def flaky(request: dict) -> Reply | str:
        if role_of(request).startswith("respond") and "number 1." in last_user_message(request):
            return Reply.error(500, "the model fell over")
        return world(request)

    with FakeOpenAIServer(flaky) as server:
        config = make_config(server, models=("ma",), judges=("ja",))
        events = []
        result = await evaluate_with(store, config, progress=events.append)
        assert result.failed == 1 and result.stages["respond"].done == 2
        assert f"instruction {ids[1]}" in result.failures[0].unit and "500" in result.failures[0].error
        assert any(e.kind == "error" for e in events)
        # The others went all the way through.
        assert store.scalar("SELECT count(*) FROM generations WHERE kind = 'summary'") == 2
        server.responder = world
        again = await evaluate_with(store, config)
        assert (again.failed == 0 and again.stages["respond"].done == 1
                and again.stages["respond"].skipped == 2)


async def test_a_dead_endpoint_stops_the_step(store):
    make_instructions(store, n=8, k=2)
    with FakeOpenAIServer(lambda r: Reply.error(500, "down")) as server:
        config = make_config(server, models=("ma",), judges=("ja",))
        with pytest.raises(StageError, match="in a row"):
            await evaluate_with(store, config, EvaluateOptions(parallel=1))
        assert server.calls == 5


async def test_edit_mode_without_base_articles_fails_units_not_the_run(store):
    ids = make_instructions(store, n=7, k=2, condition="single")
    store.conn.execute("DELETE FROM generations")
    store.conn.execute("UPDATE instructions SET base_generation_id = NULL")
    store.commit()
    with FakeOpenAIServer(world) as server:
        config = make_config(server, models=("ma",), judges=("ja",))
        result = await evaluate_with(store, config, EvaluateOptions(mode="edit"))
        assert server.calls == 0
    assert result.failed == len(ids) and all("no base article" in f.error for f in result.failures)


def test_resolve_checks_names_and_values(store):
    config = parse_config({"evaluate": {"ratios": [0.5, 0.25]}})
    plan = resolve(config, EvaluateOptions())
    assert plan.models == ("local",) and plan.ratios == (0.5, 0.25) and plan.mode == "direct"
    # No run-wide judging mode: each judge judges in its own, yes_no for the embedded model.
    assert plan.judging is None and plan.mode_of("local") == "yes_no"
    assert resolve(config, EvaluateOptions(judging="batched")).mode_of("local") == "batched"
    assert resolve(config, EvaluateOptions(rejudge=True)).models is None
    from pipeline.core.errors import ConfigError

    with pytest.raises(ConfigError, match="nope"):
        resolve(config, EvaluateOptions(models=["nope"]))
    with pytest.raises(StageError, match="ratio"):
        resolve(config, EvaluateOptions(ratios=[1.5]))
    with pytest.raises(StageError, match="judging"):
        resolve(config, EvaluateOptions(judging="vibes"))
    assert resolve(config, EvaluateOptions()).summary_slack == 0.5
    assert resolve(parse_config({"evaluate": {"summary_slack": False}}),
                   EvaluateOptions()).summary_slack is None
    with pytest.raises(StageError, match="summary_slack"):
        resolve(parse_config({"evaluate": {"summary_slack": "lots"}}), EvaluateOptions())


async def test_evaluate_records_a_run(store):
    make_instructions(store, n=1, k=2)
    with FakeOpenAIServer(world) as server:
        config = make_config(server, models=("ma",), judges=("ja",))
        result = await evaluate(store, config, EvaluateOptions())
    run = store.one("SELECT * FROM runs WHERE id = ?", [result.run_id])
    assert (run["kind"] == "evaluate" and run["status"] == "done" and run["calls"] == 4
            and run["error"] is None)
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE run_id = ?", [result.run_id]) == 4


def test_clievaluate_with(store_path, tmp_path, capsys):
    from pipeline.cli import main
    from pipeline.store.database import open_store

    s = open_store(store_path)
    make_instructions(s, n=2, k=3)
    s.close()
    with FakeOpenAIServer(world) as server:
        cfg = config_file(tmp_path, server.base_url, endpoints=("ma", "ja", "jb", "summ"))
        code = main(["--store", str(store_path), "--config", str(cfg), "evaluate", "--ratios", "0.5,0.25"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert server.calls == 2 + 4 + 6
        assert "judge" in out and "calls" in out
        code = main(["--store", str(store_path), "--config", str(cfg), "evaluate", "--rejudge",
                     "--judges", "jb",
                     "--judging", "per_constraint"])
        assert code == 0
        assert server.calls == 12 + 6 * 3
        assert main(["--store", str(store_path), "--config", str(cfg), "evaluate", "--models", "nope"]) == 2


# The real-model run through build -> evaluate -> report is
# tests/test_build.py::test_real_local_model_eval_build.
