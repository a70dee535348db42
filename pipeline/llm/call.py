"""What one LLM call is: the sampling parameters it is asked with (``Params``), the answer it
gets (``Completion``), and the request as the store keeps it (redacted JSON)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass
class Params:
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    top_p: float | None = None
    # A GBNF grammar (llama.cpp's server: a top-level `grammar` field of the body). Only for an
    # endpoint with ``gbnf``; others refuse or ignore it. Part of the cache key, like the rest.
    grammar: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    cached: bool
    call_id: int | None
    latency_s: float
    endpoint: str
    via: str = "online"  # or "batch": answered through a batch API (pipeline.llm.batch)


def stored_request(messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    """The request as the store keeps it (the cache, a batch request): JSON of the messages and
    parameters, redacted. A repair round quotes the refused reply, which may be an error page
    echoing a key: the store never holds one (cache keys are computed from the original)."""
    from pipeline.core.redact import redact

    text = json.dumps({"messages": messages, "params": params}, ensure_ascii=False)
    return redact(text) or text
