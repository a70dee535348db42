"""The echo stage: per response and summary, each active constraint's echo, the highest cosine between
the constraint and a sentence of the text (pipeline.analysis.echo: the research code's copy-paste
score, all-mpnet-base-v2 by default, any configured embedder), stored in ``constraint_echo`` with the
sentence's span (pipeline.store.echo).

Run at the end of `evaluate` (and by `unspecific evidence`). Vectors are cached by text hash in the
store, so a constraint or a sentence is embedded once; each text's echoes are committed together,
so a killed run resumes at the next text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipeline.analysis.echo import text_echoes
from pipeline.core.progress import ProgressEvent, ProgressHook, StopFlag, no_progress
from pipeline.store.echo import EchoRow, count_missing_echo, missing_echo_work, put_echoes

if TYPE_CHECKING:
    from pipeline.analysis.embeddings import Embedder
    from pipeline.store.database import Store

STAGE = "echo"


def compute_echo(store: Store, embedder: Embedder, *, instruction_ids: Sequence[int] | None = None,
                 run_id: str | None = None, progress: ProgressHook = no_progress, stop: StopFlag
                 | None = None) -> int:
    """Fill the echoes responses and summaries lack by this embedder (of these instructions or this
    run when given); return how many (text, constraint) pairs were stored."""
    total = count_missing_echo(store, embedder.name, instruction_ids=instruction_ids, run_id=run_id)
    done = 0
    while total and not (stop is not None and stop.stopped):
        work = missing_echo_work(store, embedder.name, instruction_ids=instruction_ids, run_id=run_id)
        if not work:
            break
        for w in work:
            if stop is not None and stop.stopped:
                break
            found = text_echoes(store, embedder, store.get_text(w.text_hash), [t for _, t in w.constraints])
            put_echoes(store, [EchoRow(w.generation_id, cid, embedder.name, echo, *span)
                               for (cid, _), (echo, span) in zip(w.constraints, found, strict=True)])
            done += len(found)
            progress(ProgressEvent(STAGE, done, max(total, done), f"{done} (text, constraint) echoes"))
    return done
