"""The suspicion ranking: every (constraint, response) ranked by evidence that the response
"satisfied" the constraint by pasting reference text rather than by doing what it asks.

The reasons (each can be switched off; an item with no enabled reason is not in the queue):

  similar   the constraint is close to a reference: its stored similarity (pipeline.analysis.similarity)
            to A or B reaches HIGH_SIMILARITY (an embedder's cosine) or HIGH_LEXICAL_SIMILARITY
            (lexical overlap), pipeline.core.definitions
  copied    constraint word n-grams (COPY_EVIDENCE_NGRAM words, not all stopwords or template words)
            found in a reference AND in the response; ``copied_from`` says which reference(s), ``facts``
            why each phrase is or is not specific (pipeline.analysis.specificity: the main task's words
            and both references' are the topic; a phrase in few of the domain's articles, a name, a
            number, a long run are a paste). Computed once by pipeline.stages.copy_evidence into the
            store; Audit's list computes what is missing
  echo      the response repeats some of the constraint's own words, in no reference (its template's
            never count), and the constraint's echo (the research code's copy-paste score: its highest
            cosine with a sentence of the response, pipeline.stages.echo) reaches ECHO_HIGH; with no
            echo computed, the words alone (pipeline.core.definitions.echo_counts)
  lost      satisfied in the response, lost in the summary: the item's outcome is FLIPPED
            (pipeline.core.definitions.item_outcome, the raters who judged both texts)
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

The score is a weighted sum over the enabled reasons that fire, by the one table of weights,
pipeline.core.definitions.SUSPICION_WEIGHTS (suspicion_score there): today

  similar   2 x the highest similarity (so 1.0 to 2 at the default thresholds)
  copied    1 + 4 x the item's specificity (1 for the topic's words, up to 5 for a long, rare, named paste)
  echo      1 + the echo (1.75 to 2 from ECHO_HIGH; 1 on the words alone, with no echo computed)
  lost      0.5
  split     0.15
  unquoted  0.25
  uncertain 0.05

Copying leads: the copy reasons (similar, copied, echo) are the direct evidence of copy-paste, and the
secondary ones together (0.95) weigh less than the weakest copy reason alone (1.0: a lexical
similarity at its threshold), so every item with copy evidence ranks above every item without.
Among the secondary, a lost constraint alone is what the benchmark measures, not a suspicion;
judge doubt least, and of it one judge's near-threshold P(Yes) least of all: a Yes resting on text
not in the response, or two judges disagreeing outright, say more than a verdict that nearly went
the other way. ``reason_sentences`` says each reason in words (the one place that does). Ties go by
instruction, position, writer. ``suspicion_queue`` ranks in the store
(pipeline.store.suspicion.evidence_rows computes this same score in SQL, its expression built from
SUSPICION_WEIGHTS and ECHO_RULE, so only the kept rows reach Python; a test checks the two agree
item for item, and that a changed weight moves the queue, the export and the HTML report alike);
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

Diversity at the head: one phrase copied by many constraints of one instruction (its subject, as a
rule) leads once; ``group_by_phrase`` files the later items of the same (instruction, writer, lead
phrase) under the first (``Evidence.same_phrase``) when that phrase is all they copied, which the
app, `report` and the HTML show as "and 15 more constraints on “the US trade deficit” alone". An
item that copied another phrase as well is its own row: a group never hides a different paste.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

from pipeline.analysis.copy_count import CopyCount, count_of, source_name
from pipeline.analysis.copy_evidence import CopyFinder, copied_phrases
from pipeline.analysis.copy_path import Standing, said, standings
from pipeline.analysis.similarity import LEXICAL, Similarity
from pipeline.analysis.specificity import PhraseFacts, dump_facts, lead, load_facts, phrase_key
from pipeline.analysis.trust import Trust
from pipeline.core.definitions import (
    HIGH_LEXICAL_SIMILARITY,
    HIGH_SIMILARITY,
    SUSPICION_WEIGHTS,
    Outcome,
    echo_counts,
    item_outcome,
    passes,
    suspicion_score,
    uncertain,
    view_ratio,
)
from pipeline.core.errors import UnspecificError
from pipeline.store.database import Store
from pipeline.store.generations import summary_ratios
from pipeline.store.suspicion import (
    EvidenceRow,
    Ranking,
    TextCounts,
    YesProbability,
    constraint_flags,
    copy_evidence_missing_for,
    count_missing_copy_evidence,
    evidence_rows,
    missing_copy_work,
    response_texts,
)
from pipeline.store.view import StoreReader, Writer, store_of

# The reasons, in the order they are listed and summed: SUSPICION_WEIGHTS's.
REASONS: tuple[str, ...] = tuple(SUSPICION_WEIGHTS)
# The one command that computes the stored evidence a store built before it lacks (similarity, copy
# evidence): named by every screen and report that finds it missing.
EVIDENCE_COMMAND = "unspecific evidence"
REASON_TEXT: dict[str, str] = {
    "similar": "constraint close to a reference (high similarity)",
    "copied": "a reference's words in the constraint, repeated in the response",
    "echo": "the response repeats the constraint (a sentence close to it, its own words)",
    "lost": "satisfied in the response, lost in the summary",
    "split": "judges split on the response or the summary",
    "unquoted": "a Yes on the response whose quote is missing",
    "uncertain": "a judge's P(Yes) on the response near its threshold",
}
COPY_REASONS: tuple[str, ...] = ("similar", "copied", "echo")  # the "copy only" view
SECONDARY_REASONS: tuple[str, ...] = ("lost", "split", "unquoted", "uncertain")


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
    # The constraint's phrases the response repeats (its own wording; template words never count).
    echoed: tuple[str, ...] = ()
    # Each yes_no judge's latest P(Yes) on the response, with the threshold it is read at now.
    p_yes: tuple[YesProbability, ...] = ()
    facts: tuple[PhraseFacts, ...] = ()  # one per copied phrase: why it is (not) specific
    specificity: float = 0.0  # the item's (pipeline.core.definitions.item_specificity)
    echo: float | None = None  # the constraint's echo on the response (None: not computed)
    summary_echo: float | None = None
    lead_key: str = ""  # the phrase the item is about (pipeline.analysis.specificity.phrase_key)
    same_phrase: tuple[Evidence, ...] = ()  # later items of the instruction and writer on the same phrase
    # The lead phrase as each text it names has it (its references', the response's): copy_path.stands.
    standings: tuple[Standing, ...] = field(default=(), compare=False)  # read for the words, not the item

    @property
    def unsure(self) -> tuple[YesProbability, ...]:
        """The response's P(Yes) verdicts near their judge's threshold (the "uncertain" reason)."""
        return tuple(p for p in self.p_yes if uncertain(p.p_yes, p.threshold))

    @property
    def echoes(self) -> bool:
        """The "echo" reason: the constraint's own words repeated, and a sentence close to it
        (pipeline.core.definitions.echo_counts)."""
        return echo_counts(bool(self.echoed), self.echo, bool(self.copied))

    @property
    def copy_count(self) -> CopyCount:
        """pipeline.analysis.copy_count's count for the constraint on the response: the words that make
        a copy reason fire (a reference's, else the constraint's own when it echoes), so the copied
        column and the copy-only view agree."""
        return count_of(self.copied, "".join(self.copied_from), self.echoed, self.echo)

    @property
    def lead(self) -> PhraseFacts | None:
        """The most specific copied phrase."""
        return lead(self.facts)

    @property
    def lead_phrase(self) -> str:
        """The phrase the item is about (``lead_key``) as the constraint writes it."""
        return next((p for p in self.copy_count.phrases if phrase_key(p) == self.lead_key), self.lead_key)

    @property
    def outcome(self) -> Outcome:
        """The constraint's outcome on the response and its summary (definitions.item_outcome)."""
        return item_outcome(self.response_passed, self.summary_passed)

    @property
    def lost(self) -> bool:
        """The "lost" reason: the item flipped."""
        return self.outcome is Outcome.FLIPPED

    def reasons(self) -> tuple[str, ...]:
        """The reasons that fire, in REASONS order."""
        response, summary, similarity = self.response_trust, self.summary_trust, self.similarity
        fired = {
            "similar": similarity is not None
            and similarity.highest >= similarity_threshold(similarity.method),
            "copied": bool(self.copied),
            "echo": self.echoes,
            "lost": self.lost,
            "split": any(t is not None and t.split for t in (response, summary)),
            "unquoted": response is not None and response.unquoted > 0,
            "uncertain": bool(self.unsure),
        }
        return tuple(r for r in REASONS if fired[r])

    def measure(self, reason: str) -> float:
        """The reason's measure, which its per-unit weight multiplies (SUSPICION_WEIGHTS): the highest
        similarity, the item's specificity, the echo (0 when none was computed); 0 for the others."""
        if reason == "similar":
            return self.similarity.highest if self.similarity is not None else 0.0
        if reason == "copied":
            return self.specificity
        if reason == "echo":
            return self.echo or 0.0
        return 0.0

    def score(self, enabled: Sequence[str] = REASONS) -> float:
        """The weighted sum of the enabled reasons that fire (pipeline.core.definitions.suspicion_score)."""
        return suspicion_score((r, self.measure(r)) for r in self.reasons() if r in enabled)


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
            out.append(copied_sentence(e))
        elif reason == "echo":
            words = count_of((), "", e.echoed).words
            close = f"a sentence {e.echo:.2f} close to it, " if e.echo is not None else ""
            out.append(f"the response repeats the constraint: {close}{words} of its words in no reference"
                       f" (“{e.echoed[0]}”{', …' if len(e.echoed) > 1 else ''})")
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


def copied_sentence(e: Evidence) -> str:
    """How many of the constraint's words a reference holds and the way they reached the response,
    then the most specific phrase, why it is (or is not) specific, and how each text has it
    (``standings``, when read): '8 words reference A → constraint → response: “probe by the US
    Securities Exchange Commission” (8 words of reference A only, in 1 of 2,224 BBC News articles, a
    name); reference A has “probe by the US Securities and Exchange Commission”, word for word in the
    response'."""
    count = e.copy_count.sentence()
    stands = "; " + said(e.standings) if e.standings else ""
    top = e.lead
    if top is None:  # no facts for the phrases: the count alone
        return count + stands
    others = len(e.facts) - 1
    more = f", and {others} more phrase{'' if others == 1 else 's'}" if others else ""
    return f"{count}: “{top.text}” ({top.sentence()}){more}{stands}"


def same_phrase_sentence(e: Evidence) -> str:
    """'and 15 more constraints on “the US trade deficit” alone' (the items group_by_phrase filed
    under ``e``: that phrase is all they copied)."""
    n = len(e.same_phrase)
    return f"and {n} more constraint{'' if n == 1 else 's'} on “{e.lead_phrase}” alone"


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
    trust = _trust(counts)
    mean = trust.mean if trust is not None else None
    return passes(mean) if mean is not None else None


def _summary_passed(row: EvidenceRow) -> bool | None:
    # None when no rater judged both texts: "lost" is the item outcome's, never the two texts'
    # verdicts by different raters.
    return passes(row.summary_score) if row.summary_score is not None else None


def _similarity(row: EvidenceRow) -> Similarity | None:
    if row.similarity is None:
        return None
    method, to_a, to_b = row.similarity
    return Similarity(row.constraint_id, method, to_a, to_b)


def _evidence(row: EvidenceRow, ratio: float, flags: dict[int, tuple[str, ...]]) -> Evidence:
    return Evidence(
        constraint_id=row.constraint_id, instruction_id=row.instruction_id,
        position=row.position, text=row.text,
        writer=_writer(row.model, row.mode), ratio=ratio, similarity=_similarity(row),
        copied=row.copied or (),
        copied_from=tuple(row.copied_from), response_passed=_passed(row.full_score, row.response),
        summary_passed=_summary_passed(row), response_trust=_trust(row.response),
        summary_trust=_trust(row.summary),
        flags=flags.get(row.constraint_id, ()), response_id=row.response_id, summary_id=row.summary_id,
        copy_known=row.copied is not None, echoed=row.echoed, p_yes=row.p_yes, facts=load_facts(row.facts),
        specificity=row.specificity, echo=row.echo, summary_echo=row.summary_echo, lead_key=row.lead)


def instruction_evidence(reader: StoreReader, instruction_id: int, writer: Writer,
                         ratio: float) -> dict[int, Evidence]:
    """Evidence for every active constraint of one instruction on one writer's response (Audit's list);
    copy evidence the stage has not stored is computed here. {} when the writer has no response."""
    store = store_of(reader)
    rows, _ = evidence_rows(store, ratio=ratio, instruction_id=instruction_id,
                            writer=(writer.model, writer.mode))
    flags = constraint_flags(store, [r.constraint_id for r in rows])
    rows = _fill_copy_evidence(store, instruction_id, rows)
    return {row.constraint_id: _evidence(row, ratio, flags) for row in rows}


def _fill_copy_evidence(store: Store, instruction_id: int, rows: list[EvidenceRow]) -> list[EvidenceRow]:
    """The rows, with the copy evidence the stage has not stored computed as the stage would
    (pipeline.analysis.copy_evidence; nothing is written: the app reads)."""
    if all(r.copied is not None or r.response_id is None for r in rows):
        return rows
    work = missing_copy_work(store, instruction_ids=[instruction_id], limit=10 ** 6)
    finder = CopyFinder(store)
    finder.prepare(work)
    found = {(w.response_id, w.constraint_id): finder.find(w) for w in work}
    out = []
    for row in rows:
        f = found.get((row.response_id or 0, row.constraint_id)) if row.copied is None else None
        if f is not None:
            row = row._replace(copied=f.copied, copied_from=f.copied_from, specificity=f.specificity,
                               echoed=f.echoed,
                               lead=f.lead, facts=dump_facts(f.facts))
        out.append(row)
    return out


def group_by_phrase(items: Sequence[Evidence]) -> list[Evidence]:
    """The items in rank order with each later item of the same instruction, writer and lead phrase
    filed under the first (``same_phrase``) when that phrase is all it copied (the phrases its copy
    count counts): one phrase across many constraints leads once, and an item that copied another
    phrase too stays a row of its own."""
    leaders: dict[tuple[int, Writer, str], int] = {}
    out: list[Evidence] = []
    followers: dict[int, list[Evidence]] = {}
    for e in items:
        if not e.lead_key or not (e.copied or e.echoes):
            out.append(e)
            continue
        key = (e.instruction_id, e.writer, e.lead_key)
        if key in leaders:
            if {phrase_key(p) for p in e.copy_count.phrases} == {e.lead_key}:
                followers.setdefault(leaders[key], []).append(e)
            else:
                out.append(e)
            continue
        leaders[key] = len(out)
        out.append(e)
    for i, rest in followers.items():
        out[i] = replace(out[i], same_phrase=tuple(rest))
    return out


def suspicion_queue(reader: StoreReader, *, ratio: float | None = None, enabled: Sequence[str] = REASONS,
                    run_id: str | None = None, limit: int | None = None, grouped: bool = True) -> Queue:
    """Every (constraint, response) with an enabled reason, highest score first (score > 0 only);
    ``grouped``: items on the same phrase as a higher one filed under it (group_by_phrase).
    ``.copy_evidence_missing`` on the result: the copy-evidence stage has not covered the selection."""
    store = store_of(reader)
    # The ratio the views show (pipeline.core.definitions.view_ratio): the asked one where summaries
    # are at it, else the stored one nearest; the default only where nothing is summarised.
    ratio = view_ratio(summary_ratios(store, run_id), ratio)
    ranking = Ranking(enabled=tuple(r for r in REASONS if r in enabled), limit=limit)
    rows, total = evidence_rows(store, ratio=ratio, run_id=run_id, ranking=ranking)
    # Few rows: their flags by id; many: every flag at once.
    flags = constraint_flags(store, [r.constraint_id
                                     for r in rows]) if len(rows) <= 2000 else constraint_flags(store)
    items = with_standings(store, [_evidence(row, ratio, flags) for row in rows])
    queue = Queue(group_by_phrase(items) if grouped else items)
    queue.total = total
    queue.copy_evidence_missing = _copy_missing(store, run_id)
    return queue


def with_standings(store: Store, items: list[Evidence]) -> list[Evidence]:
    """The items, each that copied a phrase with its lead phrase as its references and response have
    it (copy_path.standings; the texts read once a response)."""
    copied = [e for e in items if e.copied and e.response_id is not None]
    if not copied:
        return items
    texts = response_texts(store, sorted({e.response_id or 0 for e in copied}))
    out = []
    for e in items:
        found = texts.get(e.response_id or 0) if e.copied else None
        if found is not None:
            phrase = e.lead.text if e.lead is not None else e.copied[0]
            by_label = {"A": found.reference_a, "B": found.reference_b, "response": found.response}
            e = replace(e, standings=standings(phrase, "".join(e.copied_from), by_label))
        out.append(e)
    return out


def _copy_missing(store: Store, run_id: str | None) -> bool:
    return count_missing_copy_evidence(store, run_id=run_id) > 0


__all__ = ["COPY_REASONS", "REASONS", "REASON_TEXT", "Evidence", "Queue", "copied_phrases", "copied_sentence",
           "copy_evidence_missing_for", "group_by_phrase", "instruction_evidence", "parse_reasons",
           "reason_sentences",
           "same_phrase_sentence", "suspicion_queue"]
