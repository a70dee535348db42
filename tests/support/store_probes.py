"""Reads and writes of the store that only the tests and the benches need: how many texts wait to be
rescored, the calls' totals per template and model, and forgetting the stored copy evidence.
Production code never asks these (issue 59 item 7), so they live here, not in pipeline/store/."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from pipeline.store.database import Store


def stale_count(conn: sqlite3.Connection) -> int:
    """Texts marked for rescoring (pipeline.store.scores ``text_scores_stale``)."""
    return conn.execute("SELECT count(*) FROM text_scores_stale").fetchone()[0]


@dataclass(frozen=True)
class CallTotals:
    """The calls of one prompt template to one model, summed."""

    template: str | None
    model: str
    calls: int
    prompt_tokens: int
    cached_prompt_tokens: int | None  # what the endpoint said it read from its prompt cache; None: never said
    new_prompt_tokens: int  # the prompt tokens it evaluated anew: all of a call's when it did not say
    completion_tokens: int
    model_s: float  # the calls' own durations


def call_totals(store: Store) -> list[CallTotals]:
    """Per prompt template and model (as each call recorded it), its calls' tokens and time: what the
    demo bench weighs against the same tokens at raw speed."""
    rows = store.conn.execute(
        "SELECT template, coalesce(model, ''), count(*), coalesce(sum(prompt_tokens), 0),"
        " sum(cached_prompt_tokens), coalesce(sum(prompt_tokens - coalesce(cached_prompt_tokens, 0)), 0),"
        " coalesce(sum(completion_tokens), 0), coalesce(sum(latency_s), 0)"
        " FROM llm_calls GROUP BY template, model ORDER BY template, model"
    ).fetchall()
    return [CallTotals(r[0], r[1], int(r[2]), int(r[3]), None if r[4] is None else int(r[4]), int(r[5]),
                       int(r[6]), float(r[7])) for r in rows]


def clear_copy_evidence(store: Store) -> int:
    """Forget every stored copy evidence row (derived values: the stage computes them again); commits."""
    with store.conn:
        return store.conn.execute("DELETE FROM copy_evidence").rowcount
