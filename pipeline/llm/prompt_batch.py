"""Several prompts in one request for the embedded llama.cpp server: OpenAI's completions form with a
list ``prompt`` (as vLLM takes it), scored for their next token only (``max_tokens`` 1), or written
together (more tokens: ``generate_prompts``, below).

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

from pipeline.llm import server_patch
from pipeline.llm.server_patch import PINNED_LLAMA_CPP, NotInstalled  # noqa: F401  (the tests' names)

SWITCH = "UNSPECIFIC_PROMPT_BATCH"
ROUTE = "/v1/completions"
MAX_TOP = 20  # OpenAI's completions API allows 5, chat 20: more is refused


MAX_SEQUENCES = 8  # prompts written together: the batch context's sequences
BATCH_CONTEXT = "_unspecific_batch_context"


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


def score_prompts(llama: Any, prompts: Sequence[str],
                  top: int) -> tuple[list[list[tuple[int, float]]], int, int]:
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
            "tokens": [text(best)], "token_logprobs": [best_logprob], "top_logprobs": [tops],
            "text_offset": [0]}})
    n = len(scored)
    return {"id": f"cmpl-batch-{time.monotonic_ns()}", "object": "text_completion",
            "created": int(time.time()),
            "model": model, "choices": choices,
            "usage": {"prompt_tokens": total, "completion_tokens": n, "total_tokens": total + n,
                      "prompt_tokens_details": {"cached_tokens": cached}}}


# -- written together -------------------------------------------------------------------------
# Writing is bound by reading the weights from memory, once a token: on 2 cores the embedded model
# reads prompts at 37 tokens a second and writes 8.6 (bench/demo.py, the same run). Several replies
# written in one batch read the weights once a step for all of them. llama-cpp-python's server
# writes one sequence at a time (its context holds one), so the prompts are written in a second
# context on the same model, with room for MAX_SEQUENCES sequences: the prompts' shared prefix is
# evaluated in the server's own context as a request would (from its cache), its cells copied
# across once and shared by every sequence, then each prompt's own tail and reply go on in its own
# sequence. Each reply is sampled by the chain a request of its own gets (``Llama._init_sampler``:
# pipeline.llm.grammar_sampling's where installed), at its own seed (the request's, plus its index).


def _batch_context(llama: Any) -> Any:
    """The second context on the server's model, made once and closed before the model (it is
    entered last on the model's own exit stack)."""
    ctx = getattr(llama, BATCH_CONTEXT, None)
    if ctx is None:
        import contextlib

        from llama_cpp import _internals as internals

        own = llama.context_params
        params = type(own).from_buffer_copy(own)
        params.n_seq_max = MAX_SEQUENCES
        params.kv_unified = True  # one cache for all: the shared prefix's cells are held once
        params.embeddings = False
        ctx = llama._stack.enter_context(contextlib.closing(
            internals.LlamaContext(model=llama._model, params=params, verbose=False)))
        setattr(llama, BATCH_CONTEXT, ctx)
    return ctx


def _shared_length(tokens: Sequence[Sequence[int]]) -> int:
    """The prompts' common prefix, leaving each at least its last token to evaluate (its logits)."""
    first = tokens[0]
    n = min(len(t) for t in tokens) - 1
    for i in range(max(0, n)):
        if any(t[i] != first[i] for t in tokens[1:]):
            return i
    return max(0, n)


class _Batch:
    """One llama_batch, filled with (token, position, sequence, wants logits) rows."""

    def __init__(self, llama_cpp: Any, size: int) -> None:
        self._lib = llama_cpp
        self.size = size
        self.batch = llama_cpp.llama_batch_init(size, 0, 1)

    def decode(self, ctx: Any, rows: Sequence[tuple[int, int, int, bool]]) -> None:
        batch = self.batch
        for j, (token, pos, seq, logits) in enumerate(rows):
            batch.token[j], batch.pos[j], batch.n_seq_id[j] = token, pos, 1
            batch.seq_id[j][0], batch.logits[j] = seq, logits
        batch.n_tokens = len(rows)
        code = self._lib.llama_decode(ctx.ctx, batch)
        if code != 0:
            raise RuntimeError(f"llama_decode returned {code} for {len(rows)} tokens")

    def close(self) -> None:
        self._lib.llama_batch_free(self.batch)


def generate_prompts(llama: Any, prompts: Sequence[str], sampling: Mapping[str, Any], *, seed: int | None,
                     max_tokens: int, grammar: Any | None) -> tuple[list[tuple[str, str, int]], int, int]:
    """Each prompt's reply (text, finish reason, tokens written), written together; with the prompt
    tokens in all and those not evaluated anew (the cache's, and the shared prefix's for every
    prompt after the first)."""
    import llama_cpp

    if not 1 < len(prompts) <= MAX_SEQUENCES:
        raise ValueError(f"2 to {MAX_SEQUENCES} prompts are written together, not {len(prompts)}")
    bos = [llama.token_bos()] if llama._model.add_bos_token() and llama.token_bos() >= 0 else []
    tokens = [bos + llama.tokenize(p.encode("utf-8"), add_bos=False, special=True) for p in prompts]
    if any(not t for t in tokens):
        raise ValueError("an empty prompt has nothing to continue")
    shared = _shared_length(tokens)
    room = shared + sum(len(t) - shared + max_tokens for t in tokens)
    if room > llama.n_ctx():
        raise ValueError(f"the prompts and their max_tokens need {room} cells of the "
                         f"context's {llama.n_ctx()}")
    # The prefix as a request of its own would find it: from the server's cache, the rest evaluated.
    held = llama.longest_token_prefix(llama._input_ids[: llama.n_tokens], tokens[0][:shared])
    llama.n_tokens = held
    if held < shared:
        llama.eval(tokens[0][held:shared])
    ctx = _batch_context(llama)
    memory = llama_cpp.llama_get_memory(ctx.ctx)
    llama_cpp.llama_memory_clear(memory, True)
    own_seed = llama._seed
    batch = _Batch(llama_cpp, max(llama.n_batch, len(tokens)))
    try:
        if shared:
            _copy_prefix(llama_cpp, llama._ctx.ctx, ctx.ctx, memory, shared, len(tokens))
        samplers = []
        for i in range(len(tokens)):
            llama.set_seed((own_seed if seed is None else seed) + i)
            samplers.append(llama._init_sampler(**sampling, grammar=grammar))
        written = _write(llama, llama_cpp, ctx, batch, tokens, shared, samplers, max_tokens)
    finally:
        llama.set_seed(own_seed)
        batch.close()
        llama_cpp.llama_memory_clear(memory, True)
    total = sum(len(t) for t in tokens)
    new = (shared - held) + sum(len(t) - shared for t in tokens)
    replies = [(llama.detokenize(out).decode("utf-8", errors="ignore"), finish, len(out))
               for out, finish in written]
    return replies, total, total - new


def _copy_prefix(llama_cpp: Any, source: Any, target: Any, memory: Any, shared: int, n: int) -> None:
    """The server's sequence 0, cut at ``shared``, as sequence 0 of the batch context and shared by
    sequences 1 to n-1 (the same cells: a unified cache holds them once)."""
    import ctypes

    size = llama_cpp.llama_state_seq_get_size(source, 0)
    buffer = (ctypes.c_uint8 * size)()
    got = llama_cpp.llama_state_seq_get_data(source, buffer, size, 0)
    if not got or not llama_cpp.llama_state_seq_set_data(target, buffer, got, 0):
        raise RuntimeError("the shared prefix could not be copied to the batch context")
    llama_cpp.llama_memory_seq_rm(memory, 0, shared, -1)
    for seq in range(1, n):
        llama_cpp.llama_memory_seq_cp(memory, 0, seq, 0, shared)


def _write(llama: Any, llama_cpp: Any, ctx: Any, batch: _Batch, tokens: list[list[int]], shared: int,
           samplers: list[Any], max_tokens: int) -> list[tuple[list[int], str]]:
    """Each prompt's tail evaluated in its sequence, then one token a step for every sequence still
    writing, until its end-of-generation token or ``max_tokens``."""
    vocab = llama._model.vocab
    out: list[list[int]] = [[] for _ in tokens]
    finish: list[str | None] = [None] * len(tokens)

    def take(i: int, token: int) -> None:
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            finish[i] = "stop"
            return
        out[i].append(token)
        if len(out[i]) >= max_tokens:
            finish[i] = "length"

    tails = [(t, len(seq) - 1 == p, i, p) for i, seq in enumerate(tokens)
             for p, t in enumerate(seq) if p >= shared]
    for start in range(0, len(tails), batch.size):
        chunk = tails[start:start + batch.size]
        batch.decode(ctx, [(t, p, i, last) for t, last, i, p in chunk])
        for j, (_t, last, i, _p) in enumerate(chunk):
            if last:
                take(i, samplers[i].sample(ctx, j))
    while True:
        writing = [i for i in range(len(tokens)) if finish[i] is None]
        if not writing:
            return [(out[i], finish[i] or "length") for i in range(len(tokens))]
        batch.decode(ctx, [(out[i][-1], len(tokens[i]) + len(out[i]) - 1, i, True) for i in writing])
        for j, i in enumerate(writing):
            take(i, samplers[i].sample(ctx, j))


def generated_body(model: str, replies: list[tuple[str, str, int]], total: int,
                   cached: int) -> dict[str, Any]:
    """The OpenAI completions reply: per prompt its text and why it ended."""
    choices = [{"text": text, "index": i, "finish_reason": finish, "logprobs": None}
               for i, (text, finish, _n) in enumerate(replies)]
    written = sum(n for _t, _f, n in replies)
    return {"id": f"cmpl-batch-{time.monotonic_ns()}", "object": "text_completion",
            "created": int(time.time()),
            "model": model, "choices": choices,
            "usage": {"prompt_tokens": total, "completion_tokens": written, "total_tokens": total + written,
                      "prompt_tokens_details": {"cached_tokens": cached}}}


def install(environ: Mapping[str, str] = os.environ) -> None:
    """Serve lists of prompts on the server's completions route. Raises NotInstalled, changing
    nothing, when switched off or on a llama-cpp-python it was not written for."""
    server_patch.pinned_llama_cpp(SWITCH, environ, "whose completions route this wraps")
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
        if body.stream or body.echo or body.stop or (body.n or 1) != 1:
            raise HTTPException(status_code=400, detail="a list of prompts takes no stream, echo, stop or n")
        if (body.max_tokens or 0) > 1 and not body.logprobs:
            return await _generated(request, body, list(prompts))
        if body.max_tokens != 1:
            raise HTTPException(status_code=400,
                                detail="a list of prompts is scored for one token (max_tokens 1, "
                                "logprobs) or written (max_tokens over 1, no logprobs)")
        top = int(body.logprobs or 1)
        if not 1 <= top <= MAX_TOP:
            raise HTTPException(status_code=400, detail=f"logprobs: 1 to {MAX_TOP} alternatives")
        async with contextlib.asynccontextmanager(server_app.get_llama_proxy)() as proxy:
            llama = proxy(body.model)
            scored, total, cached = await run_in_threadpool(score_prompts, llama, list(prompts), top)
            return completion_body(llama, body.model or "", scored, total, cached)

    async def _generated(request: Request, body: CreateCompletionRequest, prompts: list[str]) -> Any:
        if len(prompts) > MAX_SEQUENCES:
            raise HTTPException(status_code=400,
                                detail=f"at most {MAX_SEQUENCES} prompts are written together")
        from llama_cpp import llama_chat_format
        from llama_cpp.llama_grammar import LlamaGrammar

        response_format = (await request.json()).get("response_format")
        grammar = LlamaGrammar.from_string(body.grammar, verbose=False) if body.grammar else (
            llama_chat_format._grammar_for_response_format(response_format) if response_format else None)
        sampling = {"top_k": body.top_k, "top_p": body.top_p, "min_p": body.min_p, "typical_p": 1.0,
                    "temp": body.temperature, "repeat_penalty": body.repeat_penalty,
                    "frequency_penalty": body.frequency_penalty or 0.0,
                    "presence_penalty": body.presence_penalty or 0.0, "tfs_z": 1.0,
                    "mirostat_mode": body.mirostat_mode, "mirostat_tau": body.mirostat_tau,
                    "mirostat_eta": body.mirostat_eta, "penalize_nl": True, "logits_processor": None}
        async with contextlib.asynccontextmanager(server_app.get_llama_proxy)() as proxy:
            llama = proxy(body.model)
            try:
                replies, total, cached = await run_in_threadpool(
                    generate_prompts, llama, prompts, sampling, seed=body.seed,
                    max_tokens=int(body.max_tokens or 0),
                    grammar=grammar)
            except ValueError as exc:
                raise HTTPException(status_code=400, detail=str(exc)) from None
            return generated_body(body.model or "", replies, total, cached)

    # FastAPI reads the parameters' types from the annotations: the classes themselves (this module's
    # annotations are strings, and these names are local to install()).
    create_completion.__annotations__ = {"request": Request, "body": CreateCompletionRequest, "return": Any}
    create_completion._prompt_batch = True  # type: ignore[attr-defined]
    # The library's own route class (it turns errors into OpenAI-style replies), as the route it replaces.
    route = type(own)(ROUTE, create_completion, methods=["POST"], dependencies=own.dependencies,
                      summary=own.summary, tags=own.tags, include_in_schema=own.include_in_schema)
    router.routes[at] = route
