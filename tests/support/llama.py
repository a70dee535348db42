"""The embedded model in this process (llama_cpp.Llama), as the server loads it: for tests that compare
the server's patched paths with the library's own on the real model."""

from __future__ import annotations

from typing import Any


def in_process_llama(n_ctx: int) -> Any:
    from llama_cpp import Llama

    from pipeline.llm.local_model import N_THREADS
    from pipeline.llm.model_file import model_path

    return Llama(model_path=str(model_path()), n_ctx=n_ctx, n_threads=N_THREADS, n_threads_batch=N_THREADS,
                 logits_all=True, verbose=False, chat_format="chatml")
