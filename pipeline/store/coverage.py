"""The reads behind judging coverage (pipeline.analysis.coverage, which keeps the arithmetic).

They work on a temp table of selected texts, ``texts`` (gid, kind, rid, ratio: rid is the
response a text belongs to, itself for a response), filled by the caller: pipeline.store's
metrics selection, or ``selected_texts`` here. They read the kept per-text totals
(pipeline.store.scores), which must be current.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pipeline.store.database import Store
from pipeline.store.scores import current_text_scores, drop_temp_scores


@dataclass(frozen=True)
class TextGroup:
    """A selected text, the group it counts in, and its instruction's count of active constraints."""

    gid: int
    kind: str
    ratio: float | None
    domain: str | None
    condition: str | None
    model: str | None
    mode: str
    n_active: int


def expected_raters(store: Store, texts: str, vwhere: Sequence[str], vparams: Sequence[Any]
                    ) -> list[tuple[str, str]]:
    """(judge, judging_mode) of every rater with a usable or a missing verdict on a text of the
    temp table ``texts``, filtered by ``vwhere`` (conditions on judge columns)."""
    conn = store.conn
    scored = "".join(f" AND s.{w}" for w in vwhere)
    missing = "".join(f" AND v.{w}" for w in vwhere)
    raters = set(conn.execute(
        f"SELECT DISTINCT s.judge, s.judging_mode FROM {texts} g JOIN text_scores s ON s.gid = "
        f"g.gid WHERE 1{scored}",
        list(vparams)))
    # Missing verdicts: a small partial index (store schema 4) answers this without a scan.
    raters |= set(conn.execute(
        f"SELECT DISTINCT v.judge, v.judging_mode FROM {texts} g CROSS JOIN verdicts v ON "
        "v.generation_id = g.gid"
        f" WHERE v.verdict IS NULL{missing}", list(vparams)))
    return sorted(raters)


def judged_per_text(store: Store, texts: str) -> list[tuple[int, str, str, int]]:
    """(gid, judge, judging_mode, items judged) of every rater's kept totals on the selected texts."""
    return list(store.conn.execute(
        f"SELECT s.gid, s.judge, s.judging_mode, s.judged FROM {texts} g JOIN "
        "text_scores s ON s.gid = g.gid"))


def text_groups(store: Store, texts: str) -> list[TextGroup]:
    """Each selected text with its group (its response's instruction, model and mode)."""
    return [TextGroup(*row) for row in store.conn.execute(
        f"SELECT g.gid, g.kind, g.ratio, i.domain, i.condition, r.model, coalesce(r.mode, "
        "''), coalesce(a.n, 0)"
        f" FROM {texts} g JOIN generations r ON r.id = g.rid JOIN instructions i ON i.id = r.instruction_id"
        " LEFT JOIN (SELECT instruction_id, count(*) AS n FROM constraints WHERE active = 1 GROUP "
        "BY instruction_id) a ON a.instruction_id = r.instruction_id")]


@contextmanager
def selected_texts(store: Store, generation_ids: Sequence[int]) -> Iterator[str]:
    """A temp table of these texts (its name is yielded), with the per-text totals current; both
    go on leaving, and only temp tables having been written, the transaction is committed."""
    conn = store.conn
    try:
        # first: refreshing needs no transaction open, and the insert below opens one
        current_text_scores(conn)
        conn.execute("DROP TABLE IF EXISTS temp.e_gen")
        conn.execute("CREATE TEMP TABLE e_gen(gid INTEGER PRIMARY KEY, kind TEXT, rid INTEGER, ratio REAL)")
        conn.executemany(
            "INSERT OR IGNORE INTO e_gen SELECT id, kind, CASE WHEN kind = 'summary' THEN "
            "parent_id ELSE id END, ratio FROM generations WHERE id = ?", [(g,) for g in generation_ids])
        yield "e_gen"
    finally:
        drop_temp_scores(conn)
        conn.execute("DROP TABLE IF EXISTS temp.e_gen")
        if conn.in_transaction:
            conn.commit()  # only temp tables were written
