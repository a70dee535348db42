"""The suspicion ranking: every (constraint, response) ranked by evidence that the response
"satisfied" the constraint by pasting reference text rather than by doing what it asks.

The reasons (each can be switched off; an item with no enabled reason is not in the queue):

  similar   the constraint is close to a reference: its stored similarity (pipeline.analysis.similarity)
            to A or B reaches HIGH_SIMILARITY (an embedder's cosine) or HIGH_LEXICAL_SIMILARITY
            (lexical overlap), pipeline.core.definitions
  copied    constraint word n-grams (COPY_EVIDENCE_NGRAM words, not all stopwords) found in a
            reference AND in the response; ``copied_from`` says which reference(s). Computed once by
            pipeline.stages.copy_evidence into the store; Audit's list computes what is missing
  lost      satisfied in the response, lost in the summary: the item flipped
            (pipeline.store.scores.item_outcome_sql, the raters who judged both texts)
  split     the judges split (some Yes, some No) on the response or on the summary (Trust.split)
  unquoted  a Yes on the response whose quote is not in the response (Trust.unquoted); a Yes on the
            summary does not count: it keeps the constraint, the opposite of what is suspected
  uncertain a yes_no judge's latest verdict on the response, Yes or No, whose P(Yes) is within
            UNCERTAIN_LOG_ODDS of that judge's current threshold (pipeline.core.definitions.uncertain;
            the threshold its check chose, pipeline.store.judge_checks). On the response, like
            unquoted: the queue doubts whether the response satisfied the constraint at all, and
            that rests on the response's verdict, Yes or No alike; a doubtful summary verdict only
            makes "lost" doubtful, which the auditor reads beside it, and says nothing of pasting

Missing verdicts are never a No (Trust counts them apart). ``response_passed`` and ``summary_passed``
are the item outcome's (the raters who judged both texts); with no judged summary,
``response_passed`` is the response's own raters' mean (>= PASS_THRESHOLD).

The score is a weighted sum over the enabled reasons that fire:

  similar   2 x the highest similarity (so 1.0 to 2 at the default thresholds)
  copied    3, plus 0.5 per further copied phrase (at most 3 more), plus 1 when copied from both references
  lost      0.5
  unquoted  0.25
  split     0.15
  uncertain 0.05

Copying leads: the copy reasons (similar, copied) are the direct evidence of copy-paste, and the
secondary ones together (0.95) weigh less than the weakest copy reason alone (1.0: a lexical
similarity at its threshold), so every item with copy evidence ranks above every item without.
Among the secondary, a lost constraint alone is what the benchmark measures, not a suspicion;
judge doubt least, and of it one judge's near-threshold P(Yes) least of all: a Yes resting on text
not in the response, or two judges disagreeing outright, say more than a verdict that nearly went
the other way. ``reason_sentences`` says each reason in words (the one place that does). Ties go by
instruction, position, writer. ``suspicion_queue`` ranks in the store
(pipeline.store.suspicion.evidence_rows computes this same score in SQL from WEIGHTS and the COPY_*
numbers below, so only the kept rows reach Python; a test checks the two agree item for item);
``copy_evidence_missing`` on its result says whether the copy-evidence stage has not run everywhere
(screens then say "run `unspecific evaluate`" or "`unspecific build`"), and ``total`` how many items
scored before ``limit``.

The verdict reasons (lost, split, unquoted, uncertain) are ranked on per-item marks the store keeps
with its per-text totals (pipeline.store.scores text_item_marks), so ranking reads no verdicts; only
the kept rows' verdicts are read in full. A new calibration marks its judge's texts for rescoring,
so "uncertain" follows the threshold.

Cost (bench: tests/fakes/synthetic.py, 2,000 instructions x 39 constraints x 2 writers, 624,000
verdicts, 111,000 suspects of 156,000 items): the queue's top 1,000 in about 0.6 s of CPU (1.5 s when
the verdicts were pivoted per query), all 111,000 as Evidence in about 5 s (building the Python
objects: ask for a ``limit``); ``instruction_evidence`` about 15-25 ms.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from functools import lru_cache

from pipeline.analysis.copy_count import CopyCount, count_of, source_name
from pipeline.analysis.copying import STOPWORDS, WORD
from pipeline.analysis.similarity import LEXICAL, Similarity
from pipeline.analysis.trust import Trust
from pipeline.core.definitions import (
    COPY_EVIDENCE_NGRAM,
    DEFAULT_RATIO,
    HIGH_LEXICAL_SIMILARITY,
    HIGH_SIMILARITY,
    passes,
    uncertain,
)
from pipeline.core.errors import UnspecificError
from pipeline.store.database import Store
from pipeline.store.suspicion import (
    EvidenceRow,
    Ranking,
    TextCounts,
    YesProbability,
    constraint_flags,
    copy_evidence_missing_for,
    count_missing_copy_evidence,
    evidence_rows,
    response_and_reference_hashes,
    text_bodies,
)
from pipeline.store.view import StoreReader, Writer, store_of

REASONS: tuple[str, ...] = ("similar", "copied", "lost", "split", "unquoted", "uncertain")
# The one command that computes the stored evidence a store built before it lacks (similarity, copy
# evidence): named by every screen and report that finds it missing.
EVIDENCE_COMMAND = "unspecific evidence"
REASON_TEXT: dict[str, str] = {
    "similar": "constraint close to a reference (high similarity)",
    "copied": "constraint words copied from a reference into the response",
    "lost": "satisfied in the response, lost in the summary",
    "split": "judges split on the response or the summary",
    "unquoted": "a Yes on the response whose quote is missing",
    "uncertain": "a judge's P(Yes) on the response near its threshold",
}
COPY_REASONS: tuple[str, ...] = ("similar", "copied")  # the "copy only" view
SECONDARY_REASONS: tuple[str, ...] = ("lost", "split", "unquoted", "uncertain")
WEIGHTS: dict[str, float] = {"similar": 2.0, "copied": 3.0, "lost": 0.5, "unquoted": 0.25, "split": 0.15,
                             "uncertain": 0.05}
COPY_EXTRA = 0.5  # per further copied phrase
COPY_EXTRA_MAX = 3  # further phrases counted at most
COPY_BOTH = 1.0  # copied from both references


def similarity_threshold(method: str) -> float:
    """What "high" similarity is for a method: lexical overlap has its own scale."""
    return HIGH_LEXICAL_SIMILARITY if method == LEXICAL else HIGH_SIMILARITY


def parse_reasons(names: str | Iterable[str]) -> tuple[str, ...]:
    """Reasons from a comma-separated list (or names); a bad name is an error naming the valid ones."""
    items = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if n.strip()]
    bad = [n for n in items if n not in REASONS]
    if bad or not items:
        raise UnspecificError(f"unknown suspicion reason(s) {', '.join(map(repr, bad)) or '(none given)'}:"
                         f" choose from {', '.join(REASONS)}")
    return tuple(r for r in REASONS if r in items)


@dataclass(frozen=True)
class Evidence:
    constraint_id: int
    instruction_id: int
    position: int
    text: str  # the constraint
    writer: Writer
    ratio: float
    similarity: Similarity | None
    copied: tuple[str, ...]  # constraint phrases found in a reference AND the response
    copied_from: tuple[str, ...]  # "A", "B" or both
    response_passed: bool | None  # None: not judged
    summary_passed: bool | None
    response_trust: Trust | None
    summary_trust: Trust | None
    flags: tuple[str, ...]
    response_id: int | None = None
    summary_id: int | None = None
    copy_known: bool = True  # False: copy evidence was not computed for this pair
    # The constraint's phrases in the response and in no reference (the response repeats the
    # constraint's wording); read only where nothing was copied from a reference.
    echoed: tuple[str, ...] = ()
    # Each yes_no judge's latest P(Yes) on the response, with the threshold it is read at now.
    p_yes: tuple[YesProbability, ...] = ()

    @property
    def unsure(self) -> tuple[YesProbability, ...]:
        """The response's P(Yes) verdicts near their judge's threshold (the "uncertain" reason)."""
        return tuple(p for p in self.p_yes if uncertain(p.p_yes, p.threshold))

    @property
    def copy_count(self) -> CopyCount:
        """pipeline.analysis.copy_count's count for the constraint on the response."""
        return count_of(self.copied, "".join(self.copied_from), self.echoed)

    @property
    def lost(self) -> bool:
        return self.response_passed is True and self.summary_passed is False

    def reasons(self) -> tuple[str, ...]:
        """The reasons that fire, in REASONS order."""
        response, summary, similarity = self.response_trust, self.summary_trust, self.similarity
        fired = {
            "similar": similarity is not None and similarity.highest >= similarity_threshold(similarity.method),
            "copied": bool(self.copied),
            "lost": self.lost,
            "split": any(t is not None and t.split for t in (response, summary)),
            "unquoted": response is not None and response.unquoted > 0,
            "uncertain": bool(self.unsure),
        }
        return tuple(r for r in REASONS if fired[r])

    def score(self, enabled: Sequence[str] = REASONS) -> float:
        """The weighted sum of the enabled reasons that fire (module docstring)."""
        return _score(self.reasons(), enabled, self.similarity, self.copied, self.copied_from)


def _score(reasons: Sequence[str], enabled: Sequence[str], similarity: Similarity | None, copied: Sequence[str],
           copied_from: Sequence[str]) -> float:
    total = 0.0
    for reason in reasons:
        if reason not in enabled:
            continue
        if reason == "similar" and similarity is not None:
            total += WEIGHTS["similar"] * similarity.highest
        elif reason == "copied":
            total += (WEIGHTS["copied"] + COPY_EXTRA * min(len(copied) - 1, COPY_EXTRA_MAX)
                      + (COPY_BOTH if len(copied_from) > 1 else 0.0))
        else:
            total += WEIGHTS[reason]
    return round(total, 6)


def reason_sentences(e: Evidence, enabled: Sequence[str] = REASONS) -> list[str]:
    """Each enabled reason that fires, in words, in REASONS order: what the app, `report`,
    `export --suspicious` and the HTML report say (the one function that makes the sentences)."""
    out: list[str] = []
    for reason in e.reasons():
        if reason not in enabled:
            continue
        if reason == "similar" and e.similarity is not None:
            out.append(_similar_sentence(e.similarity))
        elif reason == "copied":
            out.append(e.copy_count.sentence())
        elif reason == "lost":
            out.append(f"satisfied in the response, lost in its {e.ratio:g} summary")
        elif reason == "split":
            out.append("judges split on " + " and ".join(
                f"the {name} ({t.yes} Yes, {t.no} No)" for name, t in (("response", e.response_trust),
                                                                        ("summary", e.summary_trust))
                if t is not None and t.split))
        elif reason == "unquoted" and e.response_trust is not None:
            n = e.response_trust.unquoted
            out.append(f"{n} Yes on the response {'quotes' if n == 1 else 'quote'} text not in the response")
        elif reason == "uncertain":
            out.append(_uncertain_sentence(e))
    return out


def _uncertain_sentence(e: Evidence) -> str:
    """"the judge was unsure: P(Yes) 0.52 against its threshold 0.54"; the judge named when several
    gave a P(Yes) on the response."""
    def said(p: YesProbability) -> str:
        digits = 2 if f"{p.p_yes:.2f}" != f"{p.threshold:.2f}" else 3  # never "0.54 against 0.54"
        return f"P(Yes) {p.p_yes:.{digits}f} against its threshold {p.threshold:.{digits}f}"

    if len(e.p_yes) == 1:
        return f"the judge was unsure: {said(e.unsure[0])}"
    return "; ".join(f"judge {p.judge} was unsure: {said(p)}" for p in e.unsure)


def _similar_sentence(sim: Similarity) -> str:
    which = "A" if sim.to_b is None or sim.to_a >= sim.to_b else "B"
    method = " (lexical overlap)" if sim.method == LEXICAL else ""
    return f"constraint {sim.highest:.2f} similar to {source_name(which)}{method}"


class Queue(list[Evidence]):
    """The ranked evidence, with whether copy evidence is missing for some of the selection."""

    copy_evidence_missing: bool = False
    total: int = 0  # items with a score > 0 before ``limit``


# -- copy evidence ----------------------------------------------------------------------------------


def word_ngrams(text: str, n: int = COPY_EVIDENCE_NGRAM) -> set[tuple[str, ...]]:
    """The text's lower-cased word n-grams (words as pipeline.analysis.copying counts them)."""
    words = [w.lower() for w in WORD.findall(text)]
    return set(zip(*(words[k:] for k in range(n))))


def copied_phrases(constraint: str, references: dict[str, str], response: str, n: int = COPY_EVIDENCE_NGRAM,
                   *, response_grams: Set[tuple[str, ...]] | None = None,
                   reference_grams: Mapping[str, Set[tuple[str, ...]]] | None = None) -> tuple[tuple[str, ...], str]:
    """The constraint's phrases (runs of its word n-grams, not all stopwords) found both in a reference
    and in the response, as written in the constraint, and which references ("A", "B", "AB" or "").
    Pass precomputed n-gram sets to compare many constraints with the same texts."""
    spans = [m.span() for m in WORD.finditer(constraint)]
    words = [constraint[a:b].lower() for a, b in spans]
    in_response = response_grams if response_grams is not None else word_ngrams(response, n)
    refs = reference_grams if reference_grams is not None else {k: word_ngrams(v, n) for k, v in references.items() if v}
    hit = [False] * len(words)
    sources: set[str] = set()
    for i in range(len(words) - n + 1):
        gram = tuple(words[i:i + n])
        if gram not in in_response or all(w in STOPWORDS for w in gram):
            continue
        found = [label for label, grams in refs.items() if gram in grams]
        if found:
            sources.update(found)
            for k in range(i, i + n):
                hit[k] = True
    phrases: list[str] = []
    i = 0
    while i < len(words):
        if not hit[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(words) and hit[j + 1]:
            j += 1
        phrases.append(constraint[spans[i][0]:spans[j][1]])
        i = j + 1
    return tuple(phrases), "".join(sorted(sources))


class PhraseFinder:
    """copied_phrases over stored texts (by hash), each text's n-grams computed once: a response and
    its references are compared with every one of its 39 constraints. ``bodies`` maps hashes to
    texts; callers add the bodies they read."""

    def __init__(self, n: int = COPY_EVIDENCE_NGRAM, *, max_texts: int = 20000) -> None:
        self.n = n
        self.bodies: dict[str, str] = {}
        self._grams: dict[str, set[tuple[str, ...]]] = {}
        self._max = max_texts

    def _of(self, text_hash: str | None) -> set[tuple[str, ...]]:
        if not text_hash:
            return set()
        found = self._grams.get(text_hash)
        if found is None:
            if len(self._grams) >= self._max:
                self._grams.clear()  # bound memory on a large store; references recur within a chunk
            found = self._grams[text_hash] = word_ngrams(self.bodies.get(text_hash, ""), self.n)
        return found

    def find(self, constraint: str, response_hash: str | None, reference_a_hash: str | None,
             reference_b_hash: str | None) -> tuple[tuple[str, ...], str]:
        refs = {"A": self._of(reference_a_hash), "B": self._of(reference_b_hash)}
        return copied_phrases(constraint, {}, "", self.n, response_grams=self._of(response_hash),
                              reference_grams={k: v for k, v in refs.items() if v})

    def echoed(self, constraint: str, response_hash: str | None) -> tuple[str, ...]:
        """The constraint's phrases found in the response (the response as its own "reference")."""
        grams = self._of(response_hash)
        return copied_phrases(constraint, {}, "", self.n, response_grams=grams, reference_grams={"C": grams})[0]


# -- building Evidence ------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _trust(counts: TextCounts | None) -> Trust | None:
    """Cached: a queue holds tens of thousands of items and few distinct counts (Trust is frozen)."""
    return Trust(*counts) if counts is not None else None


@lru_cache(maxsize=1024)
def _writer(model: str, mode: str) -> Writer:
    return Writer(model, mode)


def _passed(score: float | None, counts: TextCounts | None) -> bool | None:
    """The item outcome's verdict on the response; with no rater on both texts, the response's own."""
    if score is not None:
        return passes(score)
    judged = counts.yes + counts.no if counts is not None else 0
    return passes(counts.yes / judged) if counts is not None and judged else None


def _summary_passed(row: EvidenceRow) -> bool | None:
    # None when no rater judged both texts: "lost" is the item outcome's, never the two texts'
    # verdicts by different raters.
    return passes(row.summary_score) if row.summary_score is not None else None


def _similarity(row: EvidenceRow) -> Similarity | None:
    if row.similarity is None:
        return None
    method, to_a, to_b = row.similarity
    return Similarity(row.constraint_id, method, to_a, to_b)


def _evidence(row: EvidenceRow, ratio: float, flags: dict[int, tuple[str, ...]],
              echoed: dict[tuple[int | None, int], tuple[str, ...]]) -> Evidence:
    return Evidence(
        constraint_id=row.constraint_id, instruction_id=row.instruction_id, position=row.position, text=row.text,
        writer=_writer(row.model, row.mode), ratio=ratio, similarity=_similarity(row), copied=row.copied or (),
        copied_from=tuple(row.copied_from), response_passed=_passed(row.full_score, row.response),
        summary_passed=_summary_passed(row), response_trust=_trust(row.response), summary_trust=_trust(row.summary),
        flags=flags.get(row.constraint_id, ()), response_id=row.response_id, summary_id=row.summary_id,
        copy_known=row.copied is not None, echoed=echoed.get((row.response_id, row.constraint_id), ()),
        p_yes=row.p_yes)


def instruction_evidence(reader: StoreReader, instruction_id: int, writer: Writer, ratio: float) -> dict[int, Evidence]:
    """Evidence for every active constraint of one instruction on one writer's response (Audit's list);
    copy evidence the stage has not stored is computed here. {} when the writer has no response."""
    store = store_of(reader)
    rows, _ = evidence_rows(store, ratio=ratio, instruction_id=instruction_id, writer=(writer.model, writer.mode))
    flags = constraint_flags(store, [r.constraint_id for r in rows])
    rows, echoed = _fill_copy_evidence(store, rows)
    return {row.constraint_id: _evidence(row, ratio, flags, echoed) for row in rows}


def _fill_copy_evidence(store: Store, rows: list[EvidenceRow]
                        ) -> tuple[list[EvidenceRow], dict[tuple[int | None, int], tuple[str, ...]]]:
    """The rows with the copy evidence the stage has not stored computed, and the echoed phrases of
    the rows copying from no reference (not stored: a cheap pass over the rows' responses, whose
    n-grams are computed once each)."""
    need = [r for r in rows if not r.copied and r.response_id is not None]
    if not need:
        return rows, {}
    hashes = response_and_reference_hashes(store, sorted({r.response_id for r in need if r.response_id}))
    finder = PhraseFinder()
    wanted = {h for r in need if r.response_id in hashes
              for h in (hashes[r.response_id] if r.copied is None else hashes[r.response_id][:1]) if h}
    finder.bodies = text_bodies(store, sorted(wanted))
    out = []
    echoed: dict[tuple[int | None, int], tuple[str, ...]] = {}
    for row in rows:
        if not row.copied and row.response_id in hashes:
            triple = hashes[row.response_id]
            if row.copied is None:
                copied, sources = finder.find(row.text, *triple)
                row = row._replace(copied=copied, copied_from=sources)
            if not row.copied:
                found = finder.echoed(row.text, triple[0])
                if found:
                    echoed[(row.response_id, row.constraint_id)] = found
        out.append(row)
    return out, echoed


def suspicion_queue(reader: StoreReader, *, ratio: float | None = None, enabled: Sequence[str] = REASONS,
                    run_id: str | None = None, limit: int | None = None) -> Queue:
    """Every (constraint, response) with an enabled reason, highest score first (score > 0 only).
    ``.copy_evidence_missing`` on the result: the copy-evidence stage has not covered the selection."""
    store = store_of(reader)
    ratio = DEFAULT_RATIO if ratio is None else ratio
    enabled = tuple(r for r in REASONS if r in enabled)
    ranking = Ranking(weights={r: WEIGHTS[r] for r in enabled}, high=HIGH_SIMILARITY, lexical=HIGH_LEXICAL_SIMILARITY,
                      copy_extra=COPY_EXTRA, copy_extra_max=COPY_EXTRA_MAX, copy_both=COPY_BOTH, limit=limit)
    rows, total = evidence_rows(store, ratio=ratio, run_id=run_id, ranking=ranking)
    # Few rows: their flags by id; many: every flag at once.
    flags = constraint_flags(store, [r.constraint_id for r in rows]) if len(rows) <= 2000 else constraint_flags(store)
    _, echoed = _fill_copy_evidence(store, [r for r in rows if r.copied is not None])
    queue = Queue(_evidence(row, ratio, flags, echoed) for row in rows)
    queue.total = total
    queue.copy_evidence_missing = _copy_missing(store, run_id)
    return queue


def _copy_missing(store: Store, run_id: str | None) -> bool:
    return count_missing_copy_evidence(store, run_id=run_id) > 0


__all__ = ["COPY_REASONS", "REASONS", "REASON_TEXT", "Evidence", "Queue", "copied_phrases", "copy_evidence_missing_for",
           "instruction_evidence", "parse_reasons", "reason_sentences", "suspicion_queue"]
