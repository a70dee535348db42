"""Quality flags for constraints, stored in ``constraint_flags``.

- ``proper_noun``: a word capitalised in the constraint (not at its sentence start) that a
  reference also capitalises away from a sentence start, i.e. a name taken from the reference.
- ``specificity_leak``: the constraint is much closer to one reference than to the other:
  lexical overlap (share of its content words found in the reference) and, when an embedder
  is given, cosine similarity. A common constraint should sit between the two.
- ``copied_ngram``: passages of >= n words copied from either reference, with character spans
  in the constraint and in the reference (pipeline.analysis.copying).
- ``duplicate``: near-duplicates within the list (rapidfuzz token-sort ratio).
- ``contradiction``: the optional LLM check (pipeline.stages.contradictions, which asks the model
  and writes; ``parse_contradictions`` here reads its reply): pairs of constraints no single text
  could satisfy, stored in ``contradictions`` and flagged on both constraints.

Each flag's ``detail`` is JSON that the app shows and highlights from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipeline.analysis.copying import content_words, copied_ngrams, lexical_overlap
from pipeline.core.definitions import LEXICAL_FLAGS
from pipeline.store.articles import article_text_hash
from pipeline.store.constraints import active_constraints
from pipeline.store.database import Store
from pipeline.store.flags import ConstraintFlag, replace_flags
from pipeline.store.instructions import get_instruction
from pipeline.store.pairs import pair_partner

if TYPE_CHECKING:
    from pipeline.analysis.embeddings import Embedder

_CAPITALISED = re.compile(r"\b[A-Z][\w'\u2019\-]*")
_SENTENCE_END = ".!?:;\n"
_OPENERS = "\"'\u201c\u2018([ \t\r*-"


@dataclass(frozen=True)
class FlagSettings:
    ngram_n: int = 5
    leak_lexical_gap: float = 0.3
    leak_min_words: int = 3  # and this many more content words from one reference: short lists are noisy
    leak_embedding_gap: float = 0.1
    duplicate_score: float = 85.0


@dataclass
class Flag:
    flag: str
    detail: dict[str, Any] = field(default_factory=dict)


def _at_sentence_start(text: str, pos: int) -> bool:
    i = pos - 1
    while i >= 0 and text[i] in _OPENERS:
        i -= 1
    return i < 0 or text[i] in _SENTENCE_END or text[i] == "\n"


def capitalised_words(text: str, *, skip_sentence_starts: bool = True) -> dict[str, list[tuple[int, int]]]:
    """Capitalised words (with their spans), leaving out sentence starts and the pronoun I."""
    out: dict[str, list[tuple[int, int]]] = {}
    for m in _CAPITALISED.finditer(text):
        word = m.group(0).rstrip("'\u2019-")
        if word == "I" or (skip_sentence_starts and _at_sentence_start(text, m.start())):
            continue
        out.setdefault(word, []).append((m.start(), m.start() + len(word)))
    return out


def proper_noun_flag(constraint: str, references: dict[str, str], names: dict[str, dict[str, list]]
                     | None = None) -> Flag | None:
    names = names or {label: capitalised_words(text) for label, text in references.items()}
    found = []
    for word, spans in capitalised_words(constraint).items():
        refs = [label for label in references if word in names[label]]
        if refs:
            found.append({"word": word, "spans": spans, "references": refs})
    return Flag("proper_noun", {"words": found}) if found else None


def leak_flag(constraint: str, ref_a: str, ref_b: str, settings: FlagSettings,
              cosines: tuple[float, float] | None = None) -> Flag | None:
    lex_a, lex_b = lexical_overlap(constraint, ref_a), lexical_overlap(constraint, ref_b)
    words = content_words(constraint)
    only_a, only_b = len(words & content_words(ref_a)
                         - content_words(ref_b)), len(words & content_words(ref_b) - content_words(ref_a))
    detail: dict[str, Any] = {"lexical": {"a": round(lex_a, 3), "b": round(lex_b, 3),
                                          "gap": round(abs(lex_a - lex_b), 3),
                                          "only_a": only_a, "only_b": only_b}}
    leaked = abs(lex_a - lex_b) >= settings.leak_lexical_gap and abs(only_a
                                                                     - only_b) >= settings.leak_min_words
    closer = "a" if lex_a >= lex_b else "b"
    if cosines is not None:
        cos_a, cos_b = cosines
        gap = abs(cos_a - cos_b)
        detail["embedding"] = {"a": round(cos_a, 3), "b": round(cos_b, 3), "gap": round(gap, 3)}
        if gap >= settings.leak_embedding_gap:
            leaked = True
            closer = "a" if cos_a >= cos_b else "b"
    detail["closer_to"] = closer
    return Flag("specificity_leak", detail) if leaked else None


def copied_flag(constraint: str, references: dict[str, str], n: int) -> Flag | None:
    spans = []
    for label, ref in references.items():
        for s in copied_ngrams(constraint, ref, n=n):
            spans.append({
                "reference": label, "constraint_span": [s.a_start, s.a_end],
                "reference_span": [s.b_start, s.b_end],
                "words": s.words, "text": s.in_a(constraint),
            })
    return Flag("copied_ngram", {"n": n, "spans": spans}) if spans else None


def duplicate_flags(constraints: Sequence[str], threshold: float) -> dict[int, Flag]:
    """index -> a duplicate flag naming the near-duplicates (by index and score)."""
    from rapidfuzz import fuzz, process, utils

    if len(constraints) < 2:
        return {}
    scores = process.cdist(constraints, constraints, scorer=fuzz.token_sort_ratio,
                           processor=utils.default_process)
    out: dict[int, Flag] = {}
    for i in range(len(constraints)):
        near = [{"index": j, "score": round(float(scores[i][j]), 1)}
                for j in range(len(constraints)) if j != i and scores[i][j] >= threshold]
        if near:
            out[i] = Flag("duplicate", {"with": near})
    return out


def compute_flags(
    constraints: Sequence[str],
    ref_a: str,
    ref_b: str | None,
    settings: FlagSettings = FlagSettings(),
    *,
    cosines: Sequence[tuple[float, float]] | None = None,
) -> list[list[Flag]]:
    """The flags of each constraint, in order. ``cosines``: per constraint (cos to A, cos to B)."""
    references = {"a": ref_a} | ({"b": ref_b} if ref_b else {})
    names = {label: capitalised_words(text) for label, text in references.items()}
    dupes = duplicate_flags(constraints, settings.duplicate_score)
    out: list[list[Flag]] = []
    for i, text in enumerate(constraints):
        flags = [
            proper_noun_flag(text, references, names),
            leak_flag(text, ref_a, ref_b, settings, cosines[i] if cosines else None) if ref_b else None,
            copied_flag(text, references, settings.ngram_n),
            dupes.get(i),
        ]
        out.append([f for f in flags if f is not None])
    return out


def embedding_cosines(store: Store, embedder: Embedder, constraints: Sequence[str], ref_a: str,
                      ref_b: str) -> list[tuple[float, float]]:
    from pipeline.analysis.embeddings import embed_texts

    vectors = embed_texts(store, embedder, [ref_a, ref_b, *constraints])
    sims = vectors[2:] @ vectors[:2].T  # rows are unit length
    return [(float(a), float(b)) for a, b in sims]


def flag_instruction(store: Store, instruction_id: int, settings: FlagSettings = FlagSettings(),
                     embedder: Embedder | None = None) -> dict[str, int]:
    """Recompute and store the lexical flags of an instruction's active constraints.

    References: article A, and B (for ``single``, the pair's partner, so a leak toward A shows).
    Returns counts per flag."""
    inst = get_instruction(store, instruction_id)
    if inst is None:
        return {}
    b_id = inst.article_b
    if b_id is None and inst.pair_id is not None:
        b_id = pair_partner(store, inst.pair_id)
    ref_a = _article_text(store, inst.article_a)
    ref_b = _article_text(store, b_id) if b_id is not None else None
    rows = active_constraints(store, instruction_id)
    texts = [r.text for r in rows]
    cosines = embedding_cosines(store, embedder, texts, ref_a,
                                ref_b) if embedder is not None and ref_b else None
    flags = compute_flags(texts, ref_a, ref_b, settings, cosines=cosines)
    counts: dict[str, int] = {}
    stored: list[ConstraintFlag] = []
    for row, row_flags in zip(rows, flags, strict=True):
        for f in row_flags:
            if f.flag == "duplicate":  # indices -> constraint ids, which the app can follow
                f.detail = {"with": [{"constraint_id": rows[d["index"]].id, "score": d["score"]}
                                     for d in f.detail["with"]]}
            stored.append(ConstraintFlag(row.id, f.flag, f.detail))
            counts[f.flag] = counts.get(f.flag, 0) + 1
    replace_flags(store, instruction_id, LEXICAL_FLAGS, stored)
    return counts


def _article_text(store: Store, article_id: int | None) -> str:
    text_hash = article_text_hash(store, article_id)
    return store.get_text(text_hash) if text_hash else ""


# -- joint satisfiability: the model's reply (pipeline.stages.contradictions asks it) ----------------


def parse_contradictions(data: Any, n: int) -> list[tuple[int, int, str]]:
    """(a, b, reason) with 1 <= a < b <= n, each pair once. Raises ValueError on the wrong shape."""
    if isinstance(data, dict):
        data = data.get("contradictions", data.get("pairs"))
    if not isinstance(data, list):
        raise ValueError('expected {"contradictions": [{"a": id, "b": id, "reason": "..."}]}')
    out: dict[tuple[int, int], str] = {}
    for item in data:
        if not isinstance(item, dict):
            continue
        try:
            # None: TypeError, skipped
            a, b = int(item.get("a")), int(item.get("b"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        a, b = min(a, b), max(a, b)
        if 1 <= a < b <= n and (a, b) not in out:
            out[(a, b)] = str(item.get("reason") or "")
    return [(a, b, r) for (a, b), r in out.items()]
