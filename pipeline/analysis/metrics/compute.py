"""compute_metrics: per-response rows from the per-text totals the store keeps (pipeline.store.scores),
then the groups, agreement and optional copying and similarity columns."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.analysis.coverage import Coverage, GroupKey, group_coverage
from pipeline.analysis.metrics.base import Filters, Group, Metrics, Row, rater_names, superficial_share
from pipeline.analysis.metrics.groups import _agreement, _group_sort_key, _groups, _KappaCounts
from pipeline.analysis.metrics.text_columns import _add_copying, _add_similarity
from pipeline.analysis.stats import DEFAULT_RESAMPLES, NAN_INTERVAL
from pipeline.core.definitions import ratio_key
from pipeline.store import metrics as selection
from pipeline.store.coverage import expected_raters
from pipeline.store.view import store_of

if TYPE_CHECKING:
    from pipeline.analysis.embeddings import Embedder
    from pipeline.store.database import Store
    from pipeline.store.view import StoreReader


def compute_metrics(
    reader: StoreReader,
    filters: Filters | None = None,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    copy: bool = False,
    ngram: int = 5,
    embedder: Embedder | None = None,
) -> Metrics:
    """Every per-response row and per-group aggregate for the selected instructions.

    ``copy`` adds copied n-gram columns; ``embedder`` (pipeline.analysis.embeddings) adds similarity
    columns. Both read texts, so they cost more than the verdict arithmetic."""
    store = store_of(reader)
    f = filters or Filters()
    with selection.scored_selection(store, f):
        raters, rows, kappa_counts = _rows(store, f)
        keys = selection.scored_raters(store, f)
        vwhere, vparams = selection.verdict_filter(f)
        texts = selection.SELECTED_TEXTS
        coverage = group_coverage(store, texts, expected_raters(store, texts, vwhere, vparams))
        totals = {raters[k]: counts for k, counts in selection.rater_totals(store).items()} if rows else {}
    if rows:
        _add_refusals(store, rows)
    if copy and rows:
        _add_copying(store, rows, ngram)
    if embedder is not None and rows:
        _add_similarity(store, rows, embedder)
    groups = _with_coverage(_groups(rows, kappa_counts, n_resamples=n_resamples, seed=seed), coverage)
    agreement = _agreement(raters, kappa_counts)
    ratios = sorted({r.ratio for r in rows if r.ratio is not None})
    return Metrics(raters=raters, rows=rows, groups=groups, agreement=agreement, ratios=ratios,
                   rater_totals=totals,
                   rater_keys=keys)


def _add_refusals(store: Store, rows: list[Row]) -> None:
    """extra["refusal"]: 1.0 when the response refused the task (pipeline.llm.contract), so a group's
    extra holds the share of refusals. Stores from before the flag have none to show."""
    flags = selection.refusal_flags(store, [r.response_id for r in rows])
    for row in rows:
        flag = flags.get(row.response_id)
        if flag is not None:
            row.extra["refusal"] = float(flag)


def _with_coverage(groups: list[Group], coverage: dict[GroupKey, Coverage]) -> list[Group]:
    """Each group with its coverage; a group of texts none of whose verdicts were given (all
    missing) has no rates but is kept, with its coverage of 0, so that it cannot pass unseen."""
    by_key = {(*g.key[:4], ratio_key(g.ratio)): g for g in groups}
    for key, c in coverage.items():
        g = by_key.get(key)
        if g is None:
            g = by_key[key] = Group(*key, n=0, org=NAN_INTERVAL)
        g.judged_items, g.expected_items = c.judged, c.expected
    return sorted(by_key.values(), key=lambda g: _group_sort_key(g.key))


def runs_covered(metrics: Metrics) -> list[str]:
    """The build runs whose judged responses the metrics count."""
    return sorted({r.run_id for r in metrics.rows if r.run_id})


def _rows(store: Store, f: Filters) -> tuple[list[str], list[Row], _KappaCounts]:
    """Per-response rows from the kept per-text totals (pipeline.store.scores) of the selected texts."""
    keys = selection.scored_raters(store, f)
    raters = rater_names(keys)
    if not keys:
        return raters, [], _KappaCounts.empty()
    selection.use_raters(store, keys)
    meta = selection.selected_responses(store)
    full = selection.response_totals(store, len(keys))
    # Per rater k: its satisfied and flipped counts, averaged over the summaries at the ratio
    # (two summarizers); NaN when k judged none of them.
    at_ratio: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for t in selection.summary_totals(store, len(keys)):
        sat_by = tuple(math.nan if v is None else v for v in t.satisfied_by)
        flip_by = tuple(math.nan if v is None else v for v in t.flipped_by)
        at_ratio[t.response_id].append((ratio_key(t.ratio), t.raters, t.core, t.satisfied, t.flipped, sat_by,
                                        flip_by))
    counts = _kappa_counts(store)
    achieved: dict[tuple[int, float | None], list[float]] = defaultdict(list)
    for rid, ratio, value in selection.achieved_ratios(store):
        achieved[(rid, ratio_key(ratio))].append(value)

    rows: list[Row] = []
    for rid, iid, run_id, domain, condition, art_a, art_b, model, mode, n_active in meta:
        judged = full.get(rid)
        if not judged:
            continue  # not judged yet
        n_judging, mean_judged, org = judged
        # The fields a response shares with its rows at each ratio (a dict: Row(**...) is much
        # cheaper than dataclasses.replace, which shows at 40,000 rows).
        shared: dict[str, Any] = {
            "instruction_id": iid, "run_id": run_id or "", "domain": domain or "",
            "condition": condition or "",
            "article_a": art_a, "article_b": art_b, "model": model or "", "mode": mode, "response_id": rid,
            "n_active": n_active, "judged": mean_judged, "org": org,
        }
        rows.append(Row(**shared, ratio=None, raters=n_judging))
        for ratio, n_summary, core, satisfied, flipped, sat_by, flip_by in sorted(at_ratio.get(rid, ())):
            reached = achieved.get((rid, ratio))
            rows.append(Row(
                **shared, ratio=ratio, raters=n_summary, core=core, satisfied=satisfied, flipped=flipped,
                satisfied_by=sat_by, flipped_by=flip_by, superficial=superficial_share(sat_by, flip_by),
                achieved_ratio=_mean(reached) if reached else None,
            ))
    return raters, rows, counts


def _kappa_counts(store: Store) -> _KappaCounts:
    """The agreement cells of the selected texts, for pairs of the selected raters."""
    rows = selection.agreement_cells(store)
    if not rows:
        return _KappaCounts.empty()
    table = np.array(rows, dtype=float)
    ratios, where = np.unique(table[:, 2], return_inverse=True)
    keyed = np.array([math.nan if math.isnan(r) else ratio_key(r) for r in ratios])  # as the rows' ratios
    return _KappaCounts(rid=table[:, 0].astype(np.int64), summary=table[:, 1].astype(bool),
                        ratio=keyed[where],
                        pair=table[:, 3:5].astype(np.int64), cells=table[:, 5:])


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan
