"""The constraint's echo: the research code's copy-paste score (cs4/analysis/copy_paste.py), per
constraint the highest cosine between it and a sentence of a text (all-mpnet-base-v2 in the paper;
any embedder here). One definition: the echo stage stores it (pipeline.stages.echo), the report's
constraint-response similarity reads it, and what is not stored is computed by this same function."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipeline.analysis.support import sentence_spans

if TYPE_CHECKING:
    from pipeline.analysis.embeddings import Embedder
    from pipeline.store.database import Store


def text_echoes(store: Store, embedder: Embedder, text: str, constraints: Sequence[str]
                ) -> list[tuple[float, tuple[int, int]]]:
    """Per constraint, its highest cosine with a sentence of ``text`` and that sentence's span;
    (0.0, (0, 0)) each when the text has no sentence. Vectors are cached in the store by text hash."""
    from pipeline.analysis.embeddings import embed_texts

    spans = sentence_spans(text)
    if not spans or not constraints:
        return [(0.0, (0, 0)) for _ in constraints]
    sentences = embed_texts(store, embedder, [text[a:b] for a, b in spans])
    wanted = embed_texts(store, embedder, list(constraints))
    cosines = wanted @ sentences.T  # unit rows: cosines
    best = cosines.argmax(axis=1)
    return [(round(float(cosines[i, j]), 6), spans[int(j)]) for i, j in enumerate(best)]
