"""Constraint-level outcomes: one Item per (constraint, response) at a ratio
(pipeline.store.scores.item_outcome_sql), and the items people are asked to label."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from pipeline.analysis.metrics.base import Filters
from pipeline.core.definitions import DEFAULT_RATIO
from pipeline.store.metrics import Item as Item  # a row of the one item query, read by the store
from pipeline.store.metrics import constraint_item_outcomes
from pipeline.store.verdicts import Verdict, shown_verdicts
from pipeline.store.view import store_of

if TYPE_CHECKING:
    from pipeline.store.view import StoreReader


def constraint_items(reader: StoreReader, filters: Filters | None = None, *,
                     ratio: float = DEFAULT_RATIO) -> list[Item]:
    """Every (constraint, response) judged on the full response and on its summary at ``ratio``
    by at least one rater; scores are the mean verdict over the raters who judged both."""
    return constraint_item_outcomes(store_of(reader), filters or Filters(), ratio)


def items_to_annotate(reader: StoreReader, filters: Filters | None = None, *, ratio: float = DEFAULT_RATIO,
                      passed_sample: int = 0, seed: int = 0) -> list[Item]:
    """The flipped items, plus a seeded random sample of ``passed_sample`` items that passed on
    both texts (the control set reviewers asked for), shuffled together so labellers cannot
    tell which is which."""
    items = constraint_items(reader, filters, ratio=ratio)
    flipped = [i for i in items if i.flipped]
    passed = [i for i in items if i.passed_both]
    rng = random.Random(seed)
    chosen = flipped + rng.sample(passed, min(passed_sample, len(passed)))
    rng.shuffle(chosen)
    return chosen


def items_by_pair(items: list[Item]) -> dict[tuple[int, int], Item]:
    """(constraint, response) -> its item; with two summaries at the ratio, the first's (as the app shows)."""
    out: dict[tuple[int, int], Item] = {}
    for item in items:
        out.setdefault((item.constraint_id, item.response_id), item)
    return out


def flipped_per_response(by_pair: dict[tuple[int, int], Item]) -> dict[int, int]:
    """response -> its constraints that flipped (the item outcome's count, as Audit and the queue count)."""
    out: dict[int, int] = {}
    for (_, response), item in by_pair.items():
        out[response] = out.get(response, 0) + int(item.flipped)
    return out


def shown_verdicts_by_pair(reader: StoreReader, generation_ids: list[int], filters: Filters | None = None
                           ) -> dict[tuple[int, int], list[Verdict]]:
    """(text, constraint) -> the verdicts a screen lists (pipeline.store.verdicts.shown_verdicts) of the
    raters ``filters`` select (its judges and judging mode), as every count of the report selects them."""
    f = filters or Filters()
    judges = set(f.judges or ())
    out: dict[tuple[int, int], list[Verdict]] = {}
    for v in shown_verdicts(store_of(reader), generation_ids):
        if (judges and v.judge not in judges) or (f.judging_mode and v.judging_mode != f.judging_mode):
            continue
        out.setdefault((v.generation_id, v.constraint_id), []).append(v)
    return out

