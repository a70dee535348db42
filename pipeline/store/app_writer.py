"""The app's one way to write: what a person gives in it, and the score totals it keeps current,
through one narrow writer.

The app reads through ``pipeline.store.view.StoreView`` and never opens a Store; what it writes is
written here: an annotation of a flipped constraint, a Yes/No on a text for the judge check, an
auditor's mark on a suspect of the suspicion queue, and the per-text score totals of texts judged
since the last refresh (pipeline.store.scores). The writer opens a store connection of its own at
the first write and commits each write at once (a label or a mark is saved the moment it is
given); its writes take turns under one lock (the app writes from its UI and from a worker), a
refresh one short transaction at a time, so a mark never waits behind a whole refresh; a build
writing the same store makes it wait (busy timeout).

May import: pipeline.core, pipeline.store.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pipeline.core.errors import StoreError
from pipeline.store.annotations import save_annotation
from pipeline.store.database import Store, now, open_store
from pipeline.store.marks import clear_mark, put_mark
from pipeline.store.scores import refresh_scores
from pipeline.store.validation import save_text_label


class AppWriter:
    """Writes people's labels, answers and marks to the store at ``path``; nothing else."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._store: Store | None = None
        self._lock = threading.RLock()

    def _open(self) -> Store:
        if self._store is None:
            self._store = open_store(self.path, create=False)
        return self._store

    def label(self, constraint_id: int, response_id: int, annotator: str, label: str, note: str = "") -> None:
        """One annotator's label (integrated / superficial / ambiguous) of a constraint on a response."""
        with self._lock:
            save_annotation(self._open(), constraint_id, response_id, annotator, label, note, now())

    def text_label(self, constraint_id: int, generation_id: int, annotator: str, yes: bool) -> None:
        """One person's Yes/No on a constraint and a text (a response or a summary)."""
        with self._lock:
            save_text_label(self._open(), constraint_id, generation_id, annotator, yes, "", now())

    def refresh_scores(self) -> int | None:
        """Score the texts judged since the last refresh into the store (pipeline.store.scores), one
        short transaction at a time, each under the writer's lock; how many, or None when the store
        cannot be written now (locked by a build, read-only)."""
        done = 0
        while True:
            with self._lock:
                step = refresh_scores(self._open(), rounds=1)
            if step is None:
                return done or None
            if not step:
                return done
            done += step

    def put_mark(self, response_id: int, constraint_id: int, mark: str, auditor: str) -> None:
        """An auditor's mark (pipeline.store.marks.MARKS) on a suspect; it replaces an earlier one."""
        with self._saving_mark():
            put_mark(self._open(), response_id, constraint_id, mark, auditor, now())

    def clear_mark(self, response_id: int, constraint_id: int) -> None:
        with self._saving_mark():
            clear_mark(self._open(), response_id, constraint_id)

    @contextmanager
    def _saving_mark(self) -> Iterator[None]:
        """A mark the store refuses (a lock held too long, a read-only file) is a StoreError naming
        the store, which the app shows as it shows every store error, and goes on."""
        try:
            with self._lock:
                yield
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: the mark could not be saved ({exc})") from exc

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
            self._store = None

