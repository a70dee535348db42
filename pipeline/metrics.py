"""Metrics read from the store: Org, Core, superficial share, judge agreement, copying, similarity.

Definitions (METHOD.md, "Core satisfaction"):

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
  group (pipeline.coverage: every expected verdict of its texts) is.
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
- **Human validation** (``annotator_agreement``, ``metric_validation``): kappa between
  annotators on shared items (all three labels), and precision/recall of the metric's
  "superficial" call (= flipped) against human labels, with label ``superficial`` the
  positive class, ``integrated`` the negative and ``ambiguous`` left out (counted apart).
- **Copying** (``copying=True``): word 5-grams a response shares with reference A and with
  B (distinct n-grams), the share of its words inside copied spans, and the longest span.
- **Similarity** (only when an embedder is given; slow on CPU): constraint-reference cosine
  (mean over the active constraints of cos(constraint, reference A) and likewise B) and
  lexical overlap (share of a constraint's content words found in the reference, averaged);
  constraint-response similarity = for each constraint the max cosine over the response's
  sentences, averaged over constraints (as the research code).
- Comparisons (``compare``): two models on the same instructions, two conditions on the
  same reference article A, or two response modes (direct vs edit: does editing widen the
  Org-Core gap?) on the same instructions, by a paired bootstrap interval of the mean
  difference and a sign-flip permutation p-value (pipeline.stats.paired_test).

Aggregation reads the per-text totals the store keeps (pipeline.scores: each rater's counts,
each judge pair's 2x2 agreement cells, each summary's counts against its response), brought up
to date first for texts judged since; means over raters run in SQL, and Python only touches
per-response rows. On a synthetic store of 10,000 instructions x 39 constraints (3.1M verdicts)
this takes about 1.5 s; per-item questions (``constraint_items``) still pivot the verdicts
(bench/report_scale.py).
"""

from __future__ import annotations

import json
import math
import random
import sqlite3
import threading
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from . import copying
from .coverage import Coverage, expected_raters, group_coverage
from .scores import current_text_scores, drop_temp_scores, item_outcome_sql, pivot
from .stats import (
    DEFAULT_RESAMPLES,
    NAN_INTERVAL,
    Agreement,
    Interval,
    PairedTest,
    PrecisionRecall,
    bootstrap_mean,
    bootstrap_ratio,
    cohen_kappa,
    kappa_from_counts,
    paired_test,
    precision_recall,
)

if TYPE_CHECKING:
    from .embeddings import Embedder
    from .store import Store

# Temp tables live on the store's connection; one metrics computation at a time per process.
_LOCK = threading.RLock()
CONDITION_ORDER = ("single", "none", "direct", "eval", "human")
LABELS = ("integrated", "superficial", "ambiguous")


@dataclass(frozen=True)
class Filters:
    run: str | None = None  # instructions.run_id
    instruction: int | None = None  # one instruction (the app's per-instruction screens)
    domain: str | None = None
    condition: str | None = None
    models: tuple[str, ...] | None = None  # models under test (the response's writer)
    mode: str | None = None  # direct | edit
    judges: tuple[str, ...] | None = None
    judging_mode: str | None = None  # batched | per_constraint
    # Only these responses (and their summaries): per-item questions about a few hundred labelled
    # items (pipeline.validation) need not pivot every verdict of the store.
    responses: tuple[int, ...] | None = None


@dataclass
class Row:
    """One response at one summary ratio (``ratio = None``: the response alone)."""

    instruction_id: int
    run_id: str
    domain: str
    condition: str
    article_a: int | None
    article_b: int | None
    model: str
    mode: str
    response_id: int
    ratio: float | None
    n_active: int
    judged: float  # constraints judged on the full response, mean over raters
    org: float
    core: float = math.nan
    satisfied: float = math.nan  # constraints Yes on full (of those judged on the summary), mean over raters
    flipped: float = math.nan  # of those, No on the summary, mean over raters
    # Per rater (index = rater column; NaN = not judged): satisfied and flipped counts.
    satisfied_by: tuple[float, ...] = ()
    flipped_by: tuple[float, ...] = ()
    achieved_ratio: float | None = None
    raters: int = 0
    extra: dict[str, float] = field(default_factory=dict)  # copying and similarity columns
    # Mean over raters of flipped / satisfied: superficial_share(satisfied_by, flipped_by).
    superficial: float = math.nan

    @property
    def coverage(self) -> float:
        return self.judged / self.n_active if self.n_active else math.nan

    def as_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in _ROW_COLUMNS}
        out["superficial"] = self.superficial
        out["coverage"] = self.coverage
        out.update(self.extra)
        return out


_ROW_COLUMNS = [f.name for f in fields(Row) if f.name not in ("extra", "satisfied_by", "flipped_by", "superficial")]


def superficial_share(satisfied_by: Sequence[float], flipped_by: Sequence[float]) -> float:
    """Per rater, the share of its satisfied constraints that flipped; the mean over raters."""
    shares = [f / s for s, f in zip(satisfied_by, flipped_by) if not math.isnan(s) and s > 0]
    return sum(shares) / len(shares) if shares else math.nan


@dataclass
class Group:
    domain: str
    condition: str
    model: str
    mode: str
    ratio: float | None
    n: int
    org: Interval
    core: Interval = NAN_INTERVAL
    superficial: Interval = NAN_INTERVAL
    kappa: float = math.nan
    agreement: float = math.nan
    agreement_items: int = 0
    achieved_ratio: float = math.nan
    extra: dict[str, float] = field(default_factory=dict)
    # Verdicts given / expected over the group's texts (pipeline.coverage); missing ones are
    # left out of the rates above, so a low coverage makes them unsure in a way no interval shows.
    judged_items: int = 0
    expected_items: int = 0

    @property
    def key(self) -> tuple[str, str, str, str, float | None]:
        return (self.domain, self.condition, self.model, self.mode, self.ratio)

    @property
    def coverage(self) -> float:
        return self.judged_items / self.expected_items if self.expected_items else math.nan

    @property
    def survival(self) -> Interval:
        s = self.superficial
        return Interval(1 - s.value, 1 - s.high, 1 - s.low, s.n)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "domain": self.domain, "condition": self.condition, "model": self.model, "mode": self.mode,
            "ratio": self.ratio, "n": self.n, "achieved_ratio": self.achieved_ratio,
        }
        for name in ("org", "core", "superficial", "survival"):
            iv: Interval = getattr(self, name)
            out[name], out[f"{name}_low"], out[f"{name}_high"] = iv.value, iv.low, iv.high
        out["gap"] = self.org.value - self.core.value  # Org - Core over the same responses
        out.update({"kappa": self.kappa, "agreement": self.agreement, "agreement_items": self.agreement_items})
        out.update({"coverage": self.coverage, "judged_items": self.judged_items, "expected_items": self.expected_items})
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class JudgeAgreement:
    rater_a: str
    rater_b: str
    kind: str  # response | summary | all
    kappa: float
    percent: float
    n: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Metrics:
    raters: list[str]
    rows: list[Row]  # per response x ratio, plus one ratio=None row per response
    groups: list[Group]
    agreement: list[JudgeAgreement]
    ratios: list[float]
    # Per rater: (verdicts given, of them Yes) over the selected texts; a judge that always says
    # the same is flagged by the report.
    rater_totals: dict[str, tuple[int, int]] = field(default_factory=dict)
    # compare's rows by stratum, unit and side, per (by, ratio): a report compares many pairs.
    _sides: dict[tuple[str, float | None], tuple[_SideTable, float | None]] = field(
        default_factory=dict, repr=False, compare=False)

    @property
    def empty(self) -> bool:
        return not self.rows

    def response_rows(self) -> list[Row]:
        return [r for r in self.rows if r.ratio is None]

    def at_ratio(self, ratio: float | None) -> list[Row]:
        return [r for r in self.rows if _same_ratio(r.ratio, ratio)]

    def group(self, domain: str, condition: str, model: str, mode: str, ratio: float | None) -> Group | None:
        for g in self.groups:
            if g.key[:4] == (domain, condition, model, mode) and _same_ratio(g.ratio, ratio):
                return g
        return None


def _same_ratio(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) < 1e-9


def _ratio_key(ratio: float | None) -> float | None:
    return None if ratio is None else round(float(ratio), 6)


# -- the SQL side -------------------------------------------------------------------------------


def _start(store: Store) -> None:
    """Before any temp table: changing temp_store drops every temp table of the connection."""
    conn = store.conn
    _cleanup(store)
    if not conn.in_transaction:
        # Sorting millions of verdicts for the GROUP BY: in memory, not in a temp file. The pragma
        # can change only outside a transaction; _cleanup restores it.
        _TEMP_STORE[id(conn)] = conn.execute("PRAGMA temp_store").fetchone()[0]
        conn.execute("PRAGMA temp_store = MEMORY")


def _select_texts(store: Store, f: Filters) -> None:
    """Fill temp table m_gen: the selected responses and summaries (gid, kind, rid, ratio)."""
    conn = store.conn
    conn.execute("CREATE TEMP TABLE m_gen(gid INTEGER PRIMARY KEY, kind TEXT, rid INTEGER, ratio REAL)")
    where, params = [], []
    for column, value in (("i.run_id", f.run), ("i.id", f.instruction), ("i.domain", f.domain),
                          ("i.condition", f.condition), ("coalesce(r.mode, '')", f.mode)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if f.models:
        where.append(f"r.model IN ({','.join('?' * len(f.models))})")
        params.extend(f.models)
    if f.responses is not None:
        where.append("r.id IN (SELECT value FROM json_each(?))")  # one parameter, however many responses
        params.append(json.dumps(list(f.responses)))
    conn.execute(
        "INSERT INTO m_gen SELECT g.id, g.kind, r.id, g.ratio FROM generations g"
        " JOIN generations r ON r.id = CASE WHEN g.kind = 'summary' THEN g.parent_id ELSE g.id END"
        " JOIN instructions i ON i.id = r.instruction_id"
        " WHERE g.kind IN ('response', 'summary') AND r.kind = 'response'" + "".join(f" AND {w}" for w in where),
        params,
    )


def _verdict_filter(f: Filters) -> tuple[list[str], list[Any]]:
    """SQL conditions on a verdict's judge and judging_mode columns, and their parameters."""
    where, params = [], []
    if f.judges:
        where.append(f"judge IN ({','.join('?' * len(f.judges))})")
        params.extend(f.judges)
    if f.judging_mode:
        where.append("judging_mode = ?")
        params.append(f.judging_mode)
    return where, params


def _rater_names(raters: Sequence[tuple[str, str]]) -> list[str]:
    """A judge's name, or "judge [mode]" when the judge appears in both judging modes."""
    modes_per_judge: dict[str, int] = defaultdict(int)
    for judge, _ in raters:
        modes_per_judge[judge] += 1
    return [judge if modes_per_judge[judge] == 1 else f"{judge} [{mode}]" for judge, mode in raters]


def _prepare(store: Store, f: Filters) -> list[str]:
    """Fill temp tables: m_gen (the selected texts) and m_p (one row per text and active
    constraint, one verdict column y0, y1, ... per rater, NULL where that rater has not judged).
    Return the rater names, in column order. For per-item questions; totals per text come from
    pipeline.scores instead."""
    conn = store.conn
    _start(store)
    _select_texts(store, f)
    vwhere, vparams = _verdict_filter(f)
    vsql = "".join(f" AND v.{w}" for w in vwhere)
    selected = conn.execute("SELECT count(*) FROM m_gen").fetchone()[0]
    total = conn.execute("SELECT count(*) FROM generations WHERE kind IN ('response', 'summary')").fetchone()[0]
    wide = selected > 0.2 * total
    # Most texts selected: one sequential scan of verdicts beats an index walk with a row lookup
    # per verdict. A narrow selection (one run of many): the selected texts drive the index.
    if wide:
        source = "verdicts v NOT INDEXED WHERE v.generation_id IN (SELECT gid FROM m_gen)"
        # Raters over all verdicts: much cheaper than checking each row's text.
        raters_from = "verdicts v WHERE 1"
    else:
        source = raters_from = "m_gen g CROSS JOIN verdicts v ON v.generation_id = g.gid WHERE 1"  # CROSS: g drives
    # No ORDER BY and no test of the verdict here: SQLite then reads a covering index instead of
    # sorting every row (6x faster). A rater with no usable verdict is dropped after the pivot.
    raters = sorted(conn.execute(f"SELECT DISTINCT v.judge, v.judging_mode FROM {raters_from}{vsql}", vparams))
    pivot(conn, "m_p", raters, source, vsql, vparams)
    if raters:
        used = conn.execute(f"SELECT {', '.join(f'count(y{k})' for k in range(len(raters)))} FROM m_p").fetchone()
        if not all(used):
            raters = [r for r, n in zip(raters, used) if n]
            conn.execute("DROP TABLE temp.m_p")
            pivot(conn, "m_p", raters, source, vsql, vparams)
    return _rater_names(raters)


def _cleanup(store: Store) -> None:
    conn = store.conn
    for table in ("m_gen", "m_p", "m_raters"):
        conn.execute(f"DROP TABLE IF EXISTS temp.{table}")
    previous = _TEMP_STORE.pop(id(conn), None)
    if previous is not None:
        # The transaction was opened by our temp-table writes alone (none was open before).
        conn.commit()
        conn.execute(f"PRAGMA temp_store = {int(previous)}")


_TEMP_STORE: dict[int, int] = {}


# -- the computation ------------------------------------------------------------------------------


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

    ``copy`` adds copied n-gram columns; ``embedder`` (pipeline.embeddings) adds similarity
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
    """extra["refusal"]: 1.0 when the response refused the task (pipeline.contract), so a group's
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


@dataclass
class _KappaCounts:
    """The 2x2 agreement cells [n11, n10, n01, n00] of each (text, pair of raters), one row each."""

    rid: np.ndarray  # the text's response (the text itself, or the response a summary shortens)
    summary: np.ndarray  # bool: the text is a summary
    ratio: np.ndarray  # a summary's ratio (NaN for responses)
    pair: np.ndarray  # (rows, 2): rater indices a < b
    cells: np.ndarray  # (rows, 4)

    @classmethod
    def empty(cls) -> _KappaCounts:
        return cls(np.zeros(0, int), np.zeros(0, bool), np.zeros(0), np.zeros((0, 2), int), np.zeros((0, 4)))

    def tables(self, mask: np.ndarray) -> dict[tuple[int, int], np.ndarray]:
        """Summed cells of the masked rows, per pair of raters."""
        out: dict[tuple[int, int], np.ndarray] = {}
        pairs, cells = self.pair[mask], self.cells[mask]
        if not len(pairs):
            return out
        codes = pairs[:, 0] * (int(self.pair.max()) + 1) + pairs[:, 1]  # one int per pair, in (a, b) order
        for code in np.unique(codes):
            rows = codes == code
            a, b = pairs[rows][0]
            out[(int(a), int(b))] = cells[rows].sum(axis=0)
        return out


def _rows(store: Store, f: Filters) -> tuple[list[str], list[Row], _KappaCounts]:
    """Per-response rows from the kept per-text totals (pipeline.scores) of the texts in m_gen."""
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


def _groups(rows: list[Row], counts: _KappaCounts, *, n_resamples: int, seed: int) -> list[Group]:
    buckets: dict[tuple, list[Row]] = defaultdict(list)
    for row in rows:
        buckets[(row.domain, row.condition, row.model, row.mode, row.ratio)].append(row)
    groups: list[Group] = []
    for key in sorted(buckets, key=_group_sort_key):
        members = buckets[key]
        domain, condition, model, mode, ratio = key
        units = _pair_units(members)
        org = bootstrap_mean([_nanmean([r.org for r in u]) for u in units], n_resamples=n_resamples, seed=seed)
        g = Group(domain, condition, model, mode, ratio, n=len(units), org=org)
        if ratio is not None:
            g.core = bootstrap_mean([_nanmean([r.core for r in u]) for u in units], n_resamples=n_resamples, seed=seed)
            # Units x raters; a rater who did not judge a response adds nothing to either sum.
            g.superficial = bootstrap_ratio(
                np.array([_unit_counts(u, "flipped_by") for u in units], dtype=float).reshape(len(units), -1),
                np.array([_unit_counts(u, "satisfied_by") for u in units], dtype=float).reshape(len(units), -1),
                n_resamples=n_resamples, seed=seed)
            reached = [r.achieved_ratio for r in members if r.achieved_ratio is not None]
            g.achieved_ratio = float(np.mean(reached)) if reached else math.nan
        # Judge agreement: cells of the group's responses, plus their summaries at its ratio.
        texts = ~counts.summary if ratio is None else ~counts.summary | (counts.ratio == ratio)
        tables = counts.tables(np.isin(counts.rid, [r.response_id for r in members]) & texts)
        if tables:
            results = [kappa_from_counts(t.reshape(2, 2)) for t in tables.values()]
            kappas = [a.kappa for a in results if not math.isnan(a.kappa)]
            g.kappa = float(np.mean(kappas)) if kappas else math.nan
            g.agreement = float(np.mean([a.percent for a in results]))
            g.agreement_items = int(sum(a.n for a in results))
        extras = defaultdict(list)
        for row in members:
            for name, value in row.extra.items():
                if value is not None and not math.isnan(value):
                    extras[name].append(value)
        g.extra = {name: float(np.mean(values)) for name, values in extras.items()}
        groups.append(g)
    return groups


def _pair_units(rows: list[Row]) -> list[list[Row]]:
    """A group's rows by pair of reference articles, the bootstrap's unit: each (pair, condition,
    model, mode) counts once. Runs that built the same pair again (an identical build repeated
    under another id, or two builds sharing pairs) give one unit, whose value is the mean over
    its responses; counted apart, a repeated pair would narrow every interval. Rows without
    reference articles (hand-made instructions) are units of their own."""
    units: dict[Any, list[Row]] = {}
    for row in rows:
        key = (row.article_a, row.article_b) if row.article_a is not None else ("instruction", row.instruction_id)
        units.setdefault(key, []).append(row)
    return list(units.values())


def _nanmean(values: Sequence[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


def _unit_counts(rows: list[Row], name: str) -> list[float]:
    """Per rater, a unit's mean count over its responses (NaN = that rater judged none): 0 in
    the pooled sums."""
    columns = np.array([getattr(r, name) for r in rows], dtype=float)
    if columns.size == 0:
        return []
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a rater with no count in this unit
        means = np.nanmean(columns, axis=0)
    return np.nan_to_num(means).tolist()


def _group_sort_key(key: tuple) -> tuple:
    domain, condition, model, mode, ratio = key
    order = CONDITION_ORDER.index(condition) if condition in CONDITION_ORDER else len(CONDITION_ORDER)
    return (domain, order, condition, model, mode, -1.0 if ratio is None else -ratio)


def _agreement(raters: list[str], counts: _KappaCounts) -> list[JudgeAgreement]:
    out = []
    by_kind = {"all": counts.tables(np.ones(len(counts.rid), dtype=bool)),
               "response": counts.tables(~counts.summary), "summary": counts.tables(counts.summary)}
    for (ra, rb), kind in sorted((pair, kind) for kind, tables in by_kind.items() for pair in tables):
        a = kappa_from_counts(by_kind[kind][(ra, rb)].reshape(2, 2))
        out.append(JudgeAgreement(raters[ra], raters[rb], kind, a.kappa, a.percent, a.n))
    return out


# -- copying and similarity (read texts) ---------------------------------------------------------


def _texts(store: Store, hashes: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    unique = [h for h in dict.fromkeys(hashes) if h]
    for start in range(0, len(unique), 500):
        chunk = unique[start : start + 500]
        out.update(store.conn.execute(
            f"SELECT hash, body FROM texts WHERE hash IN ({','.join('?' * len(chunk))})", chunk).fetchall())
    return out


def _response_and_reference_hashes(store: Store, rows: list[Row]) -> tuple[dict[int, str], dict[int, str]]:
    response_ids = sorted({r.response_id for r in rows})
    article_ids = sorted({a for r in rows for a in (r.article_a, r.article_b) if a is not None})
    resp: dict[int, str] = {}
    arts: dict[int, str] = {}
    for start in range(0, len(response_ids), 500):
        chunk = response_ids[start : start + 500]
        resp.update(store.conn.execute(
            f"SELECT id, text_hash FROM generations WHERE id IN ({','.join('?' * len(chunk))})", chunk).fetchall())
    for start in range(0, len(article_ids), 500):
        chunk = article_ids[start : start + 500]
        arts.update(store.conn.execute(
            f"SELECT id, text_hash FROM articles WHERE id IN ({','.join('?' * len(chunk))})", chunk).fetchall())
    return resp, arts


def _add_copying(store: Store, rows: list[Row], ngram: int) -> None:
    """copy_a_ngrams, copy_a_share, copy_b_ngrams, copy_b_share, copy_longest per response.

    Counts are kept in the store's copy_stats table by the texts' hashes; only new pairs of
    texts are read and compared."""
    resp, arts = _response_and_reference_hashes(store, rows)
    known = _stored_copy_stats(store, ngram)
    needed = {(resp.get(r.response_id), arts.get(article)) for r in rows for article in (r.article_a, r.article_b)
              if article is not None}
    missing = sorted(pair for pair in needed if all(pair) and pair not in known)
    if missing:
        bodies = _texts(store, [h for pair in missing for h in pair])
        fresh = {}
        for r, a in missing:
            if r in bodies and a in bodies:
                stats = copying.copy_stats(bodies[r], bodies[a], ngram)
                fresh[(r, a)] = (stats.shared_ngrams, stats.copied_words, stats.words, stats.longest)
        _keep_copy_stats(store, ngram, fresh)
        known.update(fresh)
    per_response: dict[int, dict[str, float]] = {}
    for row in rows:
        values = per_response.get(row.response_id)
        if values is None:
            values = per_response[row.response_id] = _copy_values(
                known, resp.get(row.response_id), (("a", arts.get(row.article_a)), ("b", arts.get(row.article_b))))
        row.extra.update(values)


# (response hash, reference hash) -> (shared n-grams, copied words, words, longest span)
_CopyCounts = dict[tuple[str, str], tuple[int, int, int, int]]


def _copy_values(known: _CopyCounts, r_hash: str | None,
                 references: Sequence[tuple[str, str | None]]) -> dict[str, float]:
    values: dict[str, float] = {}
    longest = 0
    for label, a_hash in references:
        counts = known.get((r_hash, a_hash)) if r_hash and a_hash else None
        if counts is None:
            continue
        shared, copied, words, span = counts
        values[f"copy_{label}_ngrams"] = float(shared)
        values[f"copy_{label}_share"] = copied / words if words else 0.0
        longest = max(longest, span)
    if values:
        values["copy_longest"] = float(longest)
    return values


def _stored_copy_stats(store: Store, ngram: int) -> _CopyCounts:
    return {(r, a): (shared, copied, words, longest) for r, a, shared, copied, words, longest in store.conn.execute(
        "SELECT text_hash, reference_hash, shared_ngrams, copied_words, words, longest FROM copy_stats"
        " WHERE ngram = ?", (ngram,))}


def _keep_copy_stats(store: Store, ngram: int, fresh: _CopyCounts) -> None:
    """Store new counts; a read-only store, or a caller's open transaction, just goes without."""
    conn = store.conn
    if not fresh or conn.in_transaction:
        return
    try:
        with conn:
            conn.executemany(
                "INSERT OR IGNORE INTO copy_stats(text_hash, reference_hash, ngram, shared_ngrams, copied_words,"
                " words, longest) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(r, a, ngram, *counts) for (r, a), counts in fresh.items()])
    except sqlite3.OperationalError as exc:
        if "readonly" not in str(exc):
            raise


def _active_constraints(store: Store, instruction_ids: Sequence[int]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = defaultdict(list)
    ids = sorted(set(instruction_ids))
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for iid, text in store.conn.execute(
            f"SELECT instruction_id, text FROM constraints WHERE active = 1 AND instruction_id IN"
            f" ({','.join('?' * len(chunk))}) ORDER BY instruction_id, position, id", chunk):
            out[iid].append(text)
    return out


def _add_similarity(store: Store, rows: list[Row], embedder: Embedder) -> None:
    """sim_ref_a / sim_ref_b (cosine), lex_ref_a / lex_ref_b (lexical overlap) per instruction;
    sim_response (mean over constraints of the max cosine over response sentences) per response."""
    from .embeddings import embed_texts

    resp, arts = _response_and_reference_hashes(store, rows)
    bodies = _texts(store, [*resp.values(), *arts.values()])
    constraints = _active_constraints(store, [r.instruction_id for r in rows])
    sentences = {rid: copying.split_sentences(bodies.get(h, "")) for rid, h in resp.items()}
    # One embedding call for every distinct text: the cache makes repeats free anyway.
    all_texts = list(dict.fromkeys(
        [t for ts in constraints.values() for t in ts]
        + [bodies[h] for h in arts.values() if h in bodies]
        + [s for ss in sentences.values() for s in ss]
    ))
    if not all_texts:
        return
    vectors = embed_texts(store, embedder, all_texts)
    index = {t: i for i, t in enumerate(all_texts)}

    def vecs(texts: Sequence[str]) -> np.ndarray:
        return vectors[[index[t] for t in texts]] if texts else np.zeros((0, vectors.shape[1]), dtype=np.float32)

    per_instruction: dict[int, dict[str, float]] = {}
    per_response: dict[int, float] = {}
    for row in rows:
        cons = constraints.get(row.instruction_id, [])
        if row.instruction_id not in per_instruction:
            values: dict[str, float] = {}
            cv = vecs(cons)
            for label, article in (("a", row.article_a), ("b", row.article_b)):
                body = bodies.get(arts.get(article, ""), "") if article is not None else ""
                if not body or not cons:
                    continue
                values[f"sim_ref_{label}"] = float((cv @ vectors[index[body]]).mean())
                values[f"lex_ref_{label}"] = float(np.mean([copying.lexical_overlap(c, body) for c in cons]))
            per_instruction[row.instruction_id] = values
        if row.response_id not in per_response:
            sv = vecs(sentences.get(row.response_id, []))
            per_response[row.response_id] = (
                float((vecs(cons) @ sv.T).max(axis=1).mean()) if cons and len(sv) else math.nan
            )
        row.extra.update(per_instruction[row.instruction_id])
        row.extra["sim_response"] = per_response[row.response_id]


# -- comparisons ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    by: str  # model | condition | mode
    a: str
    b: str
    domain: str
    within: str  # the condition (model comparison) or model/mode (condition comparison)
    metric: str  # org | core | superficial | gap (org - core)
    ratio: float | None
    test: PairedTest
    p_holm: float = math.nan  # Holm-adjusted over the family the report tested together

    def as_dict(self) -> dict[str, Any]:
        return {"by": self.by, "a": self.a, "b": self.b, "domain": self.domain, "within": self.within,
                "metric": self.metric, "ratio": self.ratio, **self.test.as_dict(), "p_holm": self.p_holm}


def compare(metrics: Metrics, a: str, b: str, *, by: str | None = None, ratio: float | None = 0.25,
            n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[Comparison]:
    """Paired tests of ``a`` against ``b``: two models (units: the same instructions, per domain,
    condition and mode), two conditions (units: the same reference article A, per domain, model
    and mode) or two response modes, direct vs edit (units: the same instructions, per domain,
    condition and model). ``by`` defaults to whichever of condition / mode both names are in the
    data, else model. Metrics: org, and at a ratio core, superficial and gap (= org - core)."""
    if by is None:
        conditions = {r.condition for r in metrics.rows}
        modes_present = {r.mode for r in metrics.rows}
        by = ("condition" if a in conditions and b in conditions
              else "mode" if a in modes_present and b in modes_present else "model")
    if by not in ("model", "condition", "mode"):
        raise ValueError(f"compare: by must be 'model', 'condition' or 'mode', not {by!r}")
    table, ratio = _side_table(metrics, by, ratio)
    metric_names = ["org"] if ratio is None else ["org", "core", "superficial", "gap"]
    out: list[Comparison] = []
    for (domain, within), units in sorted(table.items()):
        # Units with both sides, in the order their first row of either side came.
        paired = sorted((min(sa[0], sb[0]), sa[1], sb[1]) for sides in units.values()
                        if (sa := sides.get(a)) and (sb := sides.get(b)))
        if not paired:
            continue
        # units x (org, core, superficial, gap), for each side
        xa = np.array([_unit_values(ra) for _, ra, _ in paired], dtype=float)
        xb = np.array([_unit_values(rb) for _, _, rb in paired], dtype=float)
        for k, metric in enumerate(metric_names):
            test = paired_test(xa[:, k], xb[:, k], n_resamples=n_resamples, seed=seed)
            out.append(Comparison(by, a, b, domain, within, metric, ratio, test))
    return out


# stratum (domain, within) -> unit -> side -> (position of the side's first row, [(org, core,
# superficial, gap) of each of its rows])
_SideTable = dict[tuple[str, str], dict[Any, dict[str, tuple[int, list[tuple[float, ...]]]]]]


def _side_table(metrics: Metrics, by: str, ratio: float | None) -> tuple[_SideTable, float | None]:
    """Every side's rows per stratum and unit, for ``by``; and the ratio they are at (None when
    nothing is summarised at ``ratio``: Org only)."""
    cached = metrics._sides.get((by, ratio))
    if cached is not None:
        return cached
    asked = ratio
    rows = metrics.at_ratio(ratio) if ratio is not None else metrics.response_rows()
    if ratio is not None and not rows:
        rows, ratio = metrics.response_rows(), None
    table: _SideTable = defaultdict(lambda: defaultdict(dict))
    several_modes = len({r.mode for r in rows}) > 1
    for position, row in enumerate(rows):
        mode = f"/{row.mode}" if several_modes and row.mode else ""
        # A pair of references built by several runs is one unit, as in the groups (_pair_units).
        pair = (row.article_a, row.article_b) if row.article_a is not None else ("instruction", row.instruction_id)
        if by == "model":
            side, stratum, unit = row.model, (row.domain, f"{row.condition}{mode}"), pair
        elif by == "mode":
            side, stratum, unit = row.mode, (row.domain, f"{row.condition}/{row.model}"), pair
        else:
            # Conditions pair on reference A; an imported instruction without one pairs with nothing
            # (its own unit), rather than every such instruction merging into one unit "None".
            unit = row.article_a if row.article_a is not None else ("instruction", row.instruction_id)
            side, stratum = row.condition, (row.domain, f"{row.model}{mode}")
        values = (row.org, row.core, row.superficial, row.org - row.core)
        sides = table[stratum][unit]
        if side in sides:
            sides[side][1].append(values)
        else:
            sides[side] = (position, [values])
    metrics._sides[(by, asked)] = (table, ratio)
    return table, ratio


def _unit_values(values: list[tuple[float, ...]]) -> tuple[float, ...]:
    return values[0] if len(values) == 1 else tuple(_unit_mean(values, k) for k in range(len(values[0])))


def _unit_mean(values: list[tuple[float, ...]], k: int) -> float:
    """A unit's value of metric k: the mean over its rows (several runs of one reference),
    NaNs left out."""
    if len(values) == 1:
        return values[0][k]
    kept = [v[k] for v in values if not math.isnan(v[k])]
    return sum(kept) / len(kept) if kept else math.nan


# -- constraint-level: flipped items, human validation ------------------------------------------


@dataclass(frozen=True)
class Item:
    """One constraint on one response (model and mode) and its summary at a ratio, with the
    mean verdicts of the raters who judged it on both texts (pipeline.scores.item_outcome_sql,
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


@dataclass(frozen=True)
class AnnotatorAgreement:
    annotator_a: str
    annotator_b: str
    kappa: float
    percent: float
    n: int  # items both labelled

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _annotations(store: Store) -> dict[tuple[int, int], dict[str, str]]:
    out: dict[tuple[int, int], dict[str, str]] = defaultdict(dict)
    for cid, gid, annotator, label in store.conn.execute(
        "SELECT constraint_id, generation_id, annotator, label FROM annotations WHERE label IS NOT NULL"
    ):
        out[(cid, gid)][annotator] = label
    return out


def annotator_agreement(store: Store, *, exclude_ambiguous: bool = False) -> list[AnnotatorAgreement]:
    """Cohen's kappa and percent agreement for each pair of annotators over the items both
    labelled, on the three labels (or two, with ``exclude_ambiguous``: items either person
    called ambiguous are left out)."""
    labels = _annotations(store)
    annotators = sorted({a for by in labels.values() for a in by})
    out = []
    for i, a in enumerate(annotators):
        for b in annotators[i + 1 :]:
            shared = [(by[a], by[b]) for by in labels.values() if a in by and b in by]
            if exclude_ambiguous:
                shared = [(x, y) for x, y in shared if "ambiguous" not in (x, y)]
            if not shared:
                out.append(AnnotatorAgreement(a, b, math.nan, math.nan, 0))
                continue
            ag: Agreement = cohen_kappa([x for x, _ in shared], [y for _, y in shared])
            out.append(AnnotatorAgreement(a, b, ag.kappa, ag.percent, ag.n))
    return out


@dataclass(frozen=True)
class Validation:
    """The metric's "superficial" call (= flipped at the ratio) against human labels."""

    result: PrecisionRecall
    ratio: float
    annotator: str | None  # None: the majority label over annotators (ties left out)
    ambiguous: int  # items labelled ambiguous: left out
    ties: int  # items whose annotators split evenly: left out
    not_applicable: int  # labelled items the metric did not call Yes on the full response, or unjudged

    def as_dict(self) -> dict[str, Any]:
        return {**self.result.as_dict(), "ratio": self.ratio, "annotator": self.annotator,
                "ambiguous_excluded": self.ambiguous, "ties_excluded": self.ties,
                "not_applicable": self.not_applicable}


def metric_validation(store: Store, *, ratio: float = 0.25, annotator: str | None = None,
                      filters: Filters | None = None) -> Validation:
    """Precision and recall of the metric's superficial call against people.

    Positive = label ``superficial``, negative = ``integrated``; ``ambiguous`` is left out and
    counted. An item is (constraint, response); the metric's call is "flipped at ``ratio``".
    Items the judges did not pass on the full response are outside the metric's scope."""
    items = {(i.constraint_id, i.response_id): i for i in constraint_items(store, filters, ratio=ratio)}
    return validate_labels(items, _annotations(store), ratio=ratio, annotator=annotator)


def validate_labels(items: dict[tuple[int, int], Item], labels: dict[tuple[int, int], dict[str, str]], *,
                    ratio: float, annotator: str | None = None) -> Validation:
    """``metric_validation`` over items already read (keyed by (constraint, response)) and labels
    (annotator -> label per item): the Annotate screen scores its own list by this same rule."""
    predicted, truth = [], []
    ambiguous = ties = not_applicable = 0
    for key, by in labels.items():
        if annotator is not None:
            if annotator not in by:
                continue
            label = by[annotator]
        else:
            votes = defaultdict(int)
            for value in by.values():
                votes[value] += 1
            best = max(votes.values())
            top = [v for v, c in votes.items() if c == best]
            if len(top) > 1:
                ties += 1
                continue
            label = top[0]
        if label == "ambiguous":
            ambiguous += 1
            continue
        item = items.get(key)
        # not >= : an item with no call any more (NaN scores) is outside the metric's scope too.
        if item is None or not item.full_score >= 0.5 or label not in ("superficial", "integrated"):
            not_applicable += 1
            continue
        predicted.append(item.flipped)
        truth.append(label == "superficial")
    return Validation(precision_recall(predicted, truth), ratio, annotator, ambiguous, ties, not_applicable)


# -- naturalness ----------------------------------------------------------------------------------


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
                "order_agreement": self.order_agreement.value, "order_agreement_low": self.order_agreement.low,
                "order_agreement_high": self.order_agreement.high, "both_orders": self.both_orders}


def naturalness_rates(store: Store, filters: Filters | None = None, *, n_resamples: int = DEFAULT_RESAMPLES,
                      seed: int = 0) -> list[WinRate]:
    """Win rates of each condition's constraint sets in the pairwise naturalness judgments, with
    the judges' position bias and the agreement between the two orders of each comparison."""
    f = filters or Filters()
    where, params = [], []
    if f.run is not None:
        # A human-written set is imported outside any build run: keep pairs where either side is in it.
        where.append("(ia.run_id = ? OR ib.run_id = ?)")
        params += [f.run, f.run]
    if f.domain is not None:
        where.append("ia.domain = ?")
        params.append(f.domain)
    rows = store.conn.execute(
        "SELECT ia.condition, ib.condition, n.instruction_a, n.instruction_b, n.shown_first, n.winner, n.judge"
        " FROM naturalness n JOIN instructions ia ON ia.id = n.instruction_a"
        " JOIN instructions ib ON ib.id = n.instruction_b" + (" WHERE " + " AND ".join(where) if where else ""),
        params,
    ).fetchall()
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
    for (cond, opp), values in sorted(scores.items(), key=lambda kv: (_cond_order(kv[0][0]), kv[0][1] != "any", kv[0][1])):
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

