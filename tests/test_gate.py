"""The constraint gate (issue 60): each check on constructed cases it must pass and fail, the rounds on
the fake server (a generator that keeps writing duplicates stops at the bound and says its shortfall),
the judged common and easy checks, the revision gate, and one small run of the whole gate on the
embedded model. The gate in a build, the report, export, import and demo: tests/test_gate_build.py."""

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
from pipeline.llm.placeholders import prompt_kind as kind_of
from pipeline.llm.placeholders import user_messages
from pipeline.llm.prompts import defuse, load_template
from pipeline.stages.revision import ask_replacements
from pipeline.stages.synthesis import synthesize_common, synthesize_single
from tests.fakes.fake_server import FakeOpenAIServer, Reply
from tests.fakes.responders import ARTICLE_A, ARTICLE_B, fake_config, make_store
from tests.support.gate_world import DUPLICATES, GOOD, Writer
from tests.support.gate_world import gate_for as _gate

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
    # a verb swapped and a clause added (main's demo): still the original, padded
    assert appended_problem("Report on the role of politics and foreign policy in shaping trade rules.",
                            "Discuss the role of politics and foreign policy in shaping trade rules and "
                            "their impact on the global economy.") is not None


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
