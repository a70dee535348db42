"""The report flags impossible or suspicious figures (issue 13, item 8): Core above Org beyond
its interval, a group of one instruction, a judge whose verdicts never vary."""

from __future__ import annotations

import json
import re

from rich.console import Console

from pipeline.outputs.report import ReportOptions, build_report, render, write_outputs
from pipeline.stages.evaluate import EvaluateOptions, evaluate
from tests.fakes.fake_server import FakeOpenAIServer
from tests.support.evaluate_world import between, make_config, make_instructions, role_of, world


def _asked(request: dict) -> str:
    """The judge prompt itself (in a repair round, the last user message is the repair note)."""
    return next(m["content"] for m in request["messages"] if m["role"] == "user"
                and "<<<CONSTRAINTS" in m["content"])


def lenient_on_short_texts(request: dict) -> str:
    """Judge 'ja' passes everything on a short text (a summary) but only the first two
    constraints on a long one; judge 'jb' says Yes to everything, always."""
    if not role_of(request).startswith("judge"):
        return world(request)
    prompt = _asked(request)
    short = len(between(prompt, "TEXT").split()) < 40
    ids = [int(i) for i in re.findall(r"^(\d+)\. ", between(prompt, "CONSTRAINTS"), re.MULTILINE)]
    always = request["model"] == "model-jb"
    verdicts = [{"id": i, "verdict": "yes" if always or short or i <= 2 else "no", "quote": "", "reason": "r"}
                for i in ids]
    return json.dumps({"verdicts": verdicts})


async def test_core_above_org_one_instruction_and_a_constant_judge_are_flagged(store, tmp_path):
    make_instructions(store, n=3, k=4)  # condition eval: 3 instructions
    make_instructions(store, n=1, k=4, condition="single", run_id="build-2")  # a group of one
    with FakeOpenAIServer(lenient_on_short_texts) as server:
        config = make_config(server, models=("ma",), judges=("ja", "jb"))
        await evaluate(store, config, EvaluateOptions(ratios=[0.25]))
    report = build_report(store, ReportOptions(n_resamples=100, copy=False))
    kinds = [(w.kind, w.group[1] if w.group else None) for w in report.warnings]
    assert ("core_above_org", "eval") in kinds
    assert ("one_instruction", "single") in kinds and ("one_instruction", "eval") not in kinds
    assert ("constant_judge", None) in kinds
    assert "low_coverage" not in {k for k, _ in kinds}  # everything was judged
    messages = " ".join(w.message for w in report.warnings)
    assert "judge jb said Yes to every one of its 32 verdicts" in messages
    assert "judge ja said" not in messages
    console = Console(width=220, record=True)
    render(report, console)
    text = " ".join(console.export_text().split())
    assert "warning(s): figures not to trust as they stand" in text
    assert ("news / eval / ma (direct), summaries at 0.25: Core 100.0 [100.0, 100.0] is above Org 75.0"
            " [75.0, 75.0]") in text
    write_outputs(report, tmp_path / "out")
    whole = json.loads((tmp_path / "out" / "report.json").read_text())
    assert {w["kind"] for w in whole["warnings"]} == {"core_above_org", "one_instruction", "constant_judge"}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    flagged = {(r["condition"], r["ratio"]): r["warning"] for r in summary}
    assert flagged[("eval", 0.25)] == "core_above_org" and flagged[("eval", None)] is None


async def test_an_honest_store_has_no_warnings(store):
    make_instructions(store, n=3, k=4)
    with FakeOpenAIServer(world) as server:
        await evaluate(store, make_config(server, models=("ma",), judges=("ja", "jb")),
                       EvaluateOptions(ratios=[0.25]))
    report = build_report(store, ReportOptions(n_resamples=100, copy=False))
    assert report.warnings == []
