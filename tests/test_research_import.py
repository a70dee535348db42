"""`unspecific import research`: the research code's own files (written by its writers, re-created in
tests/support/research_writers.py), every layout, read with no options; a run's files in any order become
one benchmark; its judge's replies as they come."""

from __future__ import annotations

import json

import pytest

from pipeline.cli import main
from pipeline.importing.common import ImportFailed, ImportOptions
from pipeline.importing.replies import parse_judge_reply
from pipeline.importing.research import import_research_run
from tests.support import research_writers as rw
from tests.support.research_run import (
    BASE,
    BLOGS,
    DIRECT,
    ORIGINAL,
    REVISED,
    _numbered,
    common_model,
    judge,
    write_run,
)


def single_model(prompt: str) -> str:
    return f"Main Task: Write a news article about the harbour.\nConstraints:\n{_numbered(ORIGINAL)}"


def test_a_research_run_in_any_order_is_one_benchmark(store, tmp_path):
    files = write_run(tmp_path / "run1")
    paths = sorted(files.values(), key=lambda p: p.name, reverse=True)
    summary = import_research_run(store, ImportOptions("research", paths[0]), paths)
    assert summary.run_id == "import-run1" and summary.condition == "eval, none"
    assert any("base_evaluated.csv: evaluation of base" in f for f in summary.files)
    insts = {(r["source_id"], r["condition"]): r for r in store.query("SELECT * FROM instructions")}
    # The revision joins the instruction of its original list; the direct generation answered the
    # original list: that is an instruction of its own.
    assert sorted(insts) == [("1", "eval"), ("1/none", "none"), ("2", "eval"), ("2/none", "none")]
    # The main task, not the article; the reviser's empty task falls back to the constraints file's.
    assert insts[("2", "eval")]["main_task"] == "Write a news article about harbour storm 2."
    # References from blog1/blog2, shared by both conditions of a pair.
    for (sid, _), inst in insts.items():
        a, b = (store.get_text(store.scalar("SELECT text_hash FROM articles WHERE id = ?", (inst[k],)))
                for k in ("article_a", "article_b"))
        assert (a, b) == BLOGS[int(sid[0]) - 1]
    # The revised list active, the original kept as lineage.
    eval_id = insts[("1", "eval")]["id"]
    rows = store.query("SELECT * FROM constraints WHERE instruction_id = ? ORDER BY active DESC, position",
                       (eval_id,))
    assert [r["text"] for r in rows if r["active"]] == REVISED
    retired = {r["id"]: r["text"] for r in rows if not r["active"]}
    assert sorted(retired.values()) == sorted([ORIGINAL[0], ORIGINAL[3]])
    new = [r for r in rows if r["origin"] == "revised"]
    assert [(r["position"], retired[r["replaces_id"]]) for r in new] == [(2, ORIGINAL[0]), (4, ORIGINAL[3])]
    # Responses credited to the models under test: fitted is an edit of the base article.
    gens = store.query("SELECT g.*, t.body FROM generations g JOIN texts t ON t.hash = "
                       "g.text_hash ORDER BY g.id")
    responses = {(g["instruction_id"], g["model"], g["mode"]) for g in gens if g["kind"] == "response"}
    none_ids = [insts[(f"{s}/none", "none")]["id"] for s in ("1", "2")]
    eval_ids = [insts[(s, "eval")]["id"] for s in ("1", "2")]
    assert responses == {*((i, "fit-model", "edit") for i in eval_ids),
                         *((i, "direct-model", "direct") for i in none_ids)}
    base_of = store.query("SELECT base_generation_id FROM instructions WHERE id IN (?, ?)", tuple(eval_ids))
    assert all(store.get_text(store.scalar("SELECT text_hash FROM generations WHERE id = ?",
                                           (r["base_generation_id"],)))
               == BASE for r in base_of)
    # Summaries hang on the response they summarise, written by the summariser; the failed one is skipped.
    summaries = [g for g in gens if g["kind"] == "summary"]
    assert len(summaries) == 3 and {g["model"] for g in summaries} == {"summ-model"}
    by_id = {g["id"]: g for g in gens}
    assert {by_id[g["parent_id"]]["model"] for g in summaries} == {"fit-model", "direct-model"}
    assert all(g["ratio"] == 0.25 for g in summaries)
    assert summary.skipped["summaries the research run failed (its 'error' column: the "
                           "text is not a summary)"] == 1
    # Verdicts on the text judged, by eval_model; Yes counts match the file's num_satisfied.
    verdicts = store.query("SELECT g.kind, g.model, g.instruction_id, v.judge, v.verdict, "
                           "v.quote, v.quote_found"
                           " FROM verdicts v JOIN generations g ON g.id = v.generation_id")
    assert {v["judge"] for v in verdicts} == {"judge-model"}
    fitted_yes = [v for v in verdicts if v["kind"] == "response" and v["model"] == "fit-model"
                  and v["verdict"]]
    assert len(fitted_yes) == 2 * 5  # FITTED satisfies every revised constraint
    quoted = [v["quote"] for v in fitted_yes if "ferry" in v["quote"]]
    assert quoted == ['"We are not asking for much," said a ferry passenger.'] * 2
    assert all(v["quote_found"] == "exact" for v in fitted_yes)
    kinds = {(v["kind"], v["model"]) for v in verdicts}
    assert kinds == {("response", "fit-model"), ("response", "direct-model"), ("summary", "summ-model"),
                     ("base", "imported")}
    base_verdicts = [v for v in verdicts if v["kind"] == "base"]
    assert {v["instruction_id"]
            for v in base_verdicts} == set(eval_ids)  # the revised instruction's base article
    assert sum(v["verdict"] for v in base_verdicts) == 2 * 3  # harbour master, storm, knots
    # ... judged on the list before revision, as a build judges it: the retired constraints too.
    judged = {r["text"]: r["verdict"] for r in store.query(
        "SELECT c.text, v.verdict FROM verdicts v JOIN generations g ON g.id = v.generation_id"
        " JOIN constraints c ON c.id = v.constraint_id WHERE g.kind = 'base' AND c.instruction_id = ?",
        (eval_id,))}
    assert judged == {ORIGINAL[0]: 1, ORIGINAL[1]: 1, ORIGINAL[2]: 0, ORIGINAL[3]: 1, ORIGINAL[4]: 0}
    direct_verdicts = [v for v in verdicts if v["model"] == "direct-model"]
    assert sum(v["verdict"] for v in direct_verdicts) == 2 * 4 and not any(v["quote"]
                                                                           for v in direct_verdicts)
    # The closing note after item 5 is dropped with a warning, never glued onto constraint 5.
    assert any("fitted_evaluated.csv:" in w and "Note: the article" in w for w in summary.warnings)
    assert not any("Note" in (v["quote"] or "") for v in verdicts)
    # Again: nothing added.
    again = import_research_run(store, ImportOptions("research", paths[0]), list(reversed(paths)))
    assert not again.added and store.scalar("SELECT count(*) FROM verdicts") == len(verdicts)


def test_revision_without_evaluation_is_direct_unless_the_condition_says(store, tmp_path):
    files = write_run(tmp_path / "run2", with_eval=False)
    paths = [files["common"], files["hardened"]]
    summary = import_research_run(store, ImportOptions("research", paths[0]), paths)
    assert summary.condition == "direct"
    summary = import_research_run(store, ImportOptions("research", paths[0], name="as-eval",
                                                       condition="common+eval"),
                                  paths)
    assert summary.condition == "eval"
    assert store.scalar("SELECT count(*) FROM instructions WHERE run_id = 'import-as-eval' "
                        "AND condition = 'eval'") == 2


def test_a_revised_list_joins_its_instruction_one_instruction_per_row(store, tmp_path):
    """Issue 36: common and hardened constraints, fitted content, its summaries and two evaluation
    files are as many instructions as the run has rows, each with both references and its revised
    list, the original kept as lineage; not one more per revision."""
    files = write_run(tmp_path / "run6", with_eval=False)
    paths = [files[k]
             for k in ("common", "hardened", "fitted", "fitted_summaries", "fitted_eval", "summary_eval")]
    summary = import_research_run(store, ImportOptions("research", paths[0]), paths)
    insts = store.query("SELECT * FROM instructions ORDER BY source_id")
    assert [(r["source_id"], r["condition"]) for r in insts] == [("1", "direct"), ("2", "direct")]
    assert summary.added["instructions"] == len(BLOGS)
    for inst, blogs in zip(insts, BLOGS, strict=True):
        refs = tuple(store.get_text(store.scalar("SELECT text_hash FROM articles WHERE id = ?", (inst[k],)))
                     for k in ("article_a", "article_b"))
        assert refs == blogs
        rows = store.query("SELECT * FROM constraints WHERE instruction_id = ? ORDER BY position",
                           (inst["id"],))
        assert [r["text"] for r in rows if r["active"]] == REVISED
        retired = {r["id"]: r["text"] for r in rows if not r["active"]}
        assert sorted(retired.values()) == sorted([ORIGINAL[0], ORIGINAL[3]])
        assert sorted(retired[r["replaces_id"]] for r in rows
                      if r["origin"] == "revised") == sorted(retired.values())
    # The response, its summary and both evaluations hang on those two instructions.
    kinds = store.query("SELECT g.kind, count(DISTINCT g.instruction_id) AS n, count(v.id) AS "
                        "verdicts FROM generations g"
                        " LEFT JOIN verdicts v ON v.generation_id = g.id GROUP BY g.kind ORDER BY g.kind")
    assert [(k["kind"], k["n"], k["verdicts"]) for k in kinds] == [
        ("base", 2, 0), ("response", 2, 2 * 5), ("summary", 2, 2 * 5)]
    again = import_research_run(store, ImportOptions("research", paths[0]), list(reversed(paths)))
    assert not again.added


def test_single_article_constraints_and_every_file_alone(store, tmp_path):
    """A constraints file from one article: condition single, the article as reference A, the main
    task from main_task. A fitted or direct file alone brings its own instruction."""
    articles = [{"Merged Blog": "The harbour master closed the port.\nThe storm passed."}]
    single = rw.to_csv(rw.constraints_single(articles, single_model, "gen-model"), tmp_path
                       / "constraints.csv")
    summary = import_research_run(store, ImportOptions("research", single), [single])
    inst = store.one("SELECT * FROM instructions")
    assert (inst["condition"], inst["main_task"], inst["article_b"]) == (
        "single", "Write a news article about the harbour.", None)
    assert store.get_text(store.scalar("SELECT text_hash FROM articles WHERE id = ?",
                                       (inst["article_a"],))) == \
        articles[0]["Merged Blog"]
    assert summary.added["constraints"] == 5
    files = write_run(tmp_path / "run3")
    for key in ("direct", "base"):
        alone = import_research_run(store,
                                    ImportOptions("research", files[key], name=f"alone-{key}"), [files[key]])
        assert alone.added["instructions"] == 2, key
    # The reviser left out instruction 2's main task: alone, a fitted file cannot say it.
    with pytest.raises(ImportFailed, match=r"fitted_content.csv:\d+, column 2 \('main_task'\): empty"):
        import_research_run(store, ImportOptions("research", files["fitted"], name="alone"),
                            [files["fitted"]])


def test_errors_name_file_line_and_column_and_nothing_is_written(store, tmp_path):
    files = write_run(tmp_path / "run4")
    # A summary file without the responses it summarises: the model under test is not in it.
    with pytest.raises(ImportFailed) as err:
        import_research_run(store, ImportOptions("research", files["common"]),
                            [files["fitted_summaries"], files["common"], files["hardened"]])
    assert ("fitted_summaries.csv:2, column 5 ('fitted_content'): the "
            "response this row summarises" in str(err.value))
    assert store.scalar("SELECT count(*) FROM instructions") == 0  # the good files went too
    # A list no other file gives this instruction.
    with pytest.raises(ImportFailed,
                       match=r"fitted_summaries.csv:2, column 3 \('constraints'\): none of the lists"):
        import_research_run(store, ImportOptions("research", files["common"]),
                            [files["fitted_summaries"], files["common"]])
    # A broken list: the line the row starts on and the column.
    text = files["direct"].read_text()
    bad = tmp_path / "bad_direct.csv"
    bad.write_text(text.replace("3. Include a quote", "7. Include a quote", 1))
    with pytest.raises(ImportFailed,
                       match=r"bad_direct.csv:2, column 3 \('constraints'\): constraint number 7 where 3"):
        import_research_run(store, ImportOptions("research", bad), [bad])
    # A file no writer writes: the layouts and the columns seen.
    odd = tmp_path / "merged_blogs.csv"
    rw.to_csv([{"Blog A": "a", "Blog B": "b", "Merged Blog": "ab"}], odd)
    with pytest.raises(ImportFailed) as err:
        import_research_run(store, ImportOptions("research", odd), [odd])
    message = str(err.value)
    assert "merged_blogs.csv:1: not a file the research code writes" in message
    assert "common constraints (instruction_number, blog1, blog2" in message and "'Merged Blog'" in message
    assert store.scalar("SELECT count(*) FROM generations") == 0


def test_cli_imports_a_run_folder_in_one_command(store_path, tmp_path, capsys):
    folder = tmp_path / "run5"
    write_run(folder)
    rw.to_csv([{"Blog A": "a", "Blog B": "b"}], folder / "merged_blogs.csv")  # the run's input, left out
    assert main(["--store", str(store_path), "import", "research", str(folder), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["run_id"] == "import-run5" and out["added"]["instructions"] == 4
            and out["added"]["summaries"] == 3)
    assert any("merged_blogs.csv: left out" in w for w in out["warnings"])
    assert main(["--store", str(store_path), "import", "research", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "fitted_content.csv: fitted, 2 row(s)" in text and "added nothing" in text
    assert main(["--store", str(store_path), "import", "cs4", "a.csv", "b.csv"]) == 2
    assert "one file at a time" in capsys.readouterr().err


# -- the judge's replies ---------------------------------------------------------------------------


def test_judge_reply_forms():
    reply = parse_judge_reply('1. Yes - ""We are not asking," said the mayor."\n2. No - it has [2] items\n'
                              "3. Yes\n4. No\nNumber of constraints satisfied: 2\n\nNote: short text.", 4)
    assert reply.items[1]["quote"] == '"We are not asking," said the mayor.'
    assert reply.items[2] == {"verdict": False, "quote": "", "reason": "it has [2] items"}
    assert (reply.items[3]["verdict"], reply.items[4]["verdict"], reply.stated_count) == (True, False, 2)
    assert len(reply.warnings) == 1 and "Note: short text." in reply.warnings[0]
    # A bracket at the start is tried as JSON, then read as lines when JSON gives nothing.
    assert parse_judge_reply("[2] below\n1. Yes - \"x\"", 1).items[1]["quote"] == "x"
    fenced = parse_judge_reply('```json\n[{"id": 1, "verdict": "no", "reason": "r"}]\n```', 1)
    assert fenced.items[1]["verdict"] is False
    # A wrapped excerpt continues its item; a count that disagrees is a warning.
    wrapped = parse_judge_reply('1. Yes - "The storm came\nin from the west."\n2. No - x\n'
                                "Number of constraints satisfied: 2", 2)
    assert wrapped.items[1]["quote"] == "The storm came in from the west."
    assert "says 2" in wrapped.warnings[0]
    with pytest.raises(ValueError, match="no verdicts"):
        parse_judge_reply("I cannot judge this.", 3)


def test_a_yes_count_other_than_the_files_is_a_warning(store, tmp_path):
    merged = [{"Blog A": a, "Blog B": b} for a, b in BLOGS[:1]]
    common = rw.constraints_common(merged, common_model, "gen-model")
    evaluated = rw.evaluate(rw.direct(common, lambda task: DIRECT, "direct-model"), judge, "judge-model",
                            content_column="direct_content")
    assert evaluated[0]["num_satisfied"] == 4
    evaluated[0]["num_satisfied"] = 5  # as if the research count had read another line as a Yes
    path = rw.to_csv(evaluated, tmp_path / "direct_evaluated.csv")
    summary = import_research_run(store, ImportOptions("research", path), [path])
    assert summary.added["verdicts"] == 5
    assert summary.warnings == [f"{path}:2, column 10 ('satisfaction_results'): 4 Yes read where the file's "
                                "'num_satisfied' says 5"]
