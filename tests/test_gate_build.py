"""The constraint gate in a build (issue 60): each instruction's ledger stored, copied to each common
condition, logged as the stages run, in `report` (text and HTML), `export`, `build --step` and Audit's
task line; an eval revision's replacement judged on the base article; the pair floor; imported lists
checked, not changed; the dry run's price; the demo's pairs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.analysis.gate import Ledger, summarize_ledgers
from pipeline.llm.client import LLMClient
from tests.fakes.fake_server import FakeOpenAIServer
from tests.fakes.responders import fake_config, make_store
from tests.support.gate_world import GOOD, Writer

# -- the build: the ledger stored, copied to each common condition, in the report and the export ----------


async def test_a_gated_build_stores_each_instructions_ledger_for_report_and_export(tmp_path, capsys) -> None:
    from pipeline.outputs.export import iter_benchmark
    from pipeline.outputs.report_text import gate_document
    from pipeline.stages.build import BuildOptions, run_build
    from pipeline.store.ledgers import ledger_rows, run_ledgers

    store = make_store(tmp_path / "s.sqlite")
    more = ["Report how volunteers responded to the closure.", "Describe what the vote could change.",
            "Explain who will bear the cost of closing the gap."]
    writer = Writer([*GOOD, GOOD[1]], more, replacements={
        1: "Contrast the views of two groups of residents.", 2: "Explain what the elected body fears most.",
        3: "{orig} and its impact on the global economy.",
        4: "Explain how the shortfall compares with earlier years."},
        missing={3: "Describe what the closure means for families."})
    with FakeOpenAIServer(writer) as server:
        config = fake_config(server.base_url, build={"gate": True})
        client = LLMClient(config, store, backoff_base_s=0.01)
        try:
            options = BuildOptions.from_config(config, n=1, conditions=("single", "none", "direct"),
                                               n_constraints=4, words=60, embedder="lexical")
            events: list[str] = []
            def log(e: Any) -> None:
                events.append(e.message) if e.kind == "log" else None

            summary = await run_build(store, config, client, options, progress=log)
        finally:
            await client.aclose()
    assert summary.complete
    # Build's log as the stages run: each list's ledger and its refused candidates with why
    said = ": gate synthesis: 7 written, rejected 1 distinct; 4 of 4 kept after 1 round(s); 2 more not needed"
    assert any(said in m for m in events), events
    assert any(m.startswith("  refused (appended): ") and "global economy" in m for m in events)
    ledgers = {(cond, stage): data for _, cond, stage, data in run_ledgers(store, summary.run_id)}
    assert set(ledgers) == {("single", "synthesis"), ("none", "synthesis"), ("direct", "synthesis"),
                            ("direct", "revision")}
    # the shared synthesis: one ledger, copied to each common condition
    assert ledgers[("none", "synthesis")] == ledgers[("direct", "synthesis")]
    assert ledgers[("none", "synthesis")]["rejected"] == {"distinct": 1}
    revision = ledgers[("direct", "revision")]
    assert revision["rejected"] == {"appended": 1} and revision["kept"] == 4 and revision["active"] == 4
    records = {r["condition"]: r for r in iter_benchmark(store, run=summary.run_id)}
    assert records["common+direct"]["gate"]["revision"]["rejected"] == {"appended": 1}
    rows = summarize_ledgers([r for r in ledger_rows(store, run_id=summary.run_id)])
    from pipeline.analysis.report_model import build_report

    # `report` reads the same ledgers, per condition and stage (the shared holder's copy not twice)
    assert [(g.condition, g.stage) for g in build_report(store).gate] == [
        ("single", "synthesis"), ("none", "synthesis"), ("direct", "synthesis"), ("direct", "revision")]
    sheet = gate_document(rows)[0]
    text = json.dumps([list(map(str, row)) for row in sheet.rows])
    assert "direct" in text and "revision" in text and "4 of 4" in text
    from types import SimpleNamespace

    from pipeline.outputs.html_tables import gate_html

    page = gate_html(SimpleNamespace(gate=rows))  # type: ignore[arg-type]
    assert '<section id="gate">' in page and "<td>revision</td>" in page and "appended %" in page
    # build --step: each refused candidate with why, after its stage
    from rich.console import Console

    from pipeline.cli.build_cmd import _print_gate

    out = Console(record=True, width=300)
    _print_gate(out, store, summary.run_id, "revision")
    said = out.export_text()
    assert "(direct): gate revision:" in said and "refused (appended)" in said and "global economy" in said
    store.close()
    # `report` before any evaluation: nothing to rate yet, but what the gate did, per condition
    from pipeline.cli import main

    capsys.readouterr()
    assert main(["--store", str(tmp_path / "s.sqlite"), "report", "--run", summary.run_id]) == 1
    printed = capsys.readouterr().out
    assert "Constraint gate" in " ".join(printed.split()), printed
    assert "revision" in printed and "appended" in printed


async def test_a_build_refuses_a_pair_below_the_floor_unless_allowed(tmp_path) -> None:
    from pipeline.core.errors import StageError
    from pipeline.stages.build import BuildOptions, select_pairs
    from pipeline.stages.pairing import pair_floor

    store = make_store(tmp_path / "s.sqlite")
    store.conn.execute("UPDATE pairs SET cosine = 0.39")
    store.commit()
    config = fake_config("http://127.0.0.1:9")
    options = BuildOptions.from_config(config, n=1, conditions=("single", "eval"))
    with pytest.raises(StageError, match=r"floor 0.70.*cosine 0.39.*--allow-dissimilar"):
        select_pairs(store, options, pair_floor(config))
    allowed = BuildOptions.from_config(config, n=1, conditions=("single", "eval"), allow_dissimilar=True)
    assert len(select_pairs(store, allowed, pair_floor(config))) == 1
    # single alone asks nothing of the pair's similarity
    assert len(select_pairs(store, BuildOptions.from_config(config, n=1, conditions=("single",)), 0.7)) == 1
    higher = fake_config("http://127.0.0.1:9")
    higher.settings["pair"] = {"floor": 0.2}
    assert len(select_pairs(store, options, pair_floor(higher))) == 1
    store.close()


def test_pairing_reports_the_pairs_below_the_floor(tmp_path) -> None:
    from pipeline.analysis.embeddings import get_embedder
    from pipeline.stages.pairing import PairOptions, pair_domain

    store = make_store(tmp_path / "s.sqlite")
    summary = pair_domain(store, get_embedder("hash-64"), PairOptions(domain="news", floor=1.0))
    assert summary.pairs >= 1 and len(summary.below_floor) == summary.pairs
    again = pair_domain(store, get_embedder("hash-64"), PairOptions(domain="news", floor=-1.0))
    assert again.below_floor == []
    store.close()


# -- imported lists: checked, not changed ----------------------------------------------------------------


def test_an_imported_cs4_list_is_checked_not_changed(tmp_path, capsys) -> None:
    from pipeline.cli import main
    from pipeline.store.database import open_store
    from pipeline.store.ledgers import ledger_rows
    from tests.support.import_files import CS4_HEADER, numbered, write_csv

    items = ["The story should describe the storm in several sentences.",
             "The story should describe the storm in several long sentences.",  # a near-copy
             "The story should open at night. It should end at dawn.",  # two requirements
             "The story should quote the keeper's log."]
    path = write_csv(tmp_path / "cs4.csv", CS4_HEADER,
                     [["1", "Write a story about a keeper and the storm.", "4", numbered(items)]])
    store_path = tmp_path / "s.sqlite"
    assert main(["--store", str(store_path), "import", "cs4", str(path), "--name", "cs4"]) == 0
    said = capsys.readouterr().out
    assert "gate check" in said and "of 4 constraints" in said and "2 (50%) pass every check" in said
    store = open_store(store_path)
    try:
        [(_condition, stage, ledger)] = ledger_rows(store, run_id="import-cs4")
        assert stage == "import" and ledger["rejected"] == {"distinct": 1, "atomic": 1}
        assert ledger["kept"] == 2
        # not changed: the four constraints are all there
        assert store.scalar("SELECT count(*) FROM constraints WHERE active = 1") == 4
    finally:
        store.close()

def test_audit_heads_an_instruction_with_what_the_gate_kept_and_refused() -> None:
    from unspecific_tui.widgets.audit.head import gate_line

    synthesis = Ledger("synthesis", 39, written=61, rounds=4, kept=37)
    for check, n in (("distinct", 12), ("common", 6)):
        for _ in range(n):
            synthesis.reject("x", check, "why")
    revision = Ledger("revision", 18, written=25, kept=15, active=37)
    for _ in range(3):
        revision.reject("y", "appended", "why")
    line = gate_line({"synthesis": synthesis.as_json(), "revision": revision.as_json()})
    assert line == ("37 of 39 after 4 rounds, refused 12 distinct, 6 common; revision replaced 15 of 18 "
                    "(refused 3 appended)")
    assert gate_line({}) == ""


async def test_a_dry_run_prices_the_gates_judging_and_refuses_nothing(tmp_path) -> None:
    """Placeholder replies say nothing of what a model would write: the dry run asks (prices) the gate's
    judge calls, 2 a common list and 1 an eval revision, and goes on through every stage."""
    from pipeline.stages.build import BuildOptions
    from pipeline.stages.estimate import estimate_build

    store = make_store(tmp_path / "s.sqlite", 2)
    calls = {}
    for gate in (False, True):
        config = fake_config("http://127.0.0.1:9", build={"gate": gate})
        options = BuildOptions.from_config(config, n=2, n_constraints=12, words=100, embedder="lexical")
        estimate = await estimate_build(store, config, options)
        calls[gate] = estimate.endpoints["fake"].calls
        assert "revise_eval" in estimate.guessed_templates  # every stage reached
    assert calls[True] == calls[False] + 2 * (2 + 1)
    store.close()

async def test_an_eval_revision_under_the_gate_stores_the_base_articles_no_on_its_replacement(
        tmp_path) -> None:
    from pipeline.stages.build import BuildOptions, run_build
    from pipeline.store.ledgers import run_ledgers

    store = make_store(tmp_path / "s.sqlite")
    easy = GOOD[0]
    writer = Writer([*GOOD, "Report how volunteers responded to the closure."], [], easy=(easy,),
                    replacements={1: "Contrast what parents and pensioners lose when the service shuts."})
    with FakeOpenAIServer(writer) as server:
        config = fake_config(server.base_url, build={"gate": True})
        client = LLMClient(config, store, backoff_base_s=0.01)
        try:
            options = BuildOptions.from_config(config, n=1, conditions=("eval",), n_constraints=4,
                                               words=60, embedder="lexical")
            summary = await run_build(store, config, client, options)
        finally:
            await client.aclose()
    assert summary.complete
    inst = store.one("SELECT id FROM instructions WHERE condition = 'eval'")["id"]
    new = store.one("SELECT * FROM constraints WHERE instruction_id = ? AND origin = 'revised'", [inst])
    old = store.one("SELECT * FROM constraints WHERE id = ?", [new["replaces_id"]])
    assert old["text"] == easy and old["base_verdict"] == 1
    # the gate judged the base article on the replacement: its No is stored on the new row
    assert new["text"] == "Contrast what parents and pensioners lose when the service shuts."
    assert new["base_verdict"] == 0
    revision = {stage: data for iid, _, stage, data in run_ledgers(store, summary.run_id) if iid == inst}
    assert revision["revision"]["kept"] == 1 and revision["revision"]["wanted"] == 1
    assert revision["revision"]["active"] == 4
    store.close()


def test_the_demo_builds_on_pairs_in_the_band_and_else_on_the_most_similar_left(tmp_path) -> None:
    from pipeline.stages.demo import DemoOptions, demo_pairs

    store = make_store(tmp_path / "s.sqlite", 4)
    ids = [r["id"] for r in store.query("SELECT id FROM pairs ORDER BY id")]
    for pid, cosine in zip(ids, (0.39, 0.72, 0.5, 0.81), strict=True):
        store.conn.execute("UPDATE pairs SET cosine = ? WHERE id = ?", (cosine, pid))
    store.commit()
    config = fake_config("http://127.0.0.1:9")
    assert [p.cosine for p in demo_pairs(store, config, DemoOptions(pairs=2))] == [0.72, 0.81]
    # fewer in the band than asked: the most similar of the rest after them
    assert [p.cosine for p in demo_pairs(store, config, DemoOptions(pairs=3))] == [0.72, 0.81, 0.5]
    store.close()
    # the articles are paired with MiniLM unless the demo is given a model
    assert DemoOptions().articles_embedder == "minilm" and DemoOptions().embedder is None
    assert DemoOptions(embedder="hash").articles_embedder == "hash"
