"""Where a verdict rests when the judge gave no quote: the sentence of the text that best supports a
constraint, found by matching words, not asked of the model.

A ``yes_no`` judge (pipeline.stages.judging) answers one token, so its Yes carries no quote. Rather
than show every such Yes as "unquoted", the verdict points at the sentence whose words match the
constraint's best: stored as the verdict's quote with ``quote_found = "located"``, which screens show
as located, never as quoted. Words match on their first five letters, so "practised" finds
"practise"; numbers match whole. A word found in many of the text's sentences (its protagonist's
name) weighs less than a rare one, and the instruction's own verbs ("mention", "describe") none.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from pipeline.analysis.copying import STOPWORDS

LOCATED = "located"  # verdicts.quote_found of a sentence found by this module, not quoted by the judge
_STEM = 5
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
# What a constraint asks the writer to do, not what the text must hold.
_INSTRUCTION_WORDS = frozenset({"say", "state", "mention", "describe", "explain", "include", "give",
                                "report", "name",
                                "have", "make", "show", "tell", "reveal", "note", "add", "list",
                                "write", "provide",
                                "discuss", "highlight", "refer", "cite", "quote", "end", "begin",
                                "start", "text"})
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+[\"'”’)]*|\n|$)")


@dataclass(frozen=True)
class Support:
    sentence: str
    span: tuple[int, int]  # where the sentence sits in the text
    score: float  # share of the constraint's content words (by stem) found in the sentence, 0..1


def _stems(text: str) -> set[str]:
    out = set()
    for word in _WORD.findall(text.lower()):
        if word in STOPWORDS or word in _INSTRUCTION_WORDS:
            continue
        out.add(word if word[0].isdigit() else word[:_STEM])
    return out


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text``, whitespace trimmed, empty ones left out."""
    spans = []
    for m in _SENTENCE.finditer(text):
        start, end = m.start(), m.end()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            spans.append((start, end))
    return spans


@lru_cache(maxsize=64)
def _sentences(text: str) -> tuple[tuple[tuple[int, int], ...], tuple[frozenset[str], ...]]:
    """A text's sentence spans and their stems, once per text: a text is judged on each of its constraints."""
    spans = tuple(sentence_spans(text))
    return spans, tuple(frozenset(_stems(text[start:end])) for start, end in spans)


def locate_support(text: str, constraint: str) -> Support | None:
    """The sentence of ``text`` sharing most of the constraint's content words, each weighted by how
    few sentences hold it (the earlier sentence on a tie); None when the text has no sentence, the
    constraint no content word, or no sentence shares one."""
    wanted = _stems(constraint)
    spans, stems = _sentences(text)
    if not wanted or not spans:
        return None
    weight = {w: math.log(1 + len(spans) / (1 + sum(w in s for s in stems))) for w in wanted}
    total = sum(weight.values())
    best: Support | None = None
    for (start, end), held in zip(spans, stems, strict=True):
        score = sum(weight[w] for w in wanted & held) / total
        if score > 0 and (best is None or score > best.score):
            best = Support(text[start:end], (start, end), round(score, 3))
    return best
