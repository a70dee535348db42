"""Missing is not No: a verdict the judge never gave is stored as missing, left out of every
rate, and shown as coverage; evaluate fails loudly when judging fails (issue 13, items 1-2)."""

from __future__ import annotations

import json
import math
import re

import pytest
from rich.console import Console

from pipeline.analysis.coverage import Coverage, low_groups
from pipeline.analysis.metrics import compute_metrics
from pipeline.core.errors import UnusableEndpointError
from pipeline.outputs.report import ReportOptions, build_report, render, write_outputs
from pipeline.stages.evaluate import EvaluateOptions, evaluate
from pipeline.stages.judging import UNANSWERED
from pipeline.store.database import SCHEMA_VERSION, open_store
from tests.fakes.fake_server import FakeOpenAIServer
from tests.support.evaluate_world import (
    KEYWORDS,
    between,
    evaluate_cli,
    instructions_at,
    make_config,
    make_instructions,
    role_of,
    world,
)
from tests.support.judges import JUNK, flat_text


def _asked(request: dict) -> str:
    """The judge prompt itself (in a repair round, the last user message is the repair note)."""
    return next(m["content"] for m in request["messages"] if m["role"] == "user"
                and "<<<CONSTRAINTS" in m["content"])


def partial_judge(request: dict) -> str:
    """The world, except that the judge only answers constraints about the harbour or the
    lantern and says No to the harbour: every other item it leaves out, even when asked again."""
    if not role_of(request).startswith("judge"):
        return world(request)
    block = between(_asked(request), "CONSTRAINTS")
    items = re.findall(r"^(\d+)\. .*the (\w+)\.$", block, re.MULTILINE)
    verdicts = [{"id": int(i), "verdict": "no" if w == KEYWORDS[0] else "yes", "quote": "",
                 "reason": "checked"}
                for i, w in items if w in KEYWORDS[:2]]
    return json.dumps({"verdicts": verdicts}) if verdicts else "I cannot judge these."


def junk_judge(request: dict) -> str:
    """A judge endpoint that answers 200 OK with junk every time (a proxy's error page)."""
    return JUNK if role_of(request).startswith("judge") else world(request)


async def test_missing_verdicts_are_left_out_of_org_and_lower_the_coverage(store):
    make_instructions(store, n=2, k=4)  # keywords: harbour lantern ferry market / lantern ferry market storm
    with FakeOpenAIServer(partial_judge) as server:
        config = make_config(server, models=("ma",), judges=("ja",))
        result = await evaluate(store, config, EvaluateOptions(ratios=[0.25]))
    # Stored: 4 texts x 4 constraints, every one a row; the ones never answered are NULL, not 0.
    rows = store.query("SELECT verdict, reason FROM verdicts")
    assert len(rows) == 16
    missing = [r for r in rows if r["verdict"] is None]
    assert missing and all(r["reason"] == UNANSWERED for r in missing)
    assert not any(r["verdict"] == 0 and r["reason"] == UNANSWERED for r in rows)
    # Response 1: harbour No, lantern Yes (2 of 4 judged); response 2: lantern Yes (1 of 4).
    metrics = compute_metrics(store)
    org_group = next(g for g in metrics.groups if g.ratio is None)
    assert org_group.org.value == pytest.approx((0.5 + 1.0) / 2)  # counting missing as No would give 0.375
    assert (org_group.judged_items, org_group.expected_items) == (3, 8)
    assert org_group.coverage == pytest.approx(3 / 8)
    by_response = sorted(r.coverage for r in metrics.response_rows())
    assert by_response == [pytest.approx(0.25), pytest.approx(0.5)]
    # evaluate saw the same coverage and failed the run.
    low = result.low_coverage(0.95)
    assert low and low[0][1].expected == 8
    run = store.one("SELECT status, error FROM runs WHERE id = ?", [result.run_id])
    assert run["status"] == "failed" and "coverage under 95%" in run["error"]
    assert "news / eval / ma (direct), responses: 3 of 8 verdicts given (37.5%)" in run["error"]


async def test_report_shows_and_marks_low_coverage_on_screen_and_in_files(store, tmp_path):
    make_instructions(store, n=2, k=4)
    with FakeOpenAIServer(partial_judge) as server:
        await evaluate(store, make_config(server, models=("ma",), judges=("ja",)),
                       EvaluateOptions(ratios=[0.25]))
    report = build_report(store, ReportOptions(n_resamples=50, copy=False))
    assert {w.kind for w in report.warnings} == {"low_coverage"}
    console = Console(width=200, record=True)
    render(report, console)
    text = flat_text(console.export_text())
    assert "coverage %" in text and "37.5 !" in text
    assert "news / eval / ma (direct), responses: coverage 37.5% (3 of 8 verdicts given, under 95%)" in text
    write_outputs(report, tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    org_row = next(r for r in summary if r["ratio"] is None)
    assert org_row["coverage"] == pytest.approx(0.375) and org_row["warning"] == "low_coverage"
    assert org_row["judged_items"] == 3 and org_row["expected_items"] == 8
    whole = json.loads((tmp_path / "out" / "report.json").read_text())
    assert whole["min_coverage"] == 0.95 and any("37.5%" in w["message"] for w in whole["warnings"])
    # A lower threshold of the reader's own: no mark.
    assert not build_report(store, ReportOptions(n_resamples=20, copy=False, min_coverage=0.2)).warnings


async def test_a_judge_answering_junk_is_stopped_showing_its_reply_and_stores_only_missing(store):
    make_instructions(store, n=3, k=4)
    with FakeOpenAIServer(junk_judge) as server:
        config = make_config(server, models=("ma",), judges=("ja",))
        with pytest.raises(UnusableEndpointError) as caught:
            await evaluate(store, config, EvaluateOptions(ratios=[0.25], parallel=1))
    message = str(caught.value)
    assert "judge 'ja': no usable verdict on 3 texts in a row" in message and JUNK in message
    assert "stored as missing, not No" in message
    # Nothing was counted as No, and what was written before the stop is all still there.
    verdicts = store.query("SELECT verdict FROM verdicts")
    assert len(verdicts) == 3 * 4 and all(v["verdict"] is None for v in verdicts)
    assert store.scalar("SELECT count(*) FROM generations WHERE kind = 'response'") == 3
    assert store.scalar("SELECT count(*) FROM generations WHERE kind = 'summary'") == 3
    run = store.one("SELECT status, error FROM runs WHERE kind = 'evaluate'")
    assert run["status"] == "failed" and JUNK in run["error"]
    # The report has no rate to show for these texts, and says so with a coverage of 0.
    metrics = compute_metrics(store)
    assert metrics.rows == [] and metrics.groups
    assert all(g.n == 0 and math.isnan(g.org.value) and g.coverage == 0 for g in metrics.groups)


def test_cli_evaluate_exits_non_zero_under_the_minimum_coverage(store_path, tmp_path, capsys):
    instructions_at(store_path, n=2, k=4)
    code, _ = evaluate_cli(store_path, tmp_path, partial_judge)
    out = flat_text(capsys.readouterr().out)
    assert code == 1, out
    assert "judging coverage under 95% in" in out and "news / eval / ma (direct), responses: 3 of 8" in out
    s = open_store(store_path)
    assert s.scalar("SELECT count(*) FROM verdicts") == 16  # everything judged is kept
    s.close()


def test_cli_evaluate_with_a_junk_judge_exits_2_with_the_raw_reply(store_path, tmp_path, capsys):
    instructions_at(store_path, n=3, k=2)
    code, _ = evaluate_cli(store_path, tmp_path, junk_judge)
    err = flat_text(capsys.readouterr().err)
    assert code == 2
    assert "no usable verdict on 3 texts in a row" in err and "%%%garbage%%%" in err


def test_migration_turns_stored_unanswered_nos_into_missing(store_path):
    """A store written before schema 3 held a No for every verdict the judge never gave."""
    s = open_store(store_path)
    make_instructions(s, n=1, k=2)
    gid = s.db["generations"].insert({"kind": "response", "instruction_id": 1, "model": "ma",
                                      "mode": "direct",
                                      "text_hash": s.put_text("the harbour and the lantern"),
                                      "words": 5}).last_pk
    cids = [r[0] for r in s.conn.execute("SELECT id FROM constraints WHERE instruction_id = 1 ORDER BY id")]
    s.db["verdicts"].insert_all([
        {"generation_id": gid, "constraint_id": cids[0], "judge": "ja", "judging_mode": "batched",
         "prompt_hash": "p",
         "verdict": 1, "quote": "the harbour", "call_id": 7, "created_at": "x"},
        {"generation_id": gid, "constraint_id": cids[1], "judge": "ja", "judging_mode": "batched",
         "prompt_hash": "p",
         "verdict": 0, "reason": UNANSWERED, "call_id": None, "created_at": "x"},
    ])
    s.commit()
    # Back to schema 2, as an older unspecific left it.
    s.conn.execute("DROP INDEX verdicts_missing")
    s.conn.execute("PRAGMA user_version = 2")
    s.commit()
    s.close()
    s = open_store(store_path)
    assert s.schema_version == SCHEMA_VERSION
    assert [r["verdict"] for r in s.query("SELECT verdict FROM verdicts ORDER BY constraint_id")] == [1, None]
    assert s.scalar("SELECT count(*) FROM verdicts") == 2  # nothing lost
    metrics = compute_metrics(s, n_resamples=10)
    row = metrics.response_rows()[0]
    assert row.org == 1.0 and row.coverage == 0.5  # was Org 0.5 with the No counted
    assert {"pid", "host"} <= set(s.db["runs"].columns_dict)
    s.close()


def test_low_groups_orders_worst_first_and_ignores_groups_expecting_nothing():
    groups = {("news", "eval", "a", "direct", None): Coverage(9, 10),
              ("news", "eval", "b", "direct", None): Coverage(1, 10),
              ("news", "eval", "c", "direct", None): Coverage(0, 0),
              ("news", "eval", "d", "direct", None): Coverage(96, 100)}
    assert [k[2] for k, _ in low_groups(groups, 0.95)] == ["b", "a"]


async def test_a_run_stopped_early_is_paused_not_failed_for_its_coverage(store):
    """Step mode stops with judging unfinished: that is not a judge failing."""
    make_instructions(store, n=2, k=4)
    with FakeOpenAIServer(world) as server:
        config = make_config(server, models=("ma",), judges=("ja",))
        result = await evaluate(store, config, EvaluateOptions(ratios=[0.25]), max_units=5)
        assert result.stopped and result.low_coverage(0.95) == []
        run = store.one("SELECT status, error FROM runs WHERE id = ?", [result.run_id])
        assert run["status"] == "paused" and run["error"] is None
        # Finished: full coverage, done.
        again = await evaluate(store, config, EvaluateOptions(ratios=[0.25]))
    assert not again.stopped and again.low_coverage(0.95) == []
    assert all(c.rate == 1.0 for c in again.coverage.values())
    assert store.scalar("SELECT status FROM runs WHERE id = ?", [again.run_id]) == "done"
