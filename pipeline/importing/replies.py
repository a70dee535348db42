"""The research judge's replies, as its evaluation prompt asks for them (cs4/core/prompts.py,
EVALUATION_PROMPT and EVALUATION_PROMPT_TERSE): one line a constraint, ``i. Yes - "excerpt"``,
``i. No - reason`` or the terse ``i. Yes`` / ``i. No``, then ``Number of constraints satisfied: X``.

JSON is read only when the reply opens with ``{``, ``[`` or a code fence (a bracketed ``[2]`` in a
line reply is text), and the lines are read when JSON gives nothing. A line without a number
continues the item above it; an unnumbered paragraph after the last item is dropped with a
warning, never glued onto that item."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_ITEM = re.compile(
    r"^\s*(?:\*\*)?\s*(\d{1,3})\s*[.):\]]\s*(?:\*\*)?\s*(yes|no)\b(?:\*\*)?\s*[-:\u2013\u2014,]?\s*(.*)$",
    re.IGNORECASE)
_COUNT = re.compile(r"^\s*\**\s*number of constraints satisfied\s*\**\s*:\s*\**\s*(\d+)", re.IGNORECASE)
_OPENING_QUOTES = '"\u201c'
_CLOSING_QUOTES = '"\u201d'


@dataclass
class ParsedReply:
    """Verdicts by 1-based constraint number: {verdict: bool, quote: str, reason: str}."""

    items: dict[int, dict[str, Any]] = field(default_factory=dict)
    stated_count: int | None = None  # the closing "Number of constraints satisfied: X"
    warnings: list[str] = field(default_factory=list)


def parse_judge_reply(text: str, n: int) -> ParsedReply:
    """The verdicts of one reply on ``n`` constraints. Raises ValueError when it holds none."""
    reply = ParsedReply()
    stripped = text.strip()
    if stripped[:1] in "{[" or stripped.startswith("```"):
        reply.items = _json_items(stripped, n)
    if not reply.items:
        _line_items(stripped, n, reply)
    if not reply.items:
        snippet = " ".join(stripped.split())[:80]
        raise ValueError(f"no verdicts for constraints 1..{n} could be read (the reply starts {snippet!r})")
    yes = sum(1 for item in reply.items.values() if item["verdict"])
    if reply.stated_count is not None and reply.stated_count != yes:
        reply.warnings.append(f"the reply says {reply.stated_count} constraints are satisfied "
                              f"but marks {yes} Yes; "
                              "the Yes lines are kept")
    return reply


def _json_items(text: str, n: int) -> dict[int, dict[str, Any]]:
    from pipeline.llm.structured import parse_json_lenient

    try:
        data = parse_json_lenient(text)
    except ValueError:  # ReplyError: no JSON here, the lines are read instead
        return {}
    if isinstance(data, dict):
        data = data.get("verdicts", data.get("results"))
    items: dict[int, dict[str, Any]] = {}
    for raw in data if isinstance(data, list) else []:
        if not isinstance(raw, dict):
            continue
        try:
            number = int(raw.get("id"))  # type: ignore[arg-type]  # None: TypeError, skipped
        except (TypeError, ValueError):
            continue
        verdict = str(raw.get("verdict", "")).strip().lower()
        if verdict in ("yes", "no") and 1 <= number <= n and number not in items:
            items[number] = _item(verdict == "yes", str(raw.get("quote") or ""), str(raw.get("reason") or ""))
    return items


def _line_items(text: str, n: int, reply: ParsedReply) -> None:
    lines = [raw.strip() for raw in text.splitlines()]
    numbered = [i for i, line in enumerate(lines) if _ITEM.match(line)]
    last = numbered[-1] if numbered else -1
    rests: dict[int, list[str]] = {}
    verdicts: dict[int, bool] = {}
    current: int | None = None  # the item an unnumbered line continues (a wrapped excerpt)
    dropped: list[str] = []
    for index, line in enumerate(lines):
        count = _COUNT.match(line)
        if count:
            reply.stated_count = int(count.group(1))
            current = None
            continue
        m = _ITEM.match(line)
        if m:
            number = int(m.group(1))
            current = None
            if 1 <= number <= n and number not in verdicts:
                verdicts[number] = m.group(2).lower() == "yes"
                rests[number] = [m.group(3).strip()]
                current = number
        elif line and index > last >= 0:
            dropped.append(line)  # after the last item: a note, never part of that item
        elif line and current is not None:
            rests[current].append(line)
    if dropped:
        reply.warnings.append(f"{len(dropped)} unnumbered line(s) after the last item dropped "
                              f"(starting {' '.join(dropped[0].split())[:60]!r})")
    for number, yes in verdicts.items():
        rest = " ".join(" ".join(rests[number]).split())
        reply.items[number] = _item(yes, _quote(rest), "") if yes else _item(False, "", rest)


def _quote(rest: str) -> str:
    """The excerpt of a Yes: the text between its outer quotation marks. A quote that itself opens
    with a quotation mark (``""We are not asking," said...``) keeps that mark and its text."""
    if rest[:1] in _OPENING_QUOTES:
        rest = rest[1:]
        if rest[-1:] in _CLOSING_QUOTES:
            rest = rest[:-1]
    return rest.strip()


def _item(verdict: bool, quote: str, reason: str) -> dict[str, Any]:
    return {"verdict": verdict, "quote": quote.strip(), "reason": reason.strip()}
