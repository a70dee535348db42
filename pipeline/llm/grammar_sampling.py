"""Grammar-held sampling for the embedded llama.cpp server, without checking the whole vocabulary
at every token.

llama-cpp-python (0.3.x) samples under a GBNF grammar with the chain penalties -> grammar ->
(greedy | top-k -> typical -> top-p -> min-p -> temperature -> draw). The grammar step checks
every token of the vocabulary (151,936 for the embedded Qwen model) against the grammar at every
step: 15.5 ms a token on 2 cores, against 0.3 ms for the chain without it, a quarter of a judge
call's time (measured in-process on a stored judge request).

The same choice needs far fewer checks. Greedy: the best token overall is the best allowed one
whenever the grammar allows it, so only that token is checked, and the whole vocabulary only
when it is refused. Top-k sampling: the k best allowed tokens are among the best few hundred
overall whenever at least k of those are allowed, so only those are checked, and the rest of the
chain runs on them. Either way the tokens, their order and their probabilities are the ones the
full chain would give, so a request's reply (seeded, or at temperature 0) does not change.

``install()`` swaps ``Llama._init_sampler`` (a private method) for one that returns
``GrammarSampler`` when a request has a grammar and a setting this module reproduces exactly;
anything else keeps llama-cpp-python's own chain (``declines`` says why: no grammar, mirostat,
logits processors, top-k off or over ``SHORTLIST``, a negative temperature, a small vocabulary).
It runs in the server's process (pipeline.llm.local_model's bootstrap), never in the app's.

Safety, as it mirrors a private method:
- Only llama-cpp-python ``PINNED_LLAMA_CPP`` (the version pyproject.toml and the Makefile pin) is
  patched; with any other, or with another ``_init_sampler`` signature, ``install()`` raises
  ``NotInstalled`` and the bootstrap logs that one line: llama.cpp's own sampler is used.
- Any error inside the fast path falls back to llama.cpp's own sampler for that request, which
  goes on and answers: the tokens chosen so far are replayed into the new chain (penalties and
  grammar state), and one line goes to stderr (the server's log). A greedy reply is unchanged; a
  seeded draw may differ from the failing step on.
- ``UNSPECIFIC_GRAMMAR_SAMPLING=0`` (or ``false``, ``off``, ``no``) in the server's environment
  turns it off: every request gets llama.cpp's own sampler.
"""

from __future__ import annotations

import ctypes
import inspect
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from pipeline.llm import server_patch
from pipeline.llm.server_patch import PINNED_LLAMA_CPP, NotInstalled  # noqa: F401  (the tests' names)

SWITCH = "UNSPECIFIC_GRAMMAR_SAMPLING"

# How many of the best tokens overall are checked against the grammar before the whole
# vocabulary is: enough for top_k = 40 with most of them refused.
SHORTLIST = 512

_OWN_PARAMETERS = ["top_k", "top_p", "min_p", "typical_p", "temp", "repeat_penalty", "frequency_penalty",
                   "presence_penalty", "tfs_z", "mirostat_mode", "mirostat_eta",
                   "mirostat_tau", "penalize_nl",
                   "logits_processor", "grammar"]

_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)], align=True)


class _Candidates:
    """A llama_token_data_array over a numpy buffer, refilled from the logits at each step."""

    def __init__(self, llama_cpp: Any, size: int) -> None:
        self._llama_cpp = llama_cpp
        self.buf = np.zeros(size, dtype=_TOKEN_DATA)
        self.array = llama_cpp.llama_token_data_array(
            data=self.buf.ctypes.data_as(llama_cpp.llama_token_data_p), size=size, selected=-1, sorted=False)

    def fill(self, ids: np.ndarray, logits: np.ndarray) -> None:
        n = len(ids)
        self.buf["id"][:n] = ids
        self.buf["logit"][:n] = logits
        self.buf["p"][:n] = 0.0
        self.array.size = n
        self.array.selected = -1
        self.array.sorted = False

    def apply(self, sampler: Any) -> None:
        self._llama_cpp.llama_sampler_apply(sampler.sampler, ctypes.byref(self.array))

    def logits(self) -> np.ndarray:
        return self.buf["logit"][: self.array.size]

    def ids(self) -> np.ndarray:
        return self.buf["id"][: self.array.size]

    def selected_id(self) -> int:
        return int(self.buf["id"][self.array.selected])


class GrammarSampler:
    """What ``Llama._init_sampler`` returns for a grammar-held request: ``sample(ctx, idx)``
    picks the token the full chain would, and accepts it into the penalties and the grammar."""

    def __init__(self, llama: Any, *, penalties: Any, grammar: Any, tail: Any | None, top_k: int,
                 own_chain: Callable[[], Any]) -> None:
        import llama_cpp

        self._llama_cpp = llama_cpp
        self._own_chain = own_chain  # builds llama-cpp-python's chain for this request, if we fail
        self._chosen: list[int] = []  # tokens picked so far, to replay into that chain
        self.fallback: Any | None = None  # that chain, once built: it samples the rest of the request
        self._n_vocab = llama._n_vocab
        self._penalties = penalties  # a chain holding the penalties sampler alone
        self._grammar = grammar  # a chain holding the grammar sampler alone
        self._tail = tail  # None: greedy; else top-k ... draw
        self._top_k = top_k
        self._all_ids = np.arange(self._n_vocab, dtype=np.int32)
        self._full = _Candidates(llama_cpp, self._n_vocab)
        self._short = _Candidates(llama_cpp, SHORTLIST)
        self._one = _Candidates(llama_cpp, 1)
        self.full_checks = 0  # steps that checked the whole vocabulary (for tests and the bench)
        self.steps = 0

    def _logits(self, ctx: Any, idx: int) -> np.ndarray:
        pointer = self._llama_cpp.llama_get_logits_ith(ctx.ctx, idx)
        return np.ctypeslib.as_array(pointer, shape=(self._n_vocab,))

    def sample(self, ctx: Any, idx: int = -1) -> int:
        if self.fallback is not None:
            return int(self.fallback.sample(ctx, idx))
        try:
            token = self._step(ctx, idx)
        except Exception as exc:  # noqa: BLE001 - whatever broke, llama.cpp's own chain answers the request
            return self._fall_back(exc, ctx, idx)
        self._chosen.append(token)
        return token

    def _fall_back(self, exc: Exception, ctx: Any, idx: int) -> int:
        _log(f"grammar sampling failed at step {self.steps} ({exc!r}); this request goes on with "
             "llama-cpp-python's own sampler")
        chain = self._own_chain()
        for token in self._chosen:  # the state it would have reached: penalties' history, grammar's position
            chain.accept(token)
        self.fallback = chain
        return int(chain.sample(ctx, idx))

    def _step(self, ctx: Any, idx: int) -> int:
        self.steps += 1
        self._full.fill(self._all_ids, self._logits(ctx, idx))
        self._full.apply(self._penalties)
        token = self._greedy() if self._tail is None else self._top_k_draw()
        self._penalties.accept(token)
        self._grammar.accept(token)
        if self._tail is not None:
            self._tail.accept(token)
        return token

    def _allowed(self, token: int, logit: float) -> bool:
        self._one.fill(np.array([token], dtype=np.int32), np.array([logit], dtype=np.float32))
        self._one.apply(self._grammar)
        return bool(np.isfinite(self._one.logits()[0]))

    def _greedy(self) -> int:
        logits = self._full.logits()
        best = int(np.argmax(logits))  # the first of equal maxima, as llama.cpp's greedy sampler
        token = int(self._full.ids()[best])
        if self._allowed(token, float(logits[best])):
            return token
        self.full_checks += 1
        self._full.apply(self._grammar)
        return int(self._full.ids()[int(np.argmax(self._full.logits()))])

    def _top_k_draw(self) -> int:
        logits = self._full.logits()
        best = np.argpartition(-logits, SHORTLIST - 1)[:SHORTLIST]
        self._short.fill(best.astype(np.int32), logits[best])
        self._short.apply(self._grammar)
        if int(np.isfinite(self._short.logits()).sum()) >= self._top_k:
            self._short.apply(self._tail)
            return self._short.selected_id()
        self.full_checks += 1
        self._full.apply(self._grammar)
        self._full.apply(self._tail)
        return self._full.selected_id()


def declines(settings: Mapping[str, Any], n_vocab: int) -> str | None:
    """Why a request's sampler settings are left to llama-cpp-python's own chain, or None when
    GrammarSampler reproduces that chain exactly."""
    temp, top_k = settings["temp"], settings["top_k"]
    if settings["grammar"] is None:
        return "no grammar"
    if settings["logits_processor"] is not None:
        return "logits processors"
    if settings["mirostat_mode"] != 0:
        return f"mirostat {settings['mirostat_mode']}"
    if n_vocab <= SHORTLIST:
        return f"a vocabulary of {n_vocab} tokens, no more than the {SHORTLIST} shortlisted"
    if temp < 0.0:
        return "a negative temperature (a draw from the whole distribution)"
    if temp > 0.0 and not 0 < top_k <= SHORTLIST:
        return f"top_k {top_k} (off, or over the {SHORTLIST} shortlisted)"
    return None


def install(environ: Mapping[str, str] = os.environ) -> None:
    """Make ``llama_cpp.Llama`` sample grammar-held requests with GrammarSampler. Raises
    NotInstalled, changing nothing, when switched off or on a llama-cpp-python it does not mirror."""
    server_patch.pinned_llama_cpp(SWITCH, environ, "whose sampler chain this mirrors")
    from llama_cpp import Llama
    own = Llama._init_sampler
    if getattr(own, "_grammar_sampling", False):
        return
    defaults = {name: parameter.default for name, parameter in inspect.signature(own).parameters.items()
                if name != "self"}
    if list(defaults) != _OWN_PARAMETERS:
        raise NotInstalled(f"llama_cpp.Llama._init_sampler takes {list(defaults)}, not the "
                           f"{_OWN_PARAMETERS} this mirrors")

    def init_sampler(self: Any, **given: Any) -> Any:
        settings = {**defaults, **given}
        if declines(settings, self._n_vocab) is not None:
            return own(self, **given)
        try:
            return _grammar_sampler(self, settings, own_chain=lambda: own(self, **given))
        except Exception as exc:  # noqa: BLE001 - the request is served by llama.cpp's own chain instead
            _log(f"grammar sampling could not start ({exc!r}); this request uses "
                 "llama-cpp-python's own sampler")
            return own(self, **given)

    init_sampler._grammar_sampling = True  # type: ignore[attr-defined]
    Llama._init_sampler = init_sampler


def _grammar_sampler(llama: Any, settings: Mapping[str, Any], *,
                     own_chain: Callable[[], Any]) -> GrammarSampler:
    """The same samplers, with the same arguments, as llama-cpp-python 0.3.36's own chain."""
    from llama_cpp import _internals as internals

    temp, top_k = settings["temp"], settings["top_k"]
    penalties = internals.LlamaSampler()
    penalties.add_penalties(n_vocab=llama._n_vocab, penalty_last_n=llama.last_n_tokens_size,
                            penalty_repeat=settings["repeat_penalty"],
                            penalty_freq=settings["frequency_penalty"],
                            penalty_present=settings["presence_penalty"])
    grammar_chain = internals.LlamaSampler()
    grammar_chain.add_grammar(llama._model, settings["grammar"])
    tail = None
    if temp > 0.0:
        tail = internals.LlamaSampler()
        tail.add_top_k(top_k)
        tail.add_typical(settings["typical_p"], 1)
        tail.add_top_p(settings["top_p"], 1)
        tail.add_min_p(settings["min_p"], 1)
        tail.add_temp(temp)
        tail.add_dist(llama._seed)
    return GrammarSampler(llama, penalties=penalties, grammar=grammar_chain, tail=tail, top_k=top_k,
                          own_chain=own_chain)


def _log(line: str) -> None:
    # stderr is the server's log file; this module runs without the project's logging set up.
    print(line, file=sys.stderr, flush=True)
