"""Per-text verdict totals kept in the store, so metrics never re-read millions of verdicts.

A benchmark of 10,000 instructions holds about 3 million verdicts; merging them per (text,
constraint, rater) takes SQLite seconds, every time a report or the app asks. The totals below
change only when a text's verdicts change, so they are kept in the store, refreshed for the
texts whose verdicts changed since, and read as some 100,000 rows.

  text_scores        one row per (text, rater = judge x judging mode) that judged an active
                     constraint of the text: ``judged`` and ``yes`` on the text itself; on a
                     summary also, over the constraints the rater judged on both the summary and
                     its response, ``both``, ``core_yes`` (Yes on the summary), ``full_yes`` (Yes
                     on the response) and ``flipped`` (Yes on the response, No on the summary)
  text_agreement     per text and pair of raters (a < b in (judge, mode) order), the 2x2 cells
                     over the items both judged: n11, n10, n01, n00
  text_items         per text, its constraints (items) with every rater together, as the app's
                     tables count them: ``judged``, ``passed`` (the raters' mean verdict passes:
                     PASS_THRESHOLD), ``score_sum`` (the sum of those means), ``disagree`` (raters differ),
                     ``missing`` (a latest verdict's quote is not in the text); on a summary,
                     ``flipped``: items that flipped from its response (``item_outcome_sql``)
  text_item_marks    per text, the items where the judges split (a Yes and a No), where a Yes's
                     quote is missing (``unquoted``), or, on a summary, that flipped from its
                     response (``item_outcome_sql``), or where a yes_no rater's P(Yes) is near its
                     threshold (``uncertain``, pipeline.core.definitions); no row when none holds.
                     What the suspicion queue ranks on (pipeline.store.suspicion) without
                     re-reading the verdicts
  text_scores_stale  texts to rescore. Triggers on verdicts, constraints (``active``) and
                     generations add to it, and on judge_calibrations the texts a recalibrated
                     judge gave a P(Yes) on (``uncertain`` moves with the threshold even where no
                     verdict flips); ``refresh_text_scores`` empties it, in chunks. The evaluate
                     stage refreshes after each judging; a report refreshes what is left

The rules are those of pipeline.analysis.metrics: only active constraints count, and for each (text,
constraint, rater) the latest verdict wins. A summary's totals depend on its response's
verdicts too, so a stale response makes its summaries stale when refreshed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from itertools import combinations
from typing import TYPE_CHECKING, Any

from pipeline.core import definitions
from pipeline.core.definitions import DEFAULT_YES_THRESHOLD, uncertain_bounds
from pipeline.store.database import has_table, table_columns

if TYPE_CHECKING:
    from pipeline.store.database import Store

# The one latest-verdict rule, as an SQL condition on ``verdicts v``: for each (text,
# constraint, judge, judging mode) only the newest verdict (highest id) that holds a Yes/No
# counts, so a re-judge with a new prompt replaces the earlier one. ``pivot`` applies the same
# rule in bulk (rows in id order, the latest upserted last); per-item readers (the app's
# Audit and Compare screens, pipeline.store.verdicts) use this condition.
LATEST_VERDICT = ("v.verdict IS NOT NULL AND v.id = (SELECT max(w.id) FROM verdicts w"
                  " WHERE w.generation_id = v.generation_id AND w.constraint_id = v.constraint_id"
                  " AND w.judge = v.judge AND w.judging_mode = v.judging_mode AND w.verdict IS NOT NULL)")
# What a screen lists for a rater on an item: the verdict LATEST_VERDICT counts or, when the
# rater never gave one, its latest missing row, listed as missing and counted nowhere.
SHOWN_VERDICT = ("v.id = (SELECT w.id FROM verdicts w WHERE w.generation_id = v.generation_id"
                 " AND w.constraint_id = v.constraint_id AND w.judge = v.judge AND "
                 "w.judging_mode = v.judging_mode ORDER BY w.verdict IS NULL, w.id DESC LIMIT 1)")

# Texts per write transaction: short enough that a build writing beside a refresh waits well
# under a second, long enough that the per-chunk overhead does not show.
CHUNK = 2000


def _tables(schema: str) -> list[str]:
    return [
        f"CREATE TABLE IF NOT EXISTS {schema}text_scores(gid INTEGER NOT NULL, judge TEXT NOT NULL,"
        " judging_mode TEXT NOT NULL, judged INTEGER NOT NULL, yes INTEGER NOT NULL, both INTEGER,"
        " core_yes INTEGER, full_yes INTEGER, flipped INTEGER, PRIMARY KEY (gid, judge, "
        "judging_mode)) WITHOUT ROWID",
        f"CREATE TABLE IF NOT EXISTS {schema}text_agreement(gid INTEGER NOT NULL, judge_a TEXT NOT NULL,"
        " mode_a TEXT NOT NULL, judge_b TEXT NOT NULL, mode_b TEXT NOT NULL, n11 INTEGER NOT NULL,"
        " n10 INTEGER NOT NULL, n01 INTEGER NOT NULL, n00 INTEGER NOT NULL,"
        " PRIMARY KEY (gid, judge_a, mode_a, judge_b, mode_b)) WITHOUT ROWID",
        f"CREATE TABLE IF NOT EXISTS {schema}text_items(gid INTEGER PRIMARY KEY, judged INTEGER NOT NULL,"
        " passed INTEGER NOT NULL, score_sum REAL NOT NULL, disagree INTEGER NOT NULL, "
        "missing INTEGER NOT NULL, flipped INTEGER)",
        f"CREATE TABLE IF NOT EXISTS {schema}text_item_marks(gid INTEGER NOT NULL, cid INTEGER NOT NULL,"
        " split INTEGER NOT NULL, unquoted INTEGER NOT NULL, flipped INTEGER NOT NULL, "
        "uncertain INTEGER NOT NULL, PRIMARY KEY (gid, cid)) WITHOUT ROWID",
    ]


TABLES = ("text_scores", "text_agreement", "text_items", "text_item_marks")
# The column text_item_marks gained at schema 15: a store from before lacks it (migration _v15).
MARKS_LATEST_COLUMN = "uncertain"


def _mark(*gids: str) -> str:
    return "INSERT OR IGNORE INTO text_scores_stale VALUES " + ", ".join(f"({g})" for g in gids)


def _mark_instruction(iid: str) -> str:
    return ("INSERT OR IGNORE INTO text_scores_stale SELECT id FROM generations"
            f" WHERE kind IN ('response', 'summary') AND instruction_id = {iid}")


_TRIGGERS = {
    "verdicts_stale_insert": ("AFTER INSERT ON verdicts", _mark("NEW.generation_id")),
    "verdicts_stale_update": ("AFTER UPDATE ON verdicts", _mark("OLD.generation_id", "NEW.generation_id")),
    "verdicts_stale_delete": ("AFTER DELETE ON verdicts", _mark("OLD.generation_id")),
    "constraints_stale_active": ("AFTER UPDATE OF active ON constraints",
                                 _mark_instruction("NEW.instruction_id")),
    "constraints_stale_delete": ("AFTER DELETE ON constraints", _mark_instruction("OLD.instruction_id")),
    "generations_stale_update": ("AFTER UPDATE OF kind, parent_id ON generations", _mark("OLD.id")),
    "generations_stale_delete": ("AFTER DELETE ON generations", _mark("OLD.id")),
}


def _judge_texts(row: str) -> str:
    return ("INSERT OR IGNORE INTO text_scores_stale SELECT DISTINCT generation_id FROM verdicts"
            f" WHERE judge = {row}.judge AND judging_mode = {row}.judging_mode AND p_yes IS NOT NULL")


# Apart from _TRIGGERS: judge_calibrations comes at schema 13, after the tables (migration _v15).
# INSERT OR REPLACE (pipeline.store.judge_checks.put_calibration) fires the insert trigger.
_CALIBRATION_TRIGGERS = {
    "calibrations_stale_insert": ("AFTER INSERT ON judge_calibrations", _judge_texts("NEW")),
    "calibrations_stale_update": ("AFTER UPDATE ON judge_calibrations",
                                  f"{_judge_texts('OLD')}; {_judge_texts('NEW')}"),
    "calibrations_stale_delete": ("AFTER DELETE ON judge_calibrations", _judge_texts("OLD")),
}


def _create_triggers(conn: sqlite3.Connection, triggers: dict[str, tuple[str, str]]) -> None:
    for name, (when, action) in triggers.items():
        conn.execute(f"CREATE TRIGGER IF NOT EXISTS {name} {when} BEGIN {action}; END")


def create_tables(conn: sqlite3.Connection) -> None:
    """The migration step: tables, triggers, and every judged text marked for scoring."""
    for statement in _tables(""):
        conn.execute(statement)
    conn.execute("CREATE TABLE IF NOT EXISTS text_scores_stale(gid INTEGER PRIMARY KEY)")
    _create_triggers(conn, _TRIGGERS)
    conn.execute("INSERT OR IGNORE INTO text_scores_stale SELECT DISTINCT generation_id FROM verdicts")


def create_calibration_triggers(conn: sqlite3.Connection) -> None:
    """The migration step once judge_calibrations exists: a new threshold rescores its judge's texts."""
    _create_triggers(conn, _CALIBRATION_TRIGGERS)


def has_current_marks(conn: sqlite3.Connection) -> bool:
    """Whether the store keeps text_item_marks in their current shape (not a store opened read-only
    before migration _v12 added them, or _v15 added ``uncertain``)."""
    return MARKS_LATEST_COLUMN in table_columns(conn, "text_item_marks")


def yes_thresholds(conn: sqlite3.Connection) -> dict[tuple[str, str], float]:
    """(judge, judging mode) -> the threshold its check chose (pipeline.store.judge_checks); {} on a
    store from before the calibrations."""
    if not has_table(conn, "judge_calibrations"):
        return {}
    return {(judge, mode): float(t) for judge, mode, t in
            conn.execute("SELECT judge, judging_mode, threshold FROM main.judge_calibrations")}


def rater_thresholds(conn: sqlite3.Connection, raters: Sequence[tuple[str, str]]) -> list[float | None]:
    """Per rater, the threshold its P(Yes) verdicts are read at now (its calibration's, else the
    default); None for a rater that is not a yes_no judge (its verdicts carry no P(Yes) to doubt)."""
    thresholds = yes_thresholds(conn)
    return [thresholds.get(rater, DEFAULT_YES_THRESHOLD) if rater[1] == "yes_no" else None
            for rater in raters]


def uncertain_bounds_of(thresholds: Sequence[float | None]) -> list[tuple[float, float] | None]:
    """``rater_thresholds`` as the P(Yes) intervals where a verdict is uncertain
    (pipeline.core.definitions.uncertain_bounds)."""
    return [uncertain_bounds(t) if t is not None else None for t in thresholds]


def refresh_text_scores(conn: sqlite3.Connection, *, chunk: int = CHUNK, rounds: int
                        | None = None) -> int | None:
    """Rescore every stale text and commit, ``chunk`` texts per transaction; return how many.
    ``rounds``: at most this many transactions (the rest stay marked for the next call).

    None when the store cannot be written now: opened read-only, locked by another writer, or
    this connection holds someone's uncommitted writes (never commit those for them). The marks
    then stay for the next refresh; ``current_text_scores`` can still read fresh totals.
    """
    if conn.in_transaction:
        return None
    try:
        done = 0
        while True:
            # An immediate transaction: no writer can mark a text stale between reading the marks
            # and clearing them, so a mark is never lost.
            conn.execute("BEGIN IMMEDIATE")
            try:
                # A response's summaries are scored against its verdicts: they are stale with it.
                conn.execute("INSERT OR IGNORE INTO text_scores_stale SELECT g.id FROM generations g"
                             " JOIN text_scores_stale s ON s.gid = g.parent_id WHERE g.kind = 'summary'")
                gids = [g for (g,) in conn.execute("SELECT gid FROM text_scores_stale ORDER BY gid LIMIT ?",
                                                   (chunk,))]
                if gids:
                    _score(conn, gids, schema="main.")
                    conn.executemany("DELETE FROM text_scores_stale WHERE gid = ?", [(g,) for g in gids])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            if not gids:
                return done
            done += len(gids)
            if rounds is not None:
                rounds -= 1
                if rounds <= 0:
                    return done
    except sqlite3.OperationalError as exc:
        if not _cannot_write(exc):
            raise
        return None


def refresh_scores(store: Store, *, chunk: int = CHUNK, rounds: int | None = None) -> int | None:
    """``refresh_text_scores`` on the store's own connection: the form every module outside the
    store calls (the connection never leaves the store)."""
    return refresh_text_scores(store.conn, chunk=chunk, rounds=rounds)


def current_text_scores(conn: sqlite3.Connection) -> int:
    """Make the tables of TABLES current for this connection; return how many texts were
    rescored. Refreshes the store when it can be written; otherwise the fresh totals
    go to temp tables of the same names, which shadow the stored ones on this connection until
    ``drop_temp_scores``."""
    done = refresh_text_scores(conn)
    return _score_into_temp(conn) if done is None else done


def _cannot_write(exc: sqlite3.OperationalError) -> bool:
    message = str(exc)
    return "readonly" in message or "locked" in message


def _score_into_temp(conn: sqlite3.Connection) -> int:
    """The stored totals of fresh texts plus new totals of the stale ones, in temp tables."""
    drop_temp_scores(conn)
    if conn.execute("SELECT 1 FROM main.text_scores_stale LIMIT 1").fetchone() is None:
        return 0  # the stored totals are current
    opened = not conn.in_transaction
    for statement in _tables("temp."):
        conn.execute(statement)
    stale = "(SELECT gid FROM main.text_scores_stale UNION SELECT g.id FROM main.generations g" \
            " JOIN main.text_scores_stale s ON s.gid = g.parent_id WHERE g.kind = 'summary')"
    for table in TABLES:
        # A store opened read-only before a migration added a table, or a column: its totals are all
        # new here (and the marks' readers check has_current_marks).
        if table_columns(conn, table) == table_columns(conn, table, "temp"):
            conn.execute(f"INSERT INTO temp.{table} SELECT * FROM main.{table} WHERE gid NOT IN {stale}")
    gids = [g for (g,) in conn.execute(f"SELECT gid FROM {stale} ORDER BY gid")]
    for start in range(0, len(gids), CHUNK):
        _score(conn, gids[start : start + CHUNK], schema="temp.")
    if opened:
        conn.commit()  # only temp tables were written; do not hold a read snapshot open
    return len(gids)


def drop_temp_scores(conn: sqlite3.Connection) -> None:
    for table in TABLES:
        conn.execute(f"DROP TABLE IF EXISTS temp.{table}")


def _score(conn: sqlite3.Connection, gids: Sequence[int], *, schema: str) -> None:
    """Replace the totals of ``gids`` in the ``{schema}`` tables of TABLES."""
    marks = ",".join("?" * len(gids))
    for table in TABLES:
        conn.execute(f"DELETE FROM {schema}{table} WHERE gid IN ({marks})", list(gids))
    try:
        conn.execute("CREATE TEMP TABLE s_gen(gid INTEGER PRIMARY KEY, kind TEXT, rid INTEGER)")
        conn.execute(
            "INSERT INTO s_gen SELECT id, kind, CASE WHEN kind = 'summary' THEN parent_id ELSE id END"
            f" FROM main.generations WHERE id IN ({marks}) AND kind IN ('response', 'summary')", list(gids))
        # The verdicts needed: the texts' own, and those of each summary's response.
        conn.execute("CREATE TEMP TABLE s_need(gid INTEGER PRIMARY KEY)")
        conn.execute("INSERT OR IGNORE INTO s_need SELECT gid FROM s_gen UNION SELECT rid FROM s_gen")
        # CROSS: the texts drive
        source = "s_need g CROSS JOIN main.verdicts v ON v.generation_id = g.gid WHERE 1"
        raters = sorted(tuple(r)
                        for r in conn.execute(f"SELECT DISTINCT v.judge, v.judging_mode FROM {source}"))
        pivot(conn, "s_p", raters, source, missing=True,
              uncertain=uncertain_bounds_of(rater_thresholds(conn, raters)))
        if raters:
            conn.executemany(f"INSERT INTO {schema}text_scores VALUES (?,?,?,?,?,?,?,?,?)",
                             _rater_rows(conn, raters))
            conn.executemany(f"INSERT INTO {schema}text_agreement VALUES (?,?,?,?,?,?,?,?,?)",
                             _pair_rows(conn, raters))
            conn.executemany(f"INSERT INTO {schema}text_items VALUES (?,?,?,?,?,?,?)",
                             _item_rows(conn, len(raters)))
            _insert_marks(conn, len(raters), schema)
    finally:
        for table in ("s_gen", "s_need", "s_p"):
            conn.execute(f"DROP TABLE IF EXISTS temp.{table}")


def pivot(conn: Any, table: str, raters: list[tuple[str, str]], source: str, vsql: str = "",
          vparams: Sequence[Any] = (), *, missing: bool = False,
          uncertain: Sequence[tuple[float, float] | None] | None = None) -> None:
    """Temp ``table``: one row per (text, active constraint), rater k's verdict in column y{k};
    with ``missing``, also m{k}: 1 when that verdict's quote is not in the text; with ``uncertain``
    (per rater, its P(Yes) interval from ``uncertain_bounds_of``), also u{k}: 1 when that verdict's
    P(Yes) is inside it.

    ``source`` is a FROM clause over ``verdicts v`` ending in a WHERE; ``vsql`` adds conditions."""
    n = len(raters)
    names = ([f"y{k}" for k in range(n)] + ([f"m{k}" for k in range(n)] if missing else [])
             + ([f"u{k}" for k in range(n)] if uncertain is not None else []))
    columns = "".join(f", {name} INTEGER" for name in names)
    conn.execute(f"CREATE TEMP TABLE {table}(gid INTEGER, cid INTEGER{columns}, PRIMARY "
                 "KEY(gid, cid)) WITHOUT ROWID")
    if not raters:
        return
    # One row per verdict, its value in its rater's column, merged into the (text, constraint)
    # row by an upsert: no sort of millions of rows, unlike a GROUP BY. Rows come in id order,
    # so when a rater judged an item twice (a re-judge with a new prompt) the latest one wins.
    rater = "CASE WHEN v.judge = ? AND v.judging_mode = ? THEN {} END"
    cases = [rater.format("v.verdict")] * n
    if missing:  # never NULL for the rater's row, so that the latest verdict's flag wins too
        cases += [rater.format("coalesce(v.quote_found = 'missing', 0)")] * n
    case_params = [x for judge, mode in raters for x in (judge, mode)] * (2 if missing else 1)
    for (judge, mode), bounds in zip(raters, uncertain or (), strict=False):
        # Never NULL for the rater's row either. Open interval, as pipeline.core.definitions.uncertain.
        cases.append(rater.format("coalesce(v.p_yes > ? AND v.p_yes < ?, 0)" if bounds else "0"))
        case_params += [judge, mode, *(bounds or ())]
    updates = ", ".join(f"{name} = coalesce(excluded.{name}, {name})" for name in names)
    conn.execute(
        f"INSERT INTO {table} SELECT v.generation_id, v.constraint_id, {', '.join(cases)} FROM {source}"
        " AND v.verdict IS NOT NULL AND v.constraint_id NOT IN (SELECT id FROM "
        "main.constraints WHERE active = 0)"
        f"{vsql} ORDER BY v.id ON CONFLICT(gid, cid) DO UPDATE SET {updates}",
        [*case_params, *vparams],
    )


def both_judged(a: str, b: str) -> str:
    """SQL: 1 when both verdicts exist, else NULL (so count/sum skip the item)."""
    return f"(({a}) + ({b}) - ({a}) - ({b}) + 1)"


def _rater_rows(conn: sqlite3.Connection, raters: list[tuple[str, str]]) -> list[tuple[Any, ...]]:
    n = len(raters)
    per_rater = ", ".join(f"count(y{k}), sum(y{k})" for k in range(n))
    own = {gid: values for gid, *values in conn.execute(
        f"SELECT p.gid, {per_rater} FROM s_p p JOIN s_gen g ON g.gid = p.gid GROUP BY p.gid")}
    joined = ", ".join(
        f"count({both_judged(f's.y{k}', f'f.y{k}')}), sum(s.y{k} * {both_judged(f's.y{k}', f'f.y{k}')}),"
        f" sum(f.y{k} * {both_judged(f's.y{k}', f'f.y{k}')}), sum(f.y{k} * (1 - s.y{k}))"
        for k in range(n))
    on_summary = {gid: values for gid, *values in conn.execute(
        f"SELECT g.gid, {joined} FROM s_gen g JOIN s_p s ON s.gid = g.gid"
        " JOIN s_p f ON f.gid = g.rid AND f.cid = s.cid WHERE g.kind = 'summary' GROUP BY g.gid")}
    rows = []
    for gid, values in own.items():
        summary = on_summary.get(gid)
        for k, (judge, mode) in enumerate(raters):
            judged, yes = values[2 * k], values[2 * k + 1] or 0
            if not judged:
                continue
            extra: tuple[Any, ...] = (None, None, None, None)
            if summary is not None:
                both, core_yes, full_yes, flipped = summary[4 * k : 4 * k + 4]
                extra = (both, core_yes or 0, full_yes or 0, flipped or 0)
            rows.append((gid, judge, mode, judged, yes, *extra))
    return rows


def item_outcome_sql(n_raters: int, full: str = "f", summary: str = "s") -> dict[str, str]:
    """The one rule of a constraint's outcome (pipeline.core.definitions.item_outcome) in SQL, to count
    it over many items in the store (tests/test_outcome.py keeps the two equal).

    ``full`` and ``summary`` name pivot rows (columns y0..y{n-1}) of the same constraint on the
    response and on one of its summaries. Only the raters who judged the constraint on both texts
    count, so a rater who has not judged the summary yet cannot make an item look flipped:
      ``judged``   raters who judged both texts
      ``full_yes`` / ``summary_yes``  of those, Yes on the response / on the summary
      ``full_score`` / ``summary_score``  the raters' mean verdicts (NULL when none judged both)
      ``flipped``  full_score passes and summary_score does not: Outcome.FLIPPED
      ``passed_both``  both scores pass (PASS_THRESHOLD, passes_sql): Outcome.PASSED_BOTH
    The per-text totals (text_items, text_item_marks), the metrics' counts and the suspicion ranking
    count with these expressions; one item's outcome is read from its scores (score_outcome)."""
    both = [both_judged(f"{summary}.y{k}", f"{full}.y{k}") for k in range(n_raters)]
    judged = "(" + " + ".join(f"coalesce({b}, 0)" for b in both) + ")"
    full_yes = "(" + " + ".join(f"coalesce({full}.y{k} * {b}, 0)" for k, b in enumerate(both)) + ")"
    summary_yes = "(" + " + ".join(f"coalesce({summary}.y{k} * {b}, 0)" for k, b in enumerate(both)) + ")"
    return {
        "judged": judged, "full_yes": full_yes, "summary_yes": summary_yes,
        "full_score": f"(CASE WHEN {judged} > 0 THEN {full_yes} * 1.0 / {judged} END)",
        "summary_score": f"(CASE WHEN {judged} > 0 THEN {summary_yes} * 1.0 / {judged} END)",
        "flipped": f"({judged} > 0 AND {passes_sql(full_yes, judged)} AND NOT "
                   f"{passes_sql(summary_yes, judged)})",
        "passed_both": f"({judged} > 0 AND {passes_sql(full_yes, judged)} AND "
                       f"{passes_sql(summary_yes, judged)})",
    }


def passes_sql(yes: str, judged: str) -> str:
    """SQL of pipeline.core.definitions.passes on a count of Yes among ``judged`` verdicts: their mean
    reaches PASS_THRESHOLD, read from the definitions when the statement is built (one rule, in
    Python and in the store)."""
    return f"({yes} * 1.0 >= {float(definitions.PASS_THRESHOLD)!r} * {judged})"


def _item_rows(conn: sqlite3.Connection, n_raters: int) -> list[tuple[Any, ...]]:
    """text_items rows of the texts in s_gen, from s_p (every rater's latest verdict per item)."""

    def judged(p: str) -> str:  # raters with a verdict on the item
        return "(" + " + ".join(f"({p}.y{k} IS NOT NULL)" for k in range(n_raters)) + ")"

    def yes(p: str) -> str:  # raters saying Yes
        return "(" + " + ".join(f"coalesce({p}.y{k}, 0)" for k in range(n_raters)) + ")"

    def passed(p: str) -> str:  # the raters' mean passes
        return f"({judged(p)} > 0 AND {passes_sql(yes(p), judged(p))})"

    missing = "(" + " + ".join(f"coalesce(p.m{k}, 0)" for k in range(n_raters)) + ") > 0"
    own = {gid: values for gid, *values in conn.execute(
        f"SELECT p.gid, sum({judged('p')} > 0), sum({passed('p')}),"
        f" total(CASE WHEN {judged('p')} > 0 THEN {yes('p')} * 1.0 / {judged('p')} END),"
        f" sum({yes('p')} > 0 AND {yes('p')} < {judged('p')}), sum({missing})"
        " FROM s_p p JOIN s_gen g ON g.gid = p.gid GROUP BY p.gid")}
    flipped = dict(conn.execute(
        f"SELECT g.gid, sum({item_outcome_sql(n_raters)['flipped']}) FROM s_gen g"
        " JOIN s_p s ON s.gid = g.gid JOIN s_p f ON f.gid = g.rid AND f.cid = s.cid WHERE g.kind = 'summary'"
        " GROUP BY g.gid"))
    return [(gid, *values, flipped.get(gid)) for gid, values in own.items()]


def _insert_marks(conn: sqlite3.Connection, n_raters: int, schema: str) -> None:
    """text_item_marks rows of the texts in s_gen, from s_p (as Trust counts: split is a Yes and a
    No among the raters' latest verdicts, unquoted a Yes whose quote is missing; uncertain a latest
    verdict whose P(Yes) is near its rater's threshold, Yes or No)."""
    yes = " + ".join(f"coalesce(p.y{k}, 0)" for k in range(n_raters))
    no = " + ".join(f"coalesce(1 - p.y{k}, 0)" for k in range(n_raters))
    unquoted = " + ".join(f"coalesce(p.y{k} * p.m{k}, 0)" for k in range(n_raters))
    unsure = " + ".join(f"coalesce(p.u{k}, 0)" for k in range(n_raters))
    flipped = item_outcome_sql(n_raters, full="f", summary="p")["flipped"]
    conn.execute(
        f"INSERT INTO {schema}text_item_marks SELECT * FROM (SELECT p.gid, p.cid, ({yes}) > 0 AND "
        f"({no}) > 0 AS split,"
        f" ({unquoted}) > 0 AS unquoted, coalesce(g.kind = 'summary' AND {flipped}, 0) AS flipped,"
        f" ({unsure}) > 0 AS uncertain"
        " FROM s_p p JOIN s_gen g ON g.gid = p.gid LEFT JOIN s_p f ON g.kind = 'summary' AND f.gid = g.rid"
        " AND f.cid = p.cid) WHERE split OR unquoted OR flipped OR uncertain")


def _pair_rows(conn: sqlite3.Connection, raters: list[tuple[str, str]]) -> list[tuple[Any, ...]]:
    pairs = list(combinations(range(len(raters)), 2))
    if not pairs:
        return []
    cells = ", ".join(
        f"sum(y{a} * y{b}), sum(y{a} * (1 - y{b})), sum((1 - y{a}) * y{b}), sum((1 - y{a}) * (1 - y{b}))"
        for a, b in pairs)
    rows = []
    for gid, *values in conn.execute(f"SELECT p.gid, {cells} FROM s_p p JOIN s_gen g ON g.gid = "
                                     "p.gid GROUP BY p.gid"):
        for index, (a, b) in enumerate(pairs):
            cell = values[4 * index : 4 * index + 4]
            if cell[0] is not None:  # the pair judged at least one item in common
                rows.append((gid, *raters[a], *raters[b], *cell))
    return rows


