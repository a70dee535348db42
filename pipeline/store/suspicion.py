"""What the suspicion ranking reads and the copy-evidence stage writes (pipeline.analysis.suspicion).

  copy_evidence   per (response, active constraint): the constraint's phrases found in a reference and
                  in the response (JSON list, ``[]`` when none) and which reference(s): '', 'A', 'B',
                  'AB'. One row per pair once computed, so pairs without a row are the work left
                  (``missing_copy_work``), and a store from before the stage simply has none.

``evidence_rows`` is the one query behind both the queue (every response of the store or a run) and
Audit's list (one instruction and writer): the latest verdict of each rater on the response and on its
first summary at the ratio, pivoted per (text, constraint) as pipeline.store.scores does, counted into
Trust's numbers (yes, no, missing, unquoted, fuzzy), with the item outcome of
pipeline.store.scores.item_outcome_sql, the copy evidence and the stored similarity joined on.
The queue ranks first, on the per-item marks pipeline.store.scores keeps (text_item_marks: split,
unquoted, flipped, uncertain), and pivots only the kept rows' verdicts: pivoting every verdict of a
large store takes seconds (1.3 s for 624,000), ranking on the marks about half a second. Each yes_no
rater's P(Yes) on the response comes with its threshold now (pipeline.store.scores.rater_thresholds):
SQL tests it against the bounds computed in Python (SQLite may lack ln()).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

from pipeline.core.definitions import (
    ECHO_RULE,
    HIGH_LEXICAL_SIMILARITY,
    HIGH_SIMILARITY,
    RATIO_TOLERANCE,
    SCORE_DIGITS,
    SUSPICION_WEIGHTS,
    copy_evidence_version,
)
from pipeline.store.database import Store, has_table
from pipeline.store.metrics import LOCK, chunked_rows, selects_most_texts, text_bodies
from pipeline.store.scores import (
    current_text_scores,
    drop_temp_scores,
    has_current_marks,
    item_outcome_sql,
    rater_thresholds,
    uncertain_bounds_of,
)


def has_copy_evidence_table(store: Store) -> bool:
    """False on a store opened read-only before migration _v11 ran (the app's view of an old store)."""
    return has_table(store.conn, "copy_evidence")


# -- the copy-evidence stage ----------------------------------------------------------------------


class CopyWork(NamedTuple):
    """One (response, active constraint) pair without copy evidence, with the texts it needs."""

    response_id: int
    constraint_id: int
    instruction_id: int
    constraint_text: str
    response_hash: str | None
    reference_a_hash: str | None
    reference_b_hash: str | None
    domain: str | None = None
    main_task: str | None = None


@dataclass(frozen=True)
class CopyEvidenceRow:
    response_id: int
    constraint_id: int
    ngram: int
    copied: tuple[str, ...]
    copied_from: str  # '', 'A', 'B' or 'AB'
    facts: str = "[]"  # JSON: each copied phrase's facts (pipeline.analysis.specificity.PhraseFacts)
    specificity: float = 0.0  # the item's
    echoed: tuple[str, ...] = ()  # the constraint's phrases the response repeats
    lead: str = ""  # the phrase the item is about


def _current() -> str:
    """The join condition of copy evidence computed by the definition in force (a literal: the version
    is a name this code makes, never input)."""
    return f"e.version = '{copy_evidence_version()}'"


_PAIRS = (
    " FROM generations r JOIN instructions i ON i.id = r.instruction_id"
    " JOIN constraints c ON c.instruction_id = r.instruction_id AND c.active = 1"
    " LEFT JOIN copy_evidence e ON e.response_id = r.id AND e.constraint_id = c.id AND {current}"
    " WHERE r.kind = 'response' AND e.response_id IS NULL")


def missing_copy_work(store: Store, *, instruction_ids: Sequence[int] | None = None,
                      run_id: str | None = None,
                      limit: int = 5000) -> list[CopyWork]:
    """The pairs without copy evidence of the first responses lacking some (about ``limit`` pairs,
    whole responses: a response's texts are read once), of these instructions or this build run when given."""
    where, params = "", []
    if instruction_ids is not None:
        where = " AND r.instruction_id IN (SELECT value FROM json_each(?))"
        params.append(json.dumps(sorted(set(instruction_ids))))
    if run_id is not None:
        where += " AND r.instruction_id IN (SELECT id FROM instructions WHERE run_id = ?)"
        params.append(run_id)
    # Responses with fewer rows than active constraints: the count per response reads the index.
    responses = [row[0] for row in store.conn.execute(
        "SELECT r.id FROM generations r JOIN (SELECT instruction_id, count(*) AS n FROM "
        "constraints WHERE active = 1 GROUP BY instruction_id) a ON a.instruction_id = r.instruction_id"
        " LEFT JOIN (SELECT response_id, count(*) AS n FROM copy_evidence e WHERE " + _current() + " GROUP BY"
        " response_id) e ON e.response_id = r.id"
        " WHERE r.kind = 'response' AND coalesce(e.n, 0) < a.n" + where + " ORDER BY r.id LIMIT ?",
        (*params, max(1, int(limit) // 39)))]
    if not responses:
        return []
    return [CopyWork(*row) for row in store.conn.execute(
        "SELECT r.id, c.id, r.instruction_id, c.text, r.text_hash, a.text_hash, b.text_hash, "
        "i.domain, i.main_task FROM generations r JOIN instructions i ON i.id = r.instruction_id"
        " JOIN constraints c ON c.instruction_id = r.instruction_id AND c.active = 1"
        " LEFT JOIN copy_evidence e ON e.response_id = r.id AND e.constraint_id = c.id AND " + _current() +
        " LEFT JOIN articles a ON a.id = i.article_a LEFT JOIN articles b ON b.id = i.article_b"
        " WHERE e.response_id IS NULL AND r.id IN (SELECT value FROM json_each(?)) ORDER BY r.id, c.id",
        (json.dumps(responses),))]


def count_missing_copy_evidence(store: Store, *, run_id: str | None = None) -> int:
    """(response, active constraint) pairs without copy evidence; every pair when the table is absent."""
    run_sql, params = (" AND i.run_id = ?", (run_id,)) if run_id else ("", ())
    if not has_copy_evidence_table(store):
        row = store.conn.execute(
            "SELECT count(*) FROM generations r JOIN instructions i ON i.id = "
            "r.instruction_id JOIN constraints c"
            " ON c.instruction_id = r.instruction_id AND c.active = 1 WHERE r.kind = 'response'"
            + run_sql, params)
        return int(row.fetchone()[0])
    return int(store.conn.execute("SELECT count(*)" + _PAIRS.format(current=_current()) + run_sql,
                                  params).fetchone()[0])


def put_copy_evidence(store: Store, rows: Sequence[CopyEvidenceRow]) -> None:
    """Store these rows (replacing the same pairs'), named by the definition in force; commits, one batch."""
    version = copy_evidence_version()
    with store.conn:
        store.conn.executemany(
            "INSERT OR REPLACE INTO copy_evidence(response_id, constraint_id, ngram, "
            "copied, copied_from, facts,"
            " specificity, echoed, lead, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(r.response_id, r.constraint_id, r.ngram,
              json.dumps(list(r.copied), ensure_ascii=False), r.copied_from,
              r.facts, r.specificity, json.dumps(list(r.echoed), ensure_ascii=False), r.lead, version)
             for r in rows])


# -- the evidence query ---------------------------------------------------------------------------


class TextCounts(NamedTuple):
    """Trust's numbers for one (text, constraint): every rater's latest verdict."""

    yes: int
    no: int
    missing: int
    unquoted: int
    fuzzy: int


class YesProbability(NamedTuple):
    """A yes_no rater's latest verdict on a text as its P(Yes), with the threshold it is read at now."""

    judge: str
    p_yes: float
    threshold: float


class EvidenceRow(NamedTuple):
    constraint_id: int
    instruction_id: int
    position: int
    text: str
    model: str
    mode: str
    response_id: int | None
    summary_id: int | None
    response: TextCounts | None  # None: no rater's row on the text
    summary: TextCounts | None
    full_score: float | None  # item_outcome_sql: the raters who judged both texts
    summary_score: float | None
    flipped: bool
    copied: tuple[str, ...] | None  # None: copy evidence not computed for the pair
    copied_from: str
    similarity: tuple[str, float, float | None] | None  # (method, to A, to B)
    p_yes: tuple[YesProbability, ...] = ()  # on the response, per yes_no rater with a P(Yes)
    facts: str | None = None  # JSON: the copied phrases' facts (pipeline.analysis.specificity)
    specificity: float = 0.0  # the item's (0: nothing copied, or not computed)
    echoed: tuple[str, ...] = ()  # the constraint's phrases the response repeats
    lead: str = ""  # the phrase the item is about
    echo: float | None = None  # the constraint's echo on the response (None: not computed)
    summary_echo: float | None = None  # ... on the summary


@dataclass(frozen=True)
class Ranking:
    """The suspicion score, computed in SQL to rank without reading every row into Python: the
    expression is built from the one table of weights and the echo rule of pipeline.core.definitions
    (SUSPICION_WEIGHTS, ECHO_RULE) that Evidence.score reads; tests/test_suspicion.py checks the two
    agree on every item."""

    enabled: tuple[str, ...]  # the reasons switched on, in SUSPICION_WEIGHTS's order
    limit: int | None = None


def _raters(conn: sqlite3.Connection, source: str, *, wide: bool) -> list[tuple[str, str]]:
    """The raters with a verdict row on a selected text (a superset will do: an unused rater is a
    column of NULLs). Wide selections read the kept per-text totals (pipeline.store.scores: a rater
    with a Yes/No on an active constraint), the texts not rescored yet, and the small index of
    missing verdicts, instead of scanning every verdict."""
    if wide:
        return sorted(tuple(r) for r in conn.execute(
            "SELECT judge, judging_mode FROM main.text_scores UNION SELECT v.judge, v.judging_mode"
            " FROM main.text_scores_stale s CROSS JOIN main.verdicts v ON v.generation_id = s.gid"
            " UNION SELECT judge, judging_mode FROM main.verdicts WHERE verdict IS NULL"))
    return sorted(tuple(r) for r in conn.execute(f"SELECT DISTINCT v.judge, v.judging_mode FROM {source}"))


def _pivot(conn: sqlite3.Connection, raters: list[tuple[str, str]], source: str,
           bounds: Sequence[tuple[float, float] | None], *, few: bool = False) -> None:
    """Temp q_p: per (text, active constraint), rater k's latest Yes/No in y{k} (LATEST_VERDICT: the
    newest non-missing verdict), its quote check in q{k} (1 missing, 2 fuzzy, 0 else), its P(Yes) in
    p{k} and u{k} = 1 when that is inside the rater's ``bounds`` (uncertain), and s{k} = 1 when
    the rater has any row (so a rater with rows but no usable verdict counts as missing).
    ``few``: the source holds few verdicts (one instruction, the queue's head), each checked against
    its constraint by key; else the inactive constraints are listed once (a scan of every constraint)."""
    n = len(raters)
    names = [f"{c}{k} {'REAL' if c == 'p' else 'INTEGER'}" for c in "yqspu" for k in range(n)]
    conn.execute(f"CREATE TEMP TABLE q_p(gid INTEGER, cid INTEGER{''.join(f', {x}' for x in names)},"
                 " PRIMARY KEY(gid, cid)) WITHOUT ROWID")
    if not raters:
        return
    rater = "CASE WHEN v.judge = ? AND v.judging_mode = ? {} END"
    latest = "AND v.verdict IS NOT NULL THEN"  # the columns that follow the latest Yes/No
    cases = ([rater.format("THEN v.verdict")] * n
             + [rater.format(f"{latest} (CASE v.quote_found WHEN 'missing' THEN 1"
                             " WHEN 'fuzzy' THEN 2 ELSE 0 END)")] * n
             + [rater.format("THEN 1")] * n
             + [rater.format(f"{latest} v.p_yes")] * n
             # Open interval, as pipeline.core.definitions.uncertain.
             + [rater.format(f"{latest} coalesce(v.p_yes > ? AND v.p_yes < ?, 0)" if b else f"{latest} 0")
                for b in bounds])
    params = ([x for judge, mode in raters for x in (judge, mode)] * 4
              + [x for (judge, mode), b in zip(raters, bounds, strict=True)
                 for x in (judge, mode, *(b or ()))])
    updates = ", ".join([f"y{k} = coalesce(excluded.y{k}, y{k})" for k in range(n)]
                        + [f"{c}{k} = CASE WHEN excluded.y{k} IS NOT NULL THEN "
                           f"excluded.{c}{k} ELSE {c}{k} END"
                           for c in "qpu" for k in range(n)]
                        + [f"s{k} = coalesce(excluded.s{k}, s{k})" for k in range(n)])
    # Rows in id order, upserted: the latest verdict of each rater wins (as pipeline.store.scores.pivot).
    conn.execute(
        f"INSERT INTO q_p SELECT v.generation_id, v.constraint_id, {', '.join(cases)} FROM {source}"
        + (" AND NOT EXISTS (SELECT 1 FROM main.constraints x WHERE x.id = v.constraint_id AND x.active = 0)"
           if few
           else " AND v.constraint_id NOT IN (SELECT id FROM main.constraints WHERE active = 0)") +
        f" ORDER BY v.id ON CONFLICT(gid, cid) DO UPDATE SET {updates}", params)


def _counts_sql(p: str, n: int) -> list[str]:
    """SQL of TextCounts' fields over pivot row ``p`` (NULL fields when the row is absent)."""
    def total(cond: str) -> str:
        return "(" + " + ".join(f"coalesce({cond.format(k=k)}, 0)" for k in range(n)) + ")" if n else "0"
    return [total(f"{p}.y{{k}} = 1"), total(f"{p}.y{{k}} = 0"),
            total(f"{p}.s{{k}} = 1 AND {p}.y{{k}} IS NULL"),
            total(f"{p}.y{{k}} = 1 AND {p}.q{{k}} = 1"), total(f"{p}.y{{k}} = 1 AND {p}.q{{k}} = 2")]


_TEMP = ("q_gen", "q_p", "q_top", "q_need")


@contextmanager
def _temp_tables(conn: sqlite3.Connection) -> Iterator[None]:
    """The q_* temp tables exist inside; dropped on leaving, and the transaction our temp writes
    opened committed (a caller's own open transaction is left alone)."""
    with LOCK:
        opened = not conn.in_transaction
        try:
            for table in _TEMP:
                conn.execute(f"DROP TABLE IF EXISTS temp.{table}")
            yield
        finally:
            for table in _TEMP:
                conn.execute(f"DROP TABLE IF EXISTS temp.{table}")
            if opened and conn.in_transaction:
                conn.commit()


@contextmanager
def _current_marks(store: Store, wanted: bool) -> Iterator[bool]:
    """Whether the kept per-item marks (pipeline.store.scores text_item_marks) can rank: ``wanted``
    and the store has them (not a read-only store from before migration _v12). Made current first:
    a writable store is refreshed, a read-only one gets fresh marks of its changed texts in temp
    tables that shadow the kept ones, dropped on leaving. A read-only store from before migration _v15
    (marks without ``uncertain``) ranks on the verdicts, as one without the marks."""
    usable = wanted and has_current_marks(store.conn)
    with LOCK:
        if usable:
            current_text_scores(store.conn)
        try:
            yield usable
        finally:
            if usable:
                drop_temp_scores(store.conn)


def evidence_rows(store: Store, *, ratio: float, run_id: str | None = None, instruction_id: int | None = None,
                  writer: tuple[str, str] | None = None, ranking: Ranking | None = None
                  ) -> tuple[list[EvidenceRow], int]:
    """Per (active constraint, response) of the selection: the evidence columns, and how many rows.
    ``ranking`` None: every row, in list order (Audit's list); else the rows scoring above 0, highest
    first, at most ``ranking.limit`` of them, and how many scored above 0 (the queue).

    The queue ranks on the kept per-item marks (split, unquoted, flipped, uncertain) and pivots the verdicts
    of the kept rows only; a store without the marks pivots every selected text's verdicts first."""
    conn = store.conn
    where: list[str] = ["r.kind = 'response'"]
    params: list[Any] = []
    if run_id is not None:
        where.append("i.run_id = ?")
        params.append(run_id)
    if instruction_id is not None:
        where.append("r.instruction_id = ?")
        params.append(instruction_id)
    if writer is not None:
        where.append("coalesce(r.model, '') = ? AND coalesce(r.mode, '') = ?")
        params += list(writer)
    with _current_marks(store, ranking is not None) as on_marks, _temp_tables(conn):
        conn.execute("CREATE TEMP TABLE q_gen(gid INTEGER PRIMARY KEY, rid INTEGER, sid INTEGER)")
        # The response, and its first summary at the ratio (as the app's view keeps one). One
        # instruction: its summaries by key (the view's way: a summary is filed under its response's
        # instruction); else every summary grouped once.
        first_summary = (
            "(SELECT min(s.id) FROM generations s WHERE s.kind = 'summary' AND "
            "s.instruction_id = r.instruction_id"
            f" AND s.parent_id = r.id AND abs(s.ratio - ?) < {RATIO_TOLERANCE}) FROM generations r"
            " JOIN instructions i ON i.id = r.instruction_id WHERE " if instruction_id is not None else
            "s.sid FROM generations r JOIN instructions i ON i.id = r.instruction_id"
            " LEFT JOIN (SELECT parent_id, min(id) AS sid FROM generations WHERE kind = 'summary'"
            f" AND abs(ratio - ?) < {RATIO_TOLERANCE} GROUP BY parent_id) s ON s.parent_id = r.id WHERE ")
        conn.execute("INSERT INTO q_gen SELECT r.id, r.id, " + first_summary + " AND ".join(where),
                     [ratio, *params])
        conn.execute("INSERT INTO q_gen SELECT sid, rid, NULL FROM q_gen WHERE sid IS NOT NULL")
        copy_join, copy_cols = (" LEFT JOIN copy_evidence e ON e.response_id = r.id AND "
                                "e.constraint_id = c.id"
                                f" AND {_current()}",
                                "e.copied, coalesce(e.copied_from, '')") if has_copy_evidence_table(store) \
            else ("", "NULL, ''")
        sim_join, sim_cols = (" LEFT JOIN constraint_similarity m ON m.constraint_id = c.id",
                              "m.method, m.to_a, m.to_b") \
            if has_table(store.conn, "constraint_similarity") else ("", "NULL, NULL, NULL")
        if copy_join:
            copy_cols += ", e.facts, coalesce(e.specificity, 0.0), e.echoed, coalesce(e.lead, '')"
            sim_cols += ", x.echo"
            copy_join += " LEFT JOIN constraint_echo x ON x.generation_id = r.id AND x.constraint_id = c.id"
        else:
            copy_cols += ", NULL, 0.0, NULL, ''"
            sim_cols += ", NULL"
        pairs = (" FROM q_gen q JOIN generations r ON r.id = q.gid AND q.rid = q.gid"
                 " JOIN constraints c ON c.instruction_id = r.instruction_id AND c.active = 1")
        extras = f"{copy_join}{sim_join}"
        on_pivot = (" LEFT JOIN q_p f ON f.gid = r.id AND f.cid = c.id LEFT JOIN q_p s ON s.gid = "
                    "q.sid AND s.cid = c.id")
        ranked = ranking is not None and on_marks
        wide = False
        if ranked and ranking is not None:
            # Rank on the kept marks, then read the verdicts of the kept rows only.
            on_marks_sql = (" LEFT JOIN text_item_marks f ON f.gid = r.id AND f.cid = c.id"
                            " LEFT JOIN text_item_marks s ON s.gid = q.sid AND s.cid = c.id")
            total = _rank(conn, ranking, Fired(split="(coalesce(f.split, 0) OR coalesce(s.split, 0))",
                                               unquoted="coalesce(f.unquoted, 0)",
                                               flipped="coalesce(s.flipped, 0)",
                                               uncertain="coalesce(f.uncertain, 0)"),
                          pairs + on_marks_sql + extras, bool(copy_join), bool(sim_join))
            limit = total if ranking.limit is None else ranking.limit
            conn.execute("CREATE TEMP TABLE q_need(gid INTEGER, cid INTEGER, PRIMARY "
                         "KEY(gid, cid)) WITHOUT ROWID")
            conn.execute("INSERT OR IGNORE INTO q_need SELECT t.rid, t.cid FROM q_top t WHERE t.rank <= ?1"
                         " UNION ALL SELECT q.sid, t.cid FROM q_top t JOIN q_gen q ON q.gid = t.rid"
                         " WHERE t.rank <= ?1 AND q.sid IS NOT NULL", (limit,))
            source = ("q_need n CROSS JOIN main.verdicts v ON v.generation_id = n.gid AND "
                      "v.constraint_id = n.cid WHERE 1")
            raters = _raters(conn, source, wide=False)
        else:
            wide = selects_most_texts(conn, "q_gen")
            if wide:
                # Most texts: one scan of the verdicts beats an index walk (as pipeline.store.metrics).
                source = "main.verdicts v NOT INDEXED WHERE v.generation_id IN (SELECT gid FROM q_gen)"
            else:
                # CROSS: the texts drive
                source = "q_gen g CROSS JOIN main.verdicts v ON v.generation_id = g.gid WHERE 1"
            raters = _raters(conn, source, wide=wide and has_table(store.conn, "text_scores"))
        thresholds = rater_thresholds(conn, raters)
        _pivot(conn, raters, source, uncertain_bounds_of(thresholds), few=not wide)
        n = len(raters)
        outcome = item_outcome_sql(n) if n else {"full_score": "NULL",
                                                 "summary_score": "NULL", "flipped": "0"}
        f_counts, s_counts = _counts_sql("f", n), _counts_sql("s", n)
        joins = pairs + on_pivot + extras
        columns = (
            "SELECT c.id AS cid, c.instruction_id, c.position, c.text, coalesce(r.model, '') AS model,"
            " coalesce(r.mode, '') AS mode,"
            " r.id, q.sid, f.gid IS NOT NULL, s.gid IS NOT NULL,"
            f" {', '.join(f_counts)}, {', '.join(s_counts)},"
            f" {outcome['full_score']}, {outcome['summary_score']}, {outcome['flipped']} AS flipped,"
            f" {copy_cols}, {sim_cols},"
            + (" (SELECT xs.echo FROM constraint_echo xs WHERE xs.generation_id = q.sid AND "
               "xs.constraint_id = c.id)"
               if copy_join else " NULL")
            + f"{''.join(f', f.p{k}' for k in range(n))}")
        judges = [(judge, t) for (judge, _), t in zip(raters, thresholds, strict=True)]
        if ranking is None:
            rows = conn.execute(columns + joins
                                + " ORDER BY c.instruction_id, c.position, r.model, r.mode").fetchall()
            return [_evidence_row(row, judges) for row in rows], len(rows)
        if not ranked:
            total = _rank(conn, ranking, Fired(
                split=f"(({f_counts[0]} > 0 AND {f_counts[1]} > 0) OR ({s_counts[0]} > 0 "
                      f"AND {s_counts[1]} > 0))",
                unquoted=f"{f_counts[3]} > 0", flipped=outcome["flipped"],
                uncertain="(" + " OR ".join(["0", *(f"coalesce(f.u{k}, 0)" for k in range(n))]) + ")"),
                joins, bool(copy_join), bool(sim_join))
        rows = conn.execute(columns
                            + joins.replace(" FROM q_gen q", " FROM q_top t JOIN q_gen q ON q.gid = t.rid", 1)
                            .replace(" c.active = 1", " c.active = 1 AND c.id = t.cid", 1)
                            + " WHERE t.rank <= :limit ORDER BY t.rank",
                            {"limit": total if ranking.limit is None else ranking.limit}).fetchall()
    return [_evidence_row(row, judges) for row in rows], total


class Fired(NamedTuple):
    """SQL conditions, over one row of the ranking's joins, for the reasons the verdicts decide."""

    split: str  # the judges split on the response or on the summary (Trust.split)
    unquoted: str  # a Yes on the response whose quote is missing
    flipped: str  # the item outcome flipped (lost)
    uncertain: str  # a yes_no rater's P(Yes) on the response is near its threshold


def _rank(conn: sqlite3.Connection, ranking: Ranking, fired: Fired, joins: str, copy: bool, sim: bool) -> int:
    """Temp q_top: every (response, constraint) of ``joins`` scoring above 0, in rank order (rank =
    insertion order: a window function would sort twice); returns how many."""
    score, args = _score_sql(ranking, fired, copy, sim)
    conn.execute("CREATE TEMP TABLE q_top(rank INTEGER PRIMARY KEY, rid INTEGER, cid INTEGER)")
    conn.execute(
        # MATERIALIZED: the score is computed once per row, not again for the filter and the sort.
        "WITH k AS MATERIALIZED (SELECT " + score + " AS score, r.id AS rid, c.id AS cid,"
        " c.instruction_id AS iid, c.position AS position, coalesce(r.model, '') AS model,"
        " coalesce(r.mode, '') AS mode" + joins + ") INSERT INTO q_top(rid, cid) SELECT rid, cid FROM k"
        " WHERE score > 0 ORDER BY score DESC, iid, position, model, mode",
        args)
    return int(conn.execute("SELECT count(*) FROM q_top").fetchone()[0])


# Each reason's facts over one row of the ranking's joins (Fired, below, adds the verdicts'): the
# copy evidence ``e``, the echo ``x`` and the similarity ``m``.
_HIGHEST = "(CASE WHEN m.to_b IS NULL THEN m.to_a ELSE max(m.to_a, m.to_b) END)"
_ECHO_FACTS = {"echoed": "e.echoed != '[]'", "copied": "e.copied_from != ''", "echo": "x.echo"}


def _meets_sql(fact: str, test: bool | float, name: str) -> tuple[str, dict[str, float]]:
    """pipeline.core.definitions.meets in SQL: a test of ECHO_RULE, its number bound as ``name``."""
    if isinstance(test, bool):
        return (fact if test else f"NOT ({fact})"), {}
    return f"({fact} IS NULL OR {fact} >= :{name})", {name: float(test)}


def echo_counts_sql() -> tuple[str, dict[str, float]]:
    """pipeline.core.definitions.echo_counts as an SQL condition over ``e`` and ``x``, built from
    ECHO_RULE."""
    parts, args = [], {}
    for k, (fact, test) in enumerate(ECHO_RULE.items()):
        sql, bound = _meets_sql(_ECHO_FACTS[fact], test, f"echo_rule_{k}")
        parts.append(sql)
        args.update(bound)
    return "(" + " AND ".join(parts) + ")", args


def _score_sql(ranking: Ranking, fired: Fired, copy: bool, sim: bool) -> tuple[str, dict[str, Any]]:
    """pipeline.core.definitions.suspicion_score as one SQL expression, built from SUSPICION_WEIGHTS:
    per enabled reason, its weight where it fires, summed in the table's order (the same float
    operations as Python's, rounded to the same SCORE_DIGITS)."""
    echo_rule, args = echo_counts_sql()
    # Each reason's condition and measure; None where the store lacks the table it reads.
    reasons: dict[str, tuple[str, str] | None] = {
        "similar": (f"m.method IS NOT NULL AND {_HIGHEST} >= (CASE WHEN m.method = 'lexical' THEN :lexical"
                    " ELSE :high END)", _HIGHEST) if sim else None,
        "copied": ("e.copied_from != ''", "e.specificity") if copy else None,
        "echo": (echo_rule, "coalesce(x.echo, 0.0)") if copy else None,
        "lost": (fired.flipped, "0.0"),
        "split": (fired.split, "0.0"),
        "unquoted": (fired.unquoted, "0.0"),
        "uncertain": (fired.uncertain, "0.0"),
    }
    parts = []
    for reason, weight in SUSPICION_WEIGHTS.items():
        found = reasons[reason]
        if reason not in ranking.enabled or found is None:
            continue
        condition, measure = found
        parts.append(f"(CASE WHEN {condition} THEN :fixed_{reason} + :per_unit_{reason} * {measure}"
                     " ELSE 0.0 END)")
        args.update({f"fixed_{reason}": weight.fixed, f"per_unit_{reason}": weight.per_unit})
    args.update(high=HIGH_SIMILARITY, lexical=HIGH_LEXICAL_SIMILARITY)
    return f"round({' + '.join(['0.0', *parts])}, {SCORE_DIGITS})", args


def _evidence_row(row: tuple, judges: Sequence[tuple[str, float | None]]) -> EvidenceRow:
    """``judges``: per rater, its judge and the threshold of a yes_no one (rater_thresholds), in the
    order of the row's P(Yes) columns."""
    cid, iid, position, text, model, mode, rid, sid, has_f, has_s, *rest = row
    f_counts, s_counts = TextCounts(*rest[0:5]), TextCounts(*rest[5:10])
    full_score, summary_score, flipped, copied, copied_from, facts, specificity, echoed, lead, method, \
        to_a, to_b, echo, summary_echo = rest[10:24]
    return EvidenceRow(
        cid, iid, position if position is not None else 0, text, model, mode, rid, sid,
        f_counts if has_f else None, s_counts if has_s else None, full_score, summary_score, bool(flipped),
        (tuple(json.loads(copied)) if copied_from else ()) if copied is not None else None, copied_from,
        (method, to_a, to_b) if method is not None else None,
        tuple(YesProbability(judge, p, t) for (judge, t), p in zip(judges, rest[24:], strict=True)
              if t is not None and p is not None),
        facts, float(specificity or 0.0), tuple(json.loads(echoed)) if echoed else (), lead or "",
        echo, summary_echo)


def constraint_flags(store: Store, constraint_ids: Sequence[int] | None = None) -> dict[int, tuple[str, ...]]:
    """constraint id -> its stored flags, sorted (of these constraints, or every one)."""
    out: dict[int, list[str]] = {}
    if constraint_ids is None:
        rows: Any = store.conn.execute("SELECT constraint_id, flag FROM constraint_flags")
        for cid, flag in rows:
            out.setdefault(cid, []).append(flag)
    else:
        for cid, flag in chunked_rows(
                store, "SELECT constraint_id, flag FROM constraint_flags WHERE constraint_id IN ({marks})",
                constraint_ids):
            out.setdefault(cid, []).append(flag)
    return {cid: tuple(sorted(flags)) for cid, flags in out.items()}


def copy_evidence_missing_for(store: Store, response_ids: Sequence[int]) -> bool:
    """Whether any (response, active constraint) pair of these responses lacks copy evidence."""
    if not response_ids:
        return False
    if not has_copy_evidence_table(store):
        return True
    ids = json.dumps(sorted(set(response_ids)))
    return store.conn.execute(
        "SELECT 1" + _PAIRS.format(current=_current())
        + " AND r.id IN (SELECT value FROM json_each(?)) LIMIT 1",
        (ids,)).fetchone() is not None


class ResponseTexts(NamedTuple):
    """A response and its instruction's two references, as stored ("" where there is none)."""

    response: str
    reference_a: str
    reference_b: str


def response_texts(store: Store, response_ids: Sequence[int]) -> dict[int, ResponseTexts]:
    """response id -> its text and its instruction's references (what a copy reason quotes)."""
    rows = list(chunked_rows(
        store, "SELECT r.id, r.text_hash, a.text_hash, b.text_hash FROM generations r"
        " JOIN instructions i ON i.id = r.instruction_id LEFT JOIN articles a ON a.id = i.article_a"
        " LEFT JOIN articles b ON b.id = i.article_b WHERE r.id IN ({marks})", response_ids))
    bodies = text_bodies(store, {h for row in rows for h in row[1:] if h})
    return {row[0]: ResponseTexts(*(bodies.get(h or "", "") for h in row[1:])) for row in rows}
