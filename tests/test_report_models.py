"""Models compared (issue 48): two models under test on the same instructions, in the report.

Per model pair a table of Org, Core, superficial, gap and the copy-paste score, each model's value
with its interval, the difference, p and p Holm (Holm over the report's whole family, the copy-paste
tests included), one sentence saying which model follows more deeply or that the benchmark is too
small to tell, and each model's refusals; in the text report (80 columns), the HTML report and the
files. Synthetic stores with ``model_skill``: a model that satisfies more on its response and keeps
more in its summary is the deeper one.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.analysis.embeddings import get_embedder
from pipeline.analysis.model_duel import COPY_PASTE, DuelRow, ModelPair
from pipeline.analysis.stats import NAN_INTERVAL, PairedTest, holm
from pipeline.core.text import is_refusal
from pipeline.outputs.html_report import write_html
from pipeline.outputs.models_report import verdict_sentence
from pipeline.outputs.report import ReportOptions, build_report, render, write_outputs
from pipeline.outputs.report_text import Note, document
from pipeline.outputs.tables import Sheet, Value, text
from pipeline.stages.echo import compute_echo
from pipeline.store.database import Store, open_store
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store

DEEP, SHALLOW = (0.9, 0.7), (0.6, 0.2)  # (P satisfied on the response, P kept in the summary)
REFUSAL = "I'm sorry, but I can't help with that request."


def _store(path: Path, **spec: object) -> Store:
    """A synthetic store with every response's copy-paste score (the hash embedder's echo) and every
    response checked for refusal, as the generation stage leaves them."""
    spec = {"n_constraints": 8, "domains": ("news",), **spec}
    build_synthetic_store(path, SyntheticSpec(**spec))  # type: ignore[arg-type]
    store = open_store(path)
    compute_echo(store, get_embedder("hash"))
    store.conn.execute("UPDATE generations SET refusal = 0 WHERE kind = 'response'")
    store.commit()
    return store


def _refuse(store: Store, model: str) -> int:
    """One response of ``model`` becomes a refusal, flagged as pipeline.stages.generation flags it."""
    rid = store.conn.execute("SELECT min(id) FROM generations WHERE kind = 'response' AND model = ?",
                             (model,)).fetchone()[0]
    store.conn.execute("UPDATE generations SET text_hash = ?, words = ?, refusal = ? WHERE id = ?",
                       (store.put_text(REFUSAL), len(REFUSAL.split()), int(is_refusal(REFUSAL)), rid))
    store.commit()
    return rid


def _text(report, width: int = 80) -> str:  # noqa: ANN001
    console = Console(width=width, force_terminal=True, color_system=None, record=True, file=io.StringIO())
    render(report, console)
    return console.export_text()


def _flat(out: str) -> str:
    return " ".join(out.split())


def _sheets(report) -> list[Sheet]:  # noqa: ANN001
    return [i for i in document(report) if isinstance(i, Sheet) and i.title.startswith("Models compared")]


@pytest.fixture(scope="module")
def deeper(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """30 instructions of one condition: model-a follows deeply, model-b superficially; one model-a
    response refuses."""
    path = tmp_path_factory.mktemp("duel") / "deeper.sqlite"
    store = _store(path, n_instructions=30, conditions=("eval",),
                   model_skill={"model-a": DEEP, "model-b": SHALLOW})
    _refuse(store, "model-a")
    report = build_report(store, ReportOptions(n_resamples=200))
    yield store, report
    store.close()


def test_the_section_compares_both_models_with_the_copy_paste_score(deeper) -> None:  # noqa: ANN001
    store, report = deeper
    (sheet,) = _sheets(report)
    assert sheet.title == "Models compared: model-a vs model-b (paired on the same instructions)"
    assert sheet.headers == ["domain", "condition", "metric", "model-a", "model-b", "difference [95% CI]",
                             "p", "p Holm", "n"]
    rows = {row[2]: row for row in sheet.rows}
    assert list(rows) == ["Org", "Core@0.25", "superficial", "Org-Core gap", "copy-paste"]
    copy_row = rows["copy-paste"]
    for cell in copy_row[3:6]:  # each model's cosine and the difference, each with an interval
        assert isinstance(cell, Value) and cell.interval.startswith("[") and cell.bounds is not None
    assert copy_row[8] == "30"
    # The copy-paste score of a unit: the mean of its response's stored echoes, as the copying section's.
    pair = report.models.pairs[0]
    test = next(r.comparison for r in pair.rows if r.comparison.metric == COPY_PASTE)
    echoes = store.conn.execute(
        "SELECT g.model, avg(x.echo) FROM constraint_echo x JOIN generations g ON g.id = x.generation_id"
        " JOIN constraints c ON c.id = x.constraint_id AND c.active = 1"
        " WHERE g.kind = 'response' GROUP BY g.id ORDER BY g.model").fetchall()
    for model, mean in (("model-a", test.test.mean_a), ("model-b", test.test.mean_b)):
        assert mean == pytest.approx(sum(e for m, e in echoes if m == model) / 30)
    assert copy_row[3].data == (round(test.test.mean_a, 2),)


def test_one_holm_family_holds_the_copy_paste_tests_and_a_note_says_it(deeper) -> None:  # noqa: ANN001
    _, report = deeper
    tested = [c for c in report.comparisons if not math.isnan(c.test.p_value)]
    assert any(c.metric == COPY_PASTE and c.by == "model" for c in tested)
    assert [c.p_holm for c in tested] == pytest.approx(holm([c.test.p_value for c in tested]))
    assert report.models.family == len(tested)
    flat = _flat(_text(report))
    assert f"p Holm: adjusted over the report's whole family of {len(tested)} paired tests" in flat
    assert "copy-paste; every condition pair within a model; direct vs edit)" in flat


def test_the_sentence_names_the_deeper_model(deeper, tmp_path: Path) -> None:  # noqa: ANN001
    _, report = deeper
    pair = report.models.pairs[0]
    assert (pair.verdict, pair.deeper, pair.instructions) == ("deeper", "model-a", 30)
    flat = _flat(_text(report))
    assert ("model-a follows more deeply than model-b on the 30 instructions both answered (30 in each test;"
            " Core") in flat
    assert "significant after Holm, higher Core in 1 of 1 test and less superficial in 1 of 1" in flat
    # The other way round: the verdict follows the skill, not the models' order.
    store = _store(tmp_path / "swapped.sqlite", n_instructions=30, conditions=("eval",),
                   model_skill={"model-a": SHALLOW, "model-b": DEEP})
    swapped = build_report(store, ReportOptions(n_resamples=200))
    store.close()
    assert swapped.models.pairs[0].deeper == "model-b"
    assert "model-b follows more deeply than model-a" in _flat(_text(swapped))


def test_a_tiny_store_is_too_small_to_tell(tmp_path: Path) -> None:
    store = _store(tmp_path / "tiny.sqlite", n_instructions=3, conditions=("eval",),
                   model_skill={"model-a": DEEP, "model-b": SHALLOW})
    report = build_report(store, ReportOptions(n_resamples=200))
    store.close()
    assert report.models.pairs[0].verdict == "too_small"
    flat = _flat(_text(report))
    assert ("On the 3 instructions both answered (3 in each test), model-a has the higher Core" in flat
            and "this benchmark is too small to tell which model follows more deeply." in flat)


def test_with_one_instruction_a_condition_no_family_of_zero_tests_is_named(tmp_path: Path) -> None:
    """The demo's store with two models on one pair: one instruction in each condition, nothing to test."""
    store = _store(tmp_path / "one.sqlite", n_instructions=1, conditions=("eval", "single"),
                   model_skill={"model-a": DEEP, "model-b": SHALLOW})
    report = build_report(store, ReportOptions(n_resamples=200))
    store.close()
    flat = _flat(_text(report))
    assert report.models.family == 0 and "family of 0" not in flat
    assert "p: no paired test yet: too few instructions both models answered in any condition" in flat


def test_refusals_are_counted_per_model_in_text_html_and_json(deeper, tmp_path: Path) -> None:  # noqa: ANN001
    store, report = deeper
    counts = {r.model: (r.refused, r.responses) for r in report.models.refusals}
    assert counts == {"model-a": (1, 30), "model-b": (0, 30)}
    line = ("refusals (responses that refuse the task, scored as the model's answers): model-a 1 of 30"
            " responses, model-b 0 of 30 responses")
    assert line in _flat(_text(report))
    page = write_html(store, report, tmp_path / "html").path.read_text(encoding="utf-8")
    assert '<section id="models"><h2>Models compared</h2>' in page
    assert line.replace("'", "&#x27;") in page
    assert "model-a follows more deeply than model-b" in page
    write_outputs(report, tmp_path / "out")
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert {r["model"]: r["refused"] for r in data["models"]["refusals"]} == {"model-a": 1, "model-b": 0}
    assert data["models"]["pairs"][0]["sentence"].startswith("model-a follows more deeply than model-b")
    assert data["models"]["holm_family"] == report.models.family
    rows = list(csv.DictReader((tmp_path / "out" / "model_comparisons.csv").open()))
    copy_rows = [r for r in rows if r["metric"] == COPY_PASTE]
    assert len(copy_rows) == 1 and float(copy_rows[0]["a_value"]) > 0 and copy_rows[0]["p_holm"]
    assert {r["verdict"] for r in rows} == {"deeper"}
    # --format json carries the section's table and lines too.
    from pipeline.outputs.report_text import write_format

    out = io.StringIO()
    write_format(report, "json", out)
    piped = json.loads(out.getvalue())
    assert any(t["title"].startswith("Models compared") for t in piped["tables"])
    assert any(n.startswith("  refusals") for n in piped["notes"])


def test_one_model_still_counts_its_refusals_and_an_unchecked_store_says_so(tmp_path: Path) -> None:
    store = _store(tmp_path / "one.sqlite", n_instructions=4, models=("qwen2.5-coder-1.5b",))
    _refuse(store, "qwen2.5-coder-1.5b")
    report = build_report(store, ReportOptions(n_resamples=50))
    assert not _sheets(report)
    assert ("refusals (responses that refuse the task, scored as the model's answers): qwen2.5-coder-1.5b"
            " 1 of 4 responses") in _flat(_text(report))
    # As a store written before the refusal flag holds its responses.
    store.conn.execute("UPDATE generations SET refusal = NULL WHERE kind = 'response'")
    store.commit()
    unchecked = build_report(store, ReportOptions(n_resamples=50))
    store.close()
    said = "qwen2.5-coder-1.5b not checked (4 responses stored before the refusal flag)"
    assert said in _flat(_text(unchecked))


def test_the_section_fits_80_columns_with_real_model_names(tmp_path: Path) -> None:
    models = ("qwen2.5-coder-1.5b", "smollm2-135m")
    store = _store(tmp_path / "demo.sqlite", n_instructions=16, models=models,
                   model_skill={models[0]: DEEP, models[1]: SHALLOW})
    _refuse(store, models[0])
    report = build_report(store, ReportOptions(n_resamples=50))
    store.close()
    out = _text(report, 80)
    table_lines = [line for line in out.splitlines() if line[:1] in "┏┃┡│└├"]
    assert table_lines and all(len(line) <= 80 for line in table_lines)
    assert not any("…" in line for line in table_lines), "a header or a value was cut"
    flat = _flat(out)
    (sheet,) = _sheets(report)
    assert {row[1] for row in sheet.rows} == {"single", "none", "direct", "eval"}
    for row in sheet.rows:
        for cell in row:
            for part in text(cell, "\n").split("\n"):
                assert part in flat, part
    assert "qwen2.5-coder-1.5b 1 of 16 responses, smollm2-135m 0 of 16 responses" in flat
    notes = [i.text for i in document(report) if isinstance(i, Note)]
    assert sum("follows more deeply" in n for n in notes) == 1  # one sentence per pair


def _pair(favours_a: dict[str, int], favours_b: dict[str, int], instructions: int = 12) -> ModelPair:
    test = PairedTest(0.1, 0.0, 0.2, 0.01, instructions, 0.5, 0.4)
    from pipeline.analysis.metrics import Comparison

    rows = [DuelRow(Comparison("model", "m1", "m2", "news", "eval", "core", 0.25, test, 0.02), NAN_INTERVAL,
                    NAN_INTERVAL)]
    tested = {"core": 2, "superficial": 2, COPY_PASTE: 2}
    return ModelPair("m1", "m2", rows, instructions, 0.5, 0.4, {"m1": favours_a, "m2": favours_b}, tested)


def test_the_sentence_when_the_tests_disagree_or_nothing_was_shared() -> None:
    mixed = _pair({"core": 2, "superficial": 0, COPY_PASTE: 0}, {"core": 0, "superficial": 0, COPY_PASTE: 1})
    assert mixed.verdict == "mixed"
    assert verdict_sentence(mixed) == (
        "Neither model follows more deeply throughout on the 12 instructions both answered (12 in each test):"
        " significant after Holm, m1 has higher Core in 2 of 2 tests, while m2 has less copy-paste in 1 of 2"
        " tests.")
    none = _pair({}, {}, instructions=0)
    said = ("m1 and m2 have no instruction judged for both, on the response and its summary: "
            "this report cannot compare them yet.")
    assert verdict_sentence(none) == said
