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
    # Ask for the top log-probabilities of each reply token (OpenAI's chat form: ``logprobs`` true,
    # ``top_logprobs`` how many). Part of the cache key: a reply asked without them is another entry.
    logprobs: bool | None = None
    top_logprobs: int | None = None
    # Each message's content is a whole prompt (chat template applied), all sent as one completions
    # request with a list ``prompt``: with ``logprobs``, scored for their next token (the reply's
    # ``logprobs`` hold one entry per prompt); without, each written, and the completion's text is the
    # JSON list of the replies, in the prompts' order (pipeline.llm.prompt_batch serves both on the
    # embedded server; vLLM takes lists too).
    prompt_list: bool | None = None

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
    # Per reply token, its top alternatives {token: log-probability}, when they were asked and the
    # endpoint gave them; None otherwise (the caller decides what a missing one means).
    logprobs: list[dict[str, float]] | None = None
    # Of ``prompt_tokens``, those the endpoint read from its own prompt cache (OpenAI's and llama.cpp's
    # ``usage.prompt_tokens_details.cached_tokens``), as it reported them; None when it said nothing
    # (missing is missing, not 0). Priced at the endpoint's cached price (pipeline.llm.pricing).
    cached_prompt_tokens: int | None = None


def reply_cached_tokens(usage: Any, prompt_tokens: int) -> int | None:
    """The prompt tokens a reply's ``usage`` says the endpoint served from its prompt cache
    (``prompt_tokens_details.cached_tokens``: OpenAI's form, which llama.cpp's server and the embedded
    one, through pipeline.llm.cache_report, share). None when the reply does not say; never more than
    ``prompt_tokens``."""
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if isinstance(cached, bool) or not isinstance(cached, (int, float)) or cached < 0:
        return None
    return min(int(cached), prompt_tokens)


def reply_logprobs(choice: Any) -> list[dict[str, float]] | None:
    """The top log-probabilities of a chat completion choice (OpenAI's form, which llama.cpp's and
    vLLM's servers share): per reply token, {token: logprob} of its alternatives, the chosen one
    included. None when the choice carries none."""
    try:
        content = choice["logprobs"]["content"]
    except (KeyError, TypeError):
        return None
    if not isinstance(content, list) or not content:
        return None
    out: list[dict[str, float]] = []
    for entry in content:
        if not isinstance(entry, dict):
            return None
        tops = {str(t["token"]): float(t["logprob"]) for t in entry.get("top_logprobs") or []
                if isinstance(t, dict) and "token" in t and isinstance(t.get("logprob"), (int, float))}
        if isinstance(entry.get("logprob"), (int, float)) and "token" in entry:
            tops.setdefault(str(entry["token"]), float(entry["logprob"]))
        out.append(tops)
    return out


def prompt_list_texts(response: Any, n: int) -> list[str] | None:
    """Per prompt of a completions reply to ``n`` prompts, its written text (choices put in their
    ``index`` order); None unless every prompt has exactly one."""
    choices = response.get("choices") if isinstance(response, dict) else None
    if not isinstance(choices, list) or len(choices) != n:
        return None
    by_index = {c.get("index"): c.get("text") for c in choices if isinstance(c, dict)}
    if sorted(k for k in by_index if isinstance(k, int)) != list(range(n)):
        return None
    texts = [by_index[i] for i in range(n)]
    return [str(t) for t in texts] if all(isinstance(t, str) for t in texts) else None


def prompt_list_logprobs(response: Any, n: int) -> list[dict[str, float]] | None:
    """Per prompt of a completions reply to ``n`` prompts, the top log-probabilities of its one
    token ({token: logprob}); None unless every prompt has its choice and alternatives."""
    try:
        choices = sorted(response["choices"], key=lambda c: int(c["index"]))
        tops = [c["logprobs"]["top_logprobs"][0] for c in choices]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    if len(tops) != n or [int(c["index"]) for c in choices] != list(range(n)):
        return None
    out: list[dict[str, float]] = []
    for top in tops:
        if not isinstance(top, dict):
            return None
        out.append({str(t): float(v) for t, v in top.items() if isinstance(v, (int, float))})
    return out


def encode_logprobs(logprobs: list[dict[str, float]] | None) -> str | None:
    """As the store keeps them (llm_calls.logprobs, batch_requests.logprobs): JSON, or NULL."""
    return None if logprobs is None else json.dumps(logprobs, ensure_ascii=False)


def decode_logprobs(stored: str | None) -> list[dict[str, float]] | None:
    if not stored:
        return None
    try:
        value = json.loads(stored)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def stored_request(messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    """The request as the store keeps it (the cache, a batch request): JSON of the messages and
    parameters, redacted. A repair round quotes the refused reply, which may be an error page
    echoing a key: the store never holds one (cache keys are computed from the original)."""
    from pipeline.core.redact import redact

    text = json.dumps({"messages": messages, "params": params}, ensure_ascii=False)
    return redact(text) or text
