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

``install()`` swaps ``Llama._init_sampler`` for one that returns ``GrammarSampler`` when a
request has a grammar and a setting this module reproduces exactly; anything else (mirostat,
logits processors, top-k off) keeps llama-cpp-python's own chain. It runs in the server's
process (pipeline.llm.local_model's bootstrap), never in the app's.
"""

from __future__ import annotations

import ctypes
import inspect
from typing import Any

import numpy as np

# How many of the best tokens overall are checked against the grammar before the whole
# vocabulary is: enough for top_k = 40 with most of them refused.
SHORTLIST = 512

_OWN_PARAMETERS = ["top_k", "top_p", "min_p", "typical_p", "temp", "repeat_penalty", "frequency_penalty",
                   "presence_penalty", "tfs_z", "mirostat_mode", "mirostat_eta", "mirostat_tau", "penalize_nl",
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

    def __init__(self, llama: Any, *, penalties: Any, grammar: Any, tail: Any | None, top_k: int) -> None:
        import llama_cpp

        self._llama_cpp = llama_cpp
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


def install() -> None:
    """Make ``llama_cpp.Llama`` sample grammar-held requests with GrammarSampler."""
    from llama_cpp import Llama
    from llama_cpp import _internals as internals

    own = Llama._init_sampler
    if getattr(own, "_grammar_sampling", False):
        return
    # The chain rebuilt here is llama-cpp-python 0.3.x's; another version may sample otherwise.
    defaults = {name: parameter.default for name, parameter in inspect.signature(own).parameters.items()
                if name != "self"}
    if list(defaults) != _OWN_PARAMETERS:
        raise RuntimeError(f"llama_cpp.Llama._init_sampler takes {list(defaults)}, not the {_OWN_PARAMETERS} this mirrors")

    def init_sampler(self: Any, **given: Any) -> Any:
        settings = {**defaults, **given}
        temp, top_k, grammar = settings["temp"], settings["top_k"], settings["grammar"]
        exact = (grammar is not None and settings["logits_processor"] is None and settings["mirostat_mode"] == 0
                 and self._n_vocab > SHORTLIST and (temp == 0.0 or (temp > 0.0 and 0 < top_k <= SHORTLIST)))
        if not exact:
            return own(self, **given)
        # The same samplers, with the same arguments, as llama-cpp-python's own chain.
        penalties = internals.LlamaSampler()
        penalties.add_penalties(n_vocab=self._n_vocab, penalty_last_n=self.last_n_tokens_size,
                                penalty_repeat=settings["repeat_penalty"], penalty_freq=settings["frequency_penalty"],
                                penalty_present=settings["presence_penalty"])
        grammar_chain = internals.LlamaSampler()
        grammar_chain.add_grammar(self._model, grammar)
        tail = None
        if temp > 0.0:
            tail = internals.LlamaSampler()
            tail.add_top_k(top_k)
            tail.add_typical(settings["typical_p"], 1)
            tail.add_top_p(settings["top_p"], 1)
            tail.add_min_p(settings["min_p"], 1)
            tail.add_temp(temp)
            tail.add_dist(self._seed)
        return GrammarSampler(self, penalties=penalties, grammar=grammar_chain, tail=tail, top_k=top_k)

    init_sampler._grammar_sampling = True  # type: ignore[attr-defined]
    Llama._init_sampler = init_sampler
