"""`unspecific report` and `unspecific export` end to end on small stores in tmp_path."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.store.database import open_store
from tests.support.hand_store import build_hand_store

PNG = b"\x89PNG\r\n\x1a\n"


def _two_ratio_store(path: Path) -> Path:
    """The hand-built store plus a 0.5 summary, a second model and a second instruction."""
    store = build_hand_store(path)
    c = store.conn
    h = store.put_text("A longer summary of the council story.")
    c.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, ratio, parent_id, text_hash)"
              " VALUES (102, 'summary', 1, 'summ', '', 0.5, 100, ?)", (h,))
    c.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, text_hash) VALUES"
              " (200, 'response', 1, 'm2', 'direct', ?)", (h,))
    c.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, ratio, parent_id, text_hash)"
              " VALUES (201, 'summary', 1, 'summ', '', 0.25, 200, ?)", (h,))
    rows = []
    for judge in ("J1", "J2"):
        rows += [(102, cid, judge, 1) for cid in (1, 2, 3, 4)]
        rows += [(200, cid, judge, 1) for cid in (1, 2, 3, 4)]
        rows += [(201, cid, judge, int(cid < 3)) for cid in (1, 2, 3, 4)]
    c.executemany("INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, "
                  "prompt_hash, verdict) VALUES (?, ?, ?, 'batched', 'new', ?)", rows)
    store.commit()
    store.close()
    return path


def test_report_writes_tables_and_charts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _two_ratio_store(tmp_path / "s.sqlite")
    out = tmp_path / "out"
    code = main(["--store", str(store), "report", "--out", str(out), "--compare", "m1,m2",
                 "--similarity", "hash",
                 "--resamples", "100"])
    assert code == 0
    text = capsys.readouterr().out
    assert "news" in text and "62.5" in text  # m1's Org
    assert "Depth profile" in text and "Naturalness" in text and "Human validation" in text
    for name in ("summary.csv", "summary.json", "per_instruction.csv", "per_instruction.json",
                 "agreement.csv",
                 "comparisons.csv", "naturalness.csv", "validation.json", "report.json"):
        assert (out / name).is_file(), name
    for name in ("org_core_news.png", "depth_news.png"):
        data = (out / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000, name
    with (out / "summary.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    m1 = [r for r in rows if r["model"] == "m1" and r["ratio"] == "0.25"]
    assert (len(m1) == 1 and float(m1[0]["org"]) == pytest.approx(0.625)
            and float(m1[0]["core"]) == pytest.approx(0.5))
    assert float(m1[0]["superficial"]) == pytest.approx(1 / 3)
    assert "sim_response" in rows[0] and "copy_a_share" in rows[0]
    report = json.loads((out / "report.json").read_text())
    assert report["ratios"] == [0.25, 0.5] and report["raters"] == ["J1", "J2"]
    # m2 passes everything on full (Org 1.0) and keeps c1, c2 at 0.25 (Core 0.5).
    comp = {(c["metric"]): c for c in report["requested_comparison"]}
    assert comp["org"]["diff"] == pytest.approx(0.625 - 1.0) and comp["core"]["diff"] == pytest.approx(0.0)
    per = json.loads((out / "per_instruction.json").read_text())
    assert {r["response_id"] for r in per} == {100, 200}
    # validation.json's "metric" is `validate report --json`'s shape (one rule, one record): "ties".
    assert json.loads((out / "validation.json").read_text())["metric"]["ties"] == 2


def test_report_on_an_empty_store_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.sqlite"
    open_store(path).close()
    code = main(["--store", str(path), "report", "--out", str(tmp_path / "out")])
    assert code == 1
    assert "Nothing to report" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_report_rejects_a_bad_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.sqlite"
    build_hand_store(path).close()
    assert main(["--store", str(path), "report", "--compare", "m1"]) == 2
    assert "--compare" in capsys.readouterr().err


def test_export_jsonl_parses_back_with_lineage(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = build_hand_store(path)
    store.conn.execute("INSERT INTO constraint_flags VALUES (1, 'proper_noun', 'Harrowgate')")
    store.commit()
    store.close()
    out = tmp_path / "bench.jsonl"
    assert main(["--store", str(path), "export", "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 1  # instruction 2 has no constraints
    rec = lines[0]
    assert (rec["id"], rec["domain"], rec["condition"], rec["status"]) == (1, "news", "common+eval", "done")
    assert [c["position"] for c in rec["constraints"]] == [1, 2, 3, 4]
    first = rec["constraints"][0]
    assert first["replaced"] == [{"id": 10, "text": "Mention the council.",
                                  "reason": "too easy: base article satisfied it"}]
    assert rec["constraints"][1]["replaced"] == [] and rec["constraints"][1]["flags"] == []
    assert rec["constraints"][0]["flags"] == [{"flag": "proper_noun", "detail": "Harrowgate"}]
    assert rec["references"]["a"]["source_id"] == "a1" and "text" not in rec["references"]["a"]
    assert rec["instruction"].startswith("Write a news article about a council budget.\n\n1. Explain why")
    assert rec["instruction"].endswith("4. Close with a quote from a protester.")
    assert "api_key" not in out.read_text()
    # Filters and reference texts.
    assert main(["--store", str(path), "export", "--out", str(out), "--condition", "single"]) == 1
    assert main(["--store", str(path), "export", "--out", str(out), "--with-references"]) == 0
    assert json.loads(out.read_text())["references"]["a"]["text"].startswith("The council met")


def test_requested_comparison_carries_the_holm_p(tmp_path: Path) -> None:
    from pipeline.outputs.report import ReportOptions, build_report
    from tests.support.hand_store import many_store

    store = many_store(tmp_path, {"strong": 0.9, "weak": 0.5, "twin": 0.9})
    report = build_report(store, ReportOptions(compare=("weak", "strong"), n_resamples=200, copy=False))
    (requested,) = report.requested
    assert (requested.a, requested.b, requested.metric) == ("weak", "strong",
                                                            "org") and requested.test.diff < 0
    family = {frozenset((c.a, c.b)): c for c in report.comparisons}
    assert len(family) == 3  # the three model pairs, Org only (no summaries)
    same = family[frozenset(("weak", "strong"))]
    assert requested.p_holm == same.p_holm and same.p_holm >= same.test.p_value
    assert same.p_holm < 0.05 and family[frozenset(("strong", "twin"))].p_holm > 0.05
    store.close()


def test_export_writes_the_finished_benchmark_with_public_names_and_flag_objects(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = build_hand_store(path)
    c = store.conn
    c.execute("INSERT INTO constraint_flags VALUES (2, 'specificity_leak', ?)",
              (json.dumps({"closer_to": "a", "lexical": {"a": 0.5, "b": 0.1}}),))
    # An eval instruction still holding its unrevised constraints, and the build's internal
    # holder of a shared common synthesis: neither is part of the benchmark.
    for iid, run, condition, status in ((3, "r2", "eval", "base_judged"), (4, "r2", "common", "done")):
        c.execute("INSERT INTO instructions(id, run_id, domain, condition, article_a, article_b, main_task,"
                  " n_constraints, status) VALUES (?, ?, 'news', ?, 1, 2, 'Write.', 1, ?)",
                  (iid, run, condition, status))
        c.execute("INSERT INTO constraints(instruction_id, position, text, origin, "
                  "active) VALUES (?, 1, 'C.',"
                  " 'synthesized', 1)", (iid,))
    store.commit()
    store.close()
    out = tmp_path / "bench.jsonl"
    assert main(["--store", str(path), "export", "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["condition"], r["status"]) for r in lines] == [(1, "common+eval", "done")]
    leak = lines[0]["constraints"][1]["flags"]
    assert leak == [{"flag": "specificity_leak",
                     "detail": {"closer_to": "a", "lexical": {"a": 0.5, "b": 0.1}}}]
    # --all adds the unfinished one with its status; the internal holder never appears.
    assert main(["--store", str(path), "export", "--out", str(out), "--all"]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["condition"], r["status"]) for r in lines] == [(1, "common+eval", "done"),
                                                                        (3, "common+eval", "base_judged")]
    assert "common\"" not in out.read_text()
    # A public condition name selects.
    assert main(["--store", str(path), "export", "--out", str(out), "--condition", "common+eval"]) == 0
    assert len(out.read_text().splitlines()) == 1
