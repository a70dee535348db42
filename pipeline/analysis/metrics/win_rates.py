"""Naturalness win rates per condition pair, with position bias and agreement between orders."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.analysis.metrics.base import CONDITION_ORDER, Filters
from pipeline.analysis.stats import DEFAULT_RESAMPLES, NAN_INTERVAL, Interval, bootstrap_mean
from pipeline.store.metrics import naturalness_judgments

if TYPE_CHECKING:
    from pipeline.store.database import Store


@dataclass(frozen=True)
class WinRate:
    condition: str
    opponent: str  # another condition, or "any" for all opponents together
    n: int  # comparisons (a pair judged in both orders is two)
    wins: int
    ties: int
    losses: int
    rate: Interval  # (wins + ties / 2) / n, bootstrap over comparisons
    # Position bias: the share of decided comparisons won by the set shown first (0.5 = none).
    first_shown: Interval = NAN_INTERVAL
    # Between the two orders of one (judge, pair): the share where both orders name the same
    # winner (a tie in both counts as agreeing), over the pairs judged in both orders.
    order_agreement: Interval = NAN_INTERVAL

    @property
    def first_shown_wins(self) -> float:
        return self.first_shown.value

    @property
    def both_orders(self) -> int:
        """Pairs judged in both orders (the order agreement's n)."""
        return self.order_agreement.n

    def as_dict(self) -> dict[str, Any]:
        return {"condition": self.condition, "opponent": self.opponent, "n": self.n, "wins": self.wins,
                "ties": self.ties, "losses": self.losses, "rate": self.rate.value, "rate_low": self.rate.low,
                "rate_high": self.rate.high, "first_shown_wins": self.first_shown.value,
                "first_shown_low": self.first_shown.low, "first_shown_high": self.first_shown.high,
                "order_agreement": self.order_agreement.value,
                "order_agreement_low": self.order_agreement.low,
                "order_agreement_high": self.order_agreement.high, "both_orders": self.both_orders}


def naturalness_rates(store: Store, filters: Filters | None = None, *, n_resamples: int = DEFAULT_RESAMPLES,
                      seed: int = 0) -> list[WinRate]:
    """Win rates of each condition's constraint sets in the pairwise naturalness judgments, with
    the judges' position bias and the agreement between the two orders of each comparison."""
    f = filters or Filters()
    rows = naturalness_judgments(store, run=f.run, domain=f.domain)
    scores: dict[tuple[str, str], list[float]] = defaultdict(list)
    first: dict[tuple[str, str], list[float]] = defaultdict(list)
    # (condition, opponent) -> (judge, a, b) -> {shown first: winner}
    orders: dict[tuple[str, str], dict[tuple[str, int, int], dict[int, int | None]]] = defaultdict(dict)
    for ca, cb, ia, ib, shown_first, winner, judge in rows:
        if ca == cb:
            continue
        score_a = 0.5 if winner is None else (1.0 if winner == ia else 0.0)
        for cond, opp, score in ((ca, cb, score_a), (cb, ca, 1.0 - score_a)):
            for key in ((cond, opp), (cond, "any")):
                scores[key].append(score)
                if winner is not None and shown_first is not None:
                    first[key].append(1.0 if winner == shown_first else 0.0)
                if shown_first is not None:
                    orders[key].setdefault((judge, ia, ib), {})[shown_first] = winner
    out = []
    for (cond, opp), values in sorted(scores.items(),
                                      key=lambda kv: (_cond_order(kv[0][0]), kv[0][1] != "any", kv[0][1])):
        arr = np.asarray(values)
        agree = [float(len(set(by.values())) == 1) for by in orders[(cond, opp)].values() if len(by) == 2]
        out.append(WinRate(
            cond, opp, len(arr), int((arr == 1).sum()), int((arr == 0.5).sum()), int((arr == 0).sum()),
            bootstrap_mean(arr, n_resamples=n_resamples, seed=seed),
            bootstrap_mean(first[(cond, opp)], n_resamples=n_resamples, seed=seed),
            bootstrap_mean(agree, n_resamples=n_resamples, seed=seed),
        ))
    return out


def _cond_order(condition: str) -> int:
    return CONDITION_ORDER.index(condition) if condition in CONDITION_ORDER else len(CONDITION_ORDER)
