"""A copy reason says exactly what is there (issue 62): the quoted phrase's true word count, the
phrase as each text it names has it, and the way the words came (reference -> constraint -> response:
the model never sees the references). The issue's case: the constraint's "the US Federal Reserve's
decision to boost interest rates" is 9 words (not the 10 tokens "Reserve's" makes), and reference A
holds it with "on 2 February" in the middle."""

from __future__ import annotations

from pipeline.analysis.copy_count import count_of
from pipeline.analysis.copy_path import path, phrase_words, standings, stands

PHRASE = "the US Federal Reserve's decision to boost interest rates"
REF_A = ("Markets fell on Monday. Analysts blamed the US Federal Reserve's decision on 2 February to boost"
         " interest rates, which surprised few.")
RESPONSE = "Prices climbed after the US Federal Reserve's decision to boost interest rates last week."


def test_the_phrase_as_each_text_has_it() -> None:
    in_a = stands(PHRASE, REF_A, "A")
    assert in_a.run == "the US Federal Reserve's decision on 2 February to boost interest rates"
    assert not in_a.exact and in_a.said() == f"reference A has “{in_a.run}”"
    in_response = stands(PHRASE, RESPONSE, "response")
    assert in_response.exact and in_response.said() == "word for word in the response"
    assert stands(PHRASE, "Nothing alike here.", "B").said() == "not in reference B"
    # Each reference the phrase comes from, then the response.
    assert [s.label for s in standings(PHRASE, "A", {"A": REF_A, "B": "x", "response": RESPONSE})] == \
        ["A", "response"]


def test_a_piece_too_far_away_is_not_part_of_the_run() -> None:
    far = "the US Federal Reserve's decision " + "word " * 30 + "to boost interest rates"
    assert stands(PHRASE, far, "A").run == "the US Federal Reserve's decision"


def test_words_are_counted_as_a_reader_counts_them_and_the_path_named() -> None:
    assert phrase_words(PHRASE) == 9
    count = count_of((PHRASE,), "A")
    assert count.words == 9
    assert count.sentence() == "9 words reference A → constraint → response"
    assert path("AB", "summary") == "references A and B → constraint → response → summary"
