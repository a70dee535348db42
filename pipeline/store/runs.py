"""The ``runs`` table: one row per build, evaluation, naturalness or import run, with its config
(JSON, never key values), status, the process running it (pid, host) and its accounting (calls,
cache hits, tokens, cost, of which batch).

Written by pipeline.stages.runs (the run lifecycle) and pipeline.importing (import runs).
None of these functions commits: the caller does, as the run's record changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.store.database import Store


@dataclass(frozen=True)
class RunSpend:
    """A run's configuration (JSON) beside what it spent: the dry run's estimate is kept in the config."""

    id: str
    kind: str
    config: str
    calls: int
    cost: float


def insert_run(store: Store, *, run_id: str, kind: str, name: str, config: str, started_at: str, pid: int,
               host: str) -> None:
    """A new run, running, with nothing spent yet."""
    store.conn.execute(
        "INSERT INTO runs(id, kind, name, config, status, started_at, finished_at, calls, "
        "cache_hits, prompt_tokens, completion_tokens, cost, batch_calls, batch_cost, error, pid, host)"
        " VALUES (?, ?, ?, ?, 'running', ?, NULL, 0, 0, 0, 0, 0.0, 0, 0.0, NULL, ?, ?)",
        (run_id, kind, name, config, started_at, pid, host))


def reopen_run(store: Store, run_id: str, *, config: str, pid: int, host: str) -> None:
    """Mark a stored run running again, under a new config and process."""
    store.conn.execute(
        "UPDATE runs SET status = 'running', error = NULL, finished_at = NULL, config = ?, pid = ?, "
        "host = ? WHERE id = ?",
        (config, pid, host, run_id))


def add_run_usage(store: Store, run_id: str, *, calls: int, cache_hits: int, prompt_tokens: int,
                  completion_tokens: int, cost: float, batch_calls: int, batch_cost: float) -> None:
    """Add to the run's totals."""
    store.conn.execute(
        "UPDATE runs SET calls = calls + ?, cache_hits = cache_hits + ?, prompt_tokens = prompt_tokens + ?,"
        " completion_tokens = completion_tokens + ?, cost = cost + ?, batch_calls = batch_calls + ?,"
        " batch_cost = batch_cost + ? WHERE id = ?",
        (calls, cache_hits, prompt_tokens, completion_tokens, cost, batch_calls, batch_cost, run_id),
    )


def run_config(store: Store, run_id: str, kind: str | None = None) -> str | None:
    """The run's config (JSON text; None when there is no such run, of that kind when given)."""
    if kind is None:
        row = store.conn.execute("SELECT config FROM runs WHERE id = ?", (run_id,)).fetchone()
    else:
        row = store.conn.execute("SELECT config FROM runs WHERE id = ? AND kind = ?",
                                 (run_id, kind)).fetchone()
    return None if row is None else row[0]


def exists_run(store: Store, run_id: str) -> bool:
    return store.conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is not None


def set_run_config(store: Store, run_id: str, config: str) -> None:
    store.conn.execute("UPDATE runs SET config = ? WHERE id = ?", (config, run_id))


def runs_with_estimate(store: Store) -> list[RunSpend]:
    """Runs whose config holds a dry run's estimate, oldest first."""
    rows = store.conn.execute("SELECT id, kind, config, calls, cost FROM runs WHERE config "
                              "LIKE '%\"estimate\"%'"
                              " ORDER BY started_at, id").fetchall()
    return [RunSpend(*r) for r in rows]


def run_accounting(store: Store, run_id: str) -> dict[str, Any] | None:
    """A run's calls, cache_hits, prompt_tokens, completion_tokens, cost, batch_calls and batch_cost
    (None when there is no such run)."""
    cursor = store.conn.execute("SELECT calls, cache_hits, prompt_tokens, "
                                "completion_tokens, cost, batch_calls,"
                                " batch_cost FROM runs WHERE id = ?", (run_id,))
    row = cursor.fetchone()
    return None if row is None else dict(zip([d[0] for d in cursor.description], row))


def end_run(store: Store, run_id: str, *, status: str, finished_at: str, error: str | None) -> None:
    store.conn.execute("UPDATE runs SET status = ?, finished_at = ?, error = ? WHERE id = ?",
                       (status, finished_at, error, run_id))


def recent_runs(store: Store, kind: str, limit: int) -> list[str]:
    """Ids of the newest runs of a kind, newest first."""
    return [r[0]
            for r in store.conn.execute("SELECT id FROM runs WHERE kind = ? ORDER BY started_at DESC LIMIT ?",
                                             (kind, limit))]
