"""The app's one way to write: people's labels, through a narrow writer.

The app reads through ``pipeline.store.view.StoreView`` and never opens a Store; what a person
gives in it (an annotation of a flipped constraint, a Yes/No on a text for the judge check) is
written here, on a store connection of the writer's own, opened at the first label and committed
at each (a label is saved the moment it is given)."""

from __future__ import annotations

from pathlib import Path

from pipeline.store.annotations import save_annotation
from pipeline.store.database import Store, now, open_store
from pipeline.store.validation import save_text_label


class AnnotationWriter:
    """Writes people's labels to the store at ``path``; nothing else."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._store: Store | None = None

    def _open(self) -> Store:
        if self._store is None:
            self._store = open_store(self.path, create=False)
        return self._store

    def label(self, constraint_id: int, response_id: int, annotator: str, label: str, note: str = "") -> None:
        """One annotator's label (integrated / superficial / ambiguous) of a constraint on a response."""
        save_annotation(self._open(), constraint_id, response_id, annotator, label, note, now())

    def text_label(self, constraint_id: int, generation_id: int, annotator: str, yes: bool) -> None:
        """One person's Yes/No on a constraint and a text (a response or a summary)."""
        save_text_label(self._open(), constraint_id, generation_id, annotator, yes, "", now())

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
