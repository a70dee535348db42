"""The constraint gate (issue 60): each check on constructed cases it must pass and fail, the rounds on
the fake server (a generator that keeps writing duplicates stops at the bound and says its shortfall),
the judged common and easy checks, the revision gate, the ledger in the store, report and export, the
pair floor, and one small run of the whole gate on the embedded model."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from pipeline.analysis.gate import (
    Distinct,
    Ledger,
    appended_problem,
    atomic_problem,
    specifics,
    summarize_ledgers,
    token_set,
    unspecific_problem,
)
from pipeline.core.definitions import DISTINCT_TOKEN_SET
from pipeline.llm.client import LLMClient
from pipeline.llm.placeholders import block, numbered_items, user_messages
from pipeline.llm.placeholders import prompt_kind as kind_of
from pipeline.llm.prompts import defuse, load_template
from pipeline.stages.gate import ConstraintGate, Judge
from pipeline.stages.revision import ask_replacements
from pipeline.stages.synthesis import synthesize_common, synthesize_single
from tests.fakes.fake_server import FakeOpenAIServer, Reply
from tests.fakes.responders import ARTICLE_A, ARTICLE_B, fake_config, make_store

# -- the text checks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "Explain what the closure means for families. Describe how the council responded.",  # two sentences
    "What caused the gap? Who decided? What happens next?",  # a list of questions
    "Describe the funding gap and also the reaction of residents.",
    "Explain why the service closed, and describe how residents reacted.",  # a second instruction
    "Explain what happened, why it happened and how people reacted.",  # what, why, how
    "Describe the gap; mention the vote.",
])
def test_atomic_refuses_compound_constraints(text: str) -> None:
    assert atomic_problem(text) is not None


@pytest.mark.parametrize("text", [
    "Describe how residents reacted to the closure of a public service.",
    "Contrast how older and younger residents reacted to the closure.",  # "and" inside one ask
    "Explain how and why the council cut the service.",
    "Quote a resident.",
    "What does the closure mean for families who rely on the service?",
    "Compare and contrast how the two bodies tried to close the gap.",
    "Quote Mr. Khan's explanation of the deficit.",  # an abbreviation's period ends no sentence
])
def test_atomic_keeps_one_requirement(text: str) -> None:
    assert atomic_problem(text) is None


def test_distinct_catches_a_year_variant_and_keeps_another_subject() -> None:
    kept = Distinct()
    kept.add("Explain the company's market strategy in 2006.")
    assert "token-set" in (kept.problem("Explain the company's market strategy in 2007.") or "")
    assert token_set("Explain the company's market strategy.",
                     "Explain the company's market strategy in 2006.") >= DISTINCT_TOKEN_SET
    # the same template about another subject is another constraint
    assert kept.problem("Explain the company's pricing policy.") is None


def test_distinct_catches_a_paraphrase_by_its_cosine() -> None:
    """Vectors stand in for an embedder here (the real one: test_real_gate_on_the_embedded_model)."""
    kept = Distinct(cosine_threshold=0.85)
    a = np.array([1.0, 0.0, 0.0])
    kept.add("Describe how shareholders reacted to the results.", a)
    close = np.array([0.95, 0.31, 0.0])  # cosine 0.95
    far = np.array([0.5, 0.866, 0.0])  # cosine 0.5
    assert "paraphrase" in (kept.problem("Explain the response of investors to the figures.", close) or "")
    assert kept.problem("Explain the response of investors to the figures.", far) is None


def test_unspecific_refuses_a_name_only_in_a_and_a_year_in_neither() -> None:
    # Dawson and Smithfield are in reference A only; Khan in B only
    assert "Dawson" in (unspecific_problem("Explain what Councillor Dawson said about the gap.",
                                           ARTICLE_A, ARTICLE_B) or "")
    assert "only reference A" in (unspecific_problem("Describe the mood in Smithfield.", ARTICLE_A, ARTICLE_B)
                                  or "")
    assert "only reference B" in (unspecific_problem("Report what Khan blamed.", ARTICLE_A, ARTICLE_B) or "")
    assert "neither" in (unspecific_problem("Explain what changed in 2006.", ARTICLE_A, ARTICLE_B) or "")
    # in general terms: nothing specific to one reference (a verb the word list lacks is no name)
    assert unspecific_problem("Describe how residents reacted to the closure of a public service.",
                              ARTICLE_A, ARTICLE_B) is None
    assert unspecific_problem("Summarise the options on the table.", ARTICLE_A, ARTICLE_B) is None


def test_unspecific_keeps_what_both_references_hold() -> None:
    a = "Shares in Google rose in 2005, analysts said. The BBC reported the rise."
    b = "In 2005 Google bought a company, the BBC said, and its shares rose."
    assert unspecific_problem("Explain why Google's shares rose in 2005.", a, b) is None
    found = {s.word: s.where for s in specifics("Explain what the BBC said in 2005 about AOL.", a, b)}
    assert found == {"BBC": "both references", "2005": "both references", "AOL": "neither reference"}


def test_appended_refuses_the_original_with_a_clause_added() -> None:
    original = "Explain the rise in advertising revenue."
    assert appended_problem(original, "Explain the rise in advertising revenue and its impact on the global "
                                      "economy.") is not None
    # harder by asking something else, with some of the same words: kept
    assert appended_problem(original, "Contrast the rise in advertising revenue with the fall in "
                                      "subscriptions.") is None
    assert appended_problem(original, "Explain the rise.") is None  # shorter: never appended


def test_ledger_says_its_shortfall_and_adds_up_per_condition() -> None:
    ledger = Ledger("synthesis", 39, written=70, rounds=4, kept=37)
    ledger.reject("x", "distinct", "repeats")
    assert ledger.shortfall == "37 of 39 after 4 rounds"
    assert Ledger("synthesis", 5, kept=5).shortfall is None
    again = Ledger.from_json(json.loads(json.dumps(ledger.as_json())))
    assert again.rejected == {"distinct": 1} and again.shortfall == ledger.shortfall
    twice = [("eval", "synthesis", ledger.as_json())] * 2
    rows = summarize_ledgers([*twice,
                              ("eval", "revision", Ledger("revision", 10, written=12, kept=9,
                                                          active=37).as_json())])
    assert [(r.condition, r.stage, r.instructions) for r in rows] == [("eval", "synthesis", 2),
                                                                      ("eval", "revision", 1)]
    assert rows[0].share("distinct") == pytest.approx(2 / 140) and rows[0].short == 2
    assert rows[1].replaced_share == pytest.approx(9 / 37)


# -- the rounds on the fake server -----------------------------------------------------------------

GOOD = ["Describe how residents reacted to the closure of a public service.",
        "Explain what caused the gap in the budget.",
        "Describe the options the elected body is weighing."]
DUPLICATES = ["Describe how the residents reacted to the closure of the public service.",
              "Explain what caused the gap in the budget.", "Explain what caused the gap in the budget"]


class Writer:
    """A generator and judge on the fake server: the first list is ``first``, every ask for more gets
    ``more``; the judge says Yes unless a constraint names ``not_on_b`` and the text is reference B
    (Riverton's), and on any other text (a base article) Yes only to constraints in ``easy``."""

    def __init__(self, first: list[str], more: list[str], *, not_on_b: str = "\x00",
                 easy: tuple[str, ...] = (), replacements: dict[int, str] | None = None,
                 missing: dict[int, str] | None = None) -> None:
        self.first, self.more, self.not_on_b, self.easy = first, more, not_on_b, easy
        self.replacements, self.missing = replacements or {}, missing or {}
        self.asks: list[str] = []
        self.judged: list[tuple[str, str]] = []

    def __call__(self, request: dict[str, Any]) -> Reply:
        kind = kind_of(request)
        users = user_messages(request)
        if kind in ("synthesize_common", "synthesize_single"):
            return Reply(text=json.dumps({"main_task": "Write a news article about a local budget gap.",
                                          "constraints": self.first}))
        if kind == "constraints_more":
            self.asks.append(users[-1])
            return Reply(text=json.dumps({"constraints": self.more}))
        if kind == "judge_batched":
            text = block(users[0], "TEXT")
            verdicts = []
            for i, c in numbered_items(block(users[0], "CONSTRAINTS")):
                self.judged.append((text[:10], c))
                if "Smithfield" in text or "Riverton" in text:
                    yes = not (self.not_on_b in c and "Riverton" in text)
                else:
                    yes = c in self.easy
                verdicts.append({"id": i, "verdict": "yes" if yes else "no",
                                 "quote": text.split(".")[0] if yes else ""})
            return Reply(text=json.dumps({"verdicts": verdicts}))
        if kind == "base_article":
            body = "The council met and argued about money while residents waited."
            return Reply(text=" ".join([body] * 8))
        if kind in ("revise_eval", "revise_direct"):
            fence = "TOO_EASY" if kind == "revise_eval" else "CONSTRAINTS"
            listed = dict(numbered_items(block(users[0], fence)))
            # "{orig}": the listed original's words, padded (the appended clause a 1.5B model writes)
            return Reply(text=json.dumps({"replacements": [
                {"id": i, "constraint": t.replace("{orig}", listed.get(i, "").rstrip("."))}
                for i, t in self.replacements.items()]}))
        if kind == "revise_missing":
            self.asks.append(users[-1])
            ids = [i for i, _ in numbered_items(block(users[-1], "MISSING"))]
            return Reply(text=json.dumps({"replacements": [{"id": i, "constraint": self.missing[i]}
                                                           for i in ids if i in self.missing]}))
        return Reply(text="unknown prompt")


def _gate(client: LLMClient, n: int, *, common: bool = True, judged: bool = True,
          stage: str = "synthesis") -> ConstraintGate:
    return ConstraintGate(Ledger(stage, n), references=(ARTICLE_A, ARTICLE_B) if common else None,
                          judge=Judge(client, "fake", "batched") if judged else None)


async def test_a_generator_that_keeps_writing_duplicates_stops_at_the_bound_and_says_its_shortfall(
        tmp_path) -> None:
    store = make_store(tmp_path / "s.sqlite")
    writer = Writer(GOOD + DUPLICATES, DUPLICATES)
    with FakeOpenAIServer(writer) as server:
        client = LLMClient(fake_config(server.base_url), store, backoff_base_s=0.01)
        try:
            gate = _gate(client, 6)
            result = await synthesize_common(client, "fake", ARTICLE_A, ARTICLE_B, 6, domain="news", seed="s",
                                             repair_rounds=3, gate=gate)
        finally:
            await client.aclose()
    assert sorted(result.constraints) == sorted(GOOD)  # kept short, never padded with a repeat
    ledger = result.ledger
    assert ledger is gate.ledger and ledger.shortfall == "3 of 6 after 3 rounds"
    assert len(writer.asks) == 3  # the bound: three rounds, then it stops
    assert ledger.written == 6 + 3 * 3 and ledger.rejected == {"distinct": 3 + 3 * 3}
    # each ask names what was rejected and why
    assert all("These were not kept" in ask and "repeats a kept constraint" in ask for ask in writer.asks)


async def test_without_a_gate_the_same_duplicates_are_still_a_count_error(tmp_path) -> None:
    from pipeline.stages.synthesis import CountError

    store = make_store(tmp_path / "s.sqlite")
    with FakeOpenAIServer(Writer(GOOD + DUPLICATES, DUPLICATES)) as server:
        client = LLMClient(fake_config(server.base_url), store, backoff_base_s=0.01)
        try:
            with pytest.raises(CountError):
                await synthesize_common(client, "fake", ARTICLE_A, ARTICLE_B, 6, domain="news", seed="s",
                                        repair_rounds=2)
        finally:
            await client.aclose()


async def test_common_needs_the_judge_on_both_references_and_unspecific_refuses_a_name(tmp_path) -> None:
    store = make_store(tmp_path / "s.sqlite")
    only_a = "Describe what the library closure meant for students."
    named = "Explain what Councillor Dawson said about the gap."
    compound = "Explain what caused the gap, and describe the mood of the meeting."
    writer = Writer([*GOOD, only_a, named, compound], ["Report how volunteers responded to the closure."],
                    not_on_b="library")
    with FakeOpenAIServer(writer) as server:
        client = LLMClient(fake_config(server.base_url), store, backoff_base_s=0.01)
        try:
            result = await synthesize_common(client, "fake", ARTICLE_A, ARTICLE_B, 4, domain="news", seed="s",
                                             repair_rounds=2, gate=_gate(client, 4))
        finally:
            await client.aclose()
    assert sorted(result.constraints) == sorted([*GOOD, "Report how volunteers responded to the closure."])
    ledger = result.ledger
    assert ledger.rejected == {"common": 1, "unspecific": 1, "atomic": 1} and ledger.shortfall is None
    why = {e["text"]: (e["check"], e["reason"]) for e in ledger.examples}
    assert why[only_a] == ("common", "the judge found it does not hold on reference B")
    assert why[named][0] == "unspecific" and "Dawson" in why[named][1]
    # the judge saw each candidate on both references, never the ones the text checks refused
    judged = [c for _, c in writer.judged]
    assert judged.count(only_a) == 2 and named not in judged and compound not in judged


async def test_single_keeps_its_specifics_but_not_its_repeats(tmp_path) -> None:
    store = make_store(tmp_path / "s.sqlite")
    named = "Explain what Councillor Dawson said about the gap."
    writer = Writer([named, *GOOD, GOOD[0]], [])
    with FakeOpenAIServer(writer) as server:
        client = LLMClient(fake_config(server.base_url), store, backoff_base_s=0.01)
        try:
            result = await synthesize_single(client, "fake", ARTICLE_A, 4, domain="news", repair_rounds=1,
                                             gate=_gate(client, 4, common=False, judged=False))
        finally:
            await client.aclose()
    assert result.constraints == [named, *GOOD]
    assert result.ledger.rejected == {"distinct": 1} and not writer.judged


async def test_revision_gate_refuses_an_appended_clause_and_what_the_base_article_satisfies(tmp_path) -> None:
    store = make_store(tmp_path / "s.sqlite")
    originals = ["Explain what caused the gap in the budget.", "Describe how residents reacted.",
                 "Describe the options the elected body is weighing."]
    easy_again = "Describe what the meeting decided."
    writer = Writer([], [], easy=(easy_again,), replacements={
        1: "Explain what caused the gap in the budget and its impact on the global economy.",
        2: "Contrast how two groups of residents reacted to the closure.",
        3: easy_again,
    }, missing={1: "Explain who will bear the cost of closing the gap.",
                3: "Explain what the vote means for the service's future."})
    base = "The council met and argued about money while residents waited."
    with FakeOpenAIServer(writer) as server:
        client = LLMClient(fake_config(server.base_url), store, backoff_base_s=0.01)
        try:
            gate = _gate(client, 3, stage="revision")
            template = load_template("revise_eval")
            fields = {"main_task": "t", "article_a": defuse(ARTICLE_A), "article_b": defuse(ARTICLE_B),
                      "base_article": base, "constraints": "\n".join(f"- {o}" for o in originals), "n": 3,
                      "too_easy": "\n".join(f"{i}. {o}" for i, o in enumerate(originals, 1)), "k": 3}
            got = await ask_replacements(client, "fake", template, fields, originals, sources=[ARTICLE_A],
                                         repair_rounds=2, gate=gate, base=base)
        finally:
            await client.aclose()
    assert got.texts == ["Explain who will bear the cost of closing the gap.",
                         "Contrast how two groups of residents reacted to the closure.",
                         "Explain what the vote means for the service's future."]
    assert gate.ledger.rejected == {"appended": 1, "easy": 1} and gate.ledger.kept == 3
    # the ids asked again are told why
    assert "words added" in writer.asks[0] and "already satisfies" in writer.asks[0]


async def test_a_replacement_that_never_passes_keeps_its_original_and_the_ledger_says_so(tmp_path) -> None:
    store = make_store(tmp_path / "s.sqlite")
    original = "Explain what caused the gap in the budget."
    padded = original[:-1] + " and its impact on the global economy."
    writer = Writer([], [], replacements={1: padded}, missing={1: padded[:-1] + " today."})
    with FakeOpenAIServer(writer) as server:
        client = LLMClient(fake_config(server.base_url), store, backoff_base_s=0.01)
        try:
            gate = _gate(client, 1, stage="revision")
            fields = {"main_task": "t", "article_a": "a", "article_b": "b", "base_article": "base text here",
                      "constraints": f"- {original}", "n": 1, "too_easy": f"1. {original}", "k": 1}
            got = await ask_replacements(client, "fake", load_template("revise_eval"), fields, [original],
                                         repair_rounds=2, gate=gate, base="base text here")
        finally:
            await client.aclose()
    assert got.texts == [None]
    assert gate.ledger.shortfall == "0 of 1 after 2 rounds" and gate.ledger.rejected == {"appended": 3}


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


# -- the whole gate on the embedded model ----------------------------------------------------------------


@pytest.mark.real_model
async def test_real_gate_on_the_embedded_model(tmp_path, local_server_url) -> None:
    """A common synthesis of 5 constraints on the two short articles, gated with the embedded judge
    (yes_no, every candidate of a reference in one request) and MiniLM for the distinct check. Measured
    (3 rounds, 2 shared cores under load): 434 s; 14 written, 8 rejected unspecific (Smithfield,
    Riverton), 3 common ("Explain why the library is closed": not on B); 3 of 5 kept."""
    import time

    from pipeline.core.config import parse_config
    from pipeline.stages.build import BuildOptions
    from pipeline.stages.gate import GateFactory

    store = make_store(tmp_path / "s.sqlite")
    config = parse_config({})  # every role on the embedded model
    client = LLMClient(config, store, local_base_url=local_server_url)
    options = BuildOptions.from_config(config, n=1, conditions=("eval",), n_constraints=5, embedder="minilm")
    started = time.monotonic()
    try:
        gate = GateFactory(store, config, client, options).common(ARTICLE_A, ARTICLE_B)
        result = await synthesize_common(client, "local", ARTICLE_A, ARTICLE_B, 5, domain="news", seed="s",
                                         repair_rounds=2, gate=gate)
        # every kept constraint: the judge holds it on both references (asked again: from the cache)
        on_a = await gate.judge.holds(ARTICLE_A, result.constraints)
        on_b = await gate.judge.holds(ARTICLE_B, result.constraints)
    finally:
        await client.aclose()
    ledger = result.ledger
    print(f"\nreal gate: {time.monotonic() - started:.0f} s, {ledger.line()}")
    for e in ledger.examples:
        print(f"  rejected ({e['check']}): {e['text']!r}: {e['reason']}")
    assert 1 <= len(result.constraints) <= 5 and ledger.kept == len(result.constraints)
    assert all(on_a) and all(on_b)
    for i, text in enumerate(result.constraints):
        assert atomic_problem(text) is None and unspecific_problem(text, ARTICLE_A, ARTICLE_B) is None
        assert all(token_set(text, other) < DISTINCT_TOKEN_SET for other in result.constraints[:i])
    # every candidate written was kept or rejected with a reason (a surplus past 5 is neither)
    assert ledger.kept + sum(ledger.rejected.values()) <= ledger.written
    assert ledger.shortfall is None or ledger.rounds == 2


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


VARIED = ["Describe how older people were affected by the closure.",
          "Explain what the shortfall means for staff.",
          "Report the reactions of parents at the meeting.", "Outline the choices the elected body faces.",
          "Explain why costs rose faster than expected.", "Describe the role volunteers are playing.",
          "Quote someone who relies on the service.", "Explain when a decision is expected.",
          "Describe the mood among the residents who attended.", "Explain who is blamed for the gap.",
          "Describe what a petition asked for.", "Explain how the winter makes the loss harder.",
          "Compare the two ways of raising money being considered.", "Describe the risks of doing nothing.",
          "Explain how long the service has been shut.", "Report what officials said about the budget.",
          "Describe the places people now go instead.", "Explain what the vote could change for families.",
          "Describe how the meeting ended.", "Explain the wider pressure on local budgets."]


async def test_rounds_written_together_are_screened_together(tmp_path) -> None:
    """On an endpoint that writes the rounds together, one wave of rounds costs the gate two judge
    requests (one a reference), not two a round."""
    import re

    from pipeline.core.config import parse_config

    store = make_store(tmp_path / "s.sqlite")
    fed = iter(VARIED[5:])

    class Together(Writer):
        """Each round (a prompt of the wave) gets as many new, varied constraints as it asks for."""

        def __call__(self, request: dict[str, Any]) -> Reply:
            if kind_of(request) == "constraints_more":
                k = int(re.search(r"Write EXACTLY (\d+) more", user_messages(request)[-1]).group(1))
                return Reply(text=json.dumps({"constraints": [next(fed) for _ in range(k)]}))
            return super().__call__(request)

    writer = Together(VARIED[:5], [])
    with FakeOpenAIServer(writer) as server:
        server.prompt_lists = True
        config = parse_config({"endpoints": {"fake": {"base_url": server.base_url, "model": "fake-model",
                                                      "max_retries": 1, "structured": "json_object_schema",
                                                      "batch_generation": True}},
                               "roles": {"generator": "fake", "judges": ["fake"]}})
        client = LLMClient(config, store, backoff_base_s=0.01)
        try:
            result = await synthesize_common(client, "fake", ARTICLE_A, ARTICLE_B, 12, domain="news",
                                             seed="s", repair_rounds=4, gate=_gate(client, 12))
        finally:
            await client.aclose()
    kinds = [kind_of(r) for r in server.requests]
    assert len(result.constraints) == 12 and result.ledger.shortfall is None
    # the first list on A and on B, then the one wave (two rounds) on A and on B; a round at a time: 6
    assert kinds.count("judge_batched") == 4
    assert sum(1 for r in server.requests if isinstance(r.get("prompt"), list)) == 1


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
