"""The ``pairs`` table: article A, its partner B, their cosine and B's rank among A's
neighbours, under one pairing rule of one domain (unique on domain, rule, article_a).

Written by pipeline.stages.pairing (a pairing is replaced whole, in one transaction), read by
the build and the demo."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.store.database import Store

_COLUMNS = "id, domain, rule, params, article_a, article_b, cosine, rank, candidates, created_at"


@dataclass(frozen=True)
class Pair:
    id: int
    domain: str
    rule: str
    params: str  # JSON: thresholds, model
    article_a: int
    article_b: int
    cosine: float
    rank: int
    candidates: str  # JSON: the next candidates
    created_at: str


@dataclass(frozen=True)
class StoredPair:
    """What re-pairing compares a new choice with."""

    id: int
    article_a: int
    article_b: int
    params: str


@dataclass(frozen=True)
class PairWrite:
    """One pair to insert (``id`` None) or to rewrite in place."""

    id: int | None
    article_a: int
    article_b: int
    cosine: float
    rank: int
    candidates: str
    params: str


@dataclass(frozen=True)
class PairStats:
    n: int
    lo: float | None
    mean: float | None
    hi: float | None
    rank: float | None


def pairs_of(store: Store, domain: str, rule: str, *, ids: Sequence[int] | None = None,
             limit: int | None = None) -> list[Pair]:
    """The pairs of a domain and rule in id order: those with the given ids, else the first ``limit``."""
    if ids is not None:
        marks = ",".join("?" * len(ids))
        rows = store.conn.execute(
            f"SELECT {_COLUMNS} FROM pairs WHERE domain = ? AND rule = ? AND id IN ({marks}) ORDER BY id",
            [domain, rule, *ids])
    else:
        rows = store.conn.execute(f"SELECT {_COLUMNS} FROM pairs WHERE domain = ? AND rule = "
                                  "? ORDER BY id LIMIT ?",
                                  [domain, rule, -1 if limit is None else limit])
    return [Pair(*r) for r in rows]


def stored_pairing(store: Store, domain: str, rule: str) -> dict[int, StoredPair]:
    """The stored pairs of a domain and rule, by article A."""
    rows = store.conn.execute("SELECT id, article_a, article_b, params FROM pairs WHERE "
                              "domain = ? AND rule = ?",
                              (domain, rule))
    return {r[1]: StoredPair(*r) for r in rows}


def write_pairing(store: Store, domain: str, rule: str, writes: Sequence[PairWrite], removed: Sequence[int],
                  stamp: str) -> None:
    """Insert or rewrite the pairs in ``writes``, in order, then delete the ``removed`` ids: one
    transaction, so a pairing is replaced whole or not at all."""
    with store.conn:
        for w in writes:
            row = (w.article_b, w.cosine, w.rank, w.candidates, w.params)
            if w.id is None:
                store.conn.execute(
                    "INSERT INTO pairs(domain, rule, article_a, article_b, cosine, rank, candidates, "
                    "params, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (domain, rule, w.article_a, *row, stamp))
            else:
                store.conn.execute(
                    "UPDATE pairs SET article_b = ?, cosine = ?, rank = ?, candidates = ?, params "
                    "= ?, created_at = ? WHERE id = ?", (*row, stamp, w.id))
        for pair_id in removed:
            store.conn.execute("DELETE FROM pairs WHERE id = ?", (pair_id,))


def pair_stats(store: Store, domain: str, rule: str) -> PairStats:
    """The stored pairs of a domain and rule: how many, their cosine range and mean partner rank."""
    row = store.conn.execute(
        "SELECT count(*), min(cosine), avg(cosine), max(cosine), avg(rank) FROM pairs WHERE "
        "domain = ? AND rule = ?",
        (domain, rule)).fetchone()
    return PairStats(*row)


def count_pairs(store: Store, domain: str, rule: str) -> int:
    return int(store.conn.execute("SELECT count(*) FROM pairs WHERE domain = ? AND rule = ?",
                                  (domain, rule)).fetchone()[0])


def pair_partner(store: Store, pair_id: int) -> int | None:
    """Article B of the pair (None when there is no such pair)."""
    row = store.conn.execute("SELECT article_b FROM pairs WHERE id = ?", (pair_id,)).fetchone()
    return row[0] if row else None
