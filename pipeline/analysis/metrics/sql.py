"""The temp tables a computation works in (m_gen: the selected texts; m_p: one verdict column
per rater), and the lock that keeps one computation at a time on a connection."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pipeline.analysis.metrics.base import Filters
from pipeline.store.scores import pivot

if TYPE_CHECKING:
    from pipeline.store.database import Store


# Temp tables live on the store's connection; one metrics computation at a time per process.
_LOCK = threading.RLock()


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
    pipeline.store.scores instead."""
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
