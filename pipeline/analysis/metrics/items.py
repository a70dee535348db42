"""Constraint-level outcomes: one Item per (constraint, response) at a ratio
(pipeline.store.scores.item_outcome_sql), and the items people are asked to label."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipeline.analysis.metrics.base import Filters
from pipeline.analysis.metrics.sql import _LOCK, _cleanup, _prepare
from pipeline.store.scores import item_outcome_sql

if TYPE_CHECKING:
    from pipeline.store.database import Store


@dataclass(frozen=True)
class Item:
    """One constraint on one response (model and mode) and its summary at a ratio, with the
    mean verdicts of the raters who judged it on both texts (pipeline.store.scores.item_outcome_sql,
    the one definition every screen, report and export counts by)."""

    constraint_id: int
    response_id: int
    summary_id: int
    instruction_id: int
    model: str
    mode: str
    ratio: float
    full_score: float
    summary_score: float
    flipped: bool
    passed_both: bool


def constraint_items(store: Store, filters: Filters | None = None, *, ratio: float = 0.25) -> list[Item]:
    """Every (constraint, response) judged on the full response and on its summary at ``ratio``
    by at least one rater; scores are the mean verdict over the raters who judged both."""
    with _LOCK:
        try:
            n = len(_prepare(store, filters or Filters()))
            if n == 0:
                return []
            sql = item_outcome_sql(n)
            rows = store.conn.execute(
                f"SELECT s.cid, g.rid, g.gid, r.instruction_id, r.model, coalesce(r.mode, ''), g.ratio,"
                f" {sql['full_score']}, {sql['summary_score']}, {sql['flipped']}, {sql['passed_both']}"
                " FROM m_gen g JOIN m_p s ON s.gid = g.gid JOIN m_p f ON f.gid = g.rid AND f.cid = s.cid"
                " JOIN generations r ON r.id = g.rid"
                f" WHERE g.kind = 'summary' AND abs(g.ratio - ?) < 1e-9 AND {sql['judged']} > 0 ORDER BY g.rid, s.cid",
                (ratio,),
            ).fetchall()
        finally:
            _cleanup(store)
    return [Item(*row[:9], bool(row[9]), bool(row[10])) for row in rows]


def items_to_annotate(store: Store, filters: Filters | None = None, *, ratio: float = 0.25,
                      passed_sample: int = 0, seed: int = 0) -> list[Item]:
    """The flipped items, plus a seeded random sample of ``passed_sample`` items that passed on
    both texts (the control set reviewers asked for), shuffled together so labellers cannot
    tell which is which."""
    items = constraint_items(store, filters, ratio=ratio)
    flipped = [i for i in items if i.flipped]
    passed = [i for i in items if i.passed_both]
    rng = random.Random(seed)
    chosen = flipped + rng.sample(passed, min(passed_sample, len(passed)))
    rng.shuffle(chosen)
    return chosen
