"""One count of copied words per (constraint, text), named by its source, the same in every view.

A handmade store whose one response copies from each source:

  c1  "council approved a new sea wall"                from reference A   -> 6 words, A (copied)
  c2  "farmers in the valley worried about the drought"  from reference B -> 8 words, B (copied)
  c3  "rising water levels"                            in no reference: the response repeats the
                                                       constraint's own words       -> 3 words, constraint
  c4  nothing copied                                                        -> 0

c3 and c4 are lost in the summary (the judges say so), so the queue and the export list them too.
The count must agree in Audit's list and response pane, the suspicion queue, `export --suspicious`,
the HTML report's data, and the reason sentences.

The flag copied_ngram is another count, of constraints that hold five words of a reference in a row
whatever the response did (c1 and c2: 2, where 3 constraints have words pasted into the response):
Instructions' column and Audit's `f` menu give it under its own name, never "copy".
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest

from pipeline.analysis.copy_count import copy_count
from pipeline.analysis.suspicion import instruction_evidence, reason_sentences, suspicion_queue
from pipeline.outputs.html_report import PACKED, write_html
from pipeline.outputs.report import ReportOptions, build_report
from pipeline.outputs.suspicion import suspicion_rows
from pipeline.stages.copy_evidence import compute_copy_evidence
from pipeline.store.database import open_store
from pipeline.store.view import Writer
from tests.support.sea_wall import REF_A, REF_B, put_instruction, put_texts

CONSTRAINTS = [
    "Mention that the council approved a new sea wall.",
    "Say that farmers in the valley worried about the drought.",
    "End with a question about rising water levels.",
    "Keep the tone measured throughout.",
]
RESPONSE = ("Last week the council approved a new sea wall, said the mayor. Upstream, farmers in the valley"
            " worried about the drought all year. Will the town keep pace with rising water levels?")
SUMMARY = "The council approved a new sea wall."
DIRECT = Writer("m1", "direct")
EXPECTED = {1: (6, "A"), 2: (8, "B"), 3: (3, "constraint"), 4: (0, "")}


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "copy.sqlite"
    store = open_store(p)
    put_instruction(store, "eval", "Write about the town.", CONSTRAINTS)
    put_texts(store, {10: ("response", "m1", "direct", None, None, RESPONSE),
                      11: ("summary", "s", "", 0.25, 10, SUMMARY)})
    c = store.conn
    # Every constraint passes on the response; c3 and c4 are lost in the summary.
    rows = [(10, cid, "J1", "batched", "p", 1, "exact") for cid in (1, 2, 3, 4)]
    rows += [(11, cid, "J1", "batched", "p", 1 if cid < 3 else 0, "exact" if cid < 3 else None)
             for cid in (1, 2, 3, 4)]
    c.executemany("INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, "
                  "prompt_hash, verdict, quote_found) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    store.commit()
    compute_copy_evidence(store)
    store.close()
    return p


@pytest.fixture
def flagged(path: Path) -> Path:
    """The store with the build's lexical flags: copied_ngram on c1 and c2."""
    from pipeline.analysis.flags import flag_instruction

    store = open_store(path, create=False)
    try:
        flag_instruction(store, 1)
    finally:
        store.close()
    return path


def _counts(items) -> dict[int, tuple[int, str]]:  # noqa: ANN001
    return {cid: (count.words, count.source) for cid, count in items}


def test_the_definition_on_the_texts() -> None:
    got = {cid: copy_count(text, RESPONSE, REF_A, REF_B) for cid, text in enumerate(CONSTRAINTS, 1)}
    assert _counts(got.items()) == EXPECTED
    assert got[1].sentence() == "6 words reference A → constraint → response"
    assert got[3].sentence() == "3 words of the constraint repeated in the response (in no reference)"
    assert got[4].sentence() == "" and got[4].short() == "-"


def test_every_view_gives_the_same_count(path: Path) -> None:
    store = open_store(path, create=False)
    try:
        # Audit's list (its rows are this Evidence) and the response pane's count (the same object).
        listed = instruction_evidence(store, 1, DIRECT, 0.25)
        assert _counts((cid, e.copy_count) for cid, e in listed.items()) == EXPECTED
        # The queue: c1, c2 copied (leading), c3, c4 lost.
        queue = suspicion_queue(store)
        # Copied first, the more specific first (8 words of B against 6 of A), the echo, then lost.
        assert [e.constraint_id for e in queue] == [2, 1, 3, 4]
        assert _counts((e.constraint_id, e.copy_count) for e in queue) == EXPECTED
        # export --suspicious: the words, the source, and the reasons as sentences with their codes.
        rows, missing = suspicion_rows(store)
        assert not missing
        assert {r["constraint_id"]: (r["copied_words"], r["copy_source"]) for r in rows} == EXPECTED
        by_id = {r["constraint_id"]: r for r in rows}
        assert by_id[1]["reasons"] == ["6 words reference A → constraint → response: “council approved a new"
                                       " sea wall” (6 words of reference A only, in 1 of 2 store articles);"
                                       " word for word in reference A and in the response"]
        assert by_id[1]["reason_codes"] == ["copied"]
        assert by_id[3]["reasons"][1:] == ["satisfied in the response, lost in its 0.25 summary"]
        # Audit's list reads no texts for the words: the count, the path and the phrase's facts.
        assert reason_sentences(listed[2]) == ["8 words reference B → constraint → response: “farmers in the"
                                               " valley worried about the drought” (8 words of "
                                               "reference B only, in 1 of 2 store articles)"]
        # The response repeats c3's own words, in no reference: the echo (no embedder here: the words alone).
        assert reason_sentences(listed[3])[0] == ("the response repeats the constraint: 3 of its "
                                                  "words in no reference (“rising water levels”)")
        # The HTML report's data for the instruction: the same words and source on the response.
        report = build_report(store, ReportOptions(n_resamples=50))
        result = write_html(store, report, path.parent / "html")
    finally:
        store.close()
    page = result.path.read_text(encoding="utf-8")
    m = re.search(rf'<script type="{re.escape(PACKED)}" id="i1">([^<]*)</script>', page)
    assert m
    chunk = json.loads(gzip.decompress(base64.b64decode(m.group(1))))
    html = {c["id"]: tuple(c["per"]["10"]["count"]["r"][:2]) for c in chunk["constraints"] if c["active"]}
    assert html == EXPECTED
    sus = json.loads(re.search(r'<script type="application/json" id="suspicion-data">(.*?)</script>', page,
                               re.S).group(1))
    assert {it[1]: it[11] for it in sus["items"]} == {1: "6w A", 2: "8w B", 3: "3w con", 4: "-"}


async def test_audit_shows_the_count_and_the_source_beside(path: Path) -> None:
    from tests.support.app import settle
    from unspecific_tui.app import UnspecificApp
    from unspecific_tui.widgets.constraint_list import ConstraintList

    app = UnspecificApp(path, stages={})
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(app, pilot)
        app.open_audit(1, DIRECT, 1)
        await settle(app, pilot)
        screen = app.screen
        listed = {r.constraint_id: (r.copy.words, r.copy.source)
                  for r in screen.query_one(ConstraintList).rows_shown}
        assert listed == EXPECTED
        for cid, expected in EXPECTED.items():
            if cid > 1:
                await pilot.press("down")
                await pilot.pause()
            assert screen.shown.constraint_id == cid
            count = screen.shown.counts["response"]
            assert (count.words, count.source) == expected
            # The source view: the copied words highlighted in the response and in their source.
            await pilot.press("o")
            await pilot.pause()
            source, in_response, in_source = screen.shown.source
            if expected[0]:
                assert source == {"A": "A", "B": "B", "constraint": "constraint"}[expected[1]]
                body = {"A": REF_A, "B": REF_B, "constraint": CONSTRAINTS[cid - 1]}[source]
                assert in_response and in_source
                said = {RESPONSE[a:b].lower() for a, b in in_response}
                assert said == {body[a:b].lower() for a, b in in_source}
            await pilot.press("o")
            await pilot.pause()


def test_the_html_page_says_the_count_on_the_response(path: Path) -> None:
    """In a browser: the response pane's heading gives the count and its source, as the app does."""
    from tests.support.browser import chromium

    store = open_store(path, create=False)
    try:
        result = write_html(store, build_report(store, ReportOptions(n_resamples=50)), path.parent / "page")
    finally:
        store.close()
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(result.path.as_uri())
        for cid, expected in (("1", "6 words reference A → constraint → response"),
                              ("2", "8 words reference B → constraint → response"),
                              ("3", "3 words of the constraint repeated in the response (in no reference)")):
            page.evaluate("async () => await window.unspecificReport.open(1)")
            page.locator(f'.cons tr[data-c="{cid}"]').click()
            page.wait_for_selector("#detail h3")
            assert expected in page.locator("#pane-response h4").inner_text()
        sus = page.locator("#sus-list").inner_text()
        assert "6 words reference A → constraint → response" in sus
        assert "satisfied in the response, lost in its 0.25 summary" in sus


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_instructions_and_the_flag_menu_give_the_other_count_its_own_name(flagged: Path, size) -> None:
    """Two counts, two names: the queue, Audit, the export and the HTML count the words pasted into
    the response (c1, c2, c3); Instructions' column and Audit's `f` menu count the flag copied_ngram
    (c1, c2), as "ngram" / "n-grams copied into the constraint", and nothing there is called "copy"."""
    from textual.widgets import DataTable, OptionList

    from pipeline.core.definitions import FLAG_KINDS
    from pipeline.store.suspicion import constraint_flags
    from tests.support.app import goto, settle
    from unspecific_tui.app import UnspecificApp
    from unspecific_tui.screens.instructions import FLAGS
    from unspecific_tui.screens.queue_rows import OPTIONAL
    from unspecific_tui.widgets.flag_picker import FlagPicker

    store = open_store(flagged, create=False)
    try:
        ngram = {cid for cid, flags in constraint_flags(store).items() if "copied_ngram" in flags}
        pasted = {cid for cid, e in instruction_evidence(store, 1, DIRECT, 0.25).items()
                  if e.copy_count.words}
    finally:
        store.close()
    assert ngram == {1, 2} and pasted == {1, 2, 3}  # two measures: they differ, so their names must
    queue_name = next(c.label for c in OPTIONAL if c.key == "copied")
    assert queue_name == "copied"
    kind = FLAG_KINDS["copied_ngram"]
    flag_names = {FLAGS["copied_ngram"][0], kind.tag, kind.head, kind.meaning}
    assert all("constraint" in name or name == "ngram" for name in flag_names)
    assert not {"copy", queue_name} & flag_names
    app = UnspecificApp(flagged, stages={})
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        screen = await goto(app, pilot, "2")
        labels = {c.key: c.label for c in screen.columns}
        assert not {"copy", "copied"} & set(labels.values())
        if "copied_ngram" in labels:  # wide enough for a column per flag
            assert labels["copied_ngram"] == "ngram"
            table = screen.query_one("#instr-table", DataTable)
            at = [c.key for c in screen.columns].index("copied_ngram")
            assert [str(table.get_row_at(i)[at]) for i in range(table.row_count)] == [str(len(ngram))]
        else:
            assert size == (80, 24)
        app.open_audit(1, DIRECT, 1)
        await settle(app, pilot)
        await pilot.press("f")
        await pilot.pause()
        picker = app.screen
        assert isinstance(picker, FlagPicker)
        option = picker.query_one(OptionList).get_option("copied_ngram").prompt
        prompt = option.plain if hasattr(option, "plain") else str(option)
        assert prompt.split()[:4] == ["flag", "copied_ngram", str(len(ngram)), "constraints"]
        assert kind.meaning in prompt and "response" not in prompt
