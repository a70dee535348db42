"""Structured output: the response format an endpoint takes for a JSON schema, lenient parsing
of a model's JSON, the error a refused reply raises, and the message of a repair round."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from pipeline.core.config import Endpoint

T = TypeVar("T")


def structured_format(ep: Endpoint, schema: dict[str, Any]) -> dict[str, Any] | None:
    if ep.structured == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    if ep.structured == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": False}}
    if ep.structured == "json_object":
        return {"type": "json_object"}
    return None


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


class ReplyError(ValueError):
    """A reply that broke the contract; carries the reply for the repair round."""

    def __init__(self, msg: str, reply: str | None = None) -> None:
        super().__init__(msg)
        self.reply = reply


def accept_json(text: str, validate: Callable[[Any], T]) -> T:
    """``validate`` of the reply's JSON (parse_json_lenient); whatever it refuses (a ValueError) is
    a ReplyError carrying the reply, for the repair round."""
    try:
        return validate(parse_json_lenient(text))
    except ReplyError:
        raise
    except ValueError as exc:
        raise ReplyError(str(exc), reply=text) from None


def parse_json_lenient(text: str) -> Any:
    """Parse JSON from a model's reply: fences, preambles, raw control characters, trailing
    chatter. Raises ReplyError (a ValueError) naming what was wrong."""
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if start != -1 and end > start:
            candidates.append(text[start : end + 1])
    decoder = json.JSONDecoder(strict=False)  # small models put raw newlines inside strings
    for cand in candidates:
        if not cand:
            continue
        try:
            return decoder.decode(cand)
        except json.JSONDecodeError:
            pass
        # Valid JSON followed by chatter: take the first complete value.
        for i, ch in enumerate(cand):
            if ch in "{[":
                try:
                    value, _ = decoder.raw_decode(cand, i)
                    return value
                except json.JSONDecodeError:
                    break
    snippet = text.strip().replace("\n", " ")[:120]
    raise ReplyError(f"no JSON found in the reply (starts: {snippet!r})", reply=text)


def repair_message(error: str, schema: dict[str, Any] | None) -> str:
    if schema is None:
        return f"Your previous reply could not be used: {error}.\nReply again with only what was asked for."
    return (
        "Your previous reply could not be used: "
        f"{error}.\nReply again with only a JSON value that matches this schema, and nothing else:\n"
        f"{json.dumps(schema, ensure_ascii=False)}"
    )
