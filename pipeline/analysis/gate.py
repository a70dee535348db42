"""The constraint gate's text checks (docs/method.md: what a kept constraint must be). No model here:
pipeline.stages.gate adds the judged check (``common``: the judge says it holds on both references)
and runs the rounds.

- ``atomic``: one requirement in one sentence: no second sentence, no list of questions, no "and
  also", no second imperative joined on ("Explain X, and describe Y").
- ``distinct``: not a near-copy of a constraint already kept: token-set similarity (a year or a word
  added: "... strategy" and "... strategy in 2006" score 100) or embedding cosine (a paraphrase), at
  the thresholds of pipeline.core.definitions (measured on labelled pairs, bench/gate_pairs.py).
- ``unspecific`` (common conditions): no name, number or date that only one reference holds, nor
  one that neither holds.
- ``appended`` (revision): a replacement that is its original with words added.

    atomic_problem("Explain the losses. Describe the reaction.")  # 'two sentences: ...'
    unspecific_problem("Explain Google's role.", ref_a, ref_b)      # "'Google' is only in reference A"
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pipeline.analysis.copying import WORD
from pipeline.analysis.specificity import proper_words
from pipeline.core.definitions import (
    APPENDED_CONTAINMENT,
    APPENDED_JOINED,
    DISTINCT_COSINE,
    DISTINCT_TOKEN_SET,
)

# The checks, in the order a candidate meets them (the cheap ones first; ``common`` calls the judge).
CHECKS = ("usable", "atomic", "unspecific", "distinct", "common", "appended", "easy")
CHECK_TEXT = {
    "usable": "not a constraint (a fragment, a paragraph, copied from the prompt)",
    "atomic": "more than one requirement",
    "unspecific": "a name, number or date not in both references",
    "distinct": "a near-copy of a kept constraint",
    "common": "the judge found it does not hold on both references",
    "appended": "its original with words appended",
    "easy": "the base article already satisfies it",
}

# Verbs a constraint opens with: a second one joined by "and" is a second requirement.
_IMPERATIVES = (
    "analyse analyze assess compare contrast describe discuss emphasise emphasize evaluate examine explain "
    "explore give highlight identify illustrate include introduce list mention note outline present "
    "provide quote reflect show specify state suggest summarise summarize use write address consider "
    "detail elaborate end begin start conclude"
).split()
_SECOND_VERB = re.compile(r"(?:,|;)?\s+and\s+(?:then\s+|also\s+)?(?:" + "|".join(_IMPERATIVES) + r")\b",
                          re.IGNORECASE)
_JOINERS = re.compile(r"\b(?:and also|as well as|in addition|additionally|furthermore|moreover)\b|;",
                      re.IGNORECASE)
_WH = re.compile(r"\b(?:what|why|how|who|whom|when|where|which|whether)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(\w*)[.!?](?=\s+[A-Z\"'\u201c(])")
# A period after these ends no sentence ("Mr. Smith", "U.S. Treasury").
_ABBREVIATIONS = frozenset("mr mrs ms dr st jr sr inc co ltd corp vs no".split())
_ACRONYM = re.compile(r"[A-Z][A-Z0-9]+")
_DIGIT = re.compile(r"\d")
_MONTHS = frozenset("january february march april may june july august september october november "
                    "december monday tuesday wednesday thursday friday saturday sunday".split())


def atomic_problem(text: str) -> str | None:
    """Why ``text`` is more than one requirement in one sentence, or None."""
    body = text.strip()
    for m in _SENTENCE_END.finditer(body.rstrip(".!?")):
        if m.group(1).lower() not in _ABBREVIATIONS and len(m.group(1)) > 1:
            return "two sentences: write one requirement in one sentence"
    if body.count("?") > 1:
        return "a list of questions: ask for one thing"
    joiner = _JOINERS.search(body)
    if joiner:
        return f"joins two requirements ({joiner.group(0).strip() or ';'}): ask for one thing"
    # "Compare and contrast X" is one ask
    second = next((m for m in _SECOND_VERB.finditer(body)
                   if not re.search(r"\bcompare\s*$", body[:m.start()], re.IGNORECASE)), None)
    if second and second.start() > 0:
        return f"a second instruction joined on ('{second.group(0).strip(' ,;')}'): ask for one thing"
    if len({m.group(0).lower() for m in _WH.finditer(body)}) >= 3:
        return "a list of questions (what, why, how ...): ask for one thing"
    return None


# -- unspecific: names, numbers and dates that both references hold ------------------------------------


@dataclass(frozen=True)
class Specific:
    """A name, number or date the constraint writes, and which references hold it."""

    word: str
    kind: str  # name | number | date
    in_a: bool
    in_b: bool

    @property
    def where(self) -> str:
        if self.in_a and self.in_b:
            return "both references"
        if self.in_a or self.in_b:
            return f"only reference {'A' if self.in_a else 'B'}"
        return "neither reference"


def _words(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text)}


def specifics(text: str, ref_a: str, ref_b: str) -> list[Specific]:
    """The names, numbers and dates ``text`` writes, each with the references that hold it.

    A name: an acronym (G7, AOL), a word either reference treats as a name (capitalised in most of its
    uses there, mid-sentence: "Rank", though "rank" is an English word), or a capitalised word of the
    constraint that is no English word, past its first ("Google"). A number: a word with a digit (2006,
    12m)."""
    from pipeline.core.text import english_words

    known = english_words()
    names = proper_words(ref_a) | proper_words(ref_b)
    in_a, in_b = _words(ref_a), _words(ref_b)
    out: dict[str, Specific] = {}
    for i, m in enumerate(WORD.finditer(text)):
        word = m.group(0)
        low = word.lower()
        if low in out or (len(word) == 1 and not word.isdigit()):
            continue
        if _DIGIT.search(word) and not _ACRONYM.fullmatch(word):
            kind = "date" if re.fullmatch(r"(?:1[89]|20)\d\d", word) else "number"
        elif _ACRONYM.fullmatch(word):
            kind = "name"
        # The first word is a name only when a reference treats it as one: it is the verb most of the
        # time, and the word list lacks some ("Summarise", "Narrate").
        elif word[0].isupper() and (low in names or (low not in known and i > 0) or low in _MONTHS):
            kind = "date" if low in _MONTHS else "name"
        elif low in names and low not in known:
            kind = "name"  # a reference's name written lower-case
        else:
            continue
        out[low] = Specific(word, kind, low in in_a, low in in_b)
    return list(out.values())


def unspecific_problem(text: str, ref_a: str, ref_b: str) -> str | None:
    """Why ``text`` is specific to one reference (or to neither), or None: its first name, number or
    date that is not in both."""
    for s in specifics(text, ref_a, ref_b):
        if not (s.in_a and s.in_b):
            return f"'{s.word}' ({s.kind}) is in {s.where}: write it in general terms"
    return None


# -- distinct: not a near-copy of a kept constraint ---------------------------------------------------


def token_set(a: str, b: str) -> float:
    """rapidfuzz's token-set ratio (0-100) of two constraints, case and punctuation folded."""
    from rapidfuzz import fuzz, utils

    return float(fuzz.token_set_ratio(a, b, processor=utils.default_process))


@dataclass
class Distinct:
    """The constraints kept so far (and their unit vectors when an embedder is used), asked whether a
    candidate repeats one. ``cosine`` None: token-set similarity alone (no embedder)."""

    texts: list[str] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)
    token_threshold: float = DISTINCT_TOKEN_SET
    cosine_threshold: float | None = DISTINCT_COSINE

    def problem(self, text: str, vector: np.ndarray | None = None) -> str | None:
        for i, kept in enumerate(self.texts):
            score = token_set(text, kept)
            if score >= self.token_threshold:
                return f"repeats a kept constraint (token-set {score:.0f}): \"{_short(kept)}\""
            if vector is not None and self.cosine_threshold is not None and i < len(self.vectors):
                cos = float(vector @ self.vectors[i])
                if cos >= self.cosine_threshold:
                    return f"a paraphrase of a kept constraint (cosine {cos:.2f}): \"{_short(kept)}\""
        return None

    def add(self, text: str, vector: np.ndarray | None = None) -> None:
        self.texts.append(text)
        if vector is not None:
            self.vectors.append(vector)


def _short(text: str, limit: int = 70) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


# -- appended: a revision that only adds words to its original ----------------------------------------


def _folded(text: str) -> list[str]:
    return [w.lower() for w in WORD.findall(text)]


def _lcs_row(a: list[str], b: list[str]) -> list[int]:
    """LCS(a, b[:j]) for every j: the longest common subsequence of words, by how much of b it reads."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            cur[j] = prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1])
        prev = cur
    return prev


def containment(original: str, new: str) -> float:
    """The share of the original's words that the new text holds in the same order (longest common
    subsequence of words over the original's length): 1 when the original is inside the new one."""
    a, b = _folded(original), _folded(new)
    return _lcs_row(a, b)[-1] / len(a) if a else 0.0


# A clause joined on after the original's last word: "... and its impact on the global economy".
_JOINED_ON = frozenset("and including especially particularly plus along".split())


def appended_problem(original: str, new: str) -> str | None:
    """Why ``new`` is ``original`` with words appended (harder by length, not by asking more), or None:
    it keeps APPENDED_CONTAINMENT of the original's words in order, or APPENDED_JOINED of them and goes
    on past the last with a joined clause ("and its impact on ...", "and how this may affect ...")."""
    a, b = _folded(original), _folded(new)
    if not a or len(b) <= len(a):
        return None
    row = _lcs_row(a, b)
    share = row[-1] / len(a)
    tail = b[row.index(row[-1]):]  # the words after the original's last one kept
    # the clause's joining word first, or second after a word finishing the original's phrase
    # ("... in shaping trade [policies] and their impact on ...")
    joined = any(word in _JOINED_ON for word in tail[:2])
    if share >= APPENDED_CONTAINMENT or (share >= APPENDED_JOINED and joined):
        return (f"the original with words added ({share:.0%} of its words kept in order): ask for something "
                "else, not the same thing and more")
    return None


def candidates_summary(rejected: Sequence[tuple[str, str, str]]) -> str:
    """The rejected candidates as lines for the generator: '- "text": reason'."""
    return "\n".join(f"- \"{_short(text, 90)}\": {reason}" for text, _check, reason in rejected)


# -- the ledger: what the gate did for one instruction's list -------------------------------------------


@dataclass
class Ledger:
    """Per instruction and stage (``synthesis`` or ``revision``): candidates the generator wrote, how
    many each check rejected, the rounds asked, how many were kept of those wanted, and some of the
    rejected candidates with why (for step mode and Audit)."""

    stage: str
    wanted: int  # synthesis: N; revision: the constraints to replace
    written: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    rounds: int = 0
    kept: int = 0
    examples: list[dict[str, str]] = field(default_factory=list)
    active: int | None = None  # revision: the instruction's constraints (the replaced share's denominator)
    surplus: int = 0  # candidates that passed but were not needed (the list was full)

    EXAMPLES = 60  # rejected candidates kept with their reasons, per instruction and stage

    def reject(self, text: str, check: str, reason: str) -> None:
        self.rejected[check] = self.rejected.get(check, 0) + 1
        if len(self.examples) < self.EXAMPLES:
            self.examples.append({"text": text, "check": check, "reason": reason})

    @property
    def shortfall(self) -> str | None:
        """'37 of 39 after 4 rounds' when fewer than wanted were kept, else None."""
        if self.kept >= self.wanted:
            return None
        return f"{self.kept} of {self.wanted} after {self.rounds} round{'s' if self.rounds != 1 else ''}"

    def rejected_share(self, check: str) -> float:
        return self.rejected.get(check, 0) / self.written if self.written else 0.0

    def line(self) -> str:
        """One line: 'synthesis: 58 written, rejected 9 distinct, 6 common; 39 of 39 kept after 3 round(s)'"""
        rejected = ", ".join(f"{n} {check}" for check, n in sorted(self.rejected.items(),
                                                                  key=lambda kv: CHECKS.index(kv[0])
                                                                  if kv[0] in CHECKS else 99))
        kept = self.shortfall or f"{self.kept} of {self.wanted} kept after {self.rounds} round(s)"
        extra = f"; {self.surplus} more not needed" if self.surplus else ""
        return f"{self.stage}: {self.written} written, rejected {rejected or 'none'}; {kept}{extra}"

    def as_json(self) -> dict[str, object]:
        return {"stage": self.stage, "wanted": self.wanted, "written": self.written,
                "rejected": dict(self.rejected), "rounds": self.rounds, "kept": self.kept,
                "examples": list(self.examples), "active": self.active, "surplus": self.surplus}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Ledger:
        known = {k: data[k] for k in ("stage", "wanted", "written", "rejected", "rounds", "kept", "examples",
                                      "active", "surplus") if k in data}
        return cls(**known)  # type: ignore[arg-type]


# -- what the gate did, per condition (report, export, HTML) ------------------------------------------

# The paper's share of common constraints its eval revision replaced (the base article satisfied them).
PAPER_REPLACED = (0.50, 0.60)


@dataclass
class GateSummary:
    """The ledgers of one condition and stage, added up."""

    condition: str
    stage: str  # synthesis | revision | import
    instructions: int = 0
    wanted: int = 0
    written: int = 0
    kept: int = 0
    rounds: int = 0
    short: int = 0  # instructions kept short of what was wanted
    active: int = 0  # revision: constraints of the revised instructions
    rejected: dict[str, int] = field(default_factory=dict)

    def add(self, ledger: Ledger) -> None:
        self.instructions += 1
        self.wanted += ledger.wanted
        self.written += ledger.written
        self.kept += ledger.kept
        self.rounds += ledger.rounds
        self.short += ledger.shortfall is not None
        self.active += ledger.active or 0
        for check, n in ledger.rejected.items():
            self.rejected[check] = self.rejected.get(check, 0) + n

    def share(self, check: str) -> float | None:
        """The share of written candidates ``check`` rejected (None: nothing written)."""
        return self.rejected.get(check, 0) / self.written if self.written else None

    @property
    def replaced_share(self) -> float | None:
        """Revision: the share of the instructions' constraints replaced (the paper's 50-60% for eval)."""
        return self.kept / self.active if self.active else None

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"condition": self.condition, "stage": self.stage,
                                  "instructions": self.instructions, "wanted": self.wanted,
                                  "written": self.written, "kept": self.kept, "rounds": self.rounds,
                                  "short": self.short}
        out |= {f"rejected_{check}": self.rejected.get(check, 0) for check in CHECKS}
        if self.stage == "revision":
            out |= {"active": self.active, "replaced_share": self.replaced_share}
        return out


def summarize_ledgers(rows: Sequence[tuple[str, str, dict[str, object]]]) -> list[GateSummary]:
    """(condition, stage, ledger JSON) rows -> one summary per condition and stage, in order."""
    out: dict[tuple[str, str], GateSummary] = {}
    for condition, stage, data in rows:
        key = (condition, stage)
        out.setdefault(key, GateSummary(condition, stage)).add(Ledger.from_json(data))
    order = {"single": 0, "none": 1, "direct": 2, "eval": 3}
    stages = {"synthesis": 0, "revision": 1, "import": 2}
    return sorted(out.values(),
                  key=lambda s: (order.get(s.condition, 9), s.condition, stages.get(s.stage, 9)))


def check_list(constraints: Sequence[str], references: tuple[str, str] | None) -> Ledger:
    """A finished list (an import) checked, not changed: ``rejected`` counts, for each check on its own,
    the constraints that would fail it (atomic; distinct by token-set from every earlier one; unspecific
    when both references are known), ``kept`` those that would pass them all."""
    ledger = Ledger("import", len(constraints), written=len(constraints))
    earlier = Distinct(cosine_threshold=None)
    for text in constraints:
        failed = False
        problems = [("atomic", atomic_problem(text)), ("distinct", earlier.problem(text))]
        if references is not None:
            problems.append(("unspecific", unspecific_problem(text, *references)))
        for check, problem in problems:
            if problem:
                ledger.reject(text, check, problem)
                failed = True
        earlier.add(text)
        ledger.kept += not failed
    return ledger
