"""Log-probabilities from the embedded llama.cpp server without the whole vocabulary twice over.

A yes_no judge (pipeline.stages.judging) asks for one token and its 20 best alternatives. For that,
llama-cpp-python (0.3.x, a non-streamed completion) computes the log-softmax of *every* position the
model has evaluated, prompt included (``Llama.logits_to_logprobs(self._scores)[offset:]``: 300 rows of
151,936 values for a short judge prompt, 0.46 s on 2 cores), then sorts the whole vocabulary of each
reply token as Python tuples to take the best few (0.18 s a token). Together that is as long as
evaluating the prompt's new tokens.

``install()`` swaps ``Llama.logits_to_logprobs`` (a static method) for one that, given the 2-D scores,
computes a row only when the loop reads it, and hands the loop a row whose iteration shows its ``TOP``
best values exactly and every other value as -inf: the loop's sort then runs over an almost sorted list
(Timsort: a few runs, 0.04 s). Read by index, a row gives its exact value. So the reply, the chosen
tokens' log-probabilities and the best ``TOP`` alternatives are the ones llama-cpp-python's own code
gives, as long as a request asks for at most ``TOP`` alternatives; one that asks more is served by the
library's own code (``Llama._create_completion`` is wrapped to know what each request asks).

Safety, as with pipeline.llm.grammar_sampling: only llama-cpp-python ``PINNED_LLAMA_CPP`` is patched
(``NotInstalled`` otherwise, and the server's log says so); a 1-D input (the streamed path) goes to the
library's own function; ``UNSPECIFIC_FAST_LOGPROBS=0`` turns it off. It runs in the server's process
(pipeline.llm.local_model's bootstrap), never in the app's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from pipeline.llm import server_patch
from pipeline.llm.server_patch import PINNED_LLAMA_CPP, NotInstalled  # noqa: F401  (the tests' names)

SWITCH = "UNSPECIFIC_FAST_LOGPROBS"
TOP = 64  # alternatives kept exact per row: OpenAI's API allows 20

_asked = threading.local()  # the current request's top_logprobs, per server thread


def log_softmax(row: np.ndarray) -> np.ndarray:
    """As ``Llama.logits_to_logprobs`` computes it for one row (float32, max subtracted first)."""
    top = np.max(row)
    if not np.isfinite(top):
        top = 0.0
    shifted = np.subtract(row, top, dtype=np.single)
    with np.errstate(divide="ignore"):
        return shifted - np.log(np.sum(np.exp(shifted)))


class TopRow:
    """One position's log-probabilities: exact when indexed; iterated, its ``TOP`` best values and -inf
    for the rest (what the library's sort-and-take-the-best loop reads)."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index: Any) -> Any:
        return self.values[index]

    def __iter__(self) -> Iterator[float]:
        k = min(TOP, len(self.values))
        masked = np.full(len(self.values), -np.inf)
        best = np.argpartition(self.values, -k)[-k:]
        masked[best] = self.values[best]
        return iter(masked.tolist())


class LazyRows:
    """The log-softmax of 2-D scores, a row at a time as it is read, from ``start`` on."""

    def __init__(self, scores: np.ndarray, start: int = 0) -> None:
        self.scores = scores
        self.start = start

    def __len__(self) -> int:
        return max(0, len(self.scores) - self.start)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice) and key.step in (None, 1) and key.stop is None and (key.start or 0) >= 0:
            return LazyRows(self.scores, self.start + (key.start or 0))
        if isinstance(key, int) and key >= 0:
            return TopRow(log_softmax(self.scores[self.start + key]))
        return np.array([log_softmax(r) for r in self.scores[self.start:]])[key]

    def __iter__(self) -> Iterator[TopRow]:
        for r in range(self.start, len(self.scores)):
            yield TopRow(log_softmax(self.scores[r]))


def install(environ: Mapping[str, str] = os.environ) -> None:
    """Make the embedded server's non-streamed log-probabilities cheap. Raises NotInstalled, changing
    nothing, when switched off or on a llama-cpp-python it was not written for."""
    server_patch.pinned_llama_cpp(SWITCH, environ, "whose logprobs loop this reads")
    from llama_cpp import Llama
    own_logprobs = Llama.__dict__["logits_to_logprobs"].__func__
    own_create = Llama._create_completion
    if getattr(own_create, "_fast_logprobs", False):
        return

    def logits_to_logprobs(logits: Any, axis: int = -1) -> Any:
        asked = getattr(_asked, "top", None)
        if (isinstance(logits, np.ndarray) and logits.ndim == 2 and axis == -1 and asked is not None
                and asked <= TOP):
            return LazyRows(logits)
        return own_logprobs(logits, axis)

    def create_completion(self: Any, *args: Any, **kwargs: Any) -> Any:
        # Set as each request starts (its generator runs on this thread right after): a request asking
        # for more alternatives than TOP, or none, gets the library's own function.
        _asked.top = kwargs.get("logprobs")
        return own_create(self, *args, **kwargs)

    create_completion._fast_logprobs = True  # type: ignore[attr-defined]
    Llama.logits_to_logprobs = staticmethod(logits_to_logprobs)  # type: ignore[method-assign]
    Llama._create_completion = create_completion  # type: ignore[method-assign]
