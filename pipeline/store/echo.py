"""The ``constraint_echo`` table: per (response or summary, active constraint), the constraint's echo,
the highest cosine between the constraint and a sentence of the text (the research code's copy-paste
score, cs4/analysis/copy_paste.py), by ``method`` (the embedder's name), with that sentence's span.

Written by pipeline.stages.echo, one committed batch per text; read by the suspicion ranking
(pipeline.store.suspicion joins it), Audit (the sentence), and the report's copy numbers
(``copy_cells``; ``response_echoes`` for the model duel). One row per pair: computing with another
embedder replaces it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import NamedTuple

from pipeline.store.database import Store
from pipeline.store.metrics import Filters


class EchoWork(NamedTuple):
    """A text whose active constraints lack an echo by the method, with those constraints."""

    generation_id: int
    instruction_id: int
    text_hash: str
    constraints: tuple[tuple[int, str], ...]  # (constraint id, text)


class EchoRow(NamedTuple):
    generation_id: int
    constraint_id: int
    method: str
    echo: float
    sentence_start: int
    sentence_end: int


def _selection(instruction_ids: Sequence[int] | None, run_id: str | None) -> tuple[str, list[object]]:
    where, params = "", list[object]()
    if instruction_ids is not None:
        where += " AND g.instruction_id IN (SELECT value FROM json_each(?))"
        params.append(json.dumps(sorted(set(instruction_ids))))
    if run_id is not None:
        where += " AND g.instruction_id IN (SELECT id FROM instructions WHERE run_id = ?)"
        params.append(run_id)
    return where, params


_LACKING = (" FROM generations g JOIN constraints c ON c.instruction_id = g.instruction_id AND c.active = 1"
            " LEFT JOIN constraint_echo x ON x.generation_id = g.id AND x.constraint_id = "
            "c.id AND x.method = ?"
            " WHERE g.kind IN ('response', 'summary') AND g.text_hash IS NOT NULL AND "
            "x.generation_id IS NULL")


def count_missing_echo(store: Store, method: str, *, instruction_ids: Sequence[int] | None = None,
                       run_id: str | None = None) -> int:
    """(text, active constraint) pairs of responses and summaries without an echo by ``method``."""
    where, params = _selection(instruction_ids, run_id)
    return int(store.conn.execute("SELECT count(*)" + _LACKING + where, [method, *params]).fetchone()[0])


def missing_echo_work(store: Store, method: str, *, instruction_ids: Sequence[int] | None = None,
                      run_id: str | None = None, limit: int = 50) -> list[EchoWork]:
    """The first ``limit`` texts with constraints lacking an echo by ``method``, in id order."""
    where, params = _selection(instruction_ids, run_id)
    rows = store.conn.execute(
        "SELECT g.id, g.instruction_id, g.text_hash, c.id, c.text" + _LACKING + where
        + " AND g.id IN (SELECT DISTINCT g.id" + _LACKING + where
        + " ORDER BY g.id LIMIT ?) ORDER BY g.id, c.position, c.id",
        [method, *params, method, *params, limit]).fetchall()
    out: dict[int, EchoWork] = {}
    for gid, iid, text_hash, cid, text in rows:
        w = out.get(gid) or EchoWork(gid, iid, text_hash, ())
        out[gid] = w._replace(constraints=(*w.constraints, (cid, text)))
    return list(out.values())


def put_echoes(store: Store, rows: Sequence[EchoRow]) -> None:
    """Store these rows (replacing the same pairs'); commits, one batch."""
    with store.conn:
        store.conn.executemany(
            "INSERT OR REPLACE INTO constraint_echo(generation_id, constraint_id, method, "
            "echo, sentence_start, sentence_end) VALUES (?, ?, ?, ?, ?, ?)", rows)


def echoes_of(store: Store, generation_ids: Sequence[int], method: str
              | None = None) -> dict[tuple[int, int], float]:
    """(text, constraint) -> the stored echo, for these texts (by this embedder only, when given)."""
    rows = store.conn.execute("SELECT generation_id, constraint_id, echo FROM constraint_echo "
                              "WHERE generation_id IN"
                              " (SELECT value FROM json_each(?)) AND (? IS NULL OR method = ?)",
                              (json.dumps(sorted(set(generation_ids))), method, method))
    return {(g, c): e for g, c, e in rows}


class CopyCell(NamedTuple):
    """One (active constraint, response) of the report's copy numbers: its instruction's keys, the
    constraint's echo on the response and its similarity to its references (None where not stored)."""

    domain: str
    condition: str
    article_a: int | None
    instruction_id: int
    model: str
    mode: str
    constraint_id: int
    echo: float | None
    reference_similarity: float | None  # the higher of to A and to B
    similarity_method: str | None
    echo_method: str | None


def _responses_where(filters: Filters | None) -> tuple[list[str], list[object]]:
    """The responses of the selection (generations g, instructions i)."""
    f = filters or Filters()
    where, params = ["g.kind = 'response'"], list[object]()
    for column, value in (("i.run_id", f.run), ("i.id", f.instruction), ("i.domain", f.domain),
                          ("i.condition", f.condition), ("g.mode", f.mode)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if f.models is not None:
        where.append("g.model IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(list(f.models)))
    return where, params


def copy_cells(store: Store, filters: Filters | None = None) -> list[CopyCell]:
    """Every (active constraint, response) of the selection with its stored echo and
    constraint-reference similarity, nothing computed."""
    where, params = _responses_where(filters)
    rows = store.conn.execute(
        "SELECT coalesce(i.domain, ''), i.condition, i.article_a, i.id, coalesce(g.model, ''), "
        "coalesce(g.mode, ''),"
        " c.id, x.echo, CASE WHEN m.to_b IS NULL THEN m.to_a ELSE max(m.to_a, m.to_b) END, m.method, x.method"
        " FROM generations g JOIN instructions i ON i.id = g.instruction_id"
        " JOIN constraints c ON c.instruction_id = g.instruction_id AND c.active = 1"
        " LEFT JOIN constraint_echo x ON x.generation_id = g.id AND x.constraint_id = c.id"
        " LEFT JOIN constraint_similarity m ON m.constraint_id = c.id"
        f" WHERE {' AND '.join(where)} ORDER BY i.id, g.id, c.position", params)
    return [CopyCell(*r) for r in rows]


class ResponseEcho(NamedTuple):
    """A response's copy-paste score: the mean echo over its active constraints that have one."""

    domain: str
    condition: str
    article_a: int | None
    article_b: int | None
    instruction_id: int
    model: str
    mode: str
    echo: float
    constraints: int  # of them with an echo


def response_echoes(store: Store, filters: Filters | None = None) -> list[ResponseEcho]:
    """Each response of the selection with a stored echo, its mean echo (the model duel's copy-paste
    unit values, pipeline.analysis.model_duel); in instruction order."""
    where, params = _responses_where(filters)
    rows = store.conn.execute(
        "SELECT coalesce(i.domain, ''), i.condition, i.article_a, i.article_b, i.id, coalesce(g.model, ''),"
        " coalesce(g.mode, ''), avg(x.echo), count(*)"
        " FROM generations g JOIN instructions i ON i.id = g.instruction_id"
        " JOIN constraints c ON c.instruction_id = g.instruction_id AND c.active = 1"
        " JOIN constraint_echo x ON x.generation_id = g.id AND x.constraint_id = c.id"
        f" WHERE {' AND '.join(where)} GROUP BY g.id ORDER BY i.id, g.id", params)
    return [ResponseEcho(*r) for r in rows]
