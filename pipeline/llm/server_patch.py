"""What the embedded server's patches share (pipeline.llm.grammar_sampling, fast_logprobs,
prompt_logits, cache_report, prompt_batch): the llama-cpp-python they were written for, the switch
that turns each off, and the exception by which one stands aside.

The server's bootstrap (pipeline.llm.local_model) loads each patch from its file, with the project's
folder on the path so that this module is found; it imports nothing beyond the standard library and
llama_cpp, as the server's Python may have nothing of this project installed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# pyproject.toml's [local] pin and the Makefile's LLAMA_VERSION (tests/test_grammar_sampling.py checks
# they agree): the code each patch reads or replaces is this version's.
PINNED_LLAMA_CPP = "0.3.36"
_OFF = ("0", "false", "off", "no")


class NotInstalled(RuntimeError):
    """Why a patch left llama-cpp-python's own code in place (one line for the server's log)."""


def switched_off(switch: str, environ: Mapping[str, str]) -> bool:
    return environ.get(switch, "").strip().lower() in _OFF


def pinned_llama_cpp(switch: str, environ: Mapping[str, str], reads: str) -> Any:
    """llama_cpp, when a patch may go in: not turned off by ``switch`` and the pinned version, whose
    code the patch ``reads`` (for the log). Raises NotInstalled otherwise, changing nothing."""
    if switched_off(switch, environ):
        raise NotInstalled(f"turned off by {switch}={environ[switch]}")
    import llama_cpp

    version = getattr(llama_cpp, "__version__", "unknown")
    if version != PINNED_LLAMA_CPP:
        raise NotInstalled(f"llama-cpp-python {version} is not {PINNED_LLAMA_CPP}, {reads}")
    return llama_cpp
