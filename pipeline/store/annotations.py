"""The ``annotations`` table: people's labels (integrated / superficial / ambiguous) of a
constraint on one response, one per annotator (the annotator ``adjudicator`` settles a split).

Keyed (constraint id, response id): a label names the response that was read, never a summary.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.store.database import Store, now

ItemKey = tuple[int, int]  # (constraint id, response id)

_UPSERT = ("INSERT INTO annotations(constraint_id, generation_id, annotator, label, note, created_at)"
           " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(constraint_id, generation_id, annotator)"
           " DO UPDATE SET label = excluded.label, note = excluded.note, created_at = excluded.created_at")


@dataclass(frozen=True)
class Label:
    label: str
    note: str


@dataclass(frozen=True)
class AnnotationRow:
    """One annotator's label of a constraint on a response, as written."""

    constraint_id: int
    response_id: int
    annotator: str
    label: str
    note: str


def labels_by_item(store: Store) -> dict[ItemKey, dict[str, str]]:
    """(constraint, response) -> annotator -> label, for every label given."""
    out: dict[ItemKey, dict[str, str]] = {}
    for cid, gid, who, label in store.conn.execute(
            "SELECT constraint_id, generation_id, annotator, label FROM annotations WHERE label IS NOT NULL"):
        out.setdefault((cid, gid), {})[who] = label
    return out


def labels_with_notes(store: Store) -> dict[ItemKey, dict[str, Label]]:
    """(constraint, response) -> annotator -> label and note."""
    out: dict[ItemKey, dict[str, Label]] = {}
    for cid, gid, who, label, note in store.conn.execute(
            "SELECT constraint_id, generation_id, annotator, label, note FROM annotations"):
        out.setdefault((cid, gid), {})[who] = Label(label, note or "")
    return out


def annotator_labels(store: Store, annotator: str) -> dict[ItemKey, Label]:
    """One annotator's labels, by (constraint, response)."""
    return {(cid, gid): Label(label, note or "") for cid, gid, label, note in store.conn.execute(
        "SELECT constraint_id, generation_id, label, note FROM annotations WHERE annotator = ?",
        (annotator,))}


def annotation_count(store: Store) -> int:
    return int(store.conn.execute("SELECT count(*) FROM annotations").fetchone()[0])


def save_annotation(store: Store, constraint_id: int, response_id: int, annotator: str, label: str,
                    note: str = "", when: str | None = None) -> None:
    """Store (or replace) one annotator's label of a constraint on exactly this response, and commit
    (a label is saved the moment it is given). ``when``: now by default."""
    conn = store.conn
    kind = conn.execute("SELECT kind FROM generations WHERE id = ?", (response_id,)).fetchone()
    if kind is None or kind[0] != "response":
        # A label must name the response that was read, never a summary or a text that is gone.
        raise ValueError(f"generation {response_id} is not a response")
    conn.execute(_UPSERT, (constraint_id, response_id, annotator, label, note, when or now()))
    conn.commit()


def save_annotations(store: Store, rows: Iterable[AnnotationRow], when: str) -> None:
    """Store (or replace) many labels in one transaction: all of them or none."""
    with store.conn:
        store.conn.executemany(_UPSERT, [(r.constraint_id, r.response_id, r.annotator, r.label, r.note, when)
                                         for r in rows])
