"""The ``embeddings`` table: one vector per (text hash, embedding model), as float32 bytes.

Keyed by the text's sha256, whether or not the text itself is stored. pipeline.analysis.embeddings
turns the bytes into arrays and back; nothing here commits."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.store.database import Store

# SQLite caps the number of bound parameters.
_CHUNK = 500


def stored_vectors(store: Store, model: str, hashes: Sequence[str]) -> dict[str, bytes]:
    """The vectors (float32 bytes) stored for these text hashes under ``model``."""
    found: dict[str, bytes] = {}
    unique = list(dict.fromkeys(hashes))
    for start in range(0, len(unique), _CHUNK):
        chunk = unique[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        rows = store.conn.execute(
            f"SELECT text_hash, vector FROM embeddings WHERE model = ? AND text_hash IN ({marks})",
            [model, *chunk]
        )
        found.update({h: blob for h, blob in rows})
    return found


def put_vectors(store: Store, rows: Sequence[tuple[str, str, int, bytes]]) -> None:
    """Store (text hash, model, dim, float32 bytes) rows, replacing any vector of the same text and model."""
    store.conn.executemany("INSERT OR REPLACE INTO embeddings(text_hash, model, dim, "
                           "vector) VALUES (?, ?, ?, ?)", rows)
