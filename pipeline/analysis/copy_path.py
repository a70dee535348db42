"""Where a copied phrase stands in each text, and the path it took: what a reason says of a paste.

A copied phrase (pipeline.analysis.copy_evidence.phrase_runs) is the constraint's words, a run of its
word n-grams each found in a reference and in the response; the run is glued from n-grams, so a
reference may hold it with other words between ("decision on 2 February to boost interest rates"
for the constraint's "decision to boost interest rates"). ``stands`` finds the run as a text has
it: the stretch from the first to the last of the phrase's words found there in order, each piece
at most GAP words from the next. ``path`` names the way the words came: the model never sees the
references (it answers the instruction, whose constraints carry their words; edit mode revises a
constraint-blind base article), so a reference's words in a response came through the constraint.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from pipeline.core.text import count_words

TOKEN = re.compile(r"\w+", re.UNICODE)  # words as the n-grams are made (pipeline.analysis.copying.WORD)
GAP = 8  # at most this many of a text's words between two pieces of one phrase
LABELS = {"A": "reference A", "B": "reference B", "response": "the response", "summary": "the summary"}


@dataclass(frozen=True)
class Standing:
    """A phrase as one text has it: ``run`` as written there ("" when it is not there)."""

    label: str  # "A", "B", "response"
    run: str
    exact: bool  # the phrase word for word (case aside)

    def said(self) -> str:
        where = LABELS.get(self.label, self.label)
        if not self.run:
            return f"not in {where}"
        if self.exact:
            return f"word for word in {where}"
        return f"{where} has “{self.run}”"


@lru_cache(maxsize=1024)  # a queue's head names some hundreds of responses and their references
def _tokens(text: str) -> tuple[tuple[str, ...], tuple[tuple[int, int], ...], dict[str, list[int]]]:
    """A text's lower-cased tokens, their spans and where each token stands (read once a text)."""
    spans = tuple(m.span() for m in TOKEN.finditer(text))
    words = tuple(text[a:b].lower() for a, b in spans)
    index: dict[str, list[int]] = {}
    for i, w in enumerate(words):
        index.setdefault(w, []).append(i)
    return words, spans, index


def _segments(phrase: tuple[str, ...], words: tuple[str, ...],
              index: dict[str, list[int]]) -> list[tuple[int, int, int]]:
    """Every maximal piece (phrase offset, text offset, length) the phrase and the text share."""
    out = []
    for i, w in enumerate(phrase):
        for j in index.get(w, ()):
            if i and j and phrase[i - 1] == words[j - 1]:
                continue  # inside a longer piece
            n = 1
            while i + n < len(phrase) and j + n < len(words) and phrase[i + n] == words[j + n]:
                n += 1
            out.append((i, j, n))
    return out


def stands(phrase: str, text: str, label: str = "") -> Standing:
    """``phrase`` as ``text`` has it: its longest shared piece, extended by the pieces before and after
    it in both (in order, each within GAP words of the next); the text between the first and last."""
    wanted = tuple(w.lower() for w in TOKEN.findall(phrase))
    if not wanted or not text:
        return Standing(label, "", False)
    words, spans, index = _tokens(text)
    pieces = _segments(wanted, words, index)
    if not pieces:
        return Standing(label, "", False)
    best = max(pieces, key=lambda p: (p[2], -p[1]))
    chosen = [best]
    while True:  # before: a piece ending before the first chosen, in the phrase and in the text
        i0, j0, _ = chosen[0]
        before = [p for p in pieces if p[0] + p[2] <= i0 and p[1] + p[2] <= j0 and j0 - (p[1] + p[2]) <= GAP]
        if not before:
            break
        chosen.insert(0, max(before, key=lambda p: (p[0] + p[2], p[2])))
    while True:  # after
        i1, j1, n1 = chosen[-1]
        after = [p for p in pieces if p[0] >= i1 + n1 and p[1] >= j1 + n1 and p[1] - (j1 + n1) <= GAP]
        if not after:
            break
        chosen.append(min(after, key=lambda p: (p[0], -p[2])))
    first, last = chosen[0], chosen[-1]
    start, end = spans[first[1]][0], spans[last[1] + last[2] - 1][1]
    run = text[start:end]
    exact = tuple(w.lower() for w in TOKEN.findall(run)) == wanted
    return Standing(label, " ".join(run.split()), exact)


def standings(phrase: str, source: str, texts: Mapping[str, str]) -> tuple[Standing, ...]:
    """The phrase in each reference of ``source`` ("A", "B", "AB") and in the response."""
    return tuple(stands(phrase, texts.get(label, ""), label)
                 for label in (*source, "response") if texts.get(label))


def said(found: Sequence[Standing]) -> str:
    """How the texts have the phrase, in one clause: "reference A has “...”, word for word in the
    response"; the texts that have it word for word named together."""
    exact = [LABELS.get(s.label, s.label) for s in found if s.run and s.exact]
    parts = [s.said() for s in found if not (s.run and s.exact)]
    if exact:
        parts.append("word for word in " + " and in ".join(exact))
    return ", ".join(parts)


def path(source: str, text: str = "response") -> str:
    """The way a reference's words reached ``text``: "reference A → constraint → response" (a summary
    is written from the response: "... → response → summary")."""
    refs = "references A and B" if len(source) > 1 else f"reference {source}" if source else "a reference"
    return f"{refs} → constraint → response" + (f" → {text}" if text != "response" else "")


def phrase_words(phrase: str) -> int:
    """The phrase's words as a reader counts them (pipeline.core.text.count_words: "Reserve's" is one)."""
    return count_words(phrase)


__all__ = ["GAP", "Standing", "path", "phrase_words", "said", "standings", "stands"]
