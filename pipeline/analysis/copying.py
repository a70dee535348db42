"""Copied text between two texts: shared word n-grams as character spans, and lexical overlap.

Used by the report (how much of a response was pasted from its references), by the app
(highlighting copied spans side by side) and by the synthesis quality flags (a constraint
that quotes its reference).

Words are ``\\w+`` runs compared case-insensitively; punctuation and spacing between words
are ignored, so "the mayor, who" matches "The mayor who". A *copied span* is a maximal run
of words of ``a`` that also occurs, word for word, in ``b`` and is at least ``n`` words long.
Spans are returned as character offsets into both texts (``a[a_start:a_end]`` is the copied
passage as written in ``a``), do not overlap in ``a``, and are ordered by ``a_start``.

API:
  copied_ngrams(a, b, n=5) -> list[Span]          spans copied from b into a
  shared_ngram_count(a, b, n=5) -> int             distinct word n-grams in both
  copy_stats(a, b, n=5) -> CopyStats               counts, share of a's words in copied spans
  longest_common_substring(a, b) -> Span | None    longest run of words shared
  lexical_overlap(a, b) -> float                   share of a's content words found in b
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence, Set
from dataclasses import dataclass
from functools import lru_cache

WORD = re.compile(r"\w+", re.UNICODE)

# Function words left out of lexical overlap: sharing "the" says nothing about copying.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves one also may must might shall""".split()
)


@dataclass(frozen=True)
class Token:
    word: str  # lower-cased
    start: int
    end: int


@dataclass(frozen=True)
class Span:
    """A passage of ``a`` found word for word in ``b``: character offsets into both texts."""

    a_start: int
    a_end: int
    b_start: int
    b_end: int
    words: int

    def in_a(self, a: str) -> str:
        return a[self.a_start : self.a_end]

    def in_b(self, b: str) -> str:
        return b[self.b_start : self.b_end]


@dataclass(frozen=True)
class CopyStats:
    shared_ngrams: int  # distinct word n-grams present in both texts
    copied_words: int  # words of a inside copied spans
    words: int  # words of a
    longest: int  # longest copied span, in words (0 if none)
    spans: tuple[Span, ...]

    @property
    def share(self) -> float:
        """Share of a's words that sit inside copied spans."""
        return self.copied_words / self.words if self.words else 0.0


def tokenize(text: str) -> list[Token]:
    words, starts, ends = _tokens(text)
    return [Token(w, s, e) for w, s, e in zip(words, starts, ends)]


# The caches below hold tuples, not lists: the garbage collector stops tracking a tuple of strings
# or ints (and a dict of such tuples) once it has seen it, while a cached list of a text's words or
# offsets would be walked again by every full collection. In the app these caches fill as the
# auditor moves, and a full collection walking them paused a move by 100-200 ms.


@lru_cache(maxsize=2048)
def _words(text: str) -> tuple[str, ...]:
    """The lower-cased words alone: findall runs in C, many times faster than _tokens, and
    comparing texts needs offsets only where they share an n-gram."""
    return tuple(w.lower() for w in WORD.findall(text))


@lru_cache(maxsize=2048)
def _tokens(text: str) -> tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]]:
    """(lower-cased words, start offsets, end offsets); cached: a reference is compared with
    every response written for it."""
    words, starts, ends = [], [], []
    for m in WORD.finditer(text):
        words.append(m.group(0).lower())
        start, end = m.span()
        starts.append(start)
        ends.append(end)
    return tuple(words), tuple(starts), tuple(ends)


def _ngrams(words: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return list(zip(*(words[k:] for k in range(n)))) if n > 0 else []


@lru_cache(maxsize=512)
def _gram_index(text: str,
                n: int) -> tuple[tuple[tuple[str, ...], ...], dict[tuple[str, ...], tuple[int, ...]]]:
    """The text's word n-grams in order and where each occurs (its keys intersect another's in
    C: most response/reference pairs share no n-gram); cached like _tokens."""
    grams = tuple(_ngrams(_words(text), n))
    where: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for j, gram in enumerate(grams):
        where[gram].append(j)
    return grams, {gram: tuple(at) for gram, at in where.items()}


def shared_ngram_count(a: str, b: str, n: int = 5) -> int:
    return len(_shared(a, b, n))


def _shared(a: str, b: str, n: int) -> Set[tuple[str, ...]]:
    """The distinct word n-grams of a that b has too."""
    return _gram_index(a, n)[1].keys() & _gram_index(b, n)[1].keys() if n >= 1 else set()


def _spans(a: str, b: str, n: int, shared: Set[tuple[str, ...]] | None = None) -> list[Span]:
    shared = _shared(a, b, n) if shared is None else shared
    if not shared:
        return []
    wa, a_starts, a_ends = _tokens(a)
    wb, b_starts, b_ends = _tokens(b)
    grams, where_a = _gram_index(a, n)
    where = _gram_index(b, n)[1]
    la, lb = len(wa), len(wb)
    spans: list[Span] = []
    covered = 0  # a's words before this index already belong to a span
    # Diagonal (j - i) -> where in a the run of matching words through it ends. A match inside a
    # known run ends where that run ends, so each run is walked once (no O(n^2) on repeats).
    run_end: dict[int, int] = {}
    # Only the positions of a whose n-gram b has: the rest would be skipped anyway.
    for i in sorted(i for gram in shared for i in where_a[gram]):
        starts = where[grams[i]]
        # The longest match starting here, over every place b has this n-gram.
        best_len, best_j = 0, 0
        for j in starts:
            end = run_end.get(j - i, -1)
            if end <= i:
                k = n
                while i + k < la and j + k < lb and wa[i + k] == wb[j + k]:
                    k += 1
                end = run_end[j - i] = i + k
            if end - i > best_len:
                best_len, best_j = end - i, j
        end = i + best_len
        if end <= covered:
            continue  # inside a span already found
        # Clip the part already covered, keeping a and b aligned, so spans never overlap in a.
        skip = max(0, covered - i)
        ai, bj = i + skip, best_j + skip
        spans.append(Span(a_starts[ai], a_ends[end - 1], b_starts[bj],
                          b_ends[best_j + best_len - 1], end - ai))
        covered = end
    return spans


def copied_ngrams(a: str, b: str, n: int = 5) -> list[Span]:
    """Maximal passages of ``a`` (>= n words) that occur word for word in ``b``."""
    return _spans(a, b, n)


def copy_stats(a: str, b: str, n: int = 5) -> CopyStats:
    shared = _shared(a, b, n)
    spans = _spans(a, b, n, shared)
    return CopyStats(
        shared_ngrams=len(shared),
        copied_words=sum(s.words for s in spans),
        words=len(_words(a)),
        longest=max((s.words for s in spans), default=0),
        spans=tuple(spans),
    )


def longest_common_substring(a: str, b: str) -> Span | None:
    """The longest run of words shared by ``a`` and ``b`` (None if no word is shared).

    Binary search on the length: a shared run of length L implies one of every length < L.
    """
    wa, a_starts, a_ends = _tokens(a)
    wb, b_starts, b_ends = _tokens(b)

    def find(length: int) -> tuple[int, int] | None:
        seen: dict[tuple[str, ...], int] = {}
        for j, gram in enumerate(_ngrams(wb, length)):
            seen.setdefault(gram, j)
        for i, gram in enumerate(_ngrams(wa, length)):
            if gram in seen:
                return i, seen[gram]
        return None

    lo, hi, found = 1, min(len(wa), len(wb)), None
    while lo <= hi:
        mid = (lo + hi) // 2
        hit = find(mid)
        if hit:
            found, lo = (mid, *hit), mid + 1
        else:
            hi = mid - 1
    if found is None:
        return None
    length, i, j = found
    return Span(a_starts[i], a_ends[i + length - 1], b_starts[j], b_ends[j + length - 1], length)


@lru_cache(maxsize=2048)
def content_words(text: str) -> frozenset[str]:
    """Cached like _words: a reference or response is compared with each of its 39 constraints."""
    return frozenset(w for w in _words(text) if w not in STOPWORDS)


def lexical_overlap(a: str, b: str) -> float:
    """Share of ``a``'s distinct content words (stopwords left out) that also occur in ``b``.

    Asymmetric on purpose: for a constraint ``a`` and its reference ``b`` it reads "how much
    of the constraint's vocabulary comes from the reference". 0.0 when ``a`` has no content word.
    """
    wa = content_words(a)
    if not wa:
        return 0.0
    return len(wa & content_words(b)) / len(wa)
