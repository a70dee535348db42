"""How specific a copied phrase is: copy-paste, or the topic the writer was asked to write about.

A constraint phrase found in a reference and in the response (pipeline.analysis.suspicion.copied_phrases)
is evidence of pasting only when it belongs to that reference: "probe by the US Securities Exchange
Commission" is; "the US trade deficit", the instruction's own subject, repeated by 16 of its
constraints and held by both references, is not. Each phrase gets its facts (which references hold
it, the share of its words outside the main task, how many of the domain's articles hold it, whether
it names or counts something, how long it runs) and from them its specificity, the formula of
pipeline.core.definitions.specificity. The copy-evidence stage stores the facts per (response,
constraint); the ranking (Python and SQL), the app, `report`, the export and the HTML read them.

    facts = PhraseFacts.of(phrase, words, "A", context)
    facts.specificity, facts.sentence()
    # 0.93, '8 words of reference A only, in 1 of 60 store articles, a name'
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache

from pipeline.analysis.copying import STOPWORDS, WORD
from pipeline.core.definitions import SPECIFIC_ENOUGH, TEMPLATE_MIN, TEMPLATE_SHARE, specificity
from pipeline.core.text import count_words

# A capitalised word after a sentence's end is no sign of a name: only mid-sentence ones count.
_SENTENCE_START = re.compile(r"(?:^|[.!?]['\"\u201d\u2019)\]]*\s+|\n\s*)$")
_DIGIT = re.compile(r"\d")
# An acronym as a text writes it: a capital and more capitals or digits (G7, SEC, US, BBC). A name,
# though its digit reads as a number and its lower case may be a function word ("us").
_ACRONYM = re.compile(r"[A-Z][A-Z0-9]+")
# Which articles a phrase's document frequency counts, said in every rarity ("in 1 of 60 store
# articles", "in 4 of 2,224 BBC News articles"): the store's articles of the domain, or the background.
STORE_ARTICLES = "store articles"
# A phrase with no more than this share of its content words outside the main task is the task's.
TOPIC_SHARE = 0.5


@lru_cache(maxsize=256)
def template_words(constraints: tuple[str, ...]) -> frozenset[str]:
    """The words (lower-cased) in more than TEMPLATE_SHARE of an instruction's constraints: the list's
    template ("the text should discuss"), never copied. Empty for lists under TEMPLATE_MIN."""
    if len(constraints) < TEMPLATE_MIN:
        return frozenset()
    seen: dict[str, int] = {}
    for text in constraints:
        for word in {w.lower() for w in WORD.findall(text)}:
            seen[word] = seen.get(word, 0) + 1
    return frozenset(w for w, n in seen.items() if n > TEMPLATE_SHARE * len(constraints))


def shared_prefix(constraints: Sequence[str]) -> str:
    """The words most of an instruction's constraints open with ("The text should"), as the first of
    them writes them: the longest word prefix shared by more than TEMPLATE_SHARE of them ("" for lists
    under TEMPLATE_MIN). A list shows what follows it, where the constraints differ."""
    if len(constraints) < TEMPLATE_MIN:
        return ""
    openings = [tuple(w.lower() for w in WORD.findall(c)) for c in constraints]
    best: tuple[str, ...] = ()
    for n in range(1, 12):
        counts: dict[tuple[str, ...], int] = {}
        for words in openings:
            if len(words) > n:  # a prefix leaves words after it
                counts[words[:n]] = counts.get(words[:n], 0) + 1
        top = max(counts.items(), key=lambda kv: kv[1], default=((), 0))
        if top[1] <= TEMPLATE_SHARE * len(constraints):
            break
        best = top[0]
    return " ".join(best)


def after_prefix(text: str, prefix: str) -> str:
    """``text`` without ``prefix`` (shared_prefix's words, matched case-blind) and the spaces after it,
    marked with a leading '…'; ``text`` itself when it does not open with the prefix."""
    if not prefix:
        return text
    words = prefix.split()
    found = list(WORD.finditer(text))
    if len(found) <= len(words) or any(m.group(0).lower() != w for m, w in zip(found, words)):
        return text
    return "…" + text[found[len(words) - 1].end():].lstrip(" ,:;")


@lru_cache(maxsize=256)
def proper_words(text: str) -> frozenset[str]:
    """The text's names, lower-cased: words it writes capitalised mid-sentence (acronyms included),
    and capitalised in most of their uses (so "Tuesday" is one and "Market" at a headline is not)."""
    caps: dict[str, int] = {}
    uses: dict[str, int] = {}
    mid: set[str] = set()
    for m in WORD.finditer(text):
        word = m.group(0)
        low = word.lower()
        uses[low] = uses.get(low, 0) + 1
        if word[0].isupper():
            caps[low] = caps.get(low, 0) + 1
            if not _SENTENCE_START.search(text[max(0, m.start() - 6):m.start()]):
                mid.add(low)
    return frozenset(w for w in mid if w not in STOPWORDS and caps[w] * 2 > uses[w] and not w.isdigit())


@lru_cache(maxsize=256)
def acronyms(text: str) -> frozenset[str]:
    """The acronyms the text writes (G7, SEC, US), as written."""
    return frozenset(w for w in WORD.findall(text) if _ACRONYM.fullmatch(w))


def named_acronyms(phrase: str, references: Iterable[str]) -> frozenset[str]:
    """The words the phrase writes as acronyms that a reference writes so too: names ("the G7
    meeting" names the G7; it counts nothing)."""
    written = {w for w in WORD.findall(phrase) if _ACRONYM.fullmatch(w)}
    if not written:
        return frozenset()
    return frozenset(written & set().union(*(acronyms(r) for r in references)))


class CorpusFrequency:
    """Document frequency of word runs over a domain's articles: how many hold the run, word for word.
    ``name`` says which articles in a reason ("in 22 of 2,224 BBC News articles", "in 1 of 60 store
    articles")."""

    def __init__(self, bodies: Iterable[str], name: str = STORE_ARTICLES) -> None:
        self.name = name
        self._joined: list[str] = []
        self._postings: dict[str, list[int]] = {}
        for i, body in enumerate(bodies):
            words = [w.lower() for w in WORD.findall(body)]
            self._joined.append(" " + " ".join(words) + " ")
            for word in set(words):
                self._postings.setdefault(word, []).append(i)
        self._memo: dict[tuple[str, ...], int] = {}

    @property
    def articles(self) -> int:
        return len(self._joined)

    def df(self, words: Sequence[str]) -> int:
        """Articles holding these (lower-cased) words in a row."""
        key = tuple(words)
        found = self._memo.get(key)
        if found is None:
            lists = [self._postings.get(w, []) for w in key]
            rarest = min(lists, key=len) if lists else []
            needle = " " + " ".join(key) + " "
            found = self._memo[key] = sum(1 for i in rarest if needle in self._joined[i])
        return found


NO_CORPUS = CorpusFrequency(())


def _rarity(corpus: CorpusFrequency, words: tuple[str, ...]) -> tuple[float, int | None]:
    """log(N / df) / log(N) over ``corpus`` (1 with no articles to count in), and the df."""
    n = corpus.articles
    if not n:
        return 1.0, None
    # At least the reference itself: a run stitched from 3-grams its reference holds apart is in
    # no article word for word, and is no rarer for that.
    df = max(1, corpus.df(words))
    return (math.log(n / df) / math.log(n) if n > 1 else 1.0), df


@dataclass(frozen=True)
class PhraseContext:
    """What a phrase of one instruction is judged against: its main task, the references' texts
    by label, the template words of its constraint list, and the domain's articles."""

    main_task: str
    references: dict[str, str]
    template: frozenset[str] = frozenset()
    corpus: CorpusFrequency = field(default=NO_CORPUS, repr=False, compare=False)
    # The bundled BBC News articles, where the domain has too few in the store (BACKGROUND_ARTICLES).
    background: CorpusFrequency | None = field(default=None, repr=False, compare=False)

    @property
    def task_words(self) -> frozenset[str]:
        return _content(self.main_task)


def _is_content(word: str) -> bool:
    """Not a function word, nor a letter alone (the "s" of "Reserve's")."""
    return len(word) > 1 and word not in STOPWORDS


@lru_cache(maxsize=1024)
def _content(text: str) -> frozenset[str]:
    return frozenset(w for w in (w.lower() for w in WORD.findall(text)) if _is_content(w))


@dataclass(frozen=True)
class PhraseFacts:
    """One copied phrase and why it is (or is not) specific."""

    text: str  # as the constraint writes it
    words: int
    source: str  # the references holding it: "A", "B" or "AB"
    outside_task: float  # share of its content words absent from the main task
    df: int | None  # articles of the domain holding it; None: the store holds none to count in
    articles: int  # the domain's articles counted in
    entity: bool  # a name (capitalised mid-sentence in its reference, or an acronym: G7, SEC, US)
    number: bool  # a word with a digit that is not an acronym ("12 firms", not "the G7 meeting")
    specificity: float
    counted_in: str = STORE_ARTICLES  # which articles df counts: the store's of the domain, or BBC News

    @classmethod
    def of(cls, phrase: str, source: str, context: PhraseContext) -> PhraseFacts:
        written = WORD.findall(phrase)
        words = tuple(w.lower() for w in written)
        content = [w for w in words if _is_content(w) and w not in context.template]
        task = context.task_words
        outside = sum(1 for w in content if w not in task) / len(content) if content else 0.0
        corpus = context.corpus
        rarity, df = _rarity(corpus, words)
        if context.background is not None:  # a small store: the phrase as common as either says
            in_background, background_df = _rarity(context.background, words)
            if in_background < rarity or df is None:
                corpus, rarity, df = context.background, in_background, background_df
        held = [context.references[k] for k in source if k in context.references]
        names = set().union(*(proper_words(text) for text in held))
        named = named_acronyms(phrase, held)
        entity = bool(named) or any(w in names for w in content)
        number = any(_DIGIT.search(w) for w in written if w not in named)
        value = specificity(rarity, outside, len(source) > 1, entity, number, len(words))
        return cls(phrase, len(words), source, round(outside, 4), df, corpus.articles, entity, number,
                   value, corpus.name)

    @property
    def shared(self) -> bool:
        return len(self.source) > 1

    @property
    def specific(self) -> bool:
        return self.specificity >= SPECIFIC_ENOUGH

    @property
    def mostly_task(self) -> bool:
        """At most TOPIC_SHARE of its content words are outside the main task."""
        return self.outside_task <= TOPIC_SHARE

    @property
    def topic(self) -> bool:
        """Words of the main task, or of both references: the subject, not a paste."""
        return self.mostly_task or self.shared

    def sentence(self) -> str:
        """Why, in words: '8 words of reference A only, in 1 of 2,224 BBC News articles, a name'; the
        rarity always names the articles it counts (a store's stored before they were named: "store
        articles")."""
        where = "both references (the shared topic)" if self.shared else f"reference {self.source} only"
        parts = [f"{count_words(self.text)} words of {where}"]  # as a reader counts (``words``: tokens)
        if self.df is not None:
            counted_in = STORE_ARTICLES if self.counted_in == "articles" else self.counted_in
            parts.append(f"in {self.df:,} of {self.articles:,} {counted_in}")
        if self.mostly_task:
            parts.append("mostly the main task's words" if self.outside_task else "the main task's words")
        if self.entity:
            parts.append("a name")
        if self.number:
            parts.append("a number")
        return ", ".join(parts)

    def as_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, object]) -> PhraseFacts:
        return cls(**data)  # type: ignore[arg-type]


def dump_facts(facts: Sequence[PhraseFacts]) -> str:
    return json.dumps([f.as_json() for f in facts], ensure_ascii=False)


def load_facts(text: str | None) -> tuple[PhraseFacts, ...]:
    if not text:
        return ()
    return tuple(PhraseFacts.from_json(d) for d in json.loads(text))


def lead(facts: Sequence[PhraseFacts]) -> PhraseFacts | None:
    """The phrase an item is about: its most specific (the longest on a tie)."""
    return max(facts, key=lambda f: (f.specificity, f.words), default=None)


def phrase_key(phrase: str) -> str:
    """A phrase compared across constraints: its lower-cased words."""
    return " ".join(w.lower() for w in WORD.findall(phrase))


__all__ = ["STORE_ARTICLES", "CorpusFrequency", "PhraseContext", "PhraseFacts", "after_prefix",
           "dump_facts", "lead",
           "load_facts", "named_acronyms", "phrase_key", "proper_words", "shared_prefix", "template_words"]
