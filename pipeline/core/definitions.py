"""The method's named numbers, defined once (docs/method.md): every stage, metric, screen and
command reads them from here."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import NamedTuple, overload

# A constraint passes a text when its judges' mean verdict is at least this (two judges split
# 1-1 pass). The store's SQL reads it when it builds its statements (pipeline.store.scores.passes_sql).
PASS_THRESHOLD = 0.5
# The summary ratio of Core: a response summarised to 25% of its length.
DEFAULT_RATIO = 0.25
# The ratios `evaluate` summarises at when the config names none ([evaluate] ratios).
DEFAULT_RATIOS = (DEFAULT_RATIO,)
# Ratios are compared with a tolerance: 0.1 read back from SQLite is 0.1, but a user's 0.10 is too.
RATIO_TOLERANCE = 1e-9
# A ratio as a grouping key, to the tolerance's digits: ratio_key in Python, and the store's SQL rounds
# to these same digits where it groups by ratio (pipeline.store.metrics).
RATIO_DIGITS = 9


# The significance level of every test the report marks (after Holm's correction).
SIGNIFICANCE = 0.05


def same_ratio(a: float, b: float) -> bool:
    """Whether two summary ratios are the same one (within RATIO_TOLERANCE)."""
    return abs(a - b) < RATIO_TOLERANCE


def shown_ratio(stored: Iterable[float], asked: float | None = None) -> float | None:
    """The one rule for the summary ratio a screen, report or export shows: the asked one (else
    DEFAULT_RATIO) when summaries exist at it, else the stored ratio nearest to it, the larger on a
    tie (the gentler summary); None when nothing is summarised. The value returned is a stored one."""
    target = DEFAULT_RATIO if asked is None else asked
    ratios = sorted(set(stored), reverse=True)
    if not ratios:
        return None
    return min(ratios, key=lambda r: abs(r - target))  # min keeps the first (larger) on a tie


@overload
def ratio_key(ratio: float) -> float: ...
@overload
def ratio_key(ratio: None) -> None: ...
def ratio_key(ratio: float | None) -> float | None:
    """A ratio as a dict key (None, a response's, stays None): rounded to RATIO_DIGITS, the digits of
    RATIO_TOLERANCE, so ratios same_ratio calls the same one group together. The one rounding of a
    ratio: Python's keys are this, the store's SQL rounds to the same RATIO_DIGITS."""
    return None if ratio is None else round(float(ratio), RATIO_DIGITS)


def view_ratio(stored: Iterable[float], asked: float | None = None) -> float:
    """The summary ratio a view shows: shown_ratio of the store's summaries and the user's choice, and
    DEFAULT_RATIO while nothing is summarised. Every screen, report, export and ranking asks this one
    function (given the same summaries and choice they name the same ratio) and falls back on nothing else."""
    shown = shown_ratio(stored, asked)
    return DEFAULT_RATIO if shown is None else shown


def next_ratio(ratios: Sequence[float], current: float) -> float:
    """The ratio after ``current`` in ``ratios`` (round to the first), compared by same_ratio; the
    first when ``current`` is not among them (a view's `r` key)."""
    at = next((i for i, r in enumerate(ratios) if same_ratio(r, current)), None)
    return ratios[0] if at is None else ratios[(at + 1) % len(ratios)]


def unknown_ratio(asked: float, stored: Iterable[float], where: object = "this store") -> str | None:
    """Why an asked-for ratio cannot be shown (no summaries at it: the ratios there are named), or
    None when it can. Commands refuse such a ratio before any work rather than show another."""
    ratios = sorted(set(stored), reverse=True)
    if any(same_ratio(r, asked) for r in ratios):
        return None
    there = (f"summaries here are at {', '.join(f'{r:g}' for r in ratios)}" if ratios
             else "nothing is summarised yet; leave --ratio out for Org alone")
    return f"--ratio {asked:g}: no summaries at that ratio in {where} ({there})"


def passes(score: float | None) -> bool:
    """Whether a judges' mean verdict passes; a missing score (no verdict) never does."""
    return score is not None and score >= PASS_THRESHOLD


class Outcome(StrEnum):
    """A constraint's outcome on a response and its summary at a ratio: the one vocabulary Audit's
    list, the suspicion queue, `report`, `export --suspicious` and the HTML page show. The value is
    the label; ``short`` fits a narrow column, ``key`` names it where a label cannot (a page's style)."""

    FLIPPED = "FLIPPED"  # passes on the response, not on its summary: the "superficial" call
    PASSED_BOTH = "pass both"
    PASSES_RESPONSE = "passes full"  # passes on the response; no rater has judged both texts yet
    FAILS_RESPONSE = "fails full"
    NOT_JUDGED = "not judged"

    @property
    def short(self) -> str:
        return _OUTCOME_SHORT[self]

    @property
    def key(self) -> str:
        return self.name.lower()


_OUTCOME_SHORT = {Outcome.FLIPPED: "FLIPPED", Outcome.PASSED_BOTH: "pass both",
                  Outcome.PASSES_RESPONSE: "pass full", Outcome.FAILS_RESPONSE: "fails",
                  Outcome.NOT_JUDGED: "-"}


def item_outcome(response_passed: bool | None, summary_passed: bool | None) -> Outcome:
    """The one rule for a constraint's outcome. ``response_passed``: the raters' mean verdict on the
    response passes (None: none judged it); ``summary_passed``: on the summary, over the raters who
    judged both texts (None: none did, so the summary cannot make the item look flipped).
    pipeline.store.scores.item_outcome_sql is the same rule in SQL, for counting millions of items in
    the store; tests/test_outcome.py keeps the two equal."""
    if response_passed is None:
        return Outcome.NOT_JUDGED
    if not response_passed:
        return Outcome.FAILS_RESPONSE
    if summary_passed is None:
        return Outcome.PASSES_RESPONSE
    return Outcome.PASSED_BOTH if summary_passed else Outcome.FLIPPED


def score_outcome(full_score: float | None, summary_score: float | None) -> Outcome:
    """``item_outcome`` of the raters' mean verdicts on both texts (None or NaN: not judged)."""
    def passed(score: float | None) -> bool | None:
        return None if score is None or math.isnan(score) else passes(score)

    return item_outcome(passed(full_score), passed(summary_score))


class FlagKind(NamedTuple):
    """A quality flag a constraint can carry, and every name it goes by (the one registry: FLAG_KINDS)."""

    name: str  # as stored (constraint_flags.flag)
    meaning: str  # one line, where a screen lists flags (Audit's `f` menu)
    label: str  # Instructions' filter
    tag: str  # where a column has few cells (Audit's list)
    head: str | None  # its count's column in Instructions (None: no column)
    lexical: bool  # found in the texts by pipeline.analysis.flags at build; else a model's call


# copied_ngram is the constraint's own text holding a reference's words; the words pasted into the
# response are another count (pipeline.analysis.copy_count, the queue's `copied`), so its short name is
# "ngram", never "copy".
FLAG_KINDS = {kind.name: kind for kind in (
    FlagKind("proper_noun", "a name taken from a reference", "proper noun", "name", "PN", True),
    FlagKind("specificity_leak", "much closer to one reference than to the other", "specificity leak", "leak",
             "leak", True),
    FlagKind("copied_ngram", "a reference's n-grams copied into the constraint", "n-grams in the constraint",
             "ngram", "ngram", True),
    FlagKind("duplicate", "a near-duplicate of another constraint", "duplicate constraint", "dup", "dup",
             True),
    FlagKind("contradiction", "no text could satisfy it with another constraint", "contradiction", "cont",
             None, False),
)}
# The flags a build stores per constraint from the texts alone (pipeline.analysis.flags computes them),
# named here so a reader of flags needs no text analysis loaded.
LEXICAL_FLAGS = tuple(name for name, kind in FLAG_KINDS.items() if kind.lexical)


# The suspicion ranking (pipeline.analysis.suspicion, docs/counting.md): a constraint is "close to its
# reference" when its similarity to either reference reaches this: an embedder's cosine, or the
# lexical overlap (share of its content words in the reference) when no embedder was used.
HIGH_SIMILARITY = 0.6
HIGH_LEXICAL_SIMILARITY = 0.5
# Copy evidence: a constraint's word n-grams (this many words, as the app's Audit highlights them)
# found in a reference and in the response; n-grams of stopwords alone do not count.
COPY_EVIDENCE_NGRAM = 3


# How a judge gives its verdicts (pipeline.stages.judging, docs/method.md "Judging"):
# ``batched``: every constraint of a text in one call, a Yes/No and a quote each (the research code's way);
# ``per_constraint``: one call per constraint, a Yes/No and a quote;
# ``yes_no``: one call per constraint answering one token, the verdict read from P(Yes) / (P(Yes) + P(No))
# of that token against the judge's calibrated threshold (the embedded model's default).
JUDGING_MODES = ("batched", "per_constraint", "yes_no")
# Before a judge's check has calibrated it, a yes_no verdict is P(Yes) >= this.
DEFAULT_YES_THRESHOLD = 0.5
# A yes_no verdict is uncertain when P(Yes) is this close to the threshold in log-odds (e^0.85, about
# 2.3 times the threshold's odds either way; at a 0.5 threshold, P(Yes) between 0.3 and 0.7).
UNCERTAIN_LOG_ODDS = 0.85


def uncertain_bounds(threshold: float) -> tuple[float, float]:
    """The P(Yes) interval, open at both ends, within UNCERTAIN_LOG_ODDS of ``threshold`` in log-odds.
    In probabilities so that SQL (whose SQLite may lack ln()) tests the same verdicts as ``uncertain``."""
    import math

    t = min(max(threshold, 1e-6), 1 - 1e-6)
    centre = math.log(t / (1 - t))
    return 1 / (1 + math.exp(UNCERTAIN_LOG_ODDS - centre)), 1 / (1 + math.exp(-UNCERTAIN_LOG_ODDS - centre))


def uncertain(p_yes: float | None, threshold: float) -> bool:
    """Whether a P(Yes) verdict sits near its threshold (None: not a probability verdict)."""
    if p_yes is None:
        return False
    low, high = uncertain_bounds(threshold)
    return low < p_yes < high


# -- copy evidence: what makes a copied phrase specific (pipeline.analysis.specificity) ---------------
# A constraint phrase found in a reference and the response is copy-paste only when it is specific to
# that reference. Its specificity, in [0, 1], is rarity x source x shape:
#   rarity  log(N / df) / log(N): df, the articles of the instruction's domain holding the phrase, of N
#           (1 when the store holds no such articles: nothing to compare with); where the store holds
#           fewer than BACKGROUND_ARTICLES of the domain, the lower of that and the same over the
#           bundled BBC News articles ("the United States" is in 2 of the demo's 60 articles, rarity
#           0.83, but in 49 of BBC News's 2,224, 0.50: a small store cannot tell a common phrase);
#   source  the share of its content words absent from the main task (at least SPECIFIC_TOPIC: the
#           subject the writer was told to write about is no paste), times SPECIFIC_SHARED when both
#           references hold it (the shared topic the method asks constraints to come from);
#   shape   SHAPE_BASE, + SHAPE_ENTITY for a name (a word the reference capitalises mid-sentence),
#           + SHAPE_NUMBER for a number, + SHAPE_LONG x how far past the n-gram it runs towards
#           LONG_SPAN_WORDS words; at most 1.
SPECIFIC_TOPIC = 0.1
SPECIFIC_SHARED = 0.3
BACKGROUND_ARTICLES = 1000
SHAPE_BASE = 0.4
SHAPE_ENTITY = 0.3
SHAPE_NUMBER = 0.2
SHAPE_LONG = 0.3
LONG_SPAN_WORDS = 8
# An item's specificity: its most specific phrase's, plus this share of the others' (at most 1).
SPECIFIC_OTHERS = 0.25
# A phrase at or above this is "specific" in words and in the benchmark's make-up counts.
SPECIFIC_ENOUGH = 0.35
# A word in more than this share of an instruction's constraints is the list's template ("The text
# should discuss the"): it never counts as copied (instructions of at least TEMPLATE_MIN constraints).
TEMPLATE_SHARE = 0.5
TEMPLATE_MIN = 4
# The constraint's echo (the research code's copy-paste score, cs4/analysis/copy_paste.py): the
# highest cosine between the constraint and a sentence of the text. The response repeating some of the
# constraint's own words (not its template's, in no reference) counts as copying when the echo reaches
# ECHO_HIGH, or when no echo was computed (no embedder): the words alone then.
ECHO_HIGH = 0.75


# The echo rule, written once: Python reads it (echo_counts) and the store's SQL is built from it
# (pipeline.store.suspicion). Each fact of a (constraint, text) meets its test: True, it holds; False,
# it does not; a number, the fact reaches it or was not computed.
ECHO_RULE: dict[str, bool | float] = {
    "echoed": True,  # some of the constraint's own words repeated (not its template's, in no reference)
    "copied": False,  # nothing copied from a reference: a paste says more, and is what is counted
    "echo": ECHO_HIGH,  # an echo at ECHO_HIGH, or none computed (no embedder): the words alone then
}


def meets(value: bool | float | None, test: bool | float) -> bool:
    """Whether a fact meets its test in ECHO_RULE."""
    if isinstance(test, bool):
        return bool(value) is test
    return value is None or value >= test


def echo_counts(echoed: bool, echo: float | None, copied: bool = False) -> bool:
    """Whether a text's repeating the constraint's words counts (the "echo" reason, and the words
    every view's copied count shows): ECHO_RULE on these facts (a view asks it per item: no dict built)."""
    return (meets(echoed, ECHO_RULE["echoed"]) and meets(copied, ECHO_RULE["copied"])
            and meets(echo, ECHO_RULE["echo"]))


class ReasonWeight(NamedTuple):
    """A suspicion reason's weight: ``fixed`` when it fires, plus ``per_unit`` times its measure."""

    fixed: float
    per_unit: float = 0.0


# The suspicion score (pipeline.analysis.suspicion, docs/counting.md), written once: the sum over the
# enabled reasons that fire of their weights, a reason's measure being the highest similarity
# (similar), the item's specificity (copied), the echo, 0 when none was computed (echo); the others
# have none. Evidence.score reads this table and the store's SQL is built from it
# (pipeline.store.suspicion), summed in the same order. Copying leads: the secondary reasons
# together (0.95) weigh less than the weakest copy reason alone (1.0: a lexical similarity at its
# threshold), so every item with copy evidence ranks above every item without.
SUSPICION_WEIGHTS: dict[str, ReasonWeight] = {
    "similar": ReasonWeight(0.0, 2.0),  # 1.0 to 2 at the default thresholds
    "copied": ReasonWeight(1.0, 4.0),  # 1 for the topic's words, up to 5 for a long, rare, named paste
    "echo": ReasonWeight(1.0, 1.0),  # 1.75 to 2 from ECHO_HIGH; 1 on the words alone
    "lost": ReasonWeight(0.5),  # alone, what the benchmark measures, not a suspicion
    "split": ReasonWeight(0.15),
    "unquoted": ReasonWeight(0.25),
    "uncertain": ReasonWeight(0.05),  # one judge's verdict that nearly went the other way: least
}
# A score's digits (Python and SQL alike): equal scores tie, and rank by instruction, position, writer.
SCORE_DIGITS = 6


def suspicion_score(fired: Iterable[tuple[str, float]]) -> float:
    """The suspicion score of these (reason, measure) pairs, the enabled reasons that fire, summed in
    their order (SUSPICION_WEIGHTS)."""
    total = 0.0
    for reason, measure in fired:
        weight = SUSPICION_WEIGHTS[reason]
        total += weight.fixed + weight.per_unit * measure
    return round(total, SCORE_DIGITS)


# What stored copy evidence was computed by: the numbers above, and the rules' own version (bumped when
# pipeline.analysis.copy_evidence or .specificity change what they find). Evidence of another version
# is stale: the ranking leaves it out and the stage computes it again.
# 2: the BBC News background for small stores; 3: an acronym (G7, US) is a name, never a number.
COPY_EVIDENCE_RULES = 3


def copy_evidence_version() -> str:
    """A short name of the copy-evidence definition in force (COPY_EVIDENCE_RULES and its numbers)."""
    import hashlib

    numbers = (COPY_EVIDENCE_RULES, COPY_EVIDENCE_NGRAM, SPECIFIC_TOPIC, SPECIFIC_SHARED,
               SHAPE_BASE, SHAPE_ENTITY,
               SHAPE_NUMBER, SHAPE_LONG, LONG_SPAN_WORDS, SPECIFIC_OTHERS, TEMPLATE_SHARE, TEMPLATE_MIN,
               BACKGROUND_ARTICLES)
    return f"{COPY_EVIDENCE_RULES}-" + hashlib.sha256(repr(numbers).encode()).hexdigest()[:10]


def specificity(rarity: float, outside_task: float, shared: bool, entity: bool, number: bool,
                words: int) -> float:
    """A copied phrase's specificity (the formula above), from its facts."""
    source = max(SPECIFIC_TOPIC, outside_task) * (SPECIFIC_SHARED if shared else 1.0)
    run = min(1.0, max(0, words - COPY_EVIDENCE_NGRAM) / max(1, LONG_SPAN_WORDS - COPY_EVIDENCE_NGRAM))
    shape = min(1.0, SHAPE_BASE + SHAPE_ENTITY * entity + SHAPE_NUMBER * number + SHAPE_LONG * run)
    return round(max(0.0, min(1.0, rarity)) * source * shape, 6)


def item_specificity(phrases: Iterable[float]) -> float:
    """An item's specificity from its phrases': the highest, plus SPECIFIC_OTHERS of the rest, at most 1."""
    values = sorted(phrases, reverse=True)
    if not values:
        return 0.0
    return round(min(1.0, values[0] + SPECIFIC_OTHERS * sum(values[1:])), 6)


# -- the constraint gate (pipeline.analysis.gate, pipeline.stages.gate; docs/method.md) ----------------
# Two constraints are near-copies when rapidfuzz's token-set ratio (0-100, case and punctuation folded)
# reaches DISTINCT_TOKEN_SET ("... market strategy" and "... market strategy in 2006" score 100), or
# their embedding cosine reaches the embedder's DISTINCT_COSINES entry (a paraphrase in other words;
# DISTINCT_COSINE for another model). Measured on 42 labelled pairs (bench/gate_pairs.py,
# docs/measurements.md): token-set >= 92 catches 5 of 20 near-copies and no distinct pair (at 90, one:
# "... on competition" / "... on prices"); mpnet at 0.85 catches 13 of 20 and rejects 1 of 22 distinct;
# MiniLM at 0.80, 11 of 20 and 1 of 22.
DISTINCT_TOKEN_SET = 92.0
DISTINCT_COSINE = 0.85
DISTINCT_COSINES = {"all-mpnet-base-v2": 0.85, "all-MiniLM-L6-v2": 0.80}
# A revision's replacement is its original with words appended when it is longer and keeps at least
# APPENDED_CONTAINMENT of the original's words in order, or APPENDED_JOINED of them and goes on past the
# last with a joined clause ("and its impact on the global economy"). On main's demo (its second eval
# list, 18 replacements, 7 padded as the issue counted, keeping 0.86-1.00; the other 11, 0.19-0.67) it
# refuses 6, the atomic check the seventh (questions appended); "Contrast the rise in revenue with the
# fall in sales" for "Explain the rise in revenue" (0.83, no clause joined on) it keeps.
APPENDED_CONTAINMENT = 0.9
APPENDED_JOINED = 0.75
# Rounds asking the generator for more after the gate rejected candidates (each round's ask names what
# was rejected and why); then the list is kept short and the ledger says so ("37 of 39 after 4 rounds").
GATE_ROUNDS = 4
# Pairing: a pair whose cosine is below this is not similar (the research code's band is [0.70, 0.85));
# `pair` reports such pairs and a build refuses them unless allowed ([pair] floor, --allow-dissimilar).
PAIR_FLOOR = 0.70
