"""The embedded llama.cpp server computes a prompt's next-token logits at its last token only.

llama-cpp-python's server builds its model with ``logits_all`` (log-probabilities need it), and then
``Llama.eval`` asks llama.cpp for the logits of *every* prompt token and copies each row into
``Llama.scores``: the output layer (151,936 x 1,536 for the embedded model, about a sixth of a
token's compute) and 600 KB of copying per token read, for rows no request reads. A completion reads
the row of the prompt's last token and the rows of the tokens it writes (each written token is
evaluated alone, so its row is the last one too); only a request that echoes its prompt with
log-probabilities reads the prompt's other rows.

``install()`` swaps ``Llama.eval`` for one that asks for the last token's logits of each batch and
stores that row where the library's own would, so sampling, grammars and log-probabilities read
what they read before. The library's own eval still serves a request with ``echo`` and
``logprobs``, a model with a draft model (speculative decoding reads several rows) and a model built
without ``logits_all``. Measured on the demo's first synthesis prompt (885 tokens, in process, the
two ways in turn on a loaded machine): 1.24x and 1.96x the prompt speed; see docs/measurements.md.

Safety, as with pipeline.llm.prompt_batch: only llama-cpp-python ``PINNED_LLAMA_CPP`` is patched
(``NotInstalled`` otherwise, and the server's log says so); ``UNSPECIFIC_LAST_LOGITS=0`` turns it off.
It runs in the server's process (pipeline.llm.local_model's bootstrap), never in the app's.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pipeline.llm import server_patch
from pipeline.llm.server_patch import PINNED_LLAMA_CPP, NotInstalled  # noqa: F401  (the tests' names)

SWITCH = "UNSPECIFIC_LAST_LOGITS"

_every_row = threading.local()  # set while a request that reads every prompt row runs, per server thread


def eval_last(llama: Any, tokens: Sequence[int]) -> None:
    """``Llama.eval`` of ``tokens`` after the cached ones, with llama.cpp asked for each batch's last
    token's logits only, that row stored in ``llama.scores`` as the library's eval stores it."""
    llama._ctx.kv_cache_seq_rm(-1, llama.n_tokens, -1)
    for start in range(0, len(tokens), llama.n_batch):
        batch = list(tokens[start:start + llama.n_batch])
        n_past = llama.n_tokens
        llama._batch.set_batch(batch=batch, n_past=n_past, logits_all=False)
        llama._ctx.decode(llama._batch)
        llama.input_ids[n_past:n_past + len(batch)] = batch
        llama.n_tokens += len(batch)
        llama.scores[llama.n_tokens - 1, :] = np.ctypeslib.as_array(llama._ctx.get_logits_ith(-1),
                                                                    shape=(llama._n_vocab,))
    llama._requires_eval = False


def reads_every_row(request: Mapping[str, Any]) -> bool:
    """Whether a completion's arguments ask for its prompt's log-probabilities (echo with logprobs)."""
    return bool(request.get("echo")) and request.get("logprobs") is not None


def install(environ: Mapping[str, str] = os.environ) -> None:
    """Swap ``Llama.eval`` (and mark the requests that read every prompt row). Raises NotInstalled,
    changing nothing, when switched off or on a llama-cpp-python it was not written for."""
    server_patch.pinned_llama_cpp(SWITCH, environ, "whose Llama.eval this replaces")
    from llama_cpp import Llama
    own_eval = Llama.eval
    if getattr(own_eval, "_last_logits", False):
        return
    if list(inspect.signature(own_eval).parameters) != ["self", "tokens"]:
        raise NotInstalled("Llama.eval does not take (self, tokens)")
    own_completion = Llama._create_completion
    signature = inspect.signature(own_completion)

    def eval(self: Any, tokens: Sequence[int]) -> None:  # noqa: A001 - the method it replaces
        if not self._logits_all or self.draft_model is not None or getattr(_every_row, "on", False):
            return own_eval(self, tokens)
        return eval_last(self, tokens)

    @functools.wraps(own_completion)
    def create_completion(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind_partial(self, *args, **kwargs)
        if not reads_every_row(bound.arguments):
            return own_completion(self, *args, **kwargs)
        return _with_every_row(own_completion(self, *args, **kwargs))

    eval._last_logits = True  # type: ignore[attr-defined]
    Llama.eval = eval  # type: ignore[method-assign]
    Llama._create_completion = create_completion  # type: ignore[method-assign]


def _with_every_row(chunks: Any) -> Any:
    """``_create_completion`` is a generator: the flag holds while it runs, step by step."""
    while True:
        _every_row.on = True
        try:
            chunk = next(chunks)
        except StopIteration as stop:
            return stop.value
        finally:
            _every_row.on = False
        yield chunk
