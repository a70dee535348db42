"""What the metrics read: the selected texts, their kept totals, their verdicts pivoted per rater.

A computation works in temp tables on the store's connection, one computation at a time per
process (``LOCK``):

  m_gen     the selected responses and summaries (gid, kind, rid: the response, ratio)
  m_raters  the selected raters (judge, judging mode) and their column index k
  m_p       one row per (text, active constraint), rater k's latest verdict in column y{k}

``scored_selection`` fills m_gen and brings the kept per-text totals (pipeline.store.scores) up to
date for the aggregate readers below; ``constraint_item_outcomes`` pivots the verdicts for per-item
questions. pipeline.analysis.metrics does the arithmetic (groups, bootstrap, agreement) on what
these functions return. The copied n-gram counts (copy_stats) and what the reports read of
instructions, constraints and texts are here too.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from pipeline.core.definitions import DEFAULT_RATIO, RATIO_DIGITS, RATIO_TOLERANCE, Outcome, score_outcome
from pipeline.store.database import Store
from pipeline.store.scores import current_text_scores, drop_temp_scores, item_outcome_sql, pivot

# Temp tables live on the store's connection; one metrics computation at a time per process.
LOCK = threading.RLock()
# The temp table of the selected texts (gid, kind, rid, ratio), for readers that take its name.
SELECTED_TEXTS = "m_gen"
# Lists of ids are read in chunks: SQLite caps the number of bound parameters.
_CHUNK = 500


@dataclass(frozen=True)
class Filters:
    """Which texts and verdicts a computation selects (every field None: all of them)."""

    run: str | None = None  # instructions.run_id
    instruction: int | None = None  # one instruction (the app's per-instruction screens)
    domain: str | None = None
    condition: str | None = None
    models: tuple[str, ...] | None = None  # models under test (the response's writer)
    mode: str | None = None  # direct | edit
    judges: tuple[str, ...] | None = None
    judging_mode: str | None = None  # batched | per_constraint
    # Only these responses (and their summaries): per-item questions about a few hundred labelled
    # items (pipeline.analysis.validation) need not pivot every verdict of the store.
    responses: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Item:
    """One constraint on one response (model and mode) and its summary at a ratio, with the
    mean verdicts of the raters who judged it on both texts (pipeline.store.scores.item_outcome_sql)
    and its outcome by the one rule (pipeline.core.definitions.score_outcome)."""

    constraint_id: int
    response_id: int
    summary_id: int
    instruction_id: int
    model: str
    mode: str
    ratio: float
    full_score: float
    summary_score: float

    @property
    def outcome(self) -> Outcome:
        return score_outcome(self.full_score, self.summary_score)

    @property
    def flipped(self) -> bool:
        return self.outcome is Outcome.FLIPPED

    @property
    def passed_both(self) -> bool:
        return self.outcome is Outcome.PASSED_BOTH


# -- the temp tables -----------------------------------------------------------------------------


def _start(store: Store) -> None:
    """Before any temp table: changing temp_store drops every temp table of the connection."""
    conn = store.conn
    _cleanup(store)
    if not conn.in_transaction:
        # Sorting millions of verdicts for the GROUP BY: in memory, not in a temp file. The pragma
        # can change only outside a transaction; _cleanup restores it.
        _TEMP_STORE[id(conn)] = conn.execute("PRAGMA temp_store").fetchone()[0]
        conn.execute("PRAGMA temp_store = MEMORY")


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
        " WHERE g.kind IN ('response', 'summary') AND r.kind = 'response'"
        + "".join(f" AND {w}" for w in where),
        params,
    )


def verdict_filter(f: Filters) -> tuple[list[str], list[Any]]:
    """SQL conditions on a verdict's judge and judging_mode columns, and their parameters."""
    where: list[str] = []
    params: list[Any] = []
    if f.judges:
        where.append(f"judge IN ({','.join('?' * len(f.judges))})")
        params.extend(f.judges)
    if f.judging_mode:
        where.append("judging_mode = ?")
        params.append(f.judging_mode)
    return where, params


@contextmanager
def scored_selection(store: Store, f: Filters) -> Iterator[None]:
    """The selected texts in m_gen, with the kept per-text totals current, for the readers below;
    the temp tables are dropped on leaving."""
    with LOCK:
        try:
            _start(store)
            current_text_scores(store.conn)
            _select_texts(store, f)
            yield
        finally:
            _cleanup(store)
            drop_temp_scores(store.conn)


# -- aggregate readers (inside scored_selection) ---------------------------------------------------


def scored_raters(store: Store, f: Filters) -> list[tuple[str, str]]:
    """(judge, judging_mode) of every rater with kept totals on a selected text, sorted."""
    vwhere, vparams = verdict_filter(f)
    return sorted(store.conn.execute(
        "SELECT DISTINCT s.judge, s.judging_mode FROM m_gen g JOIN text_scores s ON s.gid = g.gid"
        + "".join(f" AND s.{w}" for w in vwhere), vparams))


def use_raters(store: Store, raters: Sequence[tuple[str, str]]) -> None:
    """Temp table m_raters: the raters the readers below count, column k = position in ``raters``."""
    conn = store.conn
    conn.execute("CREATE TEMP TABLE m_raters(judge TEXT, judging_mode TEXT, k INTEGER, PRIMARY "
                 "KEY(judge, judging_mode))")
    conn.executemany("INSERT INTO m_raters VALUES (?, ?, ?)", [(j, m, k) for k, (j, m) in enumerate(raters)])


class ResponseMeta(NamedTuple):
    response_id: int
    instruction_id: int
    run_id: str | None
    domain: str | None
    condition: str | None
    article_a: int | None
    article_b: int | None
    model: str | None
    mode: str
    n_active: int  # the instruction's active constraints


def selected_responses(store: Store) -> list[ResponseMeta]:
    """The selected responses, with their instruction's fields."""
    return [ResponseMeta(*row) for row in store.conn.execute(
        "SELECT r.id, r.instruction_id, i.run_id, i.domain, i.condition, i.article_a, i.article_b, r.model,"
        " COALESCE(r.mode, ''), coalesce(a.n, 0) FROM m_gen g JOIN generations r ON r.id = g.gid"
        " JOIN instructions i ON i.id = r.instruction_id LEFT JOIN (SELECT instruction_id, count(*) AS n"
        " FROM constraints WHERE active = 1 GROUP BY instruction_id) a ON a.instruction_id = r.instruction_id"
        " WHERE g.kind = 'response'")]


_RATER_JOIN = "JOIN m_raters r ON r.judge = s.judge AND r.judging_mode = s.judging_mode"


def response_totals(store: Store, n_raters: int) -> dict[int, tuple[int, float, float]]:
    """Per selected response: (raters who judged it, constraints judged as a mean over the
    ``n_raters`` raters, the mean over raters of each one's share of Yes). Means run in SQL: Python
    only touches one row per response."""
    return {gid: (n, judged, org) for gid, n, judged, org in store.conn.execute(
        f"SELECT g.gid, count(*), sum(s.judged) * 1.0 / {int(n_raters)}, avg(s.yes * 1.0 / "
        "s.judged) FROM m_gen g"
        f" JOIN text_scores s ON s.gid = g.gid {_RATER_JOIN} WHERE g.kind = 'response' GROUP BY g.gid")}


class SummaryTotals(NamedTuple):
    """A response's summaries at one ratio, means over the summaries (two summarizers)."""

    response_id: int
    ratio: float
    raters: int  # raters who judged a summary at the ratio
    core: float  # the mean over raters of each one's share of Yes on the summary
    satisfied: float
    flipped: float
    satisfied_by: tuple[float | None, ...]  # per rater k; None: k judged none of them
    flipped_by: tuple[float | None, ...]


def summary_totals(store: Store, n_raters: int) -> list[SummaryTotals]:
    """One row per (selected response, summary ratio), over the constraints judged on both texts."""
    per_rater = "".join(f", avg(CASE WHEN r.k = {k} THEN s.full_yes END), avg(CASE WHEN r.k = "
                        f"{k} THEN s.flipped END)"
                        for k in range(int(n_raters)))
    return [SummaryTotals(rid, ratio, n, core, satisfied, flipped, tuple(by[0::2]), tuple(by[1::2]))
            for rid, ratio, n, core, satisfied, flipped, *by in store.conn.execute(
                "SELECT g.rid, min(g.ratio), count(DISTINCT r.k), avg(s.core_yes * 1.0 / "
                "s.both), avg(s.full_yes),"
                f" avg(s.flipped){per_rater} FROM m_gen g JOIN text_scores s ON s.gid = g.gid {_RATER_JOIN}"
                f" WHERE g.kind = 'summary' AND s.both > 0 GROUP BY g.rid, round(g.ratio, {RATIO_DIGITS})")]


def agreement_cells(store: Store) -> list[tuple[int, int, Any, int, int, int, int, int, int]]:
    """Per selected text and pair of selected raters (a < b): (response, is a summary, ratio or
    'nan', k of a, k of b, n11, n10, n01, n00), in text order."""
    return store.conn.execute(
        "SELECT g.rid, g.kind = 'summary', coalesce(g.ratio, 'nan'), ra.k, rb.k,"
        " a.n11, a.n10, a.n01, a.n00 FROM m_gen g JOIN text_agreement a ON a.gid = g.gid"
        " JOIN m_raters ra ON ra.judge = a.judge_a AND ra.judging_mode = a.mode_a"
        " JOIN m_raters rb ON rb.judge = a.judge_b AND rb.judging_mode = a.mode_b ORDER BY a.gid"
    ).fetchall()


def achieved_ratios(store: Store) -> list[tuple[int, float, float]]:
    """(response, asked ratio, achieved ratio) of each selected summary that has one."""
    return store.conn.execute(
        "SELECT g.rid, g.ratio, s.achieved_ratio FROM m_gen g JOIN generations s ON s.id = g.gid"
        " WHERE g.kind = 'summary' AND s.achieved_ratio IS NOT NULL").fetchall()


def rater_totals(store: Store) -> dict[int, tuple[int, int]]:
    """(verdicts given, of them Yes) per rater column k over the selected texts."""
    return {k: (int(judged or 0), int(yes or 0)) for k, judged, yes in store.conn.execute(
        "SELECT r.k, sum(s.judged), sum(s.yes) FROM m_gen g JOIN text_scores s ON s.gid = g.gid"
        f" {_RATER_JOIN} GROUP BY r.k")}


class RaterTextTotals(NamedTuple):
    """One rater's kept totals on one selected text (a summary's over the constraints judged on both
    texts)."""

    response_id: int  # the text itself, or the response a summary shortens
    kind: str  # response | summary
    ratio: float | None
    k: int  # the rater's column
    judged: int
    yes: int
    both: int | None  # summaries: judged on the summary and its response
    core_yes: int | None  # of those, Yes on the summary
    full_yes: int | None  # of those, Yes on the response
    flipped: int | None  # of those, Yes on the response and No on the summary


def rater_text_totals(store: Store) -> list[RaterTextTotals]:
    """Per selected text and selected rater: its kept totals, for figures corrected judge by judge
    (pipeline.analysis.correction)."""
    return [RaterTextTotals(*row) for row in store.conn.execute(
        "SELECT g.rid, g.kind, g.ratio, r.k, s.judged, s.yes, s.both, s.core_yes, s.full_yes, s.flipped"
        f" FROM m_gen g JOIN text_scores s ON s.gid = g.gid {_RATER_JOIN} ORDER BY g.gid, r.k")]


# -- per-item outcomes (the verdicts pivoted) ------------------------------------------------------


def selects_most_texts(conn: sqlite3.Connection, selection: str) -> bool:
    """Whether the temp table ``selection`` holds more than a fifth of the store's responses and
    summaries: the point past which a scan of every verdict beats an index walk per text."""
    selected = conn.execute(f"SELECT count(*) FROM {selection}").fetchone()[0]
    total = conn.execute("SELECT count(*) FROM generations WHERE kind IN "
                         "('response', 'summary')").fetchone()[0]
    return bool(selected > 0.2 * total)


def _pivot_selection(store: Store, f: Filters) -> int:
    """Fill m_gen and m_p (one row per text and active constraint, one verdict column y0, y1, ...
    per rater, NULL where that rater has not judged); return the number of raters."""
    conn = store.conn
    _start(store)
    _select_texts(store, f)
    vwhere, vparams = verdict_filter(f)
    vsql = "".join(f" AND v.{w}" for w in vwhere)
    # Most texts selected: one sequential scan of verdicts beats an index walk with a row lookup
    # per verdict. A narrow selection (one run of many): the selected texts drive the index.
    wide = selects_most_texts(conn, "m_gen")
    if wide:
        source = "verdicts v NOT INDEXED WHERE v.generation_id IN (SELECT gid FROM m_gen)"
        # Raters over all verdicts: much cheaper than checking each row's text.
        raters_from = "verdicts v WHERE 1"
    else:
        # CROSS: g drives
        source = raters_from = "m_gen g CROSS JOIN verdicts v ON v.generation_id = g.gid WHERE 1"
    # No ORDER BY and no test of the verdict here: SQLite then reads a covering index instead of
    # sorting every row (6x faster). A rater with no usable verdict is dropped after the pivot.
    raters = sorted(conn.execute(f"SELECT DISTINCT v.judge, v.judging_mode FROM {raters_from}{vsql}",
                                 vparams))
    pivot(conn, "m_p", raters, source, vsql, vparams)
    if raters:
        used = conn.execute(f"SELECT {', '.join(f'count(y{k})' for k in range(len(raters)))} FROM "
                            "m_p").fetchone()
        if not all(used):
            raters = [r for r, n in zip(raters, used) if n]
            conn.execute("DROP TABLE temp.m_p")
            pivot(conn, "m_p", raters, source, vsql, vparams)
    return len(raters)


def constraint_item_outcomes(store: Store, f: Filters, ratio: float = DEFAULT_RATIO) -> list[Item]:
    """Every (constraint, response) judged on the full response and on its summary at ``ratio``
    by at least one rater; scores are the mean verdict over the raters who judged both."""
    with LOCK:
        try:
            n = _pivot_selection(store, f)
            if n == 0:
                return []
            sql = item_outcome_sql(n)
            rows = store.conn.execute(
                f"SELECT s.cid, g.rid, g.gid, r.instruction_id, r.model, coalesce(r.mode, ''), g.ratio,"
                f" {sql['full_score']}, {sql['summary_score']}"
                " FROM m_gen g JOIN m_p s ON s.gid = g.gid JOIN m_p f ON f.gid = g.rid AND f.cid = s.cid"
                " JOIN generations r ON r.id = g.rid"
                f" WHERE g.kind = 'summary' AND abs(g.ratio - ?) < {RATIO_TOLERANCE} AND {sql['judged']} > 0 "
                "ORDER BY g.rid, s.cid",
                (ratio,),
            ).fetchall()
        finally:
            _cleanup(store)
    return [Item(*row) for row in rows]


# -- texts and the copied n-gram counts ----------------------------------------------------------


def chunked_rows(store: Store, sql: str, keys: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
    """The rows of ``sql`` over the distinct ``keys``, a chunk of them at a time: ``sql`` names them
    as ``IN ({marks})``, once or more."""
    items = sorted(set(keys))
    for start in range(0, len(items), _CHUNK):
        chunk = items[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        yield from store.conn.execute(sql.format(marks=marks), chunk * sql.count("{marks}"))


def text_bodies(store: Store, hashes: Iterable[str]) -> dict[str, str]:
    """hash -> body of the stored texts among ``hashes`` (empty ones ignored)."""
    sql = "SELECT hash, body FROM texts WHERE hash IN ({marks})"
    return dict(chunked_rows(store, sql, (h for h in hashes if h)))


def text_hashes(store: Store, table: Literal["generations", "articles"],
                ids: Iterable[int]) -> dict[int, str]:
    """id -> its text's hash, of these generations or articles."""
    return dict(chunked_rows(store, f"SELECT id, text_hash FROM {table} WHERE id IN ({{marks}})", ids))


def refusal_flags(store: Store, generation_ids: Sequence[int]) -> dict[int, int]:
    """generation id -> its refusal flag, for the texts that have one (stores from before the flag
    have none)."""
    sql = "SELECT id, refusal FROM generations WHERE refusal IS NOT NULL AND id IN ({marks})"
    return dict(chunked_rows(store, sql, generation_ids))


# (response hash, reference hash) -> (shared n-grams, copied words, words, longest span)
CopyCounts = dict[tuple[str, str], tuple[int, int, int, int]]


def stored_copy_stats(store: Store, ngram: int) -> CopyCounts:
    """Every copy count kept for word ``ngram``-grams."""
    return {(r, a): (shared, copied, words, longest)
            for r, a, shared, copied, words, longest in store.conn.execute(
        "SELECT text_hash, reference_hash, shared_ngrams, copied_words, words, longest FROM copy_stats"
        " WHERE ngram = ?", (ngram,))}


def keep_copy_stats(store: Store, ngram: int, fresh: CopyCounts) -> None:
    """Store new counts and commit; a read-only store, or a caller's open transaction, just goes
    without."""
    conn = store.conn
    if not fresh or conn.in_transaction:
        return
    try:
        with conn:
            conn.executemany(
                "INSERT OR IGNORE INTO copy_stats(text_hash, reference_hash, ngram, "
                "shared_ngrams, copied_words, words, longest) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(r, a, ngram, *counts) for (r, a), counts in fresh.items()])
    except sqlite3.OperationalError as exc:
        if "readonly" not in str(exc):
            raise


# -- naturalness judgments -----------------------------------------------------------------------


class NaturalnessJudgment(NamedTuple):
    condition_a: str
    condition_b: str
    instruction_a: int
    instruction_b: int
    shown_first: int | None
    winner: int | None  # None: a tie
    judge: str


def naturalness_judgments(store: Store, *, run: str | None = None, domain: str | None = None
                          ) -> list[NaturalnessJudgment]:
    """The pairwise naturalness judgments with both instructions' conditions. ``run`` keeps pairs
    where either side is in the run: a human-written set is imported outside any build run."""
    where: list[str] = []
    params: list[Any] = []
    if run is not None:
        where.append("(ia.run_id = ? OR ib.run_id = ?)")
        params += [run, run]
    if domain is not None:
        where.append("ia.domain = ?")
        params.append(domain)
    return [NaturalnessJudgment(*row) for row in store.conn.execute(
        "SELECT ia.condition, ib.condition, n.instruction_a, n.instruction_b, "
        "n.shown_first, n.winner, n.judge FROM naturalness n JOIN instructions ia ON ia.id = n.instruction_a"
        " JOIN instructions ib ON ib.id = n.instruction_b"
        + (" WHERE " + " AND ".join(where) if where else ""),
        params)]


# -- what the HTML report reads of instructions and generations ----------------------


class ReportInstruction(NamedTuple):
    id: int
    run_id: str | None
    domain: str | None
    condition: str | None
    main_task: str | None
    hash_a: str | None  # reference A's text
    hash_b: str | None


class ReportGeneration(NamedTuple):
    id: int
    kind: str
    instruction_id: int
    model: str | None
    mode: str
    ratio: float | None
    parent_id: int | None
    text_hash: str | None
    refusal: int | None


def report_instructions(store: Store, instruction_ids: Sequence[int]) -> dict[int, ReportInstruction]:
    rows = chunked_rows(
        store, "SELECT i.id, i.run_id, i.domain, i.condition, i.main_task, a.text_hash, b.text_hash"
        " FROM instructions i LEFT JOIN articles a ON a.id = i.article_a"
        " LEFT JOIN articles b ON b.id = i.article_b WHERE i.id IN ({marks})", instruction_ids)
    return {row[0]: ReportInstruction(*row) for row in rows}


def responses_and_summaries(store: Store, response_ids: Sequence[int]) -> dict[int, ReportGeneration]:
    """generation id -> the responses and their summaries (the summaries by parent), in id order."""
    rows = chunked_rows(
        store, "SELECT id, kind, instruction_id, model, coalesce(mode, ''), ratio, parent_id, text_hash,"
        " refusal FROM generations WHERE id IN ({marks})"
        " OR (kind = 'summary' AND parent_id IN ({marks})) ORDER BY id", response_ids)
    return {row[0]: ReportGeneration(*row) for row in rows}
