"""The ``batches`` and ``batch_requests`` tables: calls deferred to a provider's batch API or to
vLLM's offline ``run_batch``, and the batches that carry them (pipeline.llm.batch runs batch mode).

A request's ``status``: pending (waiting for a batch) | submitted (in one) | done (answered, not
yet taken by a stage) | failed | online (the user chose to send it online). A request row goes
once its answer is cached in ``llm_calls``. Functions commit only where noted, as the code that
called SQL directly did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from pipeline.store.database import Store, now


@dataclass(frozen=True)
class RequestState:
    """A call's batch request, as the client sees it."""

    id: int
    status: str
    response: str  # "" until answered
    prompt_tokens: int
    completion_tokens: int
    cost: float
    logprobs: str | None = None  # JSON, as pipeline.llm.call encodes them


@dataclass(frozen=True)
class DeferredCall:
    """A new pending request, in the column order of its insert."""

    cache_key: str
    endpoint: str
    template: str | None
    template_hash: str | None
    request: str  # JSON of messages and parameters, redacted
    run_id: str | None
    created_at: str


@dataclass(frozen=True)
class QueuedRequest:
    id: int
    cache_key: str
    request: str


@dataclass(frozen=True)
class FiledRequest:
    """What filing a result line needs of its request."""

    cache_key: str
    endpoint: str
    status: str
    batch_id: str | None


@dataclass(frozen=True)
class BatchRow:
    """One row of ``batches``."""

    id: str
    kind: str  # provider | export
    endpoint: str
    remote_id: str | None
    input_file_id: str | None
    output_file_id: str | None
    error_file_id: str | None
    path: str | None
    state: str
    requests: int | None
    completed: int | None
    failed: int | None
    error: str | None
    pid: int | None
    host: str | None
    created_at: str
    updated_at: str | None
    collected_at: str | None


_BATCH_COLUMNS = ", ".join(f.name for f in fields(BatchRow))


# -- requests ----------------------------------------------------------------------------------


def request_for_key(store: Store, cache_key: str) -> RequestState | None:
    row = store.conn.execute(
        "SELECT id, status, response, prompt_tokens, completion_tokens, cost, logprobs FROM batch_requests"
        " WHERE cache_key = ?", (cache_key,),
    ).fetchone()
    if row is None:
        return None
    return RequestState(row[0], row[1], row[2] or "", row[3] or 0, row[4] or 0, row[5] or 0.0, row[6])


def delete_request(store: Store, cache_key: str) -> None:
    """The call's answer is cached now: its request goes. Does not commit."""
    store.conn.execute("DELETE FROM batch_requests WHERE cache_key = ?", (cache_key,))


def queue_requests(store: Store, calls: list[DeferredCall]) -> None:
    """Record calls as pending. A row already there for the key (another process deferred it) is
    left alone: nothing waiting or failed is queued twice. Does not commit."""
    store.conn.executemany(
        "INSERT OR IGNORE INTO batch_requests (cache_key, endpoint, template, template_hash, request, status,"
        " run_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?7)",
        [(c.cache_key, c.endpoint, c.template, c.template_hash, c.request, c.run_id, c.created_at)
         for c in calls],
    )


def pending_endpoints(store: Store) -> list[str]:
    return [r[0] for r in store.conn.execute(
        "SELECT DISTINCT endpoint FROM batch_requests WHERE status = 'pending' ORDER BY endpoint")]


def claim_pending(store: Store, endpoint: str, limit: int, batch_id: str, kind: str, *, pid: int, host: str,
                  path: str | None, first_file: Callable[[list[QueuedRequest]], list[tuple[int, str]]]
                  ) -> list[tuple[int, str]] | None:
    """In one write transaction: take up to ``limit`` pending requests of ``endpoint``, let
    ``first_file`` choose what fits one file (as (request id, line)), record the batch and mark
    those requests submitted to it. Two processes never claim the same request. None: nothing
    pending. Commits."""
    conn = store.conn
    if conn.in_transaction:
        conn.commit()
    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = conn.execute("SELECT id, cache_key, request FROM batch_requests WHERE status = 'pending'"
                            " AND endpoint = ? ORDER BY id LIMIT ?", (endpoint, limit)).fetchall()
        if not rows:
            conn.execute("ROLLBACK")
            return None
        first = first_file([QueuedRequest(*r) for r in rows])
        t = now()
        conn.execute(
            "INSERT INTO batches (id, kind, endpoint, state, requests, completed, failed, pid, "
            "host, path, created_at, updated_at) VALUES (?, ?, ?, 'preparing', ?, 0, 0, ?, ?, ?, ?, ?)",
            (batch_id, kind, endpoint, len(first), pid, host, path, t, t))
        conn.executemany("UPDATE batch_requests SET status = 'submitted', batch_id = ?, "
                         "updated_at = ? WHERE id = ?",
                         [(batch_id, t, rid) for rid, _ in first])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return first


def requests_of_batch(store: Store, batch_id: str) -> list[QueuedRequest]:
    return [QueuedRequest(*r) for r in store.conn.execute(
        "SELECT id, cache_key, request FROM batch_requests WHERE batch_id = ? ORDER BY id", (batch_id,))]


def request_by_id(store: Store, request_id: int) -> FiledRequest | None:
    row = store.conn.execute("SELECT cache_key, endpoint, status, batch_id FROM batch_requests WHERE id = ?",
                             (request_id,)).fetchone()
    return FiledRequest(*row) if row is not None else None


def file_answer(store: Store, request_id: int, text: str, prompt_tokens: int, completion_tokens: int,
                cost: float, logprobs: str | None = None) -> None:
    """A submitted request answered (``logprobs``: JSON, when the line carried them). Does not commit."""
    store.conn.execute("UPDATE batch_requests SET status = 'done', response = ?, prompt_tokens = ?,"
                       " completion_tokens = ?, cost = ?, logprobs = ?, updated_at = ? WHERE id = ? AND "
                       "status = 'submitted'",
                       (text, prompt_tokens, completion_tokens, cost, logprobs, now(), request_id))


def file_error(store: Store, request_id: int, error: str) -> None:
    """A submitted request failed. Does not commit."""
    store.conn.execute("UPDATE batch_requests SET status = 'failed', error = ?, updated_at = ? WHERE id = ?"
                       " AND status = 'submitted'", (error, now(), request_id))


def requeue_failed(store: Store, to: str) -> int:
    """Failed requests to ``to`` ('pending' or 'online'); returns how many. Commits."""
    cur = store.conn.execute("UPDATE batch_requests SET status = ?, batch_id = NULL, error = "
                             "NULL, updated_at = ? WHERE status = 'failed'", (to, now()))
    store.commit()
    return cur.rowcount


def request_counts(store: Store) -> dict[str, int]:
    """Requests per status."""
    return {r[0]: r[1]
            for r in store.conn.execute("SELECT status, count(*) FROM batch_requests GROUP BY status")}


def collected_not_used(store: Store) -> tuple[int, float]:
    """Answers collected and not yet taken by a stage: how many, and what they cost."""
    n, cost = store.conn.execute("SELECT count(*), sum(cost) FROM batch_requests "
                                 "WHERE status = 'done'").fetchone()
    return int(n), cost or 0.0


# -- batches -----------------------------------------------------------------------------------


def batch_endpoint(store: Store, batch_id: str) -> str:
    return store.conn.execute("SELECT endpoint FROM batches WHERE id = ?", (batch_id,)).fetchone()[0]


def update_batch(store: Store, batch_id: str, **values: Any) -> None:
    """Set columns of a batch (and its ``updated_at``). Commits."""
    values["updated_at"] = now()
    cols = ", ".join(f"{k} = ?" for k in values)
    store.conn.execute(f"UPDATE batches SET {cols} WHERE id = ?", [*values.values(), batch_id])
    store.commit()


def _batches(store: Store, where: str, params: tuple[Any, ...] = ()) -> list[BatchRow]:
    return [BatchRow(*r) for r in store.conn.execute(f"SELECT {_BATCH_COLUMNS} FROM batches {where}", params)]


def preparing_batches(store: Store, kind: str) -> list[BatchRow]:
    """Batches of ``kind`` still 'preparing': claimed, not yet sent or written."""
    return _batches(store, "WHERE kind = ? AND state = 'preparing'", (kind,))


def open_provider_batches(store: Store) -> list[BatchRow]:
    """Provider batches sent and not yet collected, oldest first."""
    return _batches(store, "WHERE kind = 'provider' AND collected_at IS NULL AND remote_id IS NOT NULL"
                           " ORDER BY created_at")


def open_export_ids(store: Store) -> list[str]:
    return [r[0]
            for r in store.conn.execute("SELECT id FROM batches WHERE kind = 'export' AND "
                                        "collected_at IS NULL")]


def batch_listing(store: Store) -> list[dict[str, Any]]:
    """Every batch, oldest first, with what ``batch status`` shows of it."""
    return store.query("SELECT id, kind, endpoint, remote_id, state, requests, completed, "
                       "failed, path, created_at, collected_at, error FROM batches ORDER BY created_at")


def close_batch(store: Store, batch_id: str, why: str) -> int:
    """A finished batch's requests still submitted (no line came for them) are failed with ``why``;
    the batch is collected. Returns how many failed. Commits."""
    t = now()
    cur = store.conn.execute("UPDATE batch_requests SET status = 'failed', error = ?, updated_at = "
                             "? WHERE batch_id = ? AND status = 'submitted'", (why, t, batch_id))
    store.conn.execute("UPDATE batches SET collected_at = ?, updated_at = ? WHERE id = ?", (t, t, batch_id))
    store.commit()
    return cur.rowcount


def complete_filed_exports(store: Store) -> None:
    """Exported batches none of whose requests is still submitted are completed and collected. Commits."""
    t = now()
    store.conn.execute(
        "UPDATE batches SET state = 'completed', collected_at = ?, updated_at = ? WHERE kind = 'export'"
        " AND collected_at IS NULL AND NOT EXISTS (SELECT 1 FROM batch_requests r WHERE "
        "r.batch_id = batches.id AND r.status = 'submitted')", (t, t))
    store.commit()
