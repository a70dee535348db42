"""Quality flags: proper nouns, specificity leaks (lexical and embedding), copied n-grams,
duplicates, and their storage per instruction."""

from __future__ import annotations

import json

import numpy as np

from pipeline.analysis.flags import (
    FlagSettings,
    capitalised_words,
    compute_flags,
    copied_flag,
    duplicate_flags,
    flag_instruction,
    leak_flag,
    parse_contradictions,
    proper_noun_flag,
)
from tests.fakes.responders import ARTICLE_A, ARTICLE_B, make_store

SETTINGS = FlagSettings()


def test_capitalised_words_skip_sentence_starts_and_I() -> None:
    text = ('The mayor met Anna Berg. "Then I left," she said. After that, Oslo.\nNext line '
            'starts here with Bergen.')
    words = capitalised_words(text)
    assert set(words) == {"Anna", "Berg", "Oslo", "Bergen"}  # not: The, Then, I, After, Next
    assert text[slice(*words["Anna"][0])] == "Anna"


def test_proper_noun_needs_the_word_to_be_a_name_in_a_reference() -> None:
    refs = {"a": ARTICLE_A, "b": ARTICLE_B}
    flag = proper_noun_flag("Explain what the Dawson family said about Riverton's board.", refs)
    assert flag is not None
    found = {w["word"]: w["references"] for w in flag.detail["words"]}
    assert found == {"Dawson": ["a"]}  # "Riverton's" only opens a sentence in B: no evidence it is a name
    # a capitalised word the references never use as a name is not flagged
    assert proper_noun_flag("Describe how the Council argued about money.", refs) is None
    # nor is the first word of the constraint
    assert proper_noun_flag("Describe the meeting.", refs) is None


def test_leak_lexical_gap_and_direction() -> None:
    leaky = "Mention the library closed for three weeks because of heating costs."
    common = "Describe how residents felt when a public service closed."
    flag = leak_flag(leaky, ARTICLE_A, ARTICLE_B, SETTINGS)
    assert flag is not None and flag.detail["closer_to"] == "a"
    assert flag.detail["lexical"]["a"] > flag.detail["lexical"]["b"] + 0.3
    assert leak_flag(common, ARTICLE_A, ARTICLE_B, SETTINGS) is None


def test_leak_by_embedding_gap_alone() -> None:
    common = "Describe how residents felt when a public service closed."
    assert leak_flag(common, ARTICLE_A, ARTICLE_B, SETTINGS, cosines=(0.62, 0.58)) is None
    flag = leak_flag(common, ARTICLE_A, ARTICLE_B, SETTINGS, cosines=(0.30, 0.71))
    assert flag is not None and flag.detail["closer_to"] == "b" and flag.detail["embedding"]["gap"] == 0.41


def test_copied_ngram_spans_point_at_both_texts() -> None:
    constraint = "Say that residents who rely on the library for internet access were upset."
    flag = copied_flag(constraint, {"a": ARTICLE_A, "b": ARTICLE_B}, n=5)
    assert flag is not None
    (span,) = flag.detail["spans"]
    s, e = span["constraint_span"]
    rs, re_ = span["reference_span"]
    assert constraint[s:e] == "residents who rely on the library for internet access"
    assert ARTICLE_A[rs:re_] == "Residents who rely on the library for internet access"  # as written in each
    assert span["reference"] == "a" and span["words"] == 9
    assert copied_flag("Describe the mood of the meeting.", {"a": ARTICLE_A}, n=5) is None


def test_duplicates_both_sides_and_not_distinct_ones() -> None:
    items = ["Describe how residents reacted to the closure.", "Explain the money problem.",
             "Describe how the residents reacted to the closure.", "Quote an official."]
    dupes = duplicate_flags(items, 85.0)
    assert set(dupes) == {0, 2}
    assert dupes[0].detail["with"][0]["index"] == 2


def test_compute_flags_single_reference_has_no_leak_flag() -> None:
    flags = compute_flags(["Mention that the library shut for almost a month."], ARTICLE_A, None)
    assert [f.flag for f in flags[0]] == []  # no B to compare with, no 5-word copy, no name


def test_flag_instruction_stores_and_recomputes(tmp_path) -> None:
    from pipeline.analysis.embeddings import HashEmbedder

    store = make_store(tmp_path / "s.sqlite", 1)
    pair = store.one("SELECT * FROM pairs")
    inst_id = store.db["instructions"].insert({"run_id": "r", "condition": "single", "pair_id": pair["id"],
                                               "article_a": pair["article_a"], "article_b": None,
                                               "status": "synthesized"}).last_pk
    texts = ["Explain what Dawson said about heating costs and the gap of two hundred thousand pounds.",
             "Describe how residents reacted.", "Describe how the residents reacted."]
    for i, t in enumerate(texts, 1):
        store.db["constraints"].insert({"instruction_id": inst_id, "position": i, "text": t,
                                        "origin": "synthesized", "active": 1})
    store.commit()
    counts = flag_instruction(store, inst_id, SETTINGS, HashEmbedder())
    assert counts["proper_noun"] == 1 and counts["duplicate"] == 2 and counts["specificity_leak"] >= 1
    leak = json.loads(store.one("SELECT detail FROM constraint_flags WHERE flag "
                                "= 'specificity_leak'")["detail"])
    assert "embedding" in leak and leak["closer_to"] == "a"  # single: compared with the pair's partner B
    # cached vectors: two articles, three constraints
    assert store.scalar("SELECT count(*) FROM embeddings") == 2 + 3
    # recomputing replaces, never piles up
    flag_instruction(store, inst_id, SETTINGS)
    assert store.scalar("SELECT count(*) FROM constraint_flags WHERE flag = 'duplicate'") == 2


def test_parse_contradictions_normalises_and_filters() -> None:
    pairs = parse_contradictions({"contradictions": [{"a": 5, "b": 2, "reason": "x"}, {"a": 2, "b": 5},
                                                     {"a": 3, "b": 3},
                                                     {"a": 1, "b": 99}, {"a": "1", "b": "4"}]}, 10)
    assert pairs == [(2, 5, "x"), (1, 4, "")]


def test_hash_embedder_cosines_rank_the_closer_reference() -> None:
    from pipeline.analysis.embeddings import HashEmbedder

    vectors = HashEmbedder().embed([ARTICLE_A, ARTICLE_B, "library internet access heating costs pool"])
    sims = vectors[2:] @ vectors[:2].T
    assert np.argmax(sims[0]) == 0
