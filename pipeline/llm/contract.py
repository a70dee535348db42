"""The output contract of generated prose: what a reply must be before it is accepted, cached
and stored.

A 200 OK is not an answer. An endpoint in trouble sends junk ("%%%garbage%%%", an HTML error
page, a JSON envelope, half a reply) with a success status, and a writer model may refuse.
Each generated text is checked here; a reply that breaks the contract raises ReplyError, so
the client never caches it and the caller's repair round asks again:

- prose (every generated text, ``pipeline.core.text.prose_problem``): mostly words, not markup,
  JSON, links or symbols ("%%%garbage%%%"); no word or phrase said over and over; and words that
  are English (a word list) or taken from the text the reply was written from, so lorem ipsum
  and gibberish fail. A junk reply from a model under test is no answer: its unit fails;
- not a refusal (texts we generate to measure with: base articles, summaries). A refusal
  from a *model under test* is different: it is that model's answer, kept, and flagged
  (``is_refusal``) in the report and the app;
- a summary's length within ``[1 - slack, 1 + slack]`` of its target (0.5x-1.5x by default).
"""

from __future__ import annotations

from pipeline.core.text import count_words, is_refusal, prose_problem
from pipeline.llm.client import ReplyError

__all__ = ["check_length", "check_prose", "is_refusal", "prose_problem"]


def check_prose(text: str, *, what: str, refusal_fails: bool, source: str = "") -> str:
    """``text`` if it keeps the contract of prose (and, with ``refusal_fails``, is no refusal);
    else ReplyError carrying the reply, for the repair round. ``source``: the text the reply was
    written from (the response summarised, the instruction answered): its names are words."""
    problem = prose_problem(text, source=source)
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
    n = count_words(text)
    margin = max(target * slack, at_least)
    low, high = max(1, round(target - margin)), round(target + margin)
    if not low <= n <= high:
        raise ReplyError(f"the {what} has {n} words; about {target} were asked for "
                         f"({low} to {high} accepted)",
                         reply=text)
    return text
