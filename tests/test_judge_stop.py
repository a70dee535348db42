"""A junk judge stops alone, at its 3rd unusable text, whatever the concurrency; the healthy judge
finishes every text, and the CLI prints the coverage line before its exit 2 (issue 29, item 5)."""

from __future__ import annotations

import re

import pytest

from pipeline.core.config import parse_config
from pipeline.stages.evaluate import MAX_UNUSABLE_IN_A_ROW, EvaluateOptions, JudgeStopped, evaluate
from pipeline.store.database import open_store
from tests.fakes.fake_server import FakeOpenAIServer, Reply
from tests.support.evaluate_world import config_file, make_instructions, role_of, world
from tests.support.judges import JUNK, flat_text

N_INSTRUCTIONS, K = 6, 3  # 6 responses + 6 summaries: 12 texts for each judge, all different


def junk_jx(request: dict) -> Reply | str:
    """Judge 'jx' answers junk (200 OK), slowly enough that its texts would overlap in flight."""
    if request["model"] == "model-jx":
        return Reply(JUNK, delay_s=0.05)
    return world(request)


def _judged_text(request: dict) -> str:
    """The text a judge request is about (a repair round repeats the first prompt)."""
    prompt = next(m["content"] for m in request["messages"] if m["role"] == "user"
                  and "<<<TEXT" in m["content"])
    return prompt.split("<<<TEXT", 1)[1].split("TEXT>>>", 1)[0]


def _texts_asked(server: FakeOpenAIServer, model: str) -> set[str]:
    return {_judged_text(r) for r in server.requests if r["model"] == model
            and role_of(r).startswith("judge")}


def _config(server: FakeOpenAIServer, concurrency: int, extra: dict | None = None):
    endpoints = {n: {"base_url": server.base_url, "model": f"model-{n}", "concurrency": concurrency,
                     "max_retries": 0}
                 for n in ("ma", "ja", "jx", "summ")}
    return parse_config({"endpoints": endpoints,
                         "roles": {"models_under_test": ["ma"], "judges": ["jx", "ja"], "summarizer": "summ"},
                         "evaluate": {"response_words": 60, **(extra or {})}})


@pytest.mark.parametrize("judging", ["batched", "per_constraint"])
@pytest.mark.parametrize("concurrency", [1, 4])
async def test_a_junk_judge_stops_at_its_third_text_and_the_healthy_judge_finishes(store,
                                                                                   concurrency, judging):
    make_instructions(store, n=N_INSTRUCTIONS, k=K)
    with FakeOpenAIServer(junk_jx) as server:
        config = _config(server, concurrency)
        with pytest.raises(JudgeStopped) as caught:
            await evaluate(store, config, EvaluateOptions(ratios=[0.25], judging=judging))
        junk_texts = _texts_asked(server, "model-jx")
        healthy_texts = _texts_asked(server, "model-ja")
    assert len(junk_texts) <= MAX_UNUSABLE_IN_A_ROW, f"{len(junk_texts)} texts asked of the junk judge"
    assert len(healthy_texts) == 2 * N_INSTRUCTIONS
    # The healthy judge gave a verdict on every constraint of every text; the junk one only missing ones.
    texts = store.scalar("SELECT count(*) FROM generations WHERE kind IN ('response', 'summary')")
    assert texts == 2 * N_INSTRUCTIONS
    assert store.scalar("SELECT count(*) FROM verdicts WHERE judge = 'ja' "
                        "AND verdict IS NOT NULL") == texts * K
    assert store.scalar("SELECT count(*) FROM verdicts WHERE judge = 'jx' AND verdict IS NOT NULL") == 0
    message = str(caught.value)
    assert "judge 'jx': no usable verdict on 3 texts in a row" in message and JUNK in message
    # What the evaluation did travels with the error, its coverage included.
    result = caught.value.result
    assert result is not None and result.run_id and result.stages["judge"].failed == 1
    assert result.coverage
    run = store.one("SELECT status, error FROM runs WHERE id = ?", [result.run_id])
    assert run["status"] == "failed" and "judge 'jx'" in run["error"]


async def test_a_judge_that_answered_well_then_turns_to_junk_stops_after_three_in_a_row(store):
    """One junk text is chance: a judge whose replies go bad after good ones stops at the 3rd
    unusable text in a row, and the texts it already judged keep their verdicts."""
    make_instructions(store, n=N_INSTRUCTIONS, k=K)
    asked: list[str] = []

    def turns(request: dict) -> Reply | str:
        if request["model"] == "model-jx" and role_of(request).startswith("judge"):
            text = _judged_text(request)
            if text not in asked:
                asked.append(text)
            return world(request) if asked.index(text) < 4 else JUNK
        return world(request)

    with FakeOpenAIServer(turns) as server:
        with pytest.raises(JudgeStopped):
            await evaluate(store, _config(server, 1), EvaluateOptions(ratios=[0.25], parallel=1))
    assert len(asked) == 4 + MAX_UNUSABLE_IN_A_ROW
    assert store.scalar("SELECT count(DISTINCT generation_id) FROM verdicts WHERE judge = 'jx'") == len(asked)
    assert store.scalar("SELECT count(*) FROM verdicts WHERE judge = 'jx' AND verdict IS NOT NULL") == 4 * K
    assert store.scalar("SELECT count(*) FROM verdicts WHERE judge = 'ja' "
                        "AND verdict IS NOT NULL") == 2 * N_INSTRUCTIONS * K


def _cli_config(tmp_path, server, concurrency: int) -> str:
    cfg = config_file(tmp_path, server.base_url, endpoints=("ma", "ja", "jx", "summ"), judges=("jx", "ja"),
                      each=f"concurrency = {concurrency}\n")
    return str(cfg)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_cli_prints_the_coverage_line_then_exits_2_naming_the_judge(store_path, tmp_path,
                                                                    capsys, concurrency):
    from pipeline.cli import main

    s = open_store(store_path)
    make_instructions(s, n=4, k=2)
    s.close()
    with FakeOpenAIServer(junk_jx) as server:
        code = main(["--store", str(store_path), "--config",
                     _cli_config(tmp_path, server, concurrency), "evaluate"])
    captured = capsys.readouterr()
    out, err = flat_text(captured.out), flat_text(captured.err)
    assert code == 2, out + err
    assert re.search(r"judging coverage: [\d,]+ of [\d,]+ verdicts given", out), out
    assert "judge 'jx': no usable verdict on 3 texts in a row" in err and "%%%garbage%%%" in err
