"""The suspicion ranking: each reason fires exactly where a small store puts its evidence, the
ranking and its switches, the copy-evidence stage (resumable), and `export --suspicious` / `report`'s lines.

The handmade store (instruction 1, references A and B, writer m1 [direct] and m1 [edit]):

  c1 copies "council approved a new sea wall" from A, and the direct response pastes it -> copied (A)
  c2 copies "in the valley" from B, the response does not                               -> nothing
  c3 judges split 1-1 on the response and on the summary (1-1 passes: not lost)         -> split (+ similar)
  c4 Yes on the response, one quote missing; No on the summary                          -> unquoted, lost
  c5 Yes on the response; on the summary a Yes whose quote is missing (summary only)    -> nothing (+ similar)
  c6 J1 missing on both texts, J2 Yes then No: missing is never a No                    -> lost
  c7 J1 judged only the summary, J2 only the response: no rater judged both             -> nothing
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline.analysis.suspicion import (
    REASONS,
    Evidence,
    copied_phrases,
    group_by_phrase,
    instruction_evidence,
    parse_reasons,
    reason_sentences,
    suspicion_queue,
)
from pipeline.cli import main
from pipeline.core.errors import UnspecificError
from pipeline.core.progress import StopFlag
from pipeline.stages.copy_evidence import compute_copy_evidence
from pipeline.store.database import Store, open_store
from pipeline.store.judge_checks import Calibration, put_calibration
from pipeline.store.scores import refresh_text_scores
from pipeline.store.suspicion import YesProbability, count_missing_copy_evidence
from pipeline.store.verdicts import apply_threshold, shown_verdicts
from pipeline.store.view import StoreReader, StoreView, Writer, store_of
from tests.support.sea_wall import REF_A, REF_B, put_instruction, put_texts
from tests.support.store_probes import stale_count
from tests.support.trust import text_trust

CONSTRAINTS = [
    "Mention that the council approved a new sea wall.",
    "Describe the drought in the valley.",
    "Use a quotation from a local resident.",
    "Keep the tone measured throughout.",
    "End the piece with a question.",
    "Name the mayor of the town.",
    "Give the date of the meeting.",
]
RESPONSE = ("Last week the council approved a new sea wall, said the mayor. The drought hurt farmers."
            " 'We feel safer,' one resident said. Will it hold?")
DIRECT, EDIT = Writer("m1", "direct"), Writer("m1", "edit")
J1, J2 = ("J1", "batched"), ("J2", "batched")


def _store(path: Path) -> Store:
    store = open_store(path)
    put_instruction(store, "none", "Write.", CONSTRAINTS)
    c = store.conn
    # An inactive constraint that copies and holds verdicts: never counted.
    c.execute("INSERT INTO constraints(id, instruction_id, position, text, origin, active) "
              "VALUES (99, 1, NULL, 'The harbour council approved a new sea wall.', 'synthesized', 0)")
    texts = {10: ("response", "m1", "direct", None, None, RESPONSE),
             11: ("summary", "s", "", 0.25, 10, "Short."),
             20: ("response", "m1", "edit", None, None, "Something else entirely."),
             21: ("summary", "s", "", 0.25, 20, "Else.")}
    put_texts(store, texts)
    verdicts = [
        # (text, constraint, rater, verdict, quote_found)
        (10, 1, J1, 1, "exact"), (10, 1, J2, 1, "exact"), (11, 1, J1, 1, "exact"), (11, 1, J2, 1, "exact"),
        (10, 3, J1, 1, "exact"), (10, 3, J2, 0, None), (11, 3, J1, 0, None), (11, 3, J2, 1, "exact"),
        (10, 4, J1, 1, "missing"), (10, 4, J2, 1, "exact"), (11, 4, J1, 0, None), (11, 4, J2, 0, None),
        (10, 5, J1, 1, "exact"), (10, 5, J2, 1, "fuzzy"), (11, 5, J1, 1, "missing"), (11, 5, J2, 1, "exact"),
        (10, 6, J1, None, None), (10, 6, J2, 1, "exact"), (11, 6, J1, None, None), (11, 6, J2, 0, None),
        (10, 7, J2, 1, "exact"), (11, 7, J1, 0, None),
        (10, 99, J1, 1, "missing"), (10, 99, J2, 0, None),
    ]
    c.executemany("INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, "
                  "prompt_hash, verdict, quote_found) VALUES (?, ?, ?, ?, 'p', ?, ?)",
                  [(g, cid, r[0], r[1], v, q) for g, cid, r, v, q in verdicts])
    # Similarity as helper SIM's stage stores it: c3 by an embedder, c5 and c2 lexically (c2 below 0.5).
    c.executemany("INSERT INTO constraint_similarity(constraint_id, instruction_id, method, to_a, to_b)"
                  " VALUES (?, 1, ?, ?, ?)", [(3, "hash", 0.2, 0.72), (5, "lexical", 0.55, 0.1),
                                              (2, "lexical", 0.1, 0.45)])
    c.execute("INSERT INTO constraint_flags(constraint_id, flag, detail) VALUES (1, 'copied_ngram', '\"x\"')")
    store.commit()
    return store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = _store(tmp_path / "s.sqlite")
    yield s
    s.close()


EXPECTED_DIRECT = {1: ("copied",), 2: (), 3: ("similar", "split"), 4: ("lost", "unquoted"), 5: ("similar",),
                   6: ("lost",), 7: ()}


def test_each_reason_fires_exactly_where_constructed(store: Store) -> None:
    assert compute_copy_evidence(store) == 14  # 7 active constraints x 2 responses
    evidence = instruction_evidence(store, 1, DIRECT, 0.25)
    assert {cid: e.reasons() for cid, e in evidence.items()} == EXPECTED_DIRECT
    assert evidence[1].copied == ("council approved a new sea wall",) and evidence[1].copied_from == ("A",)
    assert evidence[1].flags == ("copied_ngram",)
    # Missing verdicts are counted apart, never as No.
    six = evidence[6]
    assert six.response_trust is not None and (six.response_trust.missing, six.response_trust.no) == (1, 0)
    assert (six.response_passed, six.summary_passed) == (True, False)
    assert evidence[7].summary_passed is None and not evidence[7].lost
    assert evidence[3].response_passed is True and evidence[3].summary_passed is True  # 1-1 passes
    # The edit response copies nothing and has no verdicts: only the constraints' similarity.
    edit = instruction_evidence(store, 1, EDIT, 0.25)
    assert {cid: e.reasons() for cid, e in edit.items() if e.reasons()} == {3: ("similar",), 5: ("similar",)}
    assert all(e.response_trust is None and e.response_passed is None for e in edit.values())
    assert instruction_evidence(store, 1, Writer("nobody", "direct"), 0.25) == {}


def test_trust_agrees_with_text_trust_of_the_shown_verdicts(store: Store) -> None:
    evidence = instruction_evidence(store, 1, DIRECT, 0.25)
    shown = shown_verdicts(store, [10, 11])
    for cid, e in evidence.items():
        assert e.response_trust == text_trust(v for v in shown if v.generation_id == 10
                                              and v.constraint_id == cid) \
            or e.response_trust is None
        assert e.summary_trust == text_trust(v for v in shown if v.generation_id == 11
                                             and v.constraint_id == cid) \
            or e.summary_trust is None


def _key(e: Evidence) -> tuple[int, str]:
    return e.constraint_id, e.writer.mode


def test_the_queue_ranks_by_score_and_leaves_out_items_without_a_reason(store: Store) -> None:
    compute_copy_evidence(store)
    queue = suspicion_queue(store)
    assert not queue.copy_evidence_missing
    # Copying leads: copied 3; similar 2 x 0.72 + split 0.15; similar 1.44; similar 2 x 0.55 (twice); then
    # the secondary reasons alone: lost + unquoted 0.75; lost 0.5.
    assert [_key(e) for e in queue] == [(1, "direct"), (3, "direct"), (3, "edit"), (5, "direct"), (5, "edit"),
                                        (4, "direct"), (6, "direct")]
    assert [e.score() for e in queue] == [3.32, 1.59, 1.44, 1.1, 1.1, 0.75, 0.5]
    assert [e.score() for e in queue] == sorted((e.score() for e in queue), reverse=True)
    assert queue.total == 7 and len(suspicion_queue(store, limit=2)) == 2
    assert suspicion_queue(store, limit=2).total == 7


def test_reasons_switch_off(store: Store) -> None:
    compute_copy_evidence(store)
    assert {_key(e) for e in suspicion_queue(store, enabled=("lost",))} == {(4, "direct"), (6, "direct")}
    assert {_key(e) for e in suspicion_queue(store, enabled=("copied",))} == {(1, "direct")}
    unquoted_off = suspicion_queue(store, enabled=tuple(r for r in REASONS if r != "unquoted"))
    four = next(e for e in unquoted_off if _key(e) == (4, "direct"))
    assert four.score(tuple(r for r in REASONS if r != "unquoted")) == 0.5
    assert suspicion_queue(store, enabled=()) == []
    assert parse_reasons("lost, copied") == ("copied", "lost")
    with pytest.raises(UnspecificError, match="'bogus'.*similar, copied, echo, lost, split, unquoted"):
        parse_reasons("copied,bogus")


def test_without_the_stage_the_queue_says_copy_evidence_is_missing(store: Store) -> None:
    queue = suspicion_queue(store)
    assert queue.copy_evidence_missing and count_missing_copy_evidence(store) == 14
    assert (1, "direct") not in {_key(e) for e in queue}  # copied cannot fire from nothing stored
    # Audit's list computes what is not stored yet.
    assert instruction_evidence(store, 1, DIRECT, 0.25)[1].reasons() == ("copied",)
    # An older store without the table at all still ranks.
    store.conn.execute("DROP TABLE copy_evidence")
    store.commit()
    queue = suspicion_queue(store)
    assert queue.copy_evidence_missing and {_key(e) for e in queue} >= {(4, "direct"), (6, "direct")}
    assert compute_copy_evidence(store) == 0  # nothing to write into


def test_the_copy_evidence_stage_resumes(store: Store, tmp_path: Path) -> None:
    stop = StopFlag()
    seen = []

    def progress(event: object) -> None:
        seen.append(event)
        stop.stop("test")

    first = compute_copy_evidence(store, chunk=39, progress=progress, stop=stop)  # one response per chunk
    assert first == 7 and count_missing_copy_evidence(store) == 7
    assert compute_copy_evidence(store) == 7 and count_missing_copy_evidence(store) == 0
    assert compute_copy_evidence(store) == 0
    resumed = [_key(e) for e in suspicion_queue(store)]
    whole = _store(tmp_path / "whole.sqlite")
    compute_copy_evidence(whole)
    assert resumed == [_key(e) for e in suspicion_queue(whole)]
    whole.close()


def test_copied_phrases_needs_a_reference_and_the_response() -> None:
    refs = {"A": REF_A, "B": REF_B}
    assert copied_phrases(CONSTRAINTS[1], refs, RESPONSE) == ((), "")  # in B, not in the response
    assert copied_phrases(CONSTRAINTS[1], refs, "Farmers in the valley.") == (("in the valley",), "B")
    assert copied_phrases("Say it of the.", refs, "of the") == ((), "")  # stopwords alone never count
    both = {"A": "a new sea wall rose", "B": "they built a new sea wall"}
    assert copied_phrases("Build a new sea wall.", both, "a new sea wall") == (("a new sea wall",), "AB")


def test_lost_is_the_one_flipped_definition(tmp_path: Path) -> None:
    from tests.support.random_stores import flipped_by_hand, random_store

    for seed in range(6):
        store = random_store(tmp_path / f"r{seed}.sqlite", seed)
        for ratio in (0.25, 0.5):
            lost = {(e.constraint_id, e.response_id)
                    for e in suspicion_queue(store, ratio=ratio, enabled=("lost",))}
            assert lost == flipped_by_hand(store.conn, ratio), (seed, ratio)
        store.close()


def test_export_suspicious_through_the_cli(store: Store, tmp_path: Path,
                                           capsys: pytest.CaptureFixture) -> None:
    compute_copy_evidence(store)
    path = str(store.path)
    out = tmp_path / "q.jsonl"
    assert main(["--store", path, "export", "--suspicious", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["constraint_id"], r["mode"]) for r in rows][:2] == [(1, "direct"), (3, "direct")]
    assert rows[0]["reason_codes"] == ["copied"] and rows[0]["copied_from"] == "A" and rows[0]["rank"] == 1
    # Each reason in words, beside its code (pipeline.analysis.suspicion.reason_sentences).
    assert rows[0]["reasons"] == ["6 words reference A → constraint → response: “council approved a new sea"
                                  " wall” (6 words of reference A only, in 1 of 2 store articles); word for"
                                  " word in reference A and in the response"]
    # Every phrase found, by source: the paste from A, and the constraint's own words (in no reference).
    assert rows[0]["copied"] == [{"phrase": "council approved a new sea wall", "source": "A",
                                  "specificity": 0.58,
                                  "why": "6 words of reference A only, in 1 of 2 store articles"},
                                 {"phrase": "the council approved", "source": "constraint"}]
    assert (rows[0]["copied_words"], rows[0]["copy_source"]) == (6, "A")
    four = next(r for r in rows if r["constraint_id"] == 4)
    assert four["reason_lost"] and four["reason_unquoted"] and not four["reason_copied"]
    assert four["reasons"] == ["satisfied in the response, lost in its 0.25 summary",
                               "1 Yes on the response quotes text not in the response"]
    table = tmp_path / "q.csv"
    assert main(["--store", path, "export", "--suspicious", "--out", str(table), "--reasons", "lost",
                 "--limit", "1"]) == 0
    with table.open() as f:
        got = list(csv.DictReader(f))
    assert len(got) == 1 and got[0]["constraint_id"] in ("4", "6") and got[0]["reason_codes"] == "lost"
    assert got[0]["reasons"] == "satisfied in the response, lost in its 0.25 summary"
    capsys.readouterr()
    assert main(["--store", path, "export", "--suspicious", "--out", "-", "--reasons", "copied"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["constraint_id"] for line in lines] == [1]
    assert main(["--store", path, "export", "--suspicious", "--out", "-", "--reasons", "copid"]) == 2
    assert "similar, copied, echo, lost, split, unquoted" in capsys.readouterr().err.replace("\n", " ")


def test_export_help_names_every_reason(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    assert ",".join(REASONS) in capsys.readouterr().out.replace("\n", "").replace(" ", "")


def test_report_lines_show_the_top_with_reasons(store: Store) -> None:
    from pipeline.outputs.suspicion import MISSING_COPY, report_lines, suspicion_rows

    lines = report_lines(suspicion_queue(store, limit=3))
    # no copy evidence yet: c1 not in
    assert lines[0].startswith("Most suspicious") and "6 with a reason" in lines[0]
    assert any(MISSING_COPY in line for line in lines)
    compute_copy_evidence(store)
    lines = report_lines(suspicion_queue(store, limit=10))
    text = "\n".join(lines)
    assert ('6 words reference A → constraint → response: “council approved a new sea wall” (6 words of'
            ' reference A only, in 1 of 2 store articles); word for word in reference A and in the response'
            ) in " ".join(text.split())
    assert "constraint 0.72 similar to reference B" in text
    rows, missing = suspicion_rows(store)
    assert not missing and all(set(r) >= {f"reason_{x}" for x in REASONS} for r in rows)


def test_report_lines_wrap_under_their_item_in_a_terminal(store: Store) -> None:
    """At 80 columns each line wraps between words: an item's text under its 'instruction', its
    reasons under their first word, so the next item's number stands alone at the left."""
    import re

    from pipeline.outputs.suspicion import report_lines, wrap_report_lines

    compute_copy_evidence(store)
    lines = report_lines(suspicion_queue(store, limit=10))[1:]
    wrapped = wrap_report_lines(lines, 60)
    assert len(wrapped) > len(lines) and all(len(line) <= 60 for line in wrapped)
    assert " ".join(" ".join(wrapped).split()) == " ".join(" ".join(lines).split())  # no word lost or cut
    items = [line for line in wrapped if re.match(r"\s*\d+\. ", line)]
    assert len(items) == sum(1 for line in lines if re.match(r"\s*\d+\. ", line))
    legend = next(i for i, line in enumerate(wrapped) if line.startswith("  reasons:"))
    assert all(line.startswith(" " * 7) for line in wrapped[:legend] if line not in items)
    assert all(line.startswith(" " * 4) for line in wrapped[legend + 1:])
    assert wrap_report_lines(["  1.  6.72  instruction 1 #31 a b"],
                             80) == ["  1.  6.72  instruction 1 #31 a b"]


def _assert_ranking_agrees(reader: StoreReader) -> None:
    """suspicion_queue (scored in SQL) against Evidence.score on instruction_evidence of every item,
    read through ``reader`` (a Store, or the app's view)."""
    store = store_of(reader)  # the items to expect, listed by hand
    active = store.conn.execute("SELECT id, instruction_id FROM constraints WHERE active = 1").fetchall()
    writers = [Writer(m, mode) for m, mode in store.conn.execute(
        "SELECT DISTINCT model, mode FROM generations WHERE kind = 'response'")]
    everything = [e for iid in sorted({i for _, i in active}) for w in writers
                  for e in instruction_evidence(reader, iid, w, 0.25).values()]
    assert any(e.copied for e in everything) and any(e.lost for e in everything)
    assert any(e.unsure for e in everything) and any(e.p_yes and not e.unsure for e in everything)
    for enabled in (REASONS, ("similar", "copied", "echo"), ("echo",),
                    ("split", "unquoted", "uncertain"), ("lost",),
                    ("uncertain",)):
        by_hand = sorted((e for e in everything if e.score(enabled) > 0),
                         key=lambda e: (-e.score(enabled), e.instruction_id, e.position, e.writer))
        # Item for item (ungrouped), then grouped by lead phrase as the screens show it.
        assert suspicion_queue(reader, enabled=enabled) == group_by_phrase(by_hand)
        queue = suspicion_queue(reader, enabled=enabled, grouped=False)
        assert [(_key(e), e.writer.model, e.score(enabled)) for e in queue] == \
            [(_key(e), e.writer.model, e.score(enabled)) for e in by_hand], enabled
        assert queue == by_hand  # every field: the kept rows' verdicts are read in full
        assert queue.total == len(by_hand)
        head = suspicion_queue(reader, enabled=enabled, limit=5, grouped=False)
        assert head == by_hand[:5] and head.total == len(by_hand)


def test_the_sql_ranking_agrees_with_evidence_score(tmp_path: Path) -> None:
    """The queue scores in SQL on the kept per-item marks (pipeline.store.scores text_item_marks);
    Evidence.score is the definition: same items, scores and order. On a fresh store, on a read-only
    view whose texts changed (or whose judge was recalibrated) since the marks were kept, on a store
    whose marks predate "uncertain", and on a store without the marks. judge-b is a yes_no judge."""
    import random

    from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store

    path = tmp_path / "syn.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=12, n_constraints=12))
    store = open_store(path)
    compute_copy_evidence(store)
    rng = random.Random(3)
    active = store.conn.execute("SELECT id, instruction_id FROM constraints WHERE active = 1").fetchall()
    store.conn.executemany(
        "INSERT INTO constraint_similarity(constraint_id, instruction_id, method, to_a, to_b) "
        "VALUES (?, ?, ?, ?, ?)",
        [(cid, iid, rng.choice(("lexical", "hash")), rng.random(), rng.choice((None, rng.random())))
         for cid, iid in active])
    verdicts = store.conn.execute("SELECT id, verdict FROM verdicts WHERE judge = 'judge-b'").fetchall()
    store.conn.executemany("UPDATE verdicts SET judging_mode = 'yes_no', p_yes = ? WHERE id = ?",
                           [((0.5 + rng.random() / 2) if v else rng.random() / 2, i) for i, v in verdicts])
    store.commit()
    put_calibration(store, Calibration("judge-b", "yes_no", "builtin", 0.55, "test", 42, None, None))
    assert apply_threshold(store, "judge-b", "yes_no", 0.55) > 0
    _assert_ranking_agrees(store)
    assert store.conn.execute("SELECT count(*) FROM text_item_marks").fetchone()[0] > 0
    # Re-judged after the marks were kept: a newer verdict (another prompt) turns a Yes into a No
    # with its quote missing on a third of the items, unrefreshed.
    rows = store.conn.execute("SELECT generation_id, constraint_id, judge, judging_mode, "
                              "verdict FROM verdicts WHERE verdict IS NOT NULL").fetchall()
    store.conn.executemany(
        "INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, prompt_hash, "
        "verdict, quote_found) VALUES (?, ?, ?, ?, 'rejudge', ?, ?)",
        [(g, c, j, m, 1 - v, "missing" if v == 0 else None) for g, c, j, m, v in rows[::3]])
    store.commit()
    assert stale_count(store.conn) > 0
    view = StoreView.open(path)
    try:
        _assert_ranking_agrees(view)  # fresh marks on the side: the view never writes
    finally:
        view.close()
    assert stale_count(store.conn) > 0
    assert refresh_text_scores(store.conn) and stale_count(store.conn) == 0
    put_calibration(store, Calibration("judge-b", "yes_no", "builtin", 0.7, "test", 42, None, None))
    assert stale_count(store.conn) > 0  # recalibrated, no verdict re-read: the marks still follow
    view = StoreView.open(path)
    try:
        _assert_ranking_agrees(view)
        store.conn.execute("ALTER TABLE text_item_marks DROP COLUMN uncertain")  # a store from before _v15
        store.commit()
        _assert_ranking_agrees(view)
        assert view.text_totals()  # the other kept totals, fresh on the side beside the old marks
    finally:
        view.close()
    store.conn.execute("DROP TABLE text_item_marks")  # a read-only store from before the marks
    _assert_ranking_agrees(store)
    view = StoreView.open(path)
    try:
        _assert_ranking_agrees(view)
        assert view.text_totals()  # the other kept totals, fresh on the side without the marks' table
    finally:
        view.close()
    store.close()


J3 = ("J3", "yes_no")


def _yes_no_verdicts(store: Store, rows: list[tuple[int, int, int, float]]) -> None:
    """J3's (text, constraint, verdict, P(Yes)) as a yes_no judge stores them."""
    store.conn.executemany("INSERT INTO verdicts(generation_id, constraint_id, judge, "
                           "judging_mode, prompt_hash,"
                           " verdict, p_yes) VALUES (?, ?, ?, ?, 'p', ?, ?)",
                           [(g, c, *J3, v, p) for g, c, v, p in rows])
    store.commit()


def test_uncertain_is_a_p_yes_on_the_response_near_its_judges_current_threshold(
        store: Store, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """c2: J3 says Yes at P(Yes) 0.75 on the response, 0.62 on the summary. At the default threshold
    (0.5) only the summary's is near it, which does not count; calibrated at 0.6 (no verdict flips) the
    response's is near it too: the kept marks follow the calibration, not only the verdicts."""
    from pipeline.outputs.suspicion import report_lines

    compute_copy_evidence(store)
    _yes_no_verdicts(store, [(10, 2, 1, 0.75), (11, 2, 1, 0.62), (10, 1, 1, 0.97)])
    assert suspicion_queue(store, enabled=("uncertain",)) == []
    two = instruction_evidence(store, 1, DIRECT, 0.25)[2]
    assert [(p.judge, p.p_yes, p.threshold) for p in two.p_yes] == [("J3", 0.75, 0.5)] and two.reasons() == ()

    put_calibration(store, Calibration("J3", "yes_no", "builtin", 0.6, "test", 42, None, None))
    assert apply_threshold(store, "J3", "yes_no", 0.6) == 0 and stale_count(store.conn) > 0
    queue = suspicion_queue(store)
    two = next(e for e in queue if _key(e) == (2, "direct"))
    assert two.reasons() == ("uncertain",) and two.score() == 0.05 and queue[-1] is two  # judge doubt least
    assert reason_sentences(two) == ["the judge was unsure: P(Yes) 0.75 against its threshold 0.60"]
    assert [_key(e) for e in suspicion_queue(store, enabled=("uncertain",))] == [(2, "direct")]
    assert instruction_evidence(store, 1, DIRECT, 0.25)[2] == two
    # Several yes_no judges: each unsure one is named; equal at two digits, a third is shown.
    other = YesProbability("J4", 0.5449, 0.5432)
    both = replace(two, p_yes=(*two.p_yes, other))
    assert reason_sentences(both, ("uncertain",)) == [
        "judge J3 was unsure: P(Yes) 0.75 against its threshold 0.60;"
        " judge J4 was unsure: P(Yes) 0.545 against its threshold 0.543"]

    out = tmp_path / "u.jsonl"
    assert main(["--store", str(store.path), "export", "--suspicious", "--out", str(out), "--reasons",
                 "uncertain"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["constraint_id"], r["reason_codes"], r["reason_uncertain"])
            for r in rows] == [(2, ["uncertain"], True)]
    assert rows[0]["reasons"] == ["the judge was unsure: P(Yes) 0.75 against its threshold 0.60"]
    text = "\n".join(report_lines(queue, top=20))
    assert "the judge was unsure: P(Yes) 0.75" in text and "uncertain = a judge's P(Yes)" in text
    html = _html_suspicion(store, tmp_path / "html")
    uncertain_at = html["reasons"].index("uncertain")
    item = next(i for i in html["items"] if (i[1], i[4]) == (2, "direct"))
    assert item[6][uncertain_at] == 1 and item[15] == 0.05  # fires; the page shows the pipeline's score
    assert item[10][uncertain_at] == "the judge was unsure: P(Yes) 0.75 against its threshold 0.60"
    # Recalibrated back to 0.5: the mark goes again.
    put_calibration(store, Calibration("J3", "yes_no", "builtin", 0.5, "test", 42, None, None))
    assert suspicion_queue(store, enabled=("uncertain",)) == []


def test_a_store_from_before_uncertain_marks_is_migrated(store: Store) -> None:
    """Schema 14 kept the marks without ``uncertain`` and no calibration triggers: opening the store
    builds the marks anew from every judged text, and a new calibration then rescores its judge's texts."""
    from pipeline.store.database import SCHEMA_VERSION

    _yes_no_verdicts(store, [(10, 2, 1, 0.55)])
    suspicion_queue(store)  # the marks kept, in the current shape
    store.conn.execute("ALTER TABLE text_item_marks DROP COLUMN uncertain")
    for name in ("insert", "update", "delete"):
        store.conn.execute(f"DROP TRIGGER calibrations_stale_{name}")
    store.conn.execute("PRAGMA user_version = 14")
    store.commit()
    path = store.path
    store.close()
    migrated = open_store(path)
    try:
        assert migrated.schema_version == SCHEMA_VERSION
        assert stale_count(migrated.conn) == migrated.scalar("SELECT count(DISTINCT generation_id) FROM "
                                                             "verdicts")
        assert [_key(e) for e in suspicion_queue(migrated, enabled=("uncertain",))] == [(2, "direct")]
        put_calibration(migrated, Calibration("J3", "yes_no", "builtin", 0.2, "test", 42, None, None))
        assert stale_count(migrated.conn) == 1
        assert suspicion_queue(migrated, enabled=("uncertain",)) == []
    finally:
        migrated.close()


def _html_suspicion(store: Store, out: Path) -> dict:
    """The HTML report's "Most suspicious" data (reasons, and per item its scores and sentences by reason)."""
    import re

    from pipeline.outputs.html_report import write_html
    from pipeline.outputs.report import ReportOptions, build_report

    result = write_html(store, build_report(store, ReportOptions(n_resamples=20)), out)
    page = result.path.read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="suspicion-data">(.*?)</script>', page, re.S)
    assert found
    return json.loads(found.group(1))


def test_the_queue_shows_the_stored_ratio_nearest_the_asked_one(store: Store) -> None:
    """pipeline.core.definitions.shown_ratio decides the queue's ratio, as every view's: summaries only
    at 0.5, the default (0.25) asks for the nearest, and the lost items are found there."""
    at_default = {_key(e) for e in suspicion_queue(store) if "lost" in e.reasons()}
    store.conn.execute("UPDATE generations SET ratio = 0.5 WHERE kind = 'summary'")
    store.commit()
    queue = suspicion_queue(store)
    assert queue and all(e.ratio == 0.5 for e in queue)
    assert {_key(e) for e in queue if "lost" in e.reasons()} == at_default != set()


def test_a_changed_weight_moves_the_queue_the_export_and_every_report(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pipeline.core.definitions.SUSPICION_WEIGHTS is the one table of weights: weigh "lost" above a
    paste and the store's ranking (the query the app's queue reads), `export --suspicious`, the
    report's suspicion list in each of its formats and the HTML report all follow, unchanged elsewhere."""
    import io

    from pipeline.core.definitions import SUSPICION_WEIGHTS, ReasonWeight
    from pipeline.outputs.report import ReportOptions, build_report
    from pipeline.outputs.report_text import write_format
    from pipeline.outputs.suspicion import report_lines, suspicion_rows
    from pipeline.store.suspicion import Ranking, evidence_rows

    compute_copy_evidence(store)

    def everywhere() -> dict[str, list[tuple[int, float]]]:
        """((constraint, mode), score) of the top three, as each view lists them (the store's rows
        unscored, ungrouped)."""
        rows, _ = evidence_rows(store, ratio=0.25, ranking=Ranking(REASONS, limit=3))
        assert [(r.constraint_id, r.mode) for r in rows] == \
            [_key(e) for e in suspicion_queue(store, limit=3, grouped=False)]
        queue = suspicion_queue(store, limit=3)
        exported, _ = suspicion_rows(store, limit=3)
        report = build_report(store, ReportOptions(n_resamples=20, suspicious=3))
        assert report.suspicious is not None
        listed = {}
        for fmt in ("markdown", "csv", "json"):
            out = io.StringIO()
            write_format(report, fmt, out)
            listed[fmt] = out.getvalue()
        items = json.loads(listed["json"])["suspicious"]
        html = _html_suspicion(store, tmp_path / f"html{len(list(tmp_path.iterdir()))}")["items"]
        text = "\n".join(report_lines(report.suspicious))
        table = [r for r in csv.DictReader(io.StringIO(listed["csv"])) if r["table"] == "suspicious"]
        assert [(int(r["constraint_id"]), float(r["score"])) for r in table] == \
            [(i["constraint_id"], i["score"]) for i in items]
        for item in items:  # the same items and scores in markdown and the text report
            assert f"**{item['score']:.2f}** instruction 1 #{item['position']}" in listed["markdown"]
            assert f"{item['rank']:>3}. {item['score']:5.2f}  instruction 1 #{item['position']}" in text
        return {
            "store": [((r.constraint_id, r.mode), 0.0) for r in rows],
            "queue": [(_key(e), e.score()) for e in queue],
            "export": [((r["constraint_id"], r["mode"]), r["score"]) for r in exported],
            "report": [((i["constraint_id"], i["mode"]), i["score"]) for i in items],
            # The page, of the writers the report counted (here the direct one): the pipeline's order
            # and scores, written out (it never sums them).
            "html": [((i[1], i[4]), round(i[15], 2)) for i in html[:3]],
            "direct": [(_key(e), e.score()) for e in suspicion_queue(store) if e.writer == DIRECT][:3],
        }

    before = everywhere()
    assert before["queue"][0] == ((1, "direct"), 3.32)  # the paste leads
    assert before["export"] == before["queue"] == before["report"] and before["html"] == before["direct"]
    monkeypatch.setitem(SUSPICION_WEIGHTS, "lost", ReasonWeight(10.0))
    after = everywhere()
    # c4 lost + unquoted (10 + 0.25), c6 lost (10), then the paste.
    ranked = [((4, "direct"), 10.25), ((6, "direct"), 10.0), ((1, "direct"), 3.32)]
    assert after["queue"] == after["export"] == after["report"] == after["html"] == after["direct"] == ranked
    assert [k for k, _ in after["store"]] == [k for k, _ in ranked]
