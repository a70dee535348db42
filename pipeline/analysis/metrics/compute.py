"""compute_metrics: per-response rows from the per-text totals the store keeps (pipeline.store.scores),
then the groups, agreement and optional copying and similarity columns."""

from __future__ import annotations

import math
import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.analysis.coverage import Coverage, expected_raters, group_coverage
from pipeline.analysis.metrics.base import Filters, Group, Metrics, Row, _ratio_key, superficial_share
from pipeline.analysis.metrics.groups import _agreement, _group_sort_key, _groups, _KappaCounts
from pipeline.analysis.metrics.sql import _LOCK, _cleanup, _rater_names, _select_texts, _start, _verdict_filter
from pipeline.analysis.metrics.text_columns import _add_copying, _add_similarity
from pipeline.analysis.stats import DEFAULT_RESAMPLES, NAN_INTERVAL
from pipeline.store.scores import current_text_scores, drop_temp_scores

if TYPE_CHECKING:
    from pipeline.analysis.embeddings import Embedder
    from pipeline.store.database import Store


def compute_metrics(
    store: Store,
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
    f = filters or Filters()
    with _LOCK:
        try:
            _start(store)
            current_text_scores(store.conn)
            _select_texts(store, f)
            raters, rows, kappa_counts = _rows(store, f)
            vwhere, vparams = _verdict_filter(f)
            coverage = group_coverage(store.conn, "m_gen", expected_raters(store.conn, "m_gen", vwhere, vparams))
            totals = _rater_totals(store.conn, raters) if rows else {}
        finally:
            _cleanup(store)
            drop_temp_scores(store.conn)
    if rows:
        _add_refusals(store, rows)
    if copy and rows:
        _add_copying(store, rows, ngram)
    if embedder is not None and rows:
        _add_similarity(store, rows, embedder)
    groups = _with_coverage(_groups(rows, kappa_counts, n_resamples=n_resamples, seed=seed), coverage)
    agreement = _agreement(raters, kappa_counts)
    ratios = sorted({r.ratio for r in rows if r.ratio is not None})
    return Metrics(raters=raters, rows=rows, groups=groups, agreement=agreement, ratios=ratios, rater_totals=totals)


def _add_refusals(store: Store, rows: list[Row]) -> None:
    """extra["refusal"]: 1.0 when the response refused the task (pipeline.llm.contract), so a group's
    extra holds the share of refusals. Stores from before the flag have none to show."""
    ids = sorted({r.response_id for r in rows})
    flags: dict[int, int] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        flags.update(store.conn.execute(
            f"SELECT id, refusal FROM generations WHERE refusal IS NOT NULL AND id IN ({','.join('?' * len(chunk))})",
            chunk).fetchall())
    for row in rows:
        flag = flags.get(row.response_id)
        if flag is not None:
            row.extra["refusal"] = float(flag)


def _rater_totals(conn: sqlite3.Connection, raters: list[str]) -> dict[str, tuple[int, int]]:
    """(judged, yes) per rater over the texts in m_gen, for the raters in m_raters (column k)."""
    return {raters[k]: (int(judged or 0), int(yes or 0)) for k, judged, yes in conn.execute(
        "SELECT r.k, sum(s.judged), sum(s.yes) FROM m_gen g JOIN text_scores s ON s.gid = g.gid"
        " JOIN m_raters r ON r.judge = s.judge AND r.judging_mode = s.judging_mode GROUP BY r.k")}


def _with_coverage(groups: list[Group], coverage: dict[tuple, Coverage]) -> list[Group]:
    """Each group with its coverage; a group of texts none of whose verdicts were given (all
    missing) has no rates but is kept, with its coverage of 0, so that it cannot pass unseen."""
    by_key = {(*g.key[:4], _ratio_key(g.ratio)): g for g in groups}
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
    """Per-response rows from the kept per-text totals (pipeline.store.scores) of the texts in m_gen."""
    conn = store.conn
    vwhere, vparams = _verdict_filter(f)
    keys = sorted(conn.execute(
        "SELECT DISTINCT s.judge, s.judging_mode FROM m_gen g JOIN text_scores s ON s.gid = g.gid"
        + "".join(f" AND s.{w}" for w in vwhere), vparams))
    raters = _rater_names(keys)
    if not keys:
        return raters, [], _KappaCounts.empty()
    # The selected raters and their column index k, for the joins below.
    conn.execute("CREATE TEMP TABLE m_raters(judge TEXT, judging_mode TEXT, k INTEGER, PRIMARY KEY(judge, judging_mode))")
    conn.executemany("INSERT INTO m_raters VALUES (?, ?, ?)", [(j, m, k) for k, (j, m) in enumerate(keys)])
    meta = conn.execute(
        "SELECT r.id, r.instruction_id, i.run_id, i.domain, i.condition, i.article_a, i.article_b, r.model,"
        " COALESCE(r.mode, ''), coalesce(a.n, 0) FROM m_gen g JOIN generations r ON r.id = g.gid"
        " JOIN instructions i ON i.id = r.instruction_id LEFT JOIN (SELECT instruction_id, count(*) AS n"
        " FROM constraints WHERE active = 1 GROUP BY instruction_id) a ON a.instruction_id = r.instruction_id"
        " WHERE g.kind = 'response'"
    ).fetchall()
    # Means over raters in SQL, one row per response and one per (response, ratio): Python only
    # builds the rows (10,000 instructions: 40,000 rows).
    rater_join = "JOIN m_raters r ON r.judge = s.judge AND r.judging_mode = s.judging_mode"
    full = {gid: values for gid, *values in conn.execute(
        f"SELECT g.gid, count(*), sum(s.judged) * 1.0 / {len(keys)}, avg(s.yes * 1.0 / s.judged) FROM m_gen g"
        f" JOIN text_scores s ON s.gid = g.gid {rater_join} WHERE g.kind = 'response' GROUP BY g.gid")}
    # Per rater k: its satisfied and flipped counts, averaged over the summaries at the ratio
    # (two summarizers); NULL when k judged none of them.
    n_raters = len(keys)
    per_rater = "".join(f", avg(CASE WHEN r.k = {k} THEN s.full_yes END), avg(CASE WHEN r.k = {k} THEN s.flipped END)"
                        for k in range(n_raters))
    at_ratio: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for rid, ratio, n_judging, core, satisfied, flipped, *by_rater in conn.execute(
        "SELECT g.rid, min(g.ratio), count(DISTINCT r.k), avg(s.core_yes * 1.0 / s.both), avg(s.full_yes),"
        f" avg(s.flipped){per_rater} FROM m_gen g JOIN text_scores s ON s.gid = g.gid {rater_join}"
        " WHERE g.kind = 'summary' AND s.both > 0 GROUP BY g.rid, round(g.ratio, 6)"
    ):
        sat_by = tuple(math.nan if v is None else v for v in by_rater[0::2])
        flip_by = tuple(math.nan if v is None else v for v in by_rater[1::2])
        at_ratio[rid].append((_ratio_key(ratio), n_judging, core, satisfied, flipped, sat_by, flip_by))
    counts = _kappa_counts(conn)
    achieved: dict[tuple[int, float], list[float]] = defaultdict(list)
    for rid, ratio, value in conn.execute(
        "SELECT g.rid, g.ratio, s.achieved_ratio FROM m_gen g JOIN generations s ON s.id = g.gid"
        " WHERE g.kind = 'summary' AND s.achieved_ratio IS NOT NULL"
    ):
        achieved[(rid, _ratio_key(ratio))].append(value)

    rows: list[Row] = []
    for rid, iid, run_id, domain, condition, art_a, art_b, model, mode, n_active in meta:
        judged = full.get(rid)
        if not judged:
            continue  # not judged yet
        n_judging, mean_judged, org = judged
        # The fields a response shares with its rows at each ratio (a dict: Row(**...) is much
        # cheaper than dataclasses.replace, which shows at 40,000 rows).
        shared = {
            "instruction_id": iid, "run_id": run_id or "", "domain": domain or "", "condition": condition or "",
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


def _kappa_counts(conn: sqlite3.Connection) -> _KappaCounts:
    """The agreement cells of the texts in m_gen, for pairs of the raters in m_raters."""
    rows = conn.execute(
        "SELECT g.rid, g.kind = 'summary', coalesce(g.ratio, 'nan'), ra.k, rb.k,"
        " a.n11, a.n10, a.n01, a.n00 FROM m_gen g JOIN text_agreement a ON a.gid = g.gid"
        " JOIN m_raters ra ON ra.judge = a.judge_a AND ra.judging_mode = a.mode_a"
        " JOIN m_raters rb ON rb.judge = a.judge_b AND rb.judging_mode = a.mode_b ORDER BY a.gid"
    ).fetchall()
    if not rows:
        return _KappaCounts.empty()
    table = np.array(rows, dtype=float)
    ratios, where = np.unique(table[:, 2], return_inverse=True)
    keyed = np.array([math.nan if math.isnan(r) else _ratio_key(r) for r in ratios])  # as the rows' ratios
    return _KappaCounts(rid=table[:, 0].astype(np.int64), summary=table[:, 1].astype(bool), ratio=keyed[where],
                        pair=table[:, 3:5].astype(np.int64), cells=table[:, 5:])


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan
