"""Copied n-gram spans, longest common run, lexical overlap, sentence splitting."""

from __future__ import annotations

from pipeline.analysis.copying import (
    copied_ngrams,
    copy_stats,
    lexical_overlap,
    longest_common_substring,
    shared_ngram_count,
)

A = "The mayor said, on Monday: the flood plan will cost the town a great deal of money. Nothing else."
B = ("Yesterday THE MAYOR said on monday the flood plan will cost more. The town a great "
     "deal of money was spent.")


def test_spans_are_exact_in_both_texts() -> None:
    spans = copied_ngrams(A, B, n=3)
    assert [(s.a_start, s.a_end, s.b_start, s.b_end, s.words) for s in spans] == [(0, 51, 10, 59, 10),
                                                                                  (52, 82, 66, 96, 7)]
    # Case and punctuation between words are ignored; offsets cut the text as written.
    assert spans[0].in_a(A) == "The mayor said, on Monday: the flood plan will cost"
    assert spans[0].in_b(B) == "THE MAYOR said on monday the flood plan will cost"
    assert spans[1].in_a(A) == "the town a great deal of money"
    assert spans[1].in_b(B) == "The town a great deal of money"


def test_n_sets_the_minimum_span() -> None:
    # With n = 8 only the 10-word run is long enough.
    (only,) = copied_ngrams(A, B, n=8)
    assert only.words == 10
    assert copied_ngrams("one two three", "one two three", n=5) == []
    assert copied_ngrams("", B) == []


def test_copy_stats_counts() -> None:
    stats = copy_stats(A, B, n=5)
    # Runs of 10 and 7 words hold 6 + 3 distinct 5-grams; 17 of A's 19 words are copied.
    assert stats.shared_ngrams == 9 == shared_ngram_count(A, B, 5)
    assert (stats.copied_words, stats.words, stats.longest) == (17, 19, 10)
    assert stats.share == 17 / 19


def test_spans_do_not_overlap_when_a_run_continues_from_elsewhere() -> None:
    # a copies "w1..w6" from one place of b and "w4..w9" from another; spans must tile a.
    a = "w1 w2 w3 w4 w5 w6 w7 w8 w9"
    b = "w1 w2 w3 w4 w5 w6 x y z w4 w5 w6 w7 w8 w9"
    spans = copied_ngrams(a, b, n=3)
    assert sum(s.words for s in spans) == 9
    assert all(s1.a_end <= s2.a_start for s1, s2 in zip(spans, spans[1:]))
    for s in spans:  # each span reads the same in both texts
        assert s.in_a(a) == s.in_b(b)


def test_longest_common_substring() -> None:
    span = longest_common_substring(A, B)
    assert span.words == 10 and span.in_a(A).startswith("The mayor")
    assert longest_common_substring("alpha beta", "gamma delta") is None
    assert longest_common_substring("x beta y", "beta").words == 1


def test_lexical_overlap() -> None:
    # Content words of the constraint: mention, flood, plan, mayor; B has flood, plan, mayor.
    assert lexical_overlap("Mention the flood plan of the mayor", B) == 0.75
    assert lexical_overlap("the of and", B) == 0.0
    assert lexical_overlap("Describe a storm", "") == 0.0


def test_what_is_kept_per_text_costs_the_collector_nothing() -> None:
    """A text's cached words, offsets and n-gram index (and quote normalisation's offsets) are
    tuples: once the garbage collector has seen them it stops tracking them. Lists would be walked
    by every full collection, and in the app these caches fill as the auditor moves (a move
    stalled 100-200 ms on the 2,000-instruction bench store)."""
    import gc

    from pipeline.analysis import copying
    from pipeline.core.text import normalise_for_quote

    text = " ".join(f"{A} {B} {i}" for i in range(20))
    kept = [copying._words(text), *copying._tokens(text), *copying._gram_index(text, 5),
            normalise_for_quote(text)[1]]
    assert shared_ngram_count(text, B, 5) > 0  # the index works as before
    for _ in range(3):  # a nesting level a collection
        gc.collect()
    assert [gc.is_tracked(part) for part in kept] == [False] * len(kept)
