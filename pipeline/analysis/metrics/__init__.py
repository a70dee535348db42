"""Metrics read from the store: Org, Core, superficial share, judge agreement, copying, similarity.

Definitions (docs/method.md, "Core satisfaction"):

- A *rater* is a judge model in one judging mode. When the selected verdicts hold one mode
  per judge, the rater is named by the judge; when a judge has both ``batched`` and
  ``per_constraint`` verdicts, each mode is its own rater ("judge [batched]"), so the two
  modes can be compared by kappa; pass ``Filters(judging_mode=...)`` to keep one. For each
  (text, constraint, rater) the latest verdict counts (a re-judge with a new prompt wins).
- Only the instruction's active constraints (``constraints.active = 1``) are scored.
- **Org** of a response r = share of its constraints judged Yes on r, per rater, then the
  mean over raters (the paper averages two judges): equal to the mean over constraints of
  the judges' mean verdict. Constraints a rater has not judged yet are left out of that
  rater's share rather than counted as No; so is a missing verdict (stored NULL: the judge
  left the item out or its reply stayed unusable). ``coverage`` = judged / expected says how
  complete a response (judged: the mean over raters, a rater without a verdict counting 0) or a
  group (pipeline.analysis.coverage: every expected verdict of its texts) is.
- **Core@ratio** = the same on r's summary at that ratio, over the constraints the rater
  judged on both texts. Several summaries of r at one ratio (two summarizers) are averaged.
- **Superficial share** of r at a ratio: among constraints a rater judged Yes on the full
  response, the share that rater judged No on the summary; per rater, then averaged over
  raters. In aggregates each rater's share is pooled over the group's responses,
  sum(flipped) / sum(satisfied) (the paper's "X% of satisfied constraints survive"), then
  averaged over raters; **survival** = 1 - superficial.
- A constraint **flipped** on r when the raters' mean verdict is >= 0.5 on the full
  response and < 0.5 on the summary: the items the Annotate screen asks people about.
- Aggregates are per (domain, condition, model, mode, ratio): the mean of per-response
  Org and Core and the pooled superficial share, each with a bootstrap 95% interval that
  resamples responses = instructions (one response per instruction, model and mode), the
  unit of independence. Rows with ``ratio = None`` hold Org over every judged response,
  summarised or not; rows with a ratio hold Org and Core over the same responses, so the
  Org-Core gap compares like with like.
- **Judge agreement**: for each pair of raters, Cohen's kappa and percent agreement over
  the (text, constraint) items both judged; per group over the full responses and the
  summaries at the group's ratio. With more than two raters, a group shows the mean over pairs.
- **Human validation** lives in pipeline.analysis.validation: one rule (weighted by stratum,
  the adjudicator decides) for `validate report`, the report and the Annotate screen.
- **Copying** (``copying=True``): word 5-grams a response shares with reference A and with
  B (distinct n-grams), the share of its words inside copied spans, and the longest span.
- **Similarity** (only when an embedder is given; slow on CPU): constraint-reference cosine
  (mean over the active constraints of cos(constraint, reference A) and likewise B; the stored
  values of pipeline.analysis.similarity when every constraint has one by that embedder) and
  lexical overlap (share of a constraint's content words found in the reference, averaged);
  constraint-response similarity = for each constraint the max cosine over the response's
  sentences, averaged over constraints (as the research code).
- Comparisons (``compare``): two models on the same instructions, two conditions on the
  same reference article A, or two response modes (direct vs edit: does editing widen the
  Org-Core gap?) on the same instructions, by a paired bootstrap interval of the mean
  difference and a sign-flip permutation p-value (pipeline.analysis.stats.paired_test).

Aggregation reads the per-text totals the store keeps (pipeline.store.scores: each rater's counts,
each judge pair's 2x2 agreement cells, each summary's counts against its response), brought up
to date first for texts judged since; means over raters run in SQL, and Python only touches
per-response rows. On a synthetic store of 10,000 instructions x 39 constraints (3.1M verdicts)
this takes about 1.5 s; per-item questions (``constraint_items``) still pivot the verdicts
(bench/report_scale.py).

The package (pure moves from the former pipeline/metrics.py):
  base          Row, Group, JudgeAgreement, Metrics (Filters and Item live in pipeline.store.metrics,
                with every query the metrics run: the temp tables, the kept totals, the pivot)
  compute       compute_metrics: rows from the kept per-text totals
  groups        aggregates with intervals, judge agreement
  text_columns  copied n-grams and similarity
  comparisons   compare: paired tests
  items         constraint_items, items_to_annotate
  win_rates     naturalness win rates
"""

from __future__ import annotations

# Private helpers other modules reach for: judge_validation names raters as the metrics do; a test
# reads compare's side table; bench/report_scale.py times the copying columns alone.
from pipeline.analysis.metrics.base import (
    CONDITION_ORDER,
    LABELS,
    Filters,
    Group,
    JudgeAgreement,
    Metrics,
    Row,
    rater_names,
    superficial_share,
)
from pipeline.analysis.metrics.comparisons import Comparison, compare
from pipeline.analysis.metrics.comparisons import _side_table as _side_table
from pipeline.analysis.metrics.compute import compute_metrics, runs_covered
from pipeline.analysis.metrics.items import Item, constraint_items, items_to_annotate
from pipeline.analysis.metrics.text_columns import _add_copying as _add_copying
from pipeline.analysis.metrics.win_rates import WinRate, naturalness_rates

__all__ = [
    "compare",
    "Comparison",
    "compute_metrics",
    "CONDITION_ORDER",
    "constraint_items",
    "Filters",
    "Group",
    "Item",
    "items_to_annotate",
    "JudgeAgreement",
    "LABELS",
    "Metrics",
    "naturalness_rates",
    "Row",
    "rater_names",
    "runs_covered",
    "superficial_share",
    "WinRate",
]
