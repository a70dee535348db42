"""The embedded model in this process (llama_cpp.Llama), as the server loads it: for tests that compare
the server's patched paths with the library's own on the real model; and the refusals every server
patch (pipeline/llm/fast_logprobs.py, prompt_batch.py, prompt_logits.py...) owes."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest


def refuses_to_install(patch: ModuleType, off: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``patch.install`` changes nothing, raising its NotInstalled, when its switch says ``off`` and
    on a llama-cpp-python it was not written for."""
    import llama_cpp

    with pytest.raises(patch.NotInstalled, match="turned off"):
        patch.install({patch.SWITCH: off})
    monkeypatch.setattr(llama_cpp, "__version__", "0.4.0")
    with pytest.raises(patch.NotInstalled, match="0.4.0"):
        patch.install({})


def in_process_llama(n_ctx: int) -> Any:
    from llama_cpp import Llama

    from pipeline.llm.local_model import N_THREADS
    from pipeline.llm.model_file import model_path

    return Llama(model_path=str(model_path()), n_ctx=n_ctx, n_threads=N_THREADS, n_threads_batch=N_THREADS,
                 logits_all=True, verbose=False, chat_format="chatml")
