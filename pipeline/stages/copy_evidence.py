"""The copy-evidence stage: for every (response, active constraint) without it, the constraint's
word n-grams found in a reference and in the response, each phrase's facts and specificity, and the
constraint's phrases the response repeats (pipeline.analysis.copy_evidence), stored for the suspicion
ranking (pipeline.store.suspicion, table ``copy_evidence``).

No LLM and no embedder: word n-grams only, and the domain's articles read once for the phrases'
document frequency, so it runs at the end of `evaluate` and `build` and costs seconds on thousands
of instructions. Resumable: each chunk of pairs is committed, and only pairs
without a row are computed.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.analysis.copy_evidence import CopyFinder
from pipeline.analysis.specificity import dump_facts
from pipeline.core.definitions import COPY_EVIDENCE_NGRAM
from pipeline.core.progress import ProgressEvent, ProgressHook, StopFlag, no_progress
from pipeline.store.database import Store
from pipeline.store.suspicion import (
    CopyEvidenceRow,
    count_missing_copy_evidence,
    has_copy_evidence_table,
    missing_copy_work,
    put_copy_evidence,
)

STAGE = "copy evidence"
# Pairs per committed transaction: a stop or crash loses at most one chunk.
CHUNK = 5000


def compute_copy_evidence(store: Store, *, instruction_ids: Sequence[int] | None = None,
                          run_id: str | None = None,
                          progress: ProgressHook = no_progress, stop: StopFlag | None = None,
                          chunk: int = CHUNK, n: int = COPY_EVIDENCE_NGRAM) -> int:
    """Fill copy evidence for the pairs that lack it (of these instructions, when given); return how
    many pairs were computed. Stops between chunks when ``stop`` is set. ``run_id``: only that build run's."""
    if not has_copy_evidence_table(store):
        return 0  # a read-only store from before the migration: nothing can be written
    total = count_missing_copy_evidence(store, run_id=run_id) if instruction_ids is None else 0
    done = 0
    finder = CopyFinder(store, n)  # each text's n-grams once: a response has 39 constraints
    while not (stop is not None and stop.stopped):
        work = missing_copy_work(store, instruction_ids=instruction_ids, run_id=run_id, limit=chunk)
        if not work:
            break
        finder.prepare(work)
        rows = []
        for w in work:
            f = finder.find(w)
            rows.append(CopyEvidenceRow(w.response_id, w.constraint_id, n, f.copied, f.copied_from,
                                        dump_facts(f.facts), f.specificity, f.echoed, f.lead))
        put_copy_evidence(store, rows)
        done += len(rows)
        progress(ProgressEvent("copy_evidence", done, max(total, done),
                               f"{done} (response, constraint) pairs"))
    return done
