"""One count of copied words per (constraint, text), naming where the words came from.

Every view that says how much a constraint's words were copied into a text (Audit's list and
panes, the suspicion queue, `report`, `export --suspicious`, the HTML report) reads this count,
so they cannot disagree. The words are the constraint's phrases (runs of its word n-grams, not
all stopwords or the list's template words: pipeline.analysis.copy_evidence.copied_phrases) that occur in the
text, and the source is:

  "A", "B", "AB"  the phrases are also in reference A, B or both: text pasted from a reference,
                  the copy-paste the method exists to catch (they outrank an echo)
  "constraint"    the phrases are in no reference: the text repeats the constraint's own wording
  ""              nothing copied

The count is of the constraint's words in those phrases (the phrases as the constraint writes
them, counted as a reader counts words), so "12 words reference A → constraint → response" means 12
words of the constraint, which holds them from reference A: the model never sees the references.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from pipeline.analysis.copy_path import path
from pipeline.core.definitions import echo_counts
from pipeline.core.text import count_words

REFERENCE_SOURCES = ("A", "B", "AB")
CONSTRAINT = "constraint"


@dataclass(frozen=True)
class CopyCount:
    words: int  # the constraint's words in the copied phrases
    source: str  # "A" | "B" | "AB" | "constraint" | ""
    phrases: tuple[str, ...]  # as written in the constraint

    @property
    def from_reference(self) -> bool:
        return self.source in REFERENCE_SOURCES

    def source_name(self) -> str:
        """"reference A", "references A and B", "the constraint itself", or ""."""
        return source_name(self.source)

    def sentence(self, text: str = "response") -> str:
        """"12 words reference A → constraint → response" (the way to ``text``); "" when nothing was
        copied."""
        if not self.words:
            return ""
        if self.source == CONSTRAINT:
            return f"{self.words} words of the constraint repeated in the {text} (in no reference)"
        # The model never sees the references: their words came through the constraint.
        return f"{self.words} words {path(self.source, text)}"

    def short(self) -> str:
        """A table cell: "12w A", "5w con", "-"."""
        if not self.words:
            return "-"
        return f"{self.words}w {'con' if self.source == CONSTRAINT else self.source}"


NONE = CopyCount(0, "", ())


def source_name(source: str) -> str:
    return {"A": "reference A", "B": "reference B", "AB": "references A and B",
            CONSTRAINT: "the constraint itself"}.get(source, "")


def phrase_words(phrases: Sequence[str]) -> int:
    """Words in the phrases as a reader counts them (pipeline.core.text.count_words: "Reserve's" is one
    word, two of the n-grams' tokens)."""
    return sum(count_words(p) for p in phrases)


def count_of(copied: Sequence[str], copied_from: str, echoed: Sequence[str] = (), echo: float | None = None
             ) -> CopyCount:
    """The count from the phrases found: reference phrases first, else the constraint's own words when
    they count (pipeline.core.definitions.echo_counts: with the text's ``echo``, when one was computed)."""
    if copied:
        return CopyCount(phrase_words(copied), "".join(sorted(copied_from)), tuple(copied))
    if echo_counts(bool(echoed), echo, copied=False):
        return CopyCount(phrase_words(echoed), CONSTRAINT, tuple(echoed))
    return NONE


def copy_count(constraint: str, text: str, reference_a: str, reference_b: str | None,
               template: frozenset[str] = frozenset(), echo: float | None = None) -> CopyCount:
    """The count for one constraint and one text (a response or a summary), from the texts; the
    ``template`` words of the constraint's list (pipeline.analysis.specificity.template_words) never
    count; ``echo``: the constraint's stored echo on the text (None: not computed)."""
    from pipeline.analysis.copy_evidence import copied_phrases

    if not text:
        return NONE
    grams = _grams(text)
    refs = {k: _grams(v) for k, v in (("A", reference_a), ("B", reference_b or "")) if v}
    copied, sources = copied_phrases(constraint, {}, "", response_grams=grams, reference_grams=refs,
                                     ignore=template)
    echoed: tuple[str, ...] = ()
    if not copied:
        echoed, _ = copied_phrases(constraint, {}, "", response_grams=grams, reference_grams={"C": grams},
                                   ignore=template)
    return count_of(copied, sources, echoed, echo)


@lru_cache(maxsize=256)
def _grams(text: str) -> frozenset[tuple[str, ...]]:
    """A text's word n-grams, once per text: a text is counted against each of its 39 constraints."""
    from pipeline.analysis.copy_evidence import word_ngrams

    return frozenset(word_ngrams(text))
