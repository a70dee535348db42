"""Coverage: of the verdicts a group of texts should have, how many the judges really gave.

A missing verdict (the judge left the item out, or its reply stayed unusable) is stored as
NULL and left out of every rate (DESIGN.md: "Missing verdicts are missing, never No"). A rate
over a few items then looks as sure as one over all of them, so every group carries its
coverage beside it:

  expected  one verdict per active constraint of each text, from each rater that judged (or
            tried to judge: a missing verdict names its judge) any selected text
  judged    the (text, constraint, rater) items whose latest usable verdict exists

For the Org row of a group the texts are its responses; for a row at a summary ratio they
are the summaries at that ratio. ``evaluate`` fails when a group it judged is under
``MIN_COVERAGE`` (``[evaluate] min_coverage``), and the report marks such groups.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.core.definitions import ratio_key
from pipeline.store.coverage import judged_per_text, text_groups
from pipeline.store.database import Store

MIN_COVERAGE = 0.95

# (domain, condition, model, mode, ratio): the key of pipeline.analysis.metrics.Group
GroupKey = tuple[str, str, str, str, float | None]


@dataclass(frozen=True)
class Coverage:
    judged: int = 0
    expected: int = 0

    @property
    def rate(self) -> float:
        return self.judged / self.expected if self.expected else math.nan

    def below(self, threshold: float) -> bool:
        """Under the threshold (a group that expects nothing is not under anything)."""
        return self.expected > 0 and self.judged < threshold * self.expected

    def __add__(self, other: Coverage) -> Coverage:
        return Coverage(self.judged + other.judged, self.expected + other.expected)


def group_coverage(store: Store, texts: str, raters: Sequence[tuple[str, str]]) -> dict[GroupKey, Coverage]:
    """Coverage per group of the texts in the temp table ``texts`` (gid, kind, rid, ratio), each
    text expecting a verdict from every one of ``raters`` (pipeline.store.coverage.expected_raters)
    on each of its active constraints. Reads the kept per-text totals (pipeline.store.scores),
    which must be current."""
    if not raters:
        return {}
    wanted = set(raters)
    judged: dict[int, int] = defaultdict(int)
    for gid, judge, mode, n in judged_per_text(store, texts):
        if (judge, mode) in wanted:
            judged[gid] += n
    out: dict[GroupKey, Coverage] = defaultdict(Coverage)
    for t in text_groups(store, texts):
        key = (t.domain or "", t.condition or "", t.model or "", t.mode, ratio_key(t.ratio)
               if t.kind == "summary" else None)
        out[key] = out[key] + Coverage(judged.get(t.gid, 0), t.n_active * len(raters))
    return dict(out)


def low_groups(coverage: dict[GroupKey, Coverage],
               threshold: float = MIN_COVERAGE) -> list[tuple[GroupKey, Coverage]]:
    """The groups under ``threshold``, worst first."""
    low = [(key, c) for key, c in coverage.items() if c.below(threshold)]
    return sorted(low, key=lambda kc: (kc[1].rate, _sortable(kc[0])))


def _sortable(key: GroupKey) -> tuple[Any, ...]:
    return (*key[:4], -1.0 if key[4] is None else key[4])


def describe(key: GroupKey) -> str:
    """'news / eval / gpt (direct), summaries at 0.25' for messages."""
    domain, condition, model, mode, ratio = key
    what = "responses" if ratio is None else f"summaries at {ratio:g}"
    return f"{domain} / {condition} / {model}{f' ({mode})' if mode else ''}, {what}"
