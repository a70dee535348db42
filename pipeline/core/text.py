"""Rules about text that every room shares: how words are counted, what reads as prose, what
reads as a refusal, and where a judge's quote sits in a text. One definition each: the stages,
the store's migrations, the importers, the reports and the app all use these."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from pipeline.core.redact import redact

_WORD = re.compile(r"\S+")
_LETTER = re.compile(r"[^\W\d_]")
# At least this share of a text's tokens must hold a letter: junk and markup fall under it.
MIN_WORDY = 0.6
# A refusal opens by declining: an apology or an AI disclaimer followed by "I can't / I'd
# rather not..." in the first sentences, or a flat "I cannot help with that". The declining must
# be the writer's own ("I ..."): "the town cannot agree" is an answer.
_APOLOGY = re.compile(r"^\W*(?:i'?m\s+(?:so\s+|very\s+|really\s+)?sorry|i\s+am\s+(?:so\s+|very\s+|really\s+)?sorry"
                      r"|sorry\b|i\s+apologi[sz]e|unfortunately\b|as\s+an?\s+(?:ai|language\s+model))", re.IGNORECASE)
_DECLINE = re.compile(r"\bi\s*(?:'m|am)?\s*(?:can(?:no|')t|cannot|unable|not\s+able|won'?t|will\s+not|would\s+rather"
                      r"|'d\s+rather|must\s+decline|decline)|\bas\s+an?\s+(?:ai|language\s+model)", re.IGNORECASE)
_FLAT_DECLINE = re.compile(
    r"^\W*i\s*(?:can(?:no|')t|cannot|won'?t|will\s+not|am\s+unable\s+to|'m\s+unable\s+to|must\s+decline\s+to)\s+"
    r"(?:help|assist|comply|provide|write|create|fulfil|fulfill|do\s+that|summari[sz]e|complete|produce)", re.IGNORECASE)
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


def prose_problem(text: str) -> str | None:
    """Why ``text`` is not prose, or None when it is."""
    body = text.strip()
    if not body:
        return "the reply is empty"
    if body[0] in "{[<" and body[-1] in "}]>":
        return "the reply is markup or JSON, not prose"
    tokens = _WORD.findall(body)
    wordy = sum(1 for t in tokens if _LETTER.search(t))
    if wordy < MIN_WORDY * len(tokens):
        return f"the reply is not prose (only {wordy} of its {len(tokens)} tokens are words)"
    if redact(body) != body:
        # An endpoint's error page echoing a key ("Incorrect API key provided: sk-..."), not a text:
        # storing it would put the key in the store.
        return "the reply holds a credential (an endpoint's error message, not a text)"
    return None


# -- quotes ------------------------------------------------------------------------------------

# A fuzzy match (rapidfuzz partial alignment) at least this good counts as the quote being found.
FUZZY_MIN_SCORE = 90.0
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"})


@dataclass
class QuoteMatch:
    found: str | None  # exact | fuzzy | missing | None (no quote)
    score: float | None
    span: tuple[int, int] | None  # where the quote sits in the text


def normalise_for_quote(text: str) -> tuple[str, list[int]]:
    """The text as quotes are matched in it: NFC, lower-case, curly quotes and dashes made plain,
    whitespace runs collapsed to one space; with, per character kept, its offset in ``text``, so a
    match maps back to a span of the original."""
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
    return "".join(out), index


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
    if alignment is not None and alignment.score >= FUZZY_MIN_SCORE and alignment.dest_end > alignment.dest_start:
        span = (idx[alignment.dest_start], idx[alignment.dest_end - 1] + 1)
        return QuoteMatch("fuzzy", round(alignment.score, 1), span)
    score = round(alignment.score, 1) if alignment is not None else 0.0
    return QuoteMatch("missing", score, None)
