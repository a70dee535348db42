"""The output contract of generated prose: what a reply must be before it is accepted, cached
and stored.

A 200 OK is not an answer. An endpoint in trouble sends junk ("%%%garbage%%%", an HTML error
page, a JSON envelope, half a reply) with a success status, and a writer model may refuse.
Each generated text is checked here; a reply that breaks the contract raises ReplyError, so
the client never caches it and the caller's repair round asks again:

- prose: mostly words of letters, not markup, JSON or symbols (every generated text);
- not a refusal (texts we generate to measure with: base articles, summaries). A refusal
  from a *model under test* is different: it is that model's answer, kept, and flagged
  (``is_refusal``) in the report and the app;
- a summary's length within ``[1 - slack, 1 + slack]`` of its target (0.5x-1.5x by default).
"""

from __future__ import annotations

import re

from .llm import ReplyError
from .redact import redact

# At least this share of a text's tokens must hold a letter: junk and markup fall under it.
MIN_WORDY = 0.6
_WORD = re.compile(r"\S+")
_LETTER = re.compile(r"[^\W\d_]")
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


def words(text: str) -> int:
    return len(_WORD.findall(text))


def is_refusal(text: str) -> bool:
    """A short reply that opens by declining the task ("I'm sorry, but I can't help with that")."""
    body = text.strip()
    if not body or words(body) > REFUSAL_MAX_WORDS:
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


def check_prose(text: str, *, what: str, refusal_fails: bool) -> str:
    """``text`` if it keeps the contract of prose (and, with ``refusal_fails``, is no refusal);
    else ReplyError carrying the reply, for the repair round."""
    problem = prose_problem(text)
    if problem is None and refusal_fails and is_refusal(text):
        problem = f"the reply refuses the task instead of writing the {what}"
    if problem is not None:
        raise ReplyError(f"{problem}; a {what} was asked for", reply=text)
    return text


def check_length(text: str, target: int, slack: float | None, *, what: str, at_least: int = 0) -> str:
    """``text`` if its words are within ``[1 - slack, 1 + slack]`` of ``target`` (any length
    when ``slack`` is None), a band never narrower than ``at_least`` words either side."""
    if slack is None:
        return text
    n = words(text)
    margin = max(target * slack, at_least)
    low, high = max(1, round(target - margin)), round(target + margin)
    if not low <= n <= high:
        raise ReplyError(f"the {what} has {n} words; about {target} were asked for ({low} to {high} accepted)",
                         reply=text)
    return text
