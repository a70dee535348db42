"""`unspecific import`: real files made to each format (byte-order marks, trailing spaces in
headers, quoted multi-line cells, Windows line endings), idempotence, line-numbered errors and
whole rollback, imported verdicts read by the report with no LLM call, and imported responses
summarised and judged like the project's own."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.importing.common import ImportFailed, ImportOptions, ResearchColumns
from pipeline.importing.importer import import_file
from pipeline.importing.reading import parse_numbered
from pipeline.store.imports import imported_models
from tests.support.app import goto
from tests.support.import_files import (
    CS4_HEADER,
    LONG,
    cs4_rows,
    numbered,
    refused,
    row_lines,
    write_csv,
    write_jsonl,
)


def run_cli(store_path: Path, *args: str) -> int:
    return main(["--store", str(store_path), *args])


def test_cs4_file_imports_once_and_exports_as_single(store, tmp_path):
    path = write_csv(tmp_path / "Story-based Constraints.csv", CS4_HEADER, cs4_rows(3, first=7))
    assert path.read_bytes().startswith(b"\xef\xbb\xbfInstruction Number,Instruction ,")
    summary = import_file(store, ImportOptions("cs4", path, name="cs4-story"))
    assert summary.added["instructions"] == 3 and summary.added["constraints"] == 7 + 8 + 9
    assert (summary.domain, summary.condition) == ("story", "single")
    rows = store.query("SELECT id, run_id, condition, status, n_constraints, source_id, "
                       "main_task FROM instructions ORDER BY id")
    # A row's key is (number, count): its source id says both.
    assert [(r["condition"], r["status"], r["n_constraints"], r["source_id"]) for r in rows] == [
        ("single", "done", 7, "1/7"), ("single", "done", 8, "2/8"), ("single", "done", 9, "3/9")]
    assert rows[0]["main_task"] == "Write a story about keeper 1 and the storm."
    # Multi-line quoted cells with CRLF inside: each numbered line is one constraint, no \r left.
    texts = [r["text"]
             for r in store.query("SELECT text FROM constraints WHERE instruction_id = ? ORDER BY position",
                                              [rows[0]["id"]])]
    assert texts[0] == "The story should describe lighthouse detail number 1 in several sentences."
    assert not any("\r" in t for t in texts)
    assert store.one("SELECT kind, status FROM runs WHERE id = 'import-cs4-story'") == {"kind": "import",
                                                                                        "status": "done"}
    # Again: nothing added, every row skipped and why.
    again = import_file(store, ImportOptions("cs4", path, name="cs4-story"))
    assert not again.added and again.skipped == {"instruction already imported": 3}
    assert store.scalar("SELECT count(*) FROM instructions") == 3
    # export writes them as a built benchmark's instructions.
    from pipeline.outputs.export import export_jsonl

    out = io.StringIO()
    assert export_jsonl(store, out) == 3
    line = json.loads(out.getvalue().splitlines()[0])
    assert line["condition"] == "single" and len(line["constraints"]) == 7


def test_cs4_bad_rows_name_file_line_and_column_and_write_nothing(store, tmp_path):
    rows = cs4_rows(4)
    rows[2][2] = "twelve"
    rows[3][3] = "Constraints to follow."  # no numbered item at all
    path = write_csv(tmp_path / "cs4.csv", CS4_HEADER, rows)
    msg = refused(store, ImportOptions("cs4", path))
    # Rows 1 and 2 take lines 2-8 and 9-16 (their cells span lines); row 3 starts on line 17.
    starts = row_lines(rows)
    assert (f"{path}:{starts[2]}, column 3 ('Number of Constraints'): a whole number is "
            "expected, got 'twelve'" in msg)
    assert f"{path}:{starts[3]}, column 4 ('Constraints'): no numbered constraints" in msg
    assert "2 problem(s)" in msg and "nothing was imported" in msg
    # Rolled back whole: not even the good rows or the run record.
    assert store.scalar("SELECT count(*) FROM instructions") == 0
    assert store.scalar("SELECT count(*) FROM runs") == 0


def test_cs4_missing_columns_and_not_utf8(store, tmp_path):
    path = write_csv(tmp_path / "other.csv", ["Number", "Prompt"], [["1", "x"]])
    with pytest.raises(ImportFailed,
                       match=r"other.csv:1: not a CS4 constraints file: no column 'Instruction Number'"):
        import_file(store, ImportOptions("cs4", path))
    latin = tmp_path / "latin.csv"
    latin.write_bytes("Instruction Number,Instruction,Number of "
                      "Constraints,Constraints\n1,caf\xe9,1,1. x\n".encode("latin-1"))
    with pytest.raises(ImportFailed, match=r"latin.csv:2: not UTF-8"):
        import_file(store, ImportOptions("cs4", latin))


def test_parse_numbered_joins_wrapped_lines():
    assert parse_numbered("1. Open with rain\n   that falls all day.\n2) Close at dawn.\n") == [
        "Open with rain that falls all day.", "Close at dawn."]
    with pytest.raises(ValueError, match="text before constraint 1"):
        parse_numbered("Constraints:\n1. x")


# -- the research code's CSVs ---------------------------------------------------------------------

RESEARCH_CONSTRAINTS = ["Describe the storm's arrival over several sentences.",
                        "Mention the harbour at night.",
                        "Include a character who keeps a lamp lit."]


def research_files(tmp_path: Path) -> dict[str, Path]:
    """A research run's files as its own writers write them (tests/support/research_writers.py), with its
    row id renamed story_id (the research scripts let columns be named; --id-column follows)."""
    from tests.support import research_writers as rw

    constraints = numbered(RESEARCH_CONSTRAINTS, "\n")
    common = rw.constraints_common(
        [{"Blog A": LONG, "Blog B": "Another story about a storm and a ferry at the harbour."}],
        lambda prompt: f"Main Task: Write a story about a lighthouse.\nConstraints:\n{constraints}",
        "gen-model")
    direct = rw.direct(common, lambda task: LONG, "their-model")
    summaries = rw.summarize(direct, lambda text: "A keeper lit the lamp.", "summ-model",
                             content_column="direct_content")
    # Verdicts on the response; constraint 3 is left out: missing, never No.
    evaluation = rw.evaluate(direct,
                             lambda c, k: '1. Yes - "the storm came in from the '
                                          'west"\r\n2. No - never at night',
                             "gpt-4o", content_column="direct_content")
    evaluation_summary = rw.evaluate(
        summaries,
        lambda c, k: '1. No - no storm\n2. No - no harbour\n3. Yes - "A keeper lit the lamp"', "gpt-4o",
        content_column="summarized_content")
    files = {}
    for key, frame in (("constraints", common), ("fitted", direct), ("summary", summaries),
                       ("evaluation", evaluation),
                       ("evaluation_summary", evaluation_summary)):
        path = rw.to_csv(frame, tmp_path / f"{key}.csv")
        path.write_text(path.read_text().replace("instruction_number", "story_id", 1))
        files[key] = path
    return files


RESEARCH_COLUMNS = ResearchColumns(id="story_id")


def test_research_outputs_give_an_auditable_benchmark_without_llm_calls(store, tmp_path):
    files = research_files(tmp_path)
    cols = RESEARCH_COLUMNS
    for key in ("constraints", "fitted", "summary", "evaluation", "evaluation_summary"):
        import_file(store, ImportOptions("research", files[key], name="paper-run", condition="common+eval",
                                         domain="story", columns=cols))
    inst = store.one("SELECT * FROM instructions")
    assert (inst["condition"], inst["domain"], inst["status"], inst["run_id"]) == ("eval", "story", "done",
                                                                                   "import-paper-run")
    refs = store.query("SELECT a.status, t.body FROM articles a JOIN texts t ON t.hash = "
                       "a.text_hash ORDER BY a.id")
    assert [r["status"] for r in refs] == ["reference", "reference"] and refs[0]["body"] == LONG
    assert (inst["article_a"], inst["article_b"]) == (1, 2)
    gens = {g["kind"]: g for g in store.query("SELECT * FROM generations")}
    assert gens["response"]["model"] == "their-model" and gens["response"]["import_run"] == "import-paper-run"
    assert gens["summary"]["parent_id"] == gens["response"]["id"] and gens["summary"]["ratio"] == 0.25
    verdicts = store.query("SELECT g.kind, c.position, v.judge, v.verdict, v.quote_found FROM verdicts v"
                           " JOIN generations g ON g.id = v.generation_id JOIN constraints c ON "
                           "c.id = v.constraint_id ORDER BY g.kind, c.position")
    assert [(v["kind"], v["position"], v["verdict"], v["quote_found"]) for v in verdicts] == [
        ("response", 1, 1, "exact"), ("response", 2, 0, None), ("response", 3, None, None),
        ("summary", 1, 0, None), ("summary", 2, 0, None), ("summary", 3, 1, "exact")]
    assert {v["judge"] for v in verdicts} == {"gpt-4o"}
    # The report reads them as a judge's verdicts: Org over the 2 given (1 of 2), coverage 2/3.
    from pipeline.outputs.report import build_report

    report = build_report(store)
    groups = [g for g in report.metrics.groups if g.model == "their-model" and g.ratio is None]
    assert len(groups) == 1 and store.scalar("SELECT count(*) FROM llm_calls") == 0
    group = groups[0]
    assert (group.domain, group.condition, group.mode, group.n) == ("story", "eval", "direct", 1)
    assert group.org.value == pytest.approx(0.5)  # 1 Yes of the 2 verdicts given; the missing one left out
    assert (group.judged_items, group.expected_items) == (2, 3)
    summarised = [g for g in report.metrics.groups if g.model == "their-model" and g.ratio == 0.25]
    assert len(summarised) == 1 and summarised[0].core.value == pytest.approx(0.0)
    # Core counts constraints judged on both texts: 1 and 2 (3 is missing on the response), and
    # neither holds on the summary.
    # Importing every file again adds nothing.
    for key in ("constraints", "fitted", "summary", "evaluation", "evaluation_summary"):
        again = import_file(store,
                            ImportOptions("research", files[key], name="paper-run", condition="common+eval",
                                                 domain="story", columns=cols))
        assert not again.added, key
    assert store.scalar("SELECT count(*) FROM verdicts") == 6


def test_research_row_for_an_unknown_id_or_without_columns_fails_whole(store, tmp_path):
    files = research_files(tmp_path)
    import_file(store, ImportOptions("research", files["constraints"], name="r", columns=RESEARCH_COLUMNS))
    # A summary of a response never imported: the summary file names only its summariser.
    with pytest.raises(ImportFailed,
                       match=r"summary.csv:2, column 4 \('direct_content'\): the response this row"):
        import_file(store, ImportOptions("research", files["summary"], name="r", columns=RESEARCH_COLUMNS))
    assert store.scalar("SELECT count(*) FROM generations") == 0
    odd = write_csv(tmp_path / "odd.csv", ["story_id", "notes"], [["s1", "x"]])
    with pytest.raises(ImportFailed, match="not a file the research code writes"):
        import_file(store, ImportOptions("research", odd, name="r", columns=RESEARCH_COLUMNS))
    no_id = write_csv(tmp_path / "no_id.csv", ["main_task", "constraints", "direct_content", "model_used"],
                      [["Write.", "1. x", LONG, "m"]])
    with pytest.raises(ImportFailed, match=r"no_id.csv:1: no 'instruction_number' column"):
        import_file(store, ImportOptions("research", no_id, name="r"))


# -- JSONL ----------------------------------------------------------------------------------------


def test_jsonl_instructions_with_references_and_line_numbered_errors(store, tmp_path):
    good = [{"id": "a1", "instruction": "Write a blog post about gardening.",
             "constraints": ["Mention compost.",
             "Describe a spring morning in the garden."], "condition": "common+none", "domain": "blog",
             "reference": LONG, "reference_b": "Another text."},
            {"id": 2, "main_task": "Write a blog post about bread.",
             "constraints": "1. Mention flour.\n2. Mention an oven."}]
    # A raw U+2028 inside a JSON string is legal JSON: it must not split the line.
    good[1]["main_task"] += "\u2028"
    path = tmp_path / "bench.jsonl"
    path.write_bytes("\r\n".join(json.dumps(x, ensure_ascii=False) for x in good).encode("utf-8") + b"\r\n")
    summary = import_file(store, ImportOptions("jsonl", path))
    assert summary.added == {"instructions": 2, "constraints": 4, "references": 2}
    rows = store.query("SELECT source_id, condition, domain, article_a FROM instructions ORDER BY id")
    assert [(r["source_id"], r["condition"], r["domain"]) for r in rows] == [("a1", "none", "blog"),
                                                                             ("2", "single", "imported")]
    assert rows[0]["article_a"] is not None and rows[1]["article_a"] is None
    # The same ids with other constraints: an error, never an overwrite.
    changed = write_jsonl(tmp_path / "bench2.jsonl",
                          [{**good[1], "constraints": ["Mention salt."]}, "", "{not json",
                                                      [1, 2],
                           {"id": 3, "instruction": "x", "constraints": []},
                                                      {"id": 4, "instruction": "x", "constraints": ["y"],
                                                       "condition": "odd"}])
    msg = refused(store, ImportOptions("jsonl", changed, name="bench"))
    assert f"{changed}:3: not JSON" in msg and f"{changed}:4: a JSON object is expected, got list" in msg
    # Line 1 is only read once lines 3-4 parse; fix those and the row problems show.
    fixed = write_jsonl(tmp_path / "bench2.jsonl", [{**good[1], "constraints": ["Mention salt."]},
                                                    {"id": 3, "instruction": "x", "constraints": []},
                                                    {"id": 4, "instruction": "x", "constraints": ["y"],
                                                     "condition": "odd"}])
    msg = refused(store, ImportOptions("jsonl", fixed, name="bench"))
    assert (f"{fixed}:1, field 'id': instruction 2 was imported into import-bench "
            "before with another task" in msg)
    assert f"{fixed}:2, field 'constraints': the list is empty" in msg
    assert f"{fixed}:3, field 'condition': unknown condition 'odd'" in msg
    assert store.scalar("SELECT count(*) FROM instructions") == 2


def test_export_then_import_round_trip(store, tmp_path):
    path = write_jsonl(tmp_path / "src.jsonl", [{"id": "x", "instruction": "Write a note.", "reference": LONG,
                                                 "constraints": ["Mention the storm.",
                                                                 "Mention the harbour."]}])
    import_file(store, ImportOptions("jsonl", path))
    from pipeline.outputs.export import export_jsonl

    out = tmp_path / "benchmark.jsonl"
    export_jsonl(store, str(out), with_references=True)
    again = import_file(store, ImportOptions("jsonl", out, name="round-trip"))
    assert again.added["instructions"] == 1 and again.added["references"] == 1
    texts = store.query("SELECT i.run_id, c.text FROM constraints c JOIN instructions i ON "
                        "i.id = c.instruction_id ORDER BY i.id, c.position")
    assert [t["text"] for t in texts[:2]] == [t["text"] for t in texts[2:]]


# -- responses --------------------------------------------------------------------------------------


def test_responses_import_then_summarised_and_judged_like_our_own(store, tmp_path):
    import asyncio

    from pipeline.llm.client import LLMClient
    from pipeline.stages.evaluate import EvaluateOptions, run_evaluate
    from tests.fakes.fake_server import FakeOpenAIServer
    from tests.support.evaluate_world import KEYWORDS, make_config, roles_called, world

    bench = write_jsonl(tmp_path / "bench.jsonl", [
        {"id": f"q{i}", "instruction": f"Write a news article number {i}.",
         "constraints": [f"Mention the {w}." for w in KEYWORDS[:3]]} for i in range(2)])
    import_file(store, ImportOptions("jsonl", bench, name="mine", domain="news"))
    text = " ".join(f"In this part the {w} matters a great deal to everyone." for w in KEYWORDS[:3])
    responses = write_jsonl(tmp_path / "harness.jsonl", [
        # Texts differ from the first word: identical ones would make identical judge calls, and
        # whether the second is a cache hit would depend on timing.
        {"instruction": "q0", "model": "harness-x", "mode": "direct", "text": "First. " + text},
        {"instruction": "q1", "model": "harness-x", "text": "Second. " + text}])
    summary = import_file(store, ImportOptions("responses", responses, run="mine"))
    assert summary.added == {"responses": 2} and summary.run_id == "import-responses-harness"
    assert imported_models(store) == ["harness-x"]
    assert not import_file(store, ImportOptions("responses", responses, run="mine")).added

    async def go():
        with FakeOpenAIServer(world) as server:
            config = make_config(server, models=("ma",), judges=("ja",))
            client = LLMClient(config, store, backoff_base_s=0.01)
            try:
                result = await run_evaluate(store, config, client, EvaluateOptions(models=["harness-x"]))
            finally:
                await client.aclose()
            return result, roles_called(server)

    result, calls = asyncio.run(go())
    # Nothing asked to write harness-x's responses: 2 summaries and 4 judgings only.
    assert calls == {"summarize": 2, "judge_batched": 4} and result.failed == 0
    assert store.scalar("SELECT count(*) FROM verdicts v JOIN generations g ON g.id = v.generation_id"
                        " WHERE g.model = 'harness-x' AND v.verdict = 1") == 6


def test_responses_errors_name_line_and_field(store, tmp_path):
    bench = write_jsonl(tmp_path / "bench.jsonl",
                        [{"id": "q0", "instruction": "Write.", "constraints": ["Mention x."]}])
    import_file(store, ImportOptions("jsonl", bench, name="mine"))
    bad = write_jsonl(tmp_path / "r.jsonl", [{"instruction": "q9", "model": "m", "text": "t"},
                                             {"instruction": "q0", "model": "", "text": "t"},
                                             {"instruction": "q0", "model": "m",
                                              "mode": "sideways", "text": "t"},
                                             {"instruction": "q0", "model": "m", "text": "ok"}])
    msg = refused(store, ImportOptions("responses", bad, run="mine"))
    assert f"{bad}:1, field 'instruction': no instruction 'q9' in run import-mine" in msg
    assert f"{bad}:2, field 'model'" in msg and f"{bad}:3, field 'mode'" in msg
    assert store.scalar("SELECT count(*) FROM generations") == 0
    with pytest.raises(ImportFailed, match="--run nope: no such run"):
        import_file(store, ImportOptions("responses", bad, run="nope"))


def test_cli_import_dry_run_and_json(store_path, tmp_path, capsys):
    path = write_csv(tmp_path / "Instruction-based Constraints.csv", CS4_HEADER, cs4_rows(2))
    assert run_cli(store_path, "import", "cs4", str(path), "--dry-run") == 0
    assert "would add 2 instructions" in capsys.readouterr().out
    assert run_cli(store_path, "import", "cs4", str(path), "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["added"] == {"instructions": 2, "constraints": 15, "families": 2}
    assert out["run_id"] == "import-Instruction-based Constraints"
    bad = write_csv(tmp_path / "bad.csv", CS4_HEADER, [["1", "", "1", "1. x"]])
    assert run_cli(store_path, "import", "cs4", str(bad)) == 2
    assert "bad.csv:2, column 2 ('Instruction'): empty" in capsys.readouterr().err


# -- the app on imported work ------------------------------------------------------------------


async def test_every_screen_opens_on_imported_work_and_audit_shows_their_verdicts(tmp_path):
    from pipeline.store.database import open_store
    from tests.support.app import settle
    from unspecific_tui.app import SCREENS_ORDER, UnspecificApp

    path = tmp_path / "imported.sqlite"
    store = open_store(path)
    files = research_files(tmp_path)
    for key in ("constraints", "fitted", "summary", "evaluation", "evaluation_summary"):
        import_file(store, ImportOptions("research", files[key], name="paper-run", condition="common+eval",
                                         domain="story", columns=RESEARCH_COLUMNS))
    # A second benchmark with neither references nor responses: listed, never in the way.
    import_file(store, ImportOptions("cs4", write_csv(tmp_path / "cs4.csv", CS4_HEADER, cs4_rows(2))))
    constraint_1 = store.scalar("SELECT id FROM constraints WHERE position = 1 ORDER BY id LIMIT 1")
    store.close()
    app = UnspecificApp(path, stages={})
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        for key, name in zip("123456", SCREENS_ORDER):
            await pilot.press(key)
            await settle(app, pilot)
            assert app.current_mode == name
        await goto(app, pilot, "3")
        shown = app.screen.shown
        assert shown.constraint_id == constraint_1 and shown.writer == ("their-model", "direct")
        # The imported judge's quote, found in the response it judged.
        start = LONG.index("the storm came in from the west")
        assert dict(shown.quotes["response"]) == {"gpt-4o": (start, start
                                                             + len("the storm came in from the west"))}


def test_conditions_without_references_are_never_paired_as_one_unit(store, tmp_path):
    """Two imports (single, common+eval) of two instructions each, none with a reference: a
    condition comparison has no shared unit to pair on, so it pairs nothing (before, every
    reference-less instruction was one unit "None" and the four were averaged into one pair)."""
    from pipeline.analysis.metrics import _side_table, compute_metrics

    for condition in ("single", "common+eval"):
        rows = [[str(k), f"Write story {k}.", numbered(RESEARCH_CONSTRAINTS, "\n"), "m", LONG, "gpt-4o",
                 "1. Yes - \"the storm came in\"\n2. No - x\n3. No - y"] for k in range(2)]
        path = write_csv(tmp_path / f"{condition}.csv",
                         ["instruction_number", "main_task", "constraints", "model_used",
                                                         "direct_content", "eval_model",
                          "satisfaction_results"], rows)
        import_file(store, ImportOptions("research", path, name=condition, condition=condition))
    metrics = compute_metrics(store)
    table, _ = _side_table(metrics, "condition", None)
    units = [sides for stratum in table.values() for sides in stratum.values()]
    assert len(units) == 4 and all(len(sides) == 1 for sides in units)
