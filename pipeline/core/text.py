"""Rules about text that every room shares: how words are counted, what reads as prose, what
reads as a refusal, and where a judge's quote sits in a text. One definition each: the stages,
the store's migrations, the importers, the reports and the app all use these."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from itertools import groupby
from pathlib import Path

from pipeline.core.redact import redact

_WORD = re.compile(r"\S+")
# A refusal opens by declining: an apology or an AI disclaimer followed by "I can't / I'd
# rather not..." in the first sentences, or a flat "I cannot help with that". The declining must
# be the writer's own ("I ..."): "the town cannot agree" is an answer.
_APOLOGY = re.compile(r"^\W*(?:i'?m\s+(?:so\s+|very\s+|really\s+)?sorry|i\s+am\s+(?:so\s+|"
                      r"very\s+|really\s+)?sorry"
                      r"|sorry\b|i\s+apologi[sz]e|unfortunately\b|as\s+an?\s+(?:ai|language\s+model))",
                      re.IGNORECASE)
_DECLINE = re.compile(r"\bi\s*(?:'m|am)?\s*(?:can(?:no|')t|cannot|unable|not\s+able|won'?t|"
                      r"will\s+not|would\s+rather"
                      r"|'d\s+rather|must\s+decline|decline)|\bas\s+an?\s+(?:ai|language\s+model)",
                      re.IGNORECASE)
_FLAT_DECLINE = re.compile(
    r"^\W*i\s*(?:can(?:no|')t|cannot|won'?t|will\s+not|am\s+unable\s+to|'m\s+unable\s+to|"
    r"must\s+decline\s+to)\s+"
    r"(?:help|assist|comply|provide|write|create|fulfil|fulfill|do\s+that|summari[sz]e|complete|produce)",
    re.IGNORECASE)
# A refusal is short: a long text that quotes someone saying "I'm sorry, I can't" is an answer.
REFUSAL_MAX_WORDS = 120


def count_words(text: str) -> int:
    """Whitespace-separated tokens: the one word count of stored texts, targets and filters."""
    return len(_WORD.findall(text))


def is_refusal(text: str) -> bool:
    """A short reply that opens by declining the task ("I'm sorry, but I can't help with that")."""
    body = text.strip()
    if not body or count_words(body) > REFUSAL_MAX_WORDS:
        return False
    head = body[:200]
    return _FLAT_DECLINE.search(head) is not None or (
        _APOLOGY.search(head) is not None and _DECLINE.search(head[:160]) is not None)


# -- prose -------------------------------------------------------------------------------------

# The English words the prose contract knows: the words of 3 or more of the 6,049 news articles
# the project installs (bench/build_wordlist.py writes the list; nothing is downloaded).
_WORD_LIST = Path(__file__).with_name("english_words.txt")
# A token's edges that prose has (punctuation, quotes, dashes), and within them up to two marks
# of markdown emphasis (**bold**, _it_, `code`); what is left is the token's core. "%%%", "##",
# "@@", "<b>" around a word are no edges: "%%%garbage%%%" is no word.
_EDGES = ".,;:!?\"'()[]{}«»“”‘’„‚—–-…"
_EMPHASIS = re.compile(r"^[*_`]{1,2}(.*?)[*_`]{0,2}$")
_WORD_CORE = re.compile(r"[^\W\d_]+(?:['’.\-][^\W\d_]+)*")  # don't, U.S, well-known, O'Brien
# 2019, 25%, $4.5bn, COVID-19, 10:30
_NUMBER_CORE = re.compile(r"[$€£¥]?[+\-−]?[\w.,:/%+\-−']*\d[\w.,:/%+\-−']*")
_WORD_PARTS = re.compile(r"[^\W\d_]+")
# JSON or markup cut short has no closing bracket: '{"verdicts": [{"id": 1, "verdict": "ye', '<html><body>5'.
_OPENS_AS_CODE = re.compile(r"[\[{]\s*[\"\[{]|<[A-Za-z!/?]")
# At least this share of a text's tokens must be words: numbers, markup, links and symbols fall
# outside. "In 2019, 3 of 12 boats (25%) sank off the quay" has 71%, a markdown table under 45%.
MIN_WORDY = 0.5
# At most this share may be neither word, number nor punctuation: links, code, "%%%junk%%%".
MAX_SYMBOLIC = 0.2
# At least this share of the words must be English words (the word list) or words of the text the
# reply was written from (its names): news prose is above 0.9, lorem ipsum about 0.25.
MIN_KNOWN = 0.5
# A phrase of up to MAX_RUN_PERIOD words said again and again in a row is junk ("word word word
# ..."): RUN_JUNK times or more, or 3 times or more when the run is half the text. News prose has
# "ta, ta, ta, ta, ta!" (5); a sentence repeated whole is longer than a phrase and passes.
MAX_RUN_PERIOD = 5
RUN_JUNK = 8
# Longer than this, a run of letters is no word: base64, hashes, glued-up tokens.
MAX_WORD_LETTERS = 30


@dataclass(frozen=True)
class Token:
    core: str  # the token without the edges prose has
    kind: str  # word | number | mark (punctuation alone) | symbolic (links, code, junk)


def tokens(text: str) -> list[Token]:
    """Each whitespace-separated token of ``text``, with what it is."""
    out = []
    for raw in text.split():
        if raw.isalpha() and len(raw) <= MAX_WORD_LETTERS:  # most tokens of prose: no edges to strip
            out.append(Token(raw, "word"))
            continue
        core = raw.strip(_EDGES)
        emphasis = _EMPHASIS.match(core)
        if emphasis is not None and core[-1:] in "*_`":
            core = emphasis.group(1).strip(_EDGES)
        if not any(ch.isalnum() for ch in raw):
            kind = "mark"  # punctuation alone: "—", "&", "*", "##", "|---|"
        elif "://" in core or core.lower().startswith("www."):
            kind = "symbolic"
        elif _WORD_CORE.fullmatch(core):
            kind = "word" if len(core) <= MAX_WORD_LETTERS else "symbolic"
        elif _NUMBER_CORE.fullmatch(core) and len(core) <= 20:
            kind = "number"
        else:
            kind = "symbolic"
        out.append(Token(core, kind))
    return out


@lru_cache(maxsize=1)
def english_words() -> frozenset[str]:
    return frozenset(_WORD_LIST.read_text(encoding="utf-8").split())


def _vocabulary(text: str) -> set[str]:
    """The words of ``text``, lower-case, whole and part by part (Okonjo-Iweala: okonjo, iweala)."""
    words = {t.core.lower().replace("’", "'") for t in tokens(text) if t.kind == "word"}
    return words | {p for w in words for p in _WORD_PARTS.findall(w)}


def _is_known(word: str, vocabulary: frozenset[str] | set[str]) -> bool:
    """An English word or one of ``vocabulary``: whole, without its possessive, or part by part
    (well-known, U.S, rock'n'roll)."""
    word = word.lower().replace("’", "'")
    if word in vocabulary:
        return True
    if word.endswith("'s"):
        word = word[:-2]
    known = english_words()
    return word in known or all(len(p) == 1 or p in known or p in vocabulary
                                for p in _WORD_PARTS.findall(word))


def _junk_run(cores: list[str]) -> tuple[str, int] | None:
    """The phrase of at most MAX_RUN_PERIOD tokens said most times in a row, when that run is
    junk (RUN_JUNK times, or 3 times and half the text): (phrase, times)."""
    worst: tuple[str, int] | None = None
    for period in range(1, MAX_RUN_PERIOD + 1):
        start = 0
        # Runs of tokens equal to the one a period before: a run of k of them is a phrase said
        # (k + period) // period times.
        for equal, run in groupby(a == b for a, b in zip(cores, cores[period:], strict=False)):
            same = sum(1 for _ in run)
            if equal:
                times = (same + period) // period
                junk = times >= RUN_JUNK or (times >= 3 and times * period * 2 >= len(cores))
                if junk and (worst is None or times > worst[1]):
                    worst = (" ".join(cores[start:start + period]), times)
            start += same
    return worst


def prose_problem(text: str, *, source: str = "") -> str | None:
    """Why ``text`` is not prose, or None when it is. ``source`` is the text it was written from
    (the response a summary summarises, the instruction of a response): its words count as known
    words, so names and rare words taken from it pass."""
    body = text.strip()
    if not body:
        return "the reply is empty"
    if (body[0] in "{[<" and body[-1] in "}]>") or _OPENS_AS_CODE.match(body):
        return "the reply is markup or JSON, not prose"
    if redact(body) != body:
        # An endpoint's error page echoing a key ("Incorrect API key provided: sk-..."), not a text:
        # storing it would put the key in the store.
        return "the reply holds a credential (an endpoint's error message, not a text)"
    found = tokens(body)
    n = len(found)
    words = [t.core for t in found if t.kind == "word"]
    if len(words) < MIN_WORDY * n:
        return f"the reply is not prose (only {len(words)} of its {n} tokens are words)"
    symbolic = sum(1 for t in found if t.kind == "symbolic")
    if symbolic > MAX_SYMBOLIC * n:
        return f"the reply is not prose ({symbolic} of its {n} tokens are symbols, links or code)"
    run = _junk_run([t.core.lower() for t in found if t.kind != "mark"])
    if run is not None:
        return f"the reply is not prose (it says {run[0]!r} {run[1]} times in a row)"
    vocabulary = _vocabulary(source) if source else set()
    known = sum(1 for w in words if _is_known(w, vocabulary))
    if known < MIN_KNOWN * len(words):
        return (f"the reply is not prose (only {known} of its {len(words)} words are "
                "English words or words of the text it was written from: gibberish or lorem ipsum)")
    return None


# -- quotes ------------------------------------------------------------------------------------

# A fuzzy match (rapidfuzz partial alignment) at least this good counts as the quote being found.
FUZZY_MIN_SCORE = 90.0
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
                         "\u2013": "-", "\u2014": "-"})


@dataclass
class QuoteMatch:
    found: str | None  # exact | fuzzy | missing | None (no quote)
    score: float | None
    span: tuple[int, int] | None  # where the quote sits in the text


def normalise_for_quote(text: str) -> tuple[str, tuple[int, ...]]:
    """The text as quotes are matched in it: NFC, lower-case, curly quotes and dashes made plain,
    whitespace runs collapsed to one space; with, per character kept, its offset in ``text``, so a
    match maps back to a span of the original. The offsets are a tuple: callers cache them, and
    the garbage collector walks a cached list of a text's every offset in each full collection."""
    out: list[str] = []
    index: list[int] = []
    prev_space = False
    for i, ch in enumerate(unicodedata.normalize("NFC", text)):
        ch = ch.translate(_QUOTES).lower()
        if ch.isspace():
            if prev_space:
                continue
            ch, prev_space = " ", True
        else:
            prev_space = False
        out.append(ch)
        index.append(i)
    return "".join(out), tuple(index)


def bare_quote(quote: str) -> str:
    """A judge's quote without its quotation marks and the full stop it may end on ('' when empty)."""
    q = quote.strip().strip("\"'\u201c\u201d\u2018\u2019").strip()
    return (q.rstrip(".").strip() or q) if q else ""


def find_quote(quote: str, text: str) -> QuoteMatch:
    """Where a judge's quote occurs in the text: exact (after ``normalise_for_quote``), else fuzzy
    (partial alignment >= FUZZY_MIN_SCORE), else missing (a possibly hallucinated quote)."""
    q = bare_quote(quote)
    if not q:
        return QuoteMatch(None, None, None)
    nq, _ = normalise_for_quote(q)
    nt, idx = normalise_for_quote(text)
    pos = nt.find(nq)
    if pos != -1:
        return QuoteMatch("exact", 100.0, (idx[pos], idx[pos + len(nq) - 1] + 1))
    from rapidfuzz import fuzz

    alignment = fuzz.partial_ratio_alignment(nq, nt, score_cutoff=0)
    if (alignment is not None and alignment.score >= FUZZY_MIN_SCORE
        and alignment.dest_end > alignment.dest_start):
        span = (idx[alignment.dest_start], idx[alignment.dest_end - 1] + 1)
        return QuoteMatch("fuzzy", round(alignment.score, 1), span)
    score = round(alignment.score, 1) if alignment is not None else 0.0
    return QuoteMatch("missing", score, None)
