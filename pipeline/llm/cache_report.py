"""Cached prompt tokens in the embedded llama.cpp server's replies, as OpenAI and llama.cpp's own server
report them: ``usage.prompt_tokens_details.cached_tokens``.

llama-cpp-python (0.3.x) keeps the last request's tokens in its KV cache: ``Llama.generate`` keeps the
longest prefix the new prompt shares with them (all but the last token when the prompt is the same,
to refresh the logits) and evaluates only the rest. Its replies do not say how many it kept, so a
client cannot tell the prompt tokens the server evaluated anew from those it reused (a judge's calls
share their long instructions; the bench weighs model time against the tokens it evaluated).

``install()`` wraps three methods of ``Llama``: ``generate`` marks that its first ``eval`` is the
prompt's; ``eval``, at that first call, records how many tokens the context already holds (what
``generate`` kept: 0 after a reset); ``create_completion`` and ``create_chat_completion`` add that
count to their reply's usage. It also lets the server's response model keep the field (the
``CompletionUsage`` TypedDict otherwise drops keys it does not name). Nothing else changes: the same
tokens are evaluated and sampled.

Order: it must be installed before anything imports ``llama_cpp.server.app`` (pipeline.llm.prompt_batch
does): the routes' response models are built at that import. The bootstrap installs it before.

Safety, as pipeline.llm.grammar_sampling and pipeline.llm.fast_logprobs: self-contained (the server
loads it from its file, without this project); only llama-cpp-python ``PINNED_LLAMA_CPP`` is patched
(``NotInstalled`` otherwise, or when a wrapped method is missing or takes other arguments, and the
server's log says so); ``UNSPECIFIC_CACHE_REPORT=0`` turns it off. A streamed reply carries no usage
and gets none. It runs in the server's process (pipeline.llm.local_model's bootstrap), never in the app's.
"""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Mapping
from typing import Any

from pipeline.llm import server_patch
from pipeline.llm.server_patch import PINNED_LLAMA_CPP, NotInstalled  # noqa: F401  (the tests' names)

SWITCH = "UNSPECIFIC_CACHE_REPORT"
MARK = "_unspecific_cache_report"

# Per server thread (a request runs on one): whether the next eval is a prompt's, and what it kept.
_state = threading.local()


def install(environ: Mapping[str, str] = os.environ) -> None:
    """Make the embedded server's replies say how many prompt tokens it reused from its KV cache. Raises
    NotInstalled, changing nothing, when switched off or on a llama-cpp-python it was not written for."""
    server_patch.pinned_llama_cpp(SWITCH, environ, "whose KV-cache reuse this reads")
    from llama_cpp import Llama, llama_types
    for name, first in (("generate", "tokens"), ("eval", "tokens"), ("create_completion", "prompt"),
                        ("create_chat_completion", "messages")):
        own = getattr(Llama, name, None)
        parameters = list(inspect.signature(own).parameters) if callable(own) else []
        if parameters[1:2] != [first]:
            raise NotInstalled(f"Llama.{name} does not take ({first}, ...) here")
    usage = getattr(llama_types, "CompletionUsage", None)
    if usage is None:
        raise NotInstalled("llama_cpp.llama_types has no CompletionUsage")
    patch(Llama)
    # The server's routes answer through a response model built on this TypedDict, which drops keys it
    # does not name; the server module is imported after the patches, so its model keeps the field.
    if "__pydantic_config__" not in vars(usage):
        usage.__pydantic_config__ = {"extra": "allow"}


def patch(cls: Any) -> None:
    """Wrap ``cls``'s generate, eval, create_completion and create_chat_completion (a Llama, or a stand-in
    with the same four methods). Patching twice changes nothing."""
    if getattr(cls.generate, MARK, False):
        return
    own_generate, own_eval = cls.generate, cls.eval
    own_completion, own_chat = cls.create_completion, cls.create_chat_completion

    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        # A generator: nothing runs until the caller asks for the first token, whose eval is the prompt's.
        _state.prompt_next = True
        return own_generate(self, *args, **kwargs)

    def eval(self: Any, tokens: Any) -> Any:
        if getattr(_state, "prompt_next", False):
            _state.prompt_next = False
            _state.reused = int(self.n_tokens)  # what generate kept of the context: 0 after a reset
        return own_eval(self, tokens)

    def create_completion(self: Any, *args: Any, **kwargs: Any) -> Any:
        _state.reused = None
        reply = own_completion(self, *args, **kwargs)
        _report(reply, getattr(_state, "reused", None))
        return reply

    def create_chat_completion(self: Any, *args: Any, **kwargs: Any) -> Any:
        _state.reused = None
        reply = own_chat(self, *args, **kwargs)
        _report(reply, getattr(_state, "reused", None))
        return reply

    for wrapper in (generate, eval, create_completion, create_chat_completion):
        setattr(wrapper, MARK, True)
    cls.generate, cls.eval = generate, eval
    cls.create_completion, cls.create_chat_completion = create_completion, create_chat_completion


def _report(reply: Any, reused: int | None) -> None:
    """Put ``reused`` in a non-streamed reply's usage (never more than its prompt tokens); a reply that
    already says keeps what it says."""
    usage = reply.get("usage") if isinstance(reply, dict) else None
    if reused is None or not isinstance(usage, dict) or "prompt_tokens_details" in usage:
        return
    prompt = usage.get("prompt_tokens")
    cached = min(reused, prompt) if isinstance(prompt, int) else reused
    usage["prompt_tokens_details"] = {"cached_tokens": cached}
