"""Copy evidence that tells copying from the topic: a copied phrase's specificity (main task, both
references, document frequency, names, numbers, length), template words never copied, one phrase
across many constraints leading once, the constraint's echo (stored per text, a reason when high on
the constraint's own words), and the method's copy numbers in the report.

The handmade store is tests/support/copy_store.py (the suspicion queue's tests use it too): two
instructions on article A, twelve constraints each; c1..c5 repeat the topic ("the US trade deficit"),
c6 pastes A's probe, c7 holds a phrase every corpus article holds, c8 one in no reference.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.analysis.copy_numbers import copy_numbers
from pipeline.analysis.echo import text_echoes
from pipeline.analysis.specificity import (
    CorpusFrequency,
    PhraseContext,
    PhraseFacts,
    after_prefix,
    lead,
    phrase_key,
    shared_prefix,
    template_words,
)
from pipeline.analysis.suspicion import (
    COPY_REASONS,
    Evidence,
    group_by_phrase,
    instruction_evidence,
    same_phrase_sentence,
    suspicion_queue,
)
from pipeline.core.definitions import ECHO_HIGH, SPECIFIC_ENOUGH
from pipeline.stages.copy_evidence import compute_copy_evidence
from pipeline.stages.echo import compute_echo
from pipeline.store.database import Store
from pipeline.store.echo import count_missing_echo
from tests.support.copy_store import (
    CONSTRAINTS,
    OTHERS,
    PROBE,
    REF_A,
    REF_B,
    RESPONSE,
    TASK,
    TOPIC,
    WRITER,
    build_copy_store,
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = build_copy_store(tmp_path / "spec.sqlite")
    yield s
    s.close()


def _by_position(store: Store, iid: int = 1) -> dict[int, object]:
    return {e.position: e for e in instruction_evidence(store, iid, WRITER, 0.25).values()}


def test_template_words_and_the_shared_prefix() -> None:
    words = template_words(tuple(CONSTRAINTS))
    assert words == {"the", "text", "should"}  # in more than half of the 12; "deficit" (5) is not
    assert template_words(tuple(TOPIC[:3])) == frozenset()  # too short a list to have a template
    assert {"us", "trade", "deficit", "discuss"} <= template_words(tuple(CONSTRAINTS[:8]))  # 5 or 6 of 8
    prefix = shared_prefix(CONSTRAINTS)
    assert prefix == "the text should"
    assert after_prefix(TOPIC[0], prefix) == "…discuss the US trade deficit and its effect on jobs."
    assert after_prefix(TOPIC[0], shared_prefix(TOPIC)) == "…its effect on jobs."
    assert after_prefix("Use a quote.", prefix) == "Use a quote."  # does not open with it: shown whole
    assert shared_prefix(["Use a quote.", "Be brief.", "End well.", "Say hi."]) == ""


def test_document_frequency_counts_articles_holding_the_run() -> None:
    corpus = CorpusFrequency([REF_A, REF_B, *OTHERS])
    assert corpus.articles == 6
    assert corpus.df(("the", "rest", "of", "the", "year")) == 6
    assert corpus.df(("us", "trade", "deficit")) == 2
    assert corpus.df(tuple(PROBE.lower().split())) == 1
    assert corpus.df(("deficit", "widened", "nowhere")) == 0


def test_a_specific_paste_outranks_the_topic_and_common_phrases() -> None:
    context = PhraseContext(TASK, {"A": REF_A, "B": REF_B}, template_words(tuple(CONSTRAINTS)),
                            CorpusFrequency([REF_A, REF_B, *OTHERS]))
    probe = PhraseFacts.of(PROBE, "A", context)
    topic = PhraseFacts.of("the US trade deficit", "AB", context)
    common = PhraseFacts.of("for the rest of the year", "AB", context)
    assert probe.entity and probe.number and not probe.topic and probe.specific
    assert probe.sentence() == "10 words of reference A only, in 1 of 6 store articles, a name, a number"
    assert topic.topic and topic.specificity < 0.05
    assert topic.sentence().startswith("4 words of both references (the shared topic), in "
                                       "2 of 6 store articles")
    assert common.specificity == 0.0  # in every article: rarity 0
    assert probe.specificity > SPECIFIC_ENOUGH > max(topic.specificity, common.specificity)


def test_the_queue_leads_with_the_paste_and_groups_the_topic(store: Store) -> None:
    compute_copy_evidence(store)
    by_pos = _by_position(store)
    probe = by_pos[6]
    assert probe.copied and probe.lead is not None and probe.lead.text.endswith("12 firms")
    copied = next(s for s in _sentences(probe) if "→ constraint →" in s)
    assert "in 1 of 6 store articles, a name, a number" in copied
    # The template ("The text should discuss the ...") is never copied: c8's words are its own.
    assert all("text should" not in p.lower() for e in by_pos.values() for p in (*e.copied, *e.echoed))
    queue = suspicion_queue(store)
    first = queue[0]
    assert (first.instruction_id, first.position) in ((1, 6), (2, 6))
    # Per instruction: the paste leads, the topic's five constraints lead once, the rest filed under it.
    mine = [e for e in queue if e.instruction_id == 1]
    assert mine[0].position == 6
    topic = [e for e in mine if e.lead_key == "the us trade deficit"]
    assert len(topic) == 1 and len(topic[0].same_phrase) == 4
    assert topic[0].score() < probe.score()
    flat = suspicion_queue(store, grouped=False)
    assert group_by_phrase(list(flat)) == list(queue) and flat.total == queue.total


def _sentences(e: object) -> list[str]:
    from pipeline.analysis.suspicion import reason_sentences

    return reason_sentences(e)  # type: ignore[arg-type]


def test_the_echo_is_stored_per_text_and_resumes(store: Store) -> None:
    from pipeline.analysis.embeddings import get_embedder

    embedder = get_embedder("hash")
    assert count_missing_echo(store, embedder.name) == 2 * 2 * len(CONSTRAINTS)  # responses and summaries
    assert compute_echo(store, embedder) == 2 * 2 * len(CONSTRAINTS)
    assert compute_echo(store, embedder) == 0
    rows = store.conn.execute("SELECT echo, sentence_start, sentence_end FROM constraint_echo").fetchall()
    assert all(-1.0 <= e <= 1.0001 and 0 <= a < b for e, a, b in rows)
    # The research code's score by hand: the best sentence of the response for c8 is the one that repeats it.
    found = text_echoes(store, embedder, RESPONSE, [CONSTRAINTS[7]])[0]
    assert RESPONSE[found[1][0]:found[1][1]].startswith("The harvest festival traditions")


def test_the_echo_reason_and_the_copy_only_view_agree_with_the_copied_column(store: Store) -> None:
    compute_copy_evidence(store)
    # No echo computed: the response repeating the constraint's own words counts on the words alone.
    eight = _by_position(store)[8]
    assert eight.echoed and "echo" in eight.reasons() and eight.copy_count.source == "constraint"
    # A computed echo below the bar: the words no longer count, in the reason and in the column alike.
    cid, rid = eight.constraint_id, eight.response_id
    store.conn.execute("INSERT INTO constraint_echo VALUES (?, ?, 'hash', ?, 0, 5)",
                       (rid, cid, ECHO_HIGH - 0.1))
    store.commit()
    low = _by_position(store)[8]
    assert "echo" not in low.reasons() and low.copy_count.words == 0
    store.conn.execute("UPDATE constraint_echo SET echo = ? WHERE constraint_id = ?", (0.9, cid))
    store.commit()
    high = _by_position(store)[8]
    assert "echo" in high.reasons() and high.score() == pytest.approx(1.9)
    assert any("a sentence 0.90 close to it" in s for s in _sentences(high))
    # Everywhere: a count in the copied column <=> a copy reason <=> in the copy-only view.
    only = {(e.instruction_id, e.constraint_id)
            for e in suspicion_queue(store, enabled=COPY_REASONS, grouped=False)}
    for iid in (1, 2):
        for e in instruction_evidence(store, iid, WRITER, 0.25).values():
            counted = e.copy_count.words > 0
            assert counted == bool({"copied", "echo"} & set(e.reasons())), e.text
            listed = (iid, e.constraint_id) in only
            assert listed == (counted or "similar" in e.reasons()), e.text



def test_the_echo_rule_is_one_for_python_and_sql(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """pipeline.core.definitions.ECHO_RULE decides the "echo" reason in Evidence (and the copied
    column's count) and in the store's ranking alike: a raised bar drops the item from both."""
    from pipeline.core.definitions import ECHO_RULE

    compute_copy_evidence(store)
    eight = _by_position(store)[8]
    store.conn.execute("INSERT INTO constraint_echo VALUES (?, ?, 'hash', 0.9, 0, 5)",
                       (eight.response_id, eight.constraint_id))
    store.commit()

    def ranked() -> bool:
        return any(e.constraint_id == eight.constraint_id for e in suspicion_queue(store, enabled=("echo",)))

    assert "echo" in _by_position(store)[8].reasons() and ranked()
    monkeypatch.setitem(ECHO_RULE, "echo", 0.95)
    above = _by_position(store)[8]
    assert "echo" not in above.reasons() and above.copy_count.words == 0 and not ranked()
    monkeypatch.setitem(ECHO_RULE, "copied", True)  # only what a reference also holds: not this item
    monkeypatch.setitem(ECHO_RULE, "echo", 0.5)
    assert "echo" not in _by_position(store)[8].reasons() and not ranked()
    monkeypatch.setitem(ECHO_RULE, "copied", False)
    assert "echo" in _by_position(store)[8].reasons() and ranked()


def test_the_report_gives_the_methods_copy_numbers(store: Store, tmp_path: Path) -> None:
    from rich.console import Console

    from pipeline.analysis.embeddings import get_embedder
    from pipeline.outputs.report import ReportOptions, build_report, render, write_outputs
    from pipeline.stages.similarity import compute_similarities

    compute_copy_evidence(store)
    compute_similarities(store, None)
    before = copy_numbers(store, n_resamples=50)
    assert before.missing_echo == 2 * len(CONSTRAINTS)
    assert all(math.isnan(g.copy_paste.value) for g in before.groups)  # nothing computed: nothing shown
    compute_echo(store, get_embedder("hash"))
    numbers = copy_numbers(store, n_resamples=50)
    stored = store.conn.execute("SELECT avg(x.echo) FROM constraint_echo x JOIN generations g ON "
                                "g.id = x.generation_id"
                                " WHERE g.kind = 'response' AND g.instruction_id = 1").fetchone()[0]
    eval_group = next(g for g in numbers.groups if g.condition == "eval")
    assert eval_group.copy_paste.value == pytest.approx(stored)  # the cell mean of stored values
    assert numbers.missing_echo == 0
    test = next(t for t in numbers.tests if t.measure == "copy-paste")
    assert (test.condition, test.test.n) == ("eval", 1)  # paired on the shared article A
    report = build_report(store, ReportOptions(n_resamples=50))
    console = Console(width=80, record=True)
    render(report, console)
    text = " ".join(console.export_text().split())
    assert "eval vs single (m1 [direct]) on 1 shared article A: copy-paste" in text
    assert "the paper's claim (common constraints lower both)" in text
    written = write_outputs(report, tmp_path / "out")
    rows = list(csv.DictReader((tmp_path / "out" / "copying.csv").open()))
    assert {r["condition"] for r in rows} == {"eval", "single"}
    assert float(next(r for r in rows if r["condition"] == "eval")["copy_paste"]) == pytest.approx(stored)
    assert any(p.name.startswith("copying_") and p.suffix == ".png" for p in written)
    # One definition: the report's constraint-response similarity (--similarity) reads the stored echo.
    with_sim = build_report(store, ReportOptions(n_resamples=50), embedder=get_embedder("hash"))
    row = next(r for r in with_sim.metrics.rows if r.instruction_id == 1 and r.ratio is None)
    assert row.extra["sim_response"] == pytest.approx(stored)


async def test_audit_opens_the_response_on_the_copied_span_and_steps(tmp_path: Path) -> None:
    """A long response: the paste sits far below the top. Audit's response pane opens on it, `g` steps
    from copied span to copied span, and the list shows what follows "The text should" and the echo."""
    from tests.support.app import settle
    from unspecific_tui.app import UnspecificApp
    from unspecific_tui.widgets.constraint_list import ConstraintList
    from unspecific_tui.widgets.text_pane import TextPane

    store = build_copy_store(tmp_path / "long.sqlite")
    filler = " ".join(f"Paragraph {k} says nothing of note about the weather." for k in range(60))
    # An early highlight that is no copy evidence ("should mention a" is the constraint's, not a reference's):
    # the pane opens on the paste, not on the first highlight.
    long = (f"Critics said they should mention a budget. {filler} Separately, a {PROBE} unsettled traders. "
            f"{filler} Again the {PROBE} was news.")
    store.conn.execute("UPDATE generations SET text_hash = ? WHERE kind = 'response'",
                       (store.put_text(long),))
    store.commit()
    compute_copy_evidence(store)
    cid = store.conn.execute("SELECT id FROM constraints WHERE instruction_id "
                             "= 1 AND position = 6").fetchone()[0]
    rid = store.conn.execute("SELECT id FROM generations WHERE kind = 'response' "
                             "AND instruction_id = 1").fetchone()[0]
    store.conn.execute("INSERT INTO constraint_echo VALUES (?, ?, 'hash', 0.81, 0, 5)", (rid, cid))
    store.commit()
    store.close()
    app = UnspecificApp(tmp_path / "long.sqlite", stages={})
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        app.open_audit(1, WRITER, cid)
        await settle(app, pilot)
        screen = app.screen
        spans = screen.shown.copied_in_response
        assert len(spans) == 2 and "probe by the securities" in long[spans[0][0]:spans[0][1]].lower()
        pane = screen.query_one("#response", TextPane)
        first_line = pane.line_of(spans[0][0])
        assert first_line > pane.scrollable_content_region.height  # far below the top ...
        # ... in view
        assert pane.scroll_y <= first_line < pane.scroll_y + pane.scrollable_content_region.height
        await pilot.press("g")
        await pilot.pause()
        second = pane.line_of(spans[1][0])
        assert screen.shown.copy_step == 1
        assert pane.scroll_y <= second < pane.scroll_y + pane.scrollable_content_region.height
        await pilot.press("g")
        await pilot.pause()
        assert screen.shown.copy_step == 0  # round to the first
        row = next(r for r in screen.query_one(ConstraintList).rows_shown if r.constraint_id == cid)
        assert row.shown_text == f"…mention a {PROBE}." and row.echo == pytest.approx(0.81)


def test_planted_pastes_lead_on_real_news_text(tmp_path: Path) -> None:
    """bench/copy_evidence.py's planted store, small: real BBC News articles (the whole corpus, so a
    phrase's document frequency is real), the topic repeated by 12 constraints of each instruction, 4
    specific phrases of A pasted. The queue's head is the pastes; the flat scoring of before led with
    the topic."""
    from bench.copy_evidence import old_top, planted_store

    store, planted, kinds = planted_store(tmp_path / "planted.sqlite", 4)
    try:
        assert kinds["planted"] == 16 and kinds["topic"] == 48
        compute_copy_evidence(store)
        head = list(suspicion_queue(store, limit=200)[:16])
        assert sum(e.constraint_id in planted for e in head) / len(head) >= 0.9
        assert all(e.lead is not None and e.lead.specific for e in head if e.constraint_id in planted)
        before = old_top(store, 16)
        assert sum(e.constraint_id in planted for e in before) / len(before) < 0.5
    finally:
        store.close()


def test_evidence_of_another_definition_is_stale_and_computed_again(store: Store, monkeypatch) -> None:
    """Stored copy evidence names the definition it was computed by: change a number of the definition
    and the ranking leaves the old rows out (said missing), and the stage computes them again."""
    from pipeline.core import definitions
    from pipeline.store.suspicion import count_missing_copy_evidence

    assert compute_copy_evidence(store) == 2 * len(CONSTRAINTS)
    assert count_missing_copy_evidence(store) == 0 and not suspicion_queue(store).copy_evidence_missing
    before = _by_position(store)[6].specificity
    monkeypatch.setattr(definitions, "SHAPE_ENTITY", 0.0)  # a name counts for nothing now
    monkeypatch.setattr(definitions, "SHAPE_NUMBER", 0.0)
    assert count_missing_copy_evidence(store) == 2 * len(CONSTRAINTS)
    assert suspicion_queue(store).copy_evidence_missing
    assert compute_copy_evidence(store) == 2 * len(CONSTRAINTS)  # every row again, none twice
    assert store.conn.execute("SELECT count(*) FROM copy_evidence").fetchone()[0] == 2 * len(CONSTRAINTS)
    assert count_missing_copy_evidence(store) == 0
    assert _by_position(store)[6].specificity < before


def test_a_small_store_asks_bbc_news_how_common_a_phrase_is() -> None:
    """Six articles cannot tell "in the United States" is common; the bundled BBC News can. A phrase BBC
    News never prints keeps the store's count (and its reason)."""
    from pipeline.analysis.copy_evidence import background_corpus

    background = background_corpus()
    assert background is not None and background.articles > 2000
    ref = "Officials in the United States said the new budget would pass by May."
    small = CorpusFrequency([ref, *OTHERS])
    alone = PhraseFacts.of("in the United States", "A", PhraseContext(TASK, {"A": ref}, frozenset(), small))
    both = PhraseFacts.of("in the United States", "A",
                          PhraseContext(TASK, {"A": ref}, frozenset(), small, background))
    assert alone.counted_in == "store articles" and alone.df == 1
    assert both.counted_in == "BBC News articles" and both.df > 1 and both.specificity < alone.specificity
    assert f"of {background.articles:,} BBC News articles" in both.sentence()
    probe = PhraseFacts.of(PROBE, "A", PhraseContext(TASK, {"A": REF_A}, frozenset(),
                                                     CorpusFrequency([REF_A, REF_B, *OTHERS]), background))
    assert probe.counted_in == "store articles"
    assert probe.sentence().startswith("10 words of reference A only, in 1 of 6 store articles")


def test_the_rarity_always_names_the_articles_it_counts() -> None:
    """One way, every time: "in 1 of 6 store articles" beside "in 4 of 2,224 BBC News articles", never
    a bare "articles"; facts stored before the store's were named say it too."""
    store_facts = PhraseFacts.of(PROBE, "A", PhraseContext(TASK, {"A": REF_A}, frozenset(),
                                                           CorpusFrequency([REF_A, REF_B, *OTHERS])))
    assert "in 1 of 6 store articles" in store_facts.sentence()
    stored = {**store_facts.as_json(), "counted_in": "articles"}
    assert "in 1 of 6 store articles" in PhraseFacts.from_json(stored).sentence()
    older = {k: v for k, v in store_facts.as_json().items() if k != "counted_in"}
    assert "in 1 of 6 store articles" in PhraseFacts.from_json(older).sentence()


def test_an_acronym_is_a_name_never_a_number() -> None:
    """"the G7 meeting" names the G7 (a name, not a number); "the US" is a name though "us" is a
    function word; "12 firms" stays a number; a word only the constraint writes in capitals is no name."""
    ref = ("Ministers met at the G7 meeting in Rome. The US economy grew. It is not over, the "
           "SEC said of 12 firms.")
    context = PhraseContext(TASK, {"A": ref}, frozenset(), CorpusFrequency([ref, *OTHERS]))
    g7 = PhraseFacts.of("the G7 meeting", "A", context)
    assert g7.entity and not g7.number
    assert g7.sentence() == "3 words of reference A only, in 1 of 5 store articles, a name"
    us = PhraseFacts.of("the US economy grew", "A", context)
    assert us.entity and not us.number
    sec = PhraseFacts.of("the SEC said of 12 firms", "A", context)
    assert sec.entity and sec.number
    assert not PhraseFacts.of("it is NOT over", "A", context).entity  # the reference writes "not"


def _item(position: int, phrases: dict[str, float]) -> Evidence:
    """An item of instruction 1 on WRITER that copied ``phrases`` (with their specificity) from A."""
    facts = tuple(PhraseFacts(text, len(text.split()), "A", 1.0, 1, 60, False, False, value)
                  for text, value in phrases.items())
    top = lead(facts)
    assert top is not None
    return Evidence(position, 1, position, f"constraint {position}", WRITER, 0.25, None,
                    tuple(phrases), ("A",),
                    True, True, None, None, (), facts=facts, specificity=top.specificity,
                    lead_key=phrase_key(top.text))


def test_a_group_holds_only_the_items_on_its_phrase_alone() -> None:
    """Filed under "China's currency": the items that copied that phrase and nothing else. An item
    that also copied "the Federal Reserve's decision on" (less specific: its lead is still the
    currency) is a row of its own, as is one that leads with another phrase."""
    currency, fed = "China's currency", "the Federal Reserve's decision on"
    items = [_item(1, {currency: 0.6}), _item(2, {currency: 0.6}), _item(3, {currency: 0.6, fed: 0.3}),
             _item(4, {fed: 0.5}), _item(5, {currency: 0.6})]
    assert items[2].lead_key == items[0].lead_key
    grouped = group_by_phrase(items)
    assert [e.position for e in grouped] == [1, 3, 4]
    assert [f.position for f in grouped[0].same_phrase] == [2, 5]
    assert same_phrase_sentence(grouped[0]) == "and 2 more constraints on “China's currency” alone"


def test_the_background_is_read_for_a_small_domain_only(store: Store,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.analysis import copy_evidence
    from pipeline.store.suspicion import missing_copy_work

    work = missing_copy_work(store, limit=50)
    small = copy_evidence.CopyFinder(store)
    small.prepare(work)
    monkeypatch.setattr(copy_evidence, "BACKGROUND_ARTICLES", 6)  # the handmade store's six articles: enough
    enough = copy_evidence.CopyFinder(store)
    enough.prepare(work)
    ids = {w.instruction_id for w in work}
    assert all(small._contexts[i].background is not None for i in ids)
    assert all(enough._contexts[i].background is None for i in ids)


def test_the_app_reads_ahead_what_missing_evidence_needs(store: Store,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """warm_for_missing (the app's analysis worker calls it) reads the background a small store's missing
    evidence is counted against, and nothing once the evidence is stored."""
    from pipeline.analysis import copy_evidence

    monkeypatch.setattr(copy_evidence, "_BACKGROUND", [])
    assert copy_evidence.warm_for_missing(store) and copy_evidence._BACKGROUND
    compute_copy_evidence(store)
    monkeypatch.setattr(copy_evidence, "_BACKGROUND", [])
    assert not copy_evidence.warm_for_missing(store) and not copy_evidence._BACKGROUND
