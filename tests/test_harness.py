"""The benchmark run where evaluators work (issue 63): `export --format inspect` as an inspect_ai task
whose scorer gives Org, Core and superficial with this project's own prompts and pass rule, run by
inspect_ai's eval on its ``mockllm/model`` (scripted: tests.support.harness) and its log imported
back, verdicts and all, so the report reads the same numbers without a call; `export --format
lm-eval` and the samples file lm-eval 0.4.13 itself wrote on such a task (tests/fixtures/lm_eval)
imported as responses. Bad logs (another task, unknown ids, an unsupported inspect_ai) get one line,
exit 2, and leave the store as it was."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from pipeline.analysis.harness import (
    INSPECT_SPEC,
    inspect_version_problem,
    pooled_share,
    sample_scores,
)
from pipeline.cli import main
from pipeline.stages.generation import direct_messages
from pipeline.store.database import open_store
from tests.support.harness import EXPECTED, RESPONSE, SUMMARY, make_benchmark, mock_outputs

inspect_ai = pytest.importorskip("inspect_ai")
FIXTURE = Path(__file__).parent / "fixtures" / "lm_eval"
LM_EVAL_SAMPLES = FIXTURE / "samples_unspecific_2026-12-07T15-41-56.414500.jsonl"


def cli(store_path: Path, *args: str) -> int:
    return main(["--store", str(store_path), *args])


def counts(store_path: Path) -> dict[str, int]:
    """What an import may write: runs, generations, verdicts."""
    store = open_store(store_path)
    try:
        return {t: store.scalar(f"SELECT count(*) FROM {t}") for t in ("runs", "generations", "verdicts")}
    finally:
        store.close()


@pytest.fixture
def bench(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    path = tmp_path / "store.sqlite"
    store = open_store(path)
    try:
        ids = make_benchmark(store, tmp_path)
    finally:
        store.close()
    return path, ids


def run_inspect(task_dir: Path, log_dir: Path, *, roles: bool = True, task: Any = None,
                task_args: dict[str, Any] | None = None, log_format: str = "eval") -> Any:
    """inspect_ai's eval (what `inspect eval` runs) on the exported task.py, mockllm/model scripted as
    the model under test, the summarizer and the grader. Run from the task's folder: inspect globs a
    task path relative to the working directory."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    def mock() -> Any:
        return get_model("mockllm/model", custom_outputs=mock_outputs, memoize=False)

    model_roles = {"grader": mock(), "summarizer": mock()} if roles else None
    here = Path.cwd()
    os.chdir(task_dir)
    try:
        logs = inspect_eval(task or "task.py", model=mock(), model_roles=model_roles, log_dir=str(log_dir),
                            display="none", task_args=task_args or {}, log_format=log_format)
    finally:
        os.chdir(here)
    assert logs[0].status == "success", logs[0].error
    return logs[0]


def test_export_inspect_writes_each_instruction_as_evaluate_sends_it(bench, tmp_path):
    path, ids = bench
    assert cli(path, "export", "--format", "inspect", "--out", str(tmp_path / "task"), "--words", "120") == 0
    samples = [json.loads(line) for line in (tmp_path / "task" / "dataset.jsonl").read_text().splitlines()]
    assert [s["id"] for s in samples] == [ids["q1"], ids["q2"]]
    first = samples[0]
    texts = [c["text"] for c in first["metadata"]["constraints"]]
    assert texts == [f"Mention the word {w} in the text." for w in ("copper", "lantern", "meadow")]
    assert first["input"] == direct_messages("Write a short piece about q1.", texts, 120)[1]
    assert [c["position"] for c in first["metadata"]["constraints"]] == [1, 2, 3]
    spec = json.loads((tmp_path / "task" / "benchmark.json").read_text())
    assert (spec["words"], spec["ratio"], spec["instructions"]) == (120, 0.25, 2)
    assert "def unspecific(" in (tmp_path / "task" / "task.py").read_text()


def test_inspect_round_trip_scores_with_the_projects_rule_and_imports_the_verdicts(bench, tmp_path):
    path, ids = bench
    assert cli(path, "export", "--format", "inspect", "--out", str(tmp_path / "task")) == 0
    log = run_inspect(tmp_path / "task", tmp_path / "logs")
    by_id = {s.id: s.scores["core_satisfaction"] for s in log.samples}
    for key, expected in EXPECTED.items():
        score = by_id[ids[key]]
        assert score.value == pytest.approx(expected)
        verdicts = score.metadata["constraints"]
        assert all({"response", "summary"} <= set(v) for v in verdicts)
        assert score.metadata["summary"] == SUMMARY[key]
    # q1's 2nd constraint (lantern): Yes on the response with its sentence, No on the summary.
    lantern = by_id[ids["q1"]].metadata["constraints"][1]
    assert (lantern["response"]["verdict"], lantern["summary"]["verdict"]) == ("yes", "no")
    assert lantern["response"]["quote_found"] == "exact"
    metrics = {s.name: {k: m.value for k, m in s.metrics.items()} for s in log.results.scores}
    assert metrics["org"]["mean"] == pytest.approx(0.75)
    assert metrics["core"]["mean"] == pytest.approx((1 / 3 + 0.5) / 2)
    # Pooled as the report pools it: 2 flipped of 4 passed on the responses, not the mean of 2/3 and 0.
    assert metrics["superficial"]["pooled"] == pytest.approx(0.5)

    log_file = Path(log.location)
    assert cli(path, "import", "inspect", str(log_file)) == 0
    store = open_store(path)
    try:
        responses = store.query("SELECT instruction_id, model, text_hash FROM generations "
                                "WHERE kind = 'response' ORDER BY instruction_id")
        assert [(r["instruction_id"], r["model"]) for r in responses] == [(ids["q1"], "mockllm/model"),
                                                                          (ids["q2"], "mockllm/model")]
        assert store.get_text(responses[0]["text_hash"]) == RESPONSE["q1"]
        assert store.scalar("SELECT count(*) FROM generations WHERE kind = 'summary' AND ratio = 0.25") == 2
        assert store.scalar("SELECT count(DISTINCT judge) FROM verdicts") == 1
        assert store.scalar("SELECT count(*) FROM verdicts WHERE verdict IS NOT NULL") == 10
        from pipeline.analysis.metrics.compute import compute_metrics

        group = next(g for g in compute_metrics(store, n_resamples=20).groups if g.ratio == 0.25)
    finally:
        store.close()
    # The report's numbers from the imported verdicts are inspect's, with no call made.
    assert (group.org.value, group.core.value, group.superficial.value) == pytest.approx(
        (metrics["org"]["mean"], metrics["core"]["mean"], metrics["superficial"]["pooled"]))
    before = counts(path)
    assert cli(path, "import", "inspect", str(log_file)) == 0  # again: nothing added
    assert counts(path) == before


def test_the_inspect_command_line_runs_the_exported_task_with_model_roles(bench, tmp_path, monkeypatch):
    """`inspect eval task.py --model mockllm/model --model-role grader=... -T ...`, as a person types
    it, through inspect's own command line (click, in this process): mockllm is given the scripted
    outputs by default, as the command line cannot hand it a function."""
    from click.testing import CliRunner
    from inspect_ai._cli.main import inspect as inspect_cli
    from inspect_ai.model._providers.mockllm import MockLLM

    real_init = MockLLM.__init__

    def scripted_init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("custom_outputs", mock_outputs)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(MockLLM, "__init__", scripted_init)
    path, ids = bench
    assert cli(path, "export", "--format", "inspect", "--out", str(tmp_path / "task")) == 0
    monkeypatch.chdir(tmp_path / "task")
    result = CliRunner().invoke(inspect_cli, [
        "eval", "task.py", "--model", "mockllm/model", "--model-role", "grader=mockllm/model",
        "--model-role", "summarizer=mockllm/model", "-T", "judging_mode=per_constraint",
        "--log-dir", str(tmp_path / "logs"), "--display", "none"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    [log_file] = list((tmp_path / "logs").glob("*.eval"))
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(log_file))
    assert log.eval.task_args["judging_mode"] == "per_constraint"
    assert sorted(log.eval.model_roles) == ["grader", "summarizer"]
    assert {s.id: s.scores["core_satisfaction"].value["org"] for s in log.samples} == {
        ids[k]: v["org"] for k, v in EXPECTED.items()}
    assert cli(path, "import", "inspect", str(log_file)) == 0
    assert counts(path)["verdicts"] == 5 + 5  # each of the 5 constraints on a response and on its summary


@pytest.mark.parametrize("mode", ["per_constraint", "yes_no"])
def test_every_judging_mode_scores_and_imports_alike(bench, tmp_path, mode):
    path, ids = bench
    assert cli(path, "export", "--format", "inspect", "--out", str(tmp_path / "task")) == 0
    log = run_inspect(tmp_path / "task", tmp_path / "logs", task_args={"judging_mode": mode})
    by_id = {s.id: s.scores["core_satisfaction"] for s in log.samples}
    for key, expected in EXPECTED.items():
        assert by_id[ids[key]].value == pytest.approx(expected)
    copper = by_id[ids["q1"]].metadata["constraints"][0]["response"]
    # yes_no reads P(Yes) from the answer token and locates the supporting sentence (no judge quote).
    expected = (0.9, "located") if mode == "yes_no" else (None, "exact")
    assert (copper["p_yes"], copper["quote_found"]) == expected
    assert cli(path, "import", "inspect", log.location) == 0
    store = open_store(path)
    try:
        modes = store.query("SELECT DISTINCT judging_mode, p_yes IS NOT NULL AS has_p FROM verdicts")
    finally:
        store.close()
    assert [(r["judging_mode"], r["has_p"]) for r in modes] == [(mode, int(mode == "yes_no"))]


def test_a_grader_not_given_is_the_model_under_test_said_as_a_warning(bench, tmp_path, caplog, monkeypatch):
    from pipeline.outputs import inspect_task

    monkeypatch.setattr(inspect_task, "_warned", set())  # said once a process: this test's process too
    path, _ = bench
    assert cli(path, "export", "--format", "inspect", "--out", str(tmp_path / "task")) == 0
    log = run_inspect(tmp_path / "task", tmp_path / "logs", roles=False, log_format="json")
    assert log.location.endswith(".json")  # inspect's other log format: read by the same reader
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"
                and r.name == inspect_task.__name__]
    assert len(warnings) == 2, warnings  # once for each role, not once a sample
    assert any("no --model-role grader" in w for w in warnings), warnings
    assert any("no --model-role summarizer" in w for w in warnings), warnings
    assert cli(path, "import", "inspect", log.location) == 0
    store = open_store(path)
    try:  # judged by the model under evaluation, named as the log names it
        assert store.scalar("SELECT DISTINCT judge FROM verdicts") == "mockllm/model"
    finally:
        store.close()


def test_a_log_of_another_task_exits_2_and_writes_nothing(bench, tmp_path, capsys):
    from inspect_ai import Task
    from inspect_ai.dataset import Sample

    path, _ = bench
    other = Task(dataset=[Sample(input="Say hello.", id=1)], name="hello")
    (tmp_path / "other").mkdir()
    log = run_inspect(tmp_path / "other", tmp_path / "logs", task=other)
    before = counts(path)
    assert cli(path, "import", "inspect", log.location) == 2
    err = capsys.readouterr()
    message = [line for line in (err.out + err.err).splitlines() if "not of a benchmark exported" in line]
    assert len(message) == 1 and "'hello'" in message[0]
    assert counts(path) == before


def test_samples_matching_no_instruction_exit_2_and_write_nothing(bench, tmp_path, capsys):
    path, _ = bench
    assert cli(path, "export", "--format", "inspect", "--out", str(tmp_path / "task")) == 0
    log = run_inspect(tmp_path / "task", tmp_path / "logs")
    other_path = tmp_path / "other.sqlite"
    other = open_store(other_path)
    try:
        (tmp_path / "one").mkdir()
        make_benchmark(other, tmp_path / "one", ids=("q2",))  # one instruction: id 1 only
    finally:
        other.close()
    before = counts(other_path)
    assert cli(other_path, "import", "inspect", log.location) == 2
    out = capsys.readouterr()
    line = next(x for x in (out.out + out.err).splitlines() if "match no instruction" in x)
    assert "1 of 2 samples" in line and "(ids 2)" in line and "nothing was imported" in line
    assert counts(other_path) == before


def test_another_run_of_the_same_model_is_refused_not_overwritten(bench, tmp_path, monkeypatch, capsys):
    from tests.support import harness

    path, ids = bench
    assert cli(path, "export", "--format", "inspect", "--out", str(tmp_path / "task")) == 0
    first = run_inspect(tmp_path / "task", tmp_path / "logs")
    assert cli(path, "import", "inspect", first.location) == 0
    monkeypatch.setitem(harness.RESPONSE, "q1", harness.RESPONSE["q1"].replace("workshop", "forge"))
    second = run_inspect(tmp_path / "task", tmp_path / "logs2")
    before = counts(path)
    assert cli(path, "import", "inspect", second.location) == 2
    out = capsys.readouterr()
    assert f"sample {ids['q1']}: another response by 'mockllm/model' is stored" in out.out + out.err
    assert counts(path) == before
    # Under another model name it is another run, side by side.
    assert cli(path, "import", "inspect", second.location, "--model", "mockllm/model-again") == 0


def test_an_instruction_revised_since_the_export_exits_2_and_writes_nothing(bench, tmp_path, capsys):
    path, ids = bench
    assert cli(path, "export", "--format", "inspect", "--out", str(tmp_path / "task")) == 0
    log = run_inspect(tmp_path / "task", tmp_path / "logs")
    store = open_store(path)
    try:  # q2's second constraint retired after the export (as a revision retires one)
        store.conn.execute("UPDATE constraints SET active = 0 WHERE instruction_id = ? AND position = 2",
                           (ids["q2"],))
        store.commit()
    finally:
        store.close()
    before = counts(path)
    assert cli(path, "import", "inspect", log.location) == 2
    out = capsys.readouterr()
    assert f"instruction {ids['q2']}'s constraints" in out.out + out.err
    assert counts(path) == before


def test_an_unsupported_inspect_version_gets_one_line_naming_it(bench, tmp_path, monkeypatch, capsys):
    assert inspect_version_problem(inspect_ai.__version__) is None
    assert inspect_version_problem("0.3.120") is None
    for old_or_new in ("0.3.119", "0.2.9", "0.4.0", "1.0"):
        problem = inspect_version_problem(old_or_new)
        assert problem is not None and f"inspect_ai {old_or_new} is not supported" in problem
        assert INSPECT_SPEC in problem
    path, _ = bench
    log = tmp_path / "any.eval"
    log.write_bytes(b"not read")
    import importlib.metadata

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: "0.2.9" if name == "inspect_ai" else real(name))
    assert cli(path, "import", "inspect", str(log)) == 2
    out = capsys.readouterr()
    assert "inspect_ai 0.2.9 is not supported" in out.out + out.err
    # The exported task.py says the same when inspect loads it.
    import runpy

    from pipeline.analysis.harness import HarnessError

    assert cli(path, "export", "--format", "inspect", "--out", str(tmp_path / "task")) == 0
    with pytest.raises(HarnessError, match=r"^inspect_ai 0\.2\.9 is not supported: this tool works with "):
        runpy.run_path(str(tmp_path / "task" / "task.py"))


def test_sample_scores_count_missing_verdicts_nowhere_and_pool_the_superficial_share():
    s = sample_scores([True, True, None, False], [False, None, True, False])
    # Org over the 3 judged; Core and superficial over the 2 judged on both (1st and 4th).
    assert (s.org, s.core, s.judged, s.judged_both, s.flipped, s.passed_full) == (2 / 3, 0.0, 3, 2, 1, 1)
    assert s.superficial == 1.0
    assert math.isnan(sample_scores([False], [False]).superficial)
    rate, se = pooled_share([2, 0], [3, 1])
    assert rate == 0.5 and se > 0
    assert math.isnan(pooled_share([0], [0])[0])


def test_export_lm_eval_writes_the_task_lm_eval_ran(bench, tmp_path):
    import yaml

    path, ids = bench
    assert cli(path, "export", "--format", "lm-eval", "--words", "100", "--out", str(tmp_path / "lm")) == 0
    written = yaml.safe_load((tmp_path / "lm" / "unspecific.yaml").read_text())
    ran = yaml.safe_load((FIXTURE / "unspecific.yaml.as-exported").read_text())
    docs = written["dataset_kwargs"]["data_files"]["test"]
    assert docs == str((tmp_path / "lm" / "unspecific.jsonl").resolve())
    written["dataset_kwargs"] = ran["dataset_kwargs"] = None  # the folder each was written to
    assert written == ran and written["output_type"] == "generate_until"
    docs_written = [json.loads(x) for x in (tmp_path / "lm" / "unspecific.jsonl").read_text().splitlines()]
    logged = [json.loads(x)["doc"] for x in LM_EVAL_SAMPLES.read_text().splitlines()]
    # The fixture's documents are this exporter's (the prompt's wording aside: a template may change).
    assert [{k: v for k, v in d.items() if k != "prompt"} for d in docs_written] == [
        {k: v for k, v in d.items() if k != "prompt"} for d in logged]
    assert all(d["prompt"].endswith("Write about 100 words. Reply with the text only.") for d in logged)
    assert [d["id"] for d in docs_written] == [ids["q1"], ids["q2"]]


def test_lm_evals_own_samples_file_imports_as_responses(bench, tmp_path, capsys):
    path, ids = bench
    assert cli(path, "import", "lm-eval", str(LM_EVAL_SAMPLES)) == 0
    lines = [json.loads(x) for x in LM_EVAL_SAMPLES.read_text().splitlines()]
    store = open_store(path)
    try:
        rows = store.query("SELECT instruction_id, model, mode, text_hash FROM generations "
                           "WHERE kind = 'response' ORDER BY instruction_id")
        # The model is the one lm-eval's results file names; each text is what it wrote.
        assert [(r["instruction_id"], r["model"], r["mode"]) for r in rows] == [
            (ids["q1"], "smollm2-135m", "direct"), (ids["q2"], "smollm2-135m", "direct")]
        assert [store.get_text(r["text_hash"]) for r in rows] == [
            line["filtered_resps"][0].strip() for line in lines]
    finally:
        store.close()
    # lm-eval's results file given for its samples: one line naming the file to give.
    [results] = FIXTURE.glob("results_*.json")
    assert cli(path, "import", "lm-eval", str(results)) == 2
    out = capsys.readouterr()
    assert "lm-eval's results file, not its samples" in out.out + out.err
    # A samples file of another task: one line, exit 2, nothing written.
    other = tmp_path / "samples_other_2026.jsonl"
    other.write_text(json.dumps({"doc_id": 0, "doc": {"question": "2+2?"}, "resps": [["4"]],
                                 "filtered_resps": ["4"]}) + "\n")
    before = counts(path)
    capsys.readouterr()
    assert cli(path, "import", "lm-eval", str(other), "--model", "m") == 2
    out = capsys.readouterr()
    assert "not a sample of the 'unspecific' task" in out.out + out.err
    assert counts(path) == before


@pytest.fixture
def two_models_imported(bench, tmp_path) -> tuple[Path, int, dict[str, float]]:
    """One inspect log imported under two model names (run before the app's event loop: inspect's
    eval runs its own); the store, q1's id and q1's score in the log."""
    path, ids = bench
    assert cli(path, "export", "--format", "inspect", "--out", str(tmp_path / "task")) == 0
    log = run_inspect(tmp_path / "task", tmp_path / "logs")
    for model in ("model-a", "model-b"):
        assert cli(path, "import", "inspect", log.location, "--model", model) == 0
    q1 = next(s.scores["core_satisfaction"].value for s in log.samples if s.id == ids["q1"])
    return path, ids["q1"], q1


async def test_an_imported_log_opens_in_compare_with_inspects_org_and_core(two_models_imported):
    """Done when the log inspect writes opens in Compare: two models' imported runs side by side,
    each side's Org and Core those inspect's scorer gave."""
    from tests.support.app import on_screen
    from unspecific_tui.app import UnspecificApp

    path, q1_id, q1 = two_models_imported
    app = UnspecificApp(path, stages={})
    async with on_screen(app, "4", (140, 40)):
        screen = app.screen
        assert [w.model for w in screen.writers if w] == ["model-a", "model-b"]
        assert screen.data.id == q1_id
        expected = (f"{100 * q1['org']:.0f}%", f"{100 * q1['core']:.0f}%")
        assert screen.totals["a"] == screen.totals["b"] == expected


def _outputs(*texts: str) -> Any:
    from inspect_ai.model import ModelOutput, ModelUsage

    outs = []
    for text in texts:
        out = ModelOutput.from_content(model="mockllm/model", content=text)
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        outs.append(out)
    return outs


@pytest.mark.parametrize(("replies", "kept"), [
    # Junk twice: no summary (so no Core), never the junk.
    (("%%% <html>502</html> %%%", "%%%garbage%%% <html><body>502 Bad Gateway</body></html>"), None),
    # Too long both times (band 12 to 32 words for 22 asked), the second within the band again: kept.
    ((" ".join(["The smith polished copper while children watched."] * 10),
      " ".join(["The smith polished copper while children watched."] * 6)), 6),
    # Too long both times, past the band again: none.
    ((" ".join(["The smith polished copper while children watched."] * 12),) * 2, None),
])
async def test_the_scorers_summary_keeps_evaluates_contract(replies, kept):
    from inspect_ai.model import get_model

    from pipeline.outputs.inspect_task import summarize

    model = get_model("mockllm/model", custom_outputs=_outputs(*replies), memoize=False)
    summary = await summarize(model, RESPONSE["q1"], 0.25)  # 88 words: 22 asked
    if kept is None:
        assert summary is None
    else:
        assert summary == " ".join(["The smith polished copper while children watched."] * kept)
