"""Several prompts in one request for the embedded llama.cpp server: OpenAI's completions form with a
list ``prompt`` (as vLLM takes it), scored for their next token only.

A yes_no judge asks one token per constraint, each prompt the same text followed by one
constraint. Sent one request at a time, each pays the server's fixed cost (the HTTP request, the
chat template, tokenizing the whole prompt again, matching its cached prefix, a sampler and the
log-probability loop) on top of the constraint's few new tokens: about as long as the tokens
themselves (issue 49's bench: 0.74 s a call, twice its tokens at the raw prompt speed).

``install()`` replaces the server's ``/v1/completions`` route with one that serves a list of two
or more prompts with ``max_tokens`` 1 here, and hands anything else to llama-cpp-python's own
route. Each prompt is evaluated, in turn, from where it parts from what the model holds (the
previous prompt: the text they share is read once), as its own request would be, and its last
position's log-probabilities read: the best ``logprobs`` alternatives, in the completions form
(``choices[i].logprobs.top_logprobs[0]``). The usage says how many prompt tokens came from the cache
(``prompt_tokens_details.cached_tokens``): each prompt's part shared with the one before.

Safety, as with pipeline.llm.fast_logprobs: only llama-cpp-python ``PINNED_LLAMA_CPP`` is patched
(``NotInstalled`` otherwise, and the server's log says so: lists of prompts are then refused as the
library refuses them, and the client judges one call a constraint); ``UNSPECIFIC_PROMPT_BATCH=0``
turns it off. It runs in the server's process (pipeline.llm.local_model's bootstrap).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

PINNED_LLAMA_CPP = "0.3.36"  # as pipeline.llm.fast_logprobs
SWITCH = "UNSPECIFIC_PROMPT_BATCH"
_OFF = ("0", "false", "off", "no")
ROUTE = "/v1/completions"
MAX_TOP = 20  # OpenAI's completions API allows 5, chat 20: more is refused


class NotInstalled(Exception):
    """The patch was not installed; llama-cpp-python's own route serves every request."""


def top_alternatives(logits: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` best tokens of one position and their log-probabilities, best first."""
    top = float(np.max(logits))
    shifted = logits.astype(np.float64) - top
    log_total = float(np.log(np.sum(np.exp(shifted))))
    k = max(1, min(k, len(logits)))
    best = np.argpartition(shifted, -k)[-k:]
    best = best[np.argsort(-shifted[best], kind="stable")]
    return [(int(t), float(shifted[t] - log_total)) for t in best]


def next_token_logits(llama: Any, tokens: Sequence[int]) -> np.ndarray:
    """``tokens`` evaluated after the cached ones; the logits of the last one. ``Llama.eval`` computes
    only that row where pipeline.llm.prompt_logits is installed (every row otherwise)."""
    llama.eval(list(tokens))
    return np.array(llama.scores[llama.n_tokens - 1, :], dtype=np.float32)


def score_prompts(llama: Any, prompts: Sequence[str], top: int) -> tuple[list[list[tuple[int, float]]], int, int]:
    """Each prompt's next-token alternatives; with the prompt tokens in all and those the cache gave.

    Each prompt is evaluated from where it parts from what the model holds (the previous prompt, or
    the previous request's tokens for the first), as a request of its own would be: the same tokens in
    the same batches, so its logits are those of one call each, not merely close to them. Evaluated
    once for all and then each tail, P(Yes) moved by up to 0.047 and the 205-item check's kappa by
    0.03 (docs/measurements.md)."""
    bos = [llama.token_bos()] if llama._model.add_bos_token() and llama.token_bos() >= 0 else []
    tokens = [bos + llama.tokenize(p.encode("utf-8"), add_bos=False, special=True) for p in prompts]
    if any(not t for t in tokens):
        raise ValueError("an empty prompt has no next token to score")
    out = []
    cached = 0
    for t in tokens:
        held = llama.longest_token_prefix(llama._input_ids[: llama.n_tokens], t)
        held = min(held, len(t) - 1)  # its last token is evaluated again: its logits are the answer
        llama.n_tokens = held
        out.append(top_alternatives(next_token_logits(llama, t[held:]), top))
        cached += held
    return out, sum(len(t) for t in tokens), cached


def completion_body(llama: Any, model: str, scored: list[list[tuple[int, float]]], total: int,
                    cached: int) -> dict[str, Any]:
    """The OpenAI completions reply: per prompt its best token as the text, its alternatives."""
    def text(token: int) -> str:
        return str(llama.detokenize([token]).decode("utf-8", errors="ignore"))

    choices = []
    for i, alternatives in enumerate(scored):
        tops: dict[str, float] = {}
        for token, logprob in alternatives:
            tops.setdefault(text(token), logprob)
        best, best_logprob = alternatives[0]
        choices.append({"text": text(best), "index": i, "finish_reason": "length", "logprobs": {
            "tokens": [text(best)], "token_logprobs": [best_logprob], "top_logprobs": [tops], "text_offset": [0]}})
    n = len(scored)
    return {"id": f"cmpl-batch-{time.monotonic_ns()}", "object": "text_completion", "created": int(time.time()),
            "model": model, "choices": choices,
            "usage": {"prompt_tokens": total, "completion_tokens": n, "total_tokens": total + n,
                      "prompt_tokens_details": {"cached_tokens": cached}}}


def switched_off(environ: Mapping[str, str]) -> bool:
    return environ.get(SWITCH, "").strip().lower() in _OFF


def install(environ: Mapping[str, str] = os.environ) -> None:
    """Serve lists of prompts on the server's completions route. Raises NotInstalled, changing
    nothing, when switched off or on a llama-cpp-python it was not written for."""
    if switched_off(environ):
        raise NotInstalled(f"turned off by {SWITCH}={environ[SWITCH]}")
    import llama_cpp

    version = getattr(llama_cpp, "__version__", "unknown")
    if version != PINNED_LLAMA_CPP:
        raise NotInstalled(f"llama-cpp-python {version} is not {PINNED_LLAMA_CPP}, whose completions route this wraps")
    import contextlib

    from fastapi import HTTPException, Request
    from fastapi.routing import APIRoute
    from llama_cpp.server import app as server_app
    from llama_cpp.server.types import CreateCompletionRequest
    from starlette.concurrency import run_in_threadpool

    router = server_app.router
    at = next((i for i, r in enumerate(router.routes) if isinstance(r, APIRoute) and r.path == ROUTE), None)
    if at is None:
        raise NotInstalled(f"llama_cpp.server has no {ROUTE} route to wrap")
    own = router.routes[at]
    if getattr(own.endpoint, "_prompt_batch", False):
        return
    own_endpoint = own.endpoint  # type: ignore[attr-defined]

    async def create_completion(request: Request, body: CreateCompletionRequest) -> Any:
        prompts = body.prompt
        if not (isinstance(prompts, list) and len(prompts) > 1):
            return await own_endpoint(request, body)
        if body.max_tokens != 1 or body.stream:
            raise HTTPException(status_code=400, detail="a list of prompts is scored for one token: set max_tokens "
                                "to 1 (no stream)")
        top = int(body.logprobs or 1)
        if not 1 <= top <= MAX_TOP:
            raise HTTPException(status_code=400, detail=f"logprobs: 1 to {MAX_TOP} alternatives")
        async with contextlib.asynccontextmanager(server_app.get_llama_proxy)() as proxy:
            llama = proxy(body.model)
            scored, total, cached = await run_in_threadpool(score_prompts, llama, list(prompts), top)
            return completion_body(llama, body.model or "", scored, total, cached)

    # FastAPI reads the parameters' types from the annotations: the classes themselves (this module's
    # annotations are strings, and these names are local to install()).
    create_completion.__annotations__ = {"request": Request, "body": CreateCompletionRequest, "return": Any}
    create_completion._prompt_batch = True  # type: ignore[attr-defined]
    # The library's own route class (it turns errors into OpenAI-style replies), as the route it replaces.
    route = type(own)(ROUTE, create_completion, methods=["POST"], dependencies=own.dependencies,
                      summary=own.summary, tags=own.tags, include_in_schema=own.include_in_schema)
    router.routes[at] = route
