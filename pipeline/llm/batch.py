"""Batch mode: a stage's calls through a provider's Batch API, or vLLM's offline ``run_batch``.

A stage run with ``--batch`` gets a client in batch mode (pipeline.llm.client): a call with no answer
yet is not sent but recorded in ``batch_requests`` (one row per cache key, so nothing is asked
twice), and the unit waits. Then:

- ``submit_pending`` writes the pending requests as OpenAI batch JSONL (``custom_id``,
  ``method``, ``url``, ``body``), split at ``MAX_REQUESTS`` requests or ``MAX_BYTES`` bytes a file,
  uploads each file (``POST /v1/files``, purpose ``batch``) and creates a batch
  (``POST /v1/batches``). Each batch is recorded in ``batches`` before it is sent, with a local id
  also sent as the batch's metadata: a process killed between creating the batch and recording
  its id finds it again by that id (``GET /v1/batches``) instead of submitting it twice.
- ``collect`` asks each open batch's state; a finished one (completed, expired, cancelled,
  failed) has its output and error files downloaded and every line filed against its request:
  an answer (``done``, priced as batch) or an error (``failed``). Lines are filed under their
  request's status, so a collect killed half way and run again files each line once.
- The stage run again (with or without ``--batch``) takes each answer through the same
  path as an online reply: its contract is checked, an accepted reply is cached
  (``llm_calls.via = 'batch'``), a refused one goes to the repair round. So stages never know
  which mode served them.
- Failed or expired items wait for the user: ``rebatch`` queues them for the next batch,
  ``online`` lets the stage's next run send them online.

``export`` / ``ingest`` are the same files for vLLM's offline runner
(``python -m vllm.entrypoints.openai.run_batch -i in.jsonl -o out.jsonl --model M``): no server
to keep up; its output lines have the OpenAI batch output shape.

A ``custom_id`` is ``<request id>-<first 12 hex of its cache key>``: a line from another store's
file, or an edited file, never lands on the wrong request.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.config import Config, Endpoint
from pipeline.core.errors import ConfigError, EndpointError, StageError
from pipeline.store.database import Store, now

MAX_REQUESTS = 50_000  # the OpenAI Batch API's limits per input file
MAX_BYTES = 200 * 1024 * 1024
URL = "/v1/chat/completions"
OPEN_STATES = ("preparing", "validating", "in_progress", "finalizing", "cancelling")
FINISHED_STATES = ("completed", "failed", "expired", "cancelled")
EventHook = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


# -- the JSONL -------------------------------------------------------------------------------


def custom_id(request_id: int, key: str) -> str:
    return f"{request_id}-{key[:12]}"


def request_line(request_id: int, key: str, ep: Endpoint, request_json: str) -> str:
    """One batch input line: the same body the online client sends (pipeline.llm.client._attempt)."""
    req = json.loads(request_json)
    body = {"model": ep.model, "messages": req["messages"], **req.get("params", {}), **ep.extra_body}
    return json.dumps({"custom_id": custom_id(request_id, key), "method": "POST", "url": URL, "body": body},
                      ensure_ascii=False)


def chunks(lines: Iterable[tuple[int, str]], max_requests: int, max_bytes: int) -> Iterator[list[tuple[int, str]]]:
    """(request id, line) split so no file holds more than ``max_requests`` lines or ``max_bytes``."""
    chunk: list[tuple[int, str]] = []
    size = 0
    for rid, line in lines:
        n = len(line.encode("utf-8")) + 1
        if n > max_bytes:
            raise StageError(f"batch request {rid} alone is {n:,} bytes, over the {max_bytes:,}-byte limit of a batch file")
        if chunk and (len(chunk) >= max_requests or size + n > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append((rid, line))
        size += n
    if chunk:
        yield chunk


# -- submitting ------------------------------------------------------------------------------


@dataclass
class Submitted:
    batch_id: str
    endpoint: str
    remote_id: str | None
    requests: int
    bytes: int
    recovered: bool = False  # found again after a kill, not created now


def _batchable(config: Config, name: str) -> Endpoint:
    ep = config.endpoint(name)
    if ep.is_local:
        raise ConfigError(f"endpoint '{name}': the embedded local model has no batch API; run the stage online, "
                          "or use `unspecific batch export` for vLLM")
    if ep.batch == "files":
        raise ConfigError(f"endpoint '{name}' has batch = \"files\": its calls wait for `unspecific batch export`")
    if ep.is_pool:
        raise ConfigError(f"endpoint '{name}' is a pool; a provider's batch API belongs to one endpoint: point the "
                          "role at one member for --batch, or use `unspecific batch export` for vLLM")
    return ep


def _has_api(ep: Endpoint) -> bool:
    return not (ep.is_local or ep.is_pool or ep.batch == "files")


def _client(ep: Endpoint) -> Any:
    import openai

    return openai.AsyncOpenAI(base_url=ep.base_url, api_key=ep.api_key(), max_retries=3, timeout=ep.timeout_s)


def pending_endpoints(store: Store) -> list[str]:
    return [r[0] for r in store.conn.execute(
        "SELECT DISTINCT endpoint FROM batch_requests WHERE status = 'pending' ORDER BY endpoint")]


def _claim(store: Store, endpoint: str, kind: str, max_requests: int, max_bytes: int, config: Config,
           path: str | None = None) -> tuple[str, list[tuple[int, str]]] | None:
    """Take up to one file's worth of pending requests of ``endpoint`` for a new batch, in one
    write transaction: two processes never claim the same request."""
    ep = config.endpoint(endpoint)
    conn = store.conn
    if conn.in_transaction:
        conn.commit()
    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = conn.execute("SELECT id, cache_key, request FROM batch_requests WHERE status = 'pending'"
                            " AND endpoint = ? ORDER BY id LIMIT ?", (endpoint, max_requests)).fetchall()
        if not rows:
            conn.execute("ROLLBACK")
            return None
        first = next(chunks(((rid, request_line(rid, key, ep, req)) for rid, key, req in rows), max_requests, max_bytes))
        batch_id = f"ub-{uuid.uuid4().hex[:16]}"
        t = now()
        conn.execute(
            "INSERT INTO batches (id, kind, endpoint, state, requests, completed, failed, pid, host, path, created_at,"
            " updated_at) VALUES (?, ?, ?, 'preparing', ?, 0, 0, ?, ?, ?, ?, ?)",
            (batch_id, kind, endpoint, len(first), os.getpid(), socket.gethostname(), path, t, t))
        conn.executemany("UPDATE batch_requests SET status = 'submitted', batch_id = ?, updated_at = ? WHERE id = ?",
                         [(batch_id, t, rid) for rid, _ in first])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return batch_id, first


def _lines_of(store: Store, config: Config, batch_id: str) -> list[tuple[int, str]]:
    row = store.one("SELECT endpoint FROM batches WHERE id = ?", [batch_id])
    ep = config.endpoint(row["endpoint"])
    return [(rid, request_line(rid, key, ep, req)) for rid, key, req in store.conn.execute(
        "SELECT id, cache_key, request FROM batch_requests WHERE batch_id = ? ORDER BY id", (batch_id,))]


def _set(store: Store, batch_id: str, **values: Any) -> None:
    values["updated_at"] = now()
    cols = ", ".join(f"{k} = ?" for k in values)
    store.conn.execute(f"UPDATE batches SET {cols} WHERE id = ?", [*values.values(), batch_id])
    store.commit()


async def _send_batch(store: Store, ep: Endpoint, batch_id: str, lines: list[tuple[int, str]],
                      row: dict[str, Any]) -> Submitted:
    """Upload (unless done before a kill), then find or create the batch."""
    data = ("\n".join(line for _, line in lines) + "\n").encode("utf-8")
    client = _client(ep)
    recovered = False
    try:
        file_id = row.get("input_file_id")
        if not file_id:
            uploaded = await client.files.create(file=(f"{batch_id}.jsonl", data), purpose="batch")
            file_id = uploaded.id
            _set(store, batch_id, input_file_id=file_id)
        remote = None
        if row.get("input_file_id"):  # we got this far before: the batch may exist already
            remote = await _find_remote(client, batch_id)
            recovered = remote is not None
        if remote is None:
            remote = await client.batches.create(input_file_id=file_id, endpoint=URL, completion_window="24h",
                                                 metadata={"unspecific_batch": batch_id})
        _set(store, batch_id, remote_id=remote.id, state=remote.status)
    finally:
        await client.close()
    return Submitted(batch_id, ep.name, remote.id, len(lines), len(data), recovered)


async def _find_remote(client: Any, batch_id: str) -> Any:
    async for b in client.batches.list(limit=100):
        if (b.metadata or {}).get("unspecific_batch") == batch_id:
            return b
    return None


def _orphans(store: Store, kind: str = "provider") -> list[dict[str, Any]]:
    """Batches left in 'preparing' by a process that is gone (killed between claiming its
    requests and recording the remote batch, or writing the export file)."""
    from pipeline.store.database import _alive

    host = socket.gethostname()
    rows = store.query("SELECT * FROM batches WHERE kind = ? AND state = 'preparing'", [kind])
    # pid NULL: its own process gave up on sending it (an error); the next submit finishes it.
    return [r for r in rows if r["host"] == host and (r["pid"] is None or not _alive(int(r["pid"])))]


async def submit_pending(store: Store, config: Config, *, endpoints: Iterable[str] | None = None,
                         max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES,
                         on_event: EventHook = _quiet) -> list[Submitted]:
    """Send every pending request as provider batches; first finish any batch a killed process
    left half-sent. Returns what was sent."""
    out = []
    for row in _orphans(store):
        ep = _batchable(config, row["endpoint"])
        on_event(f"batch {row['id']}: left half-sent by process {row['pid']}; finishing it")
        _set(store, row["id"], pid=os.getpid())
        out.append(await _send_batch(store, ep, row["id"], _lines_of(store, config, row["id"]), row))
    names = list(endpoints) if endpoints is not None else pending_endpoints(store)
    for name in names:
        ep = _batchable(config, name)
        while True:
            claimed = _claim(store, name, "provider", max_requests, max_bytes, config)
            if claimed is None:
                break
            batch_id, lines = claimed
            try:
                sent = await _send_batch(store, ep, batch_id, lines, {})
            except Exception as exc:
                # Nothing reached the provider, or we cannot tell: the batch stays 'preparing' with
                # its error; the next submit finds it again (by its metadata) before creating one.
                from pipeline.core.redact import redact

                _set(store, batch_id, error=redact(str(exc)), pid=None)
                raise EndpointError(f"endpoint '{name}': submitting batch {batch_id} failed ({exc}); run "
                                    "`unspecific batch submit` again: it is found or sent then, never twice") from None
            on_event(f"batch {batch_id}: {sent.requests} requests ({sent.bytes:,} bytes) sent to {name} as {sent.remote_id}")
            out.append(sent)
    return out


async def submit_stage(store: Store, config: Config, on_event: Callable[[str, str], None] | None = None) -> list[Submitted]:
    """What a stage run with --batch does at its end: send the pending requests of every endpoint
    with a batch API. The others (the local model, pools, ``batch = "files"``) wait for
    `unspecific batch export`."""
    names = [n for n in pending_endpoints(store) if _has_api(config.endpoint(n))]
    return await submit_pending(store, config, endpoints=names,
                                on_event=lambda m: on_event("batch", m) if on_event else None)


# -- collecting -------------------------------------------------------------------------------


@dataclass
class Ingested:
    done: int = 0
    failed: int = 0
    duplicates: int = 0  # a second line for a request already filed
    malformed: int = 0  # not JSON, or no custom_id
    unknown: int = 0  # a custom_id of no request in that batch (another store's file, an edited line)
    missing: int = 0  # requests of a finished batch with no line at all (marked failed)

    def add(self, other: Ingested) -> None:
        for k in self.__dataclass_fields__:
            setattr(self, k, getattr(self, k) + getattr(other, k))


@dataclass
class Collected:
    batches: dict[str, str] = field(default_factory=dict)  # batch id -> state now
    ingested: Ingested = field(default_factory=Ingested)
    rebatched: int = 0
    online: int = 0
    seconds: float = 0.0


def ingest_lines(store: Store, config: Config, lines: Iterable[str], batch_id: str | None = None,
                 commit_every: int = 2000) -> Ingested:
    """File output/error lines against their requests. Only a request still 'submitted' takes a
    line, so a line seen twice (a duplicate, or a collect run again after a kill) counts once."""
    from pipeline.core.redact import redact

    result = Ingested()
    conn = store.conn
    pending = 0
    eps: dict[str, Endpoint] = {}
    for raw in lines:
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
            cid = str(item["custom_id"])
            rid_text, prefix = cid.split("-", 1)
            rid = int(rid_text)
        except (ValueError, KeyError, TypeError):
            result.malformed += 1
            continue
        row = conn.execute("SELECT cache_key, endpoint, status, batch_id FROM batch_requests WHERE id = ?",
                           (rid,)).fetchone()
        if row is None or not row[0].startswith(prefix) or (batch_id is not None and row[3] != batch_id):
            result.unknown += 1
            continue
        if row[2] != "submitted":
            result.duplicates += 1
            continue
        ep = eps.get(row[1]) or eps.setdefault(row[1], config.endpoint(row[1]))
        text, pt, ct, error = _answer(item)
        t = now()
        if error is None:
            # Held until a stage takes it (and for good if refused): a reply echoing a key never
            # sits in the store with it (pipeline.core.redact), as no refused online reply is stored.
            text = redact(text) or text
            conn.execute("UPDATE batch_requests SET status = 'done', response = ?, prompt_tokens = ?,"
                         " completion_tokens = ?, cost = ?, updated_at = ? WHERE id = ? AND status = 'submitted'",
                         (text, pt, ct, ep.batch_cost(pt, ct), t, rid))
            result.done += 1
        else:
            conn.execute("UPDATE batch_requests SET status = 'failed', error = ?, updated_at = ? WHERE id = ?"
                         " AND status = 'submitted'", (redact(error) or error, t, rid))
            result.failed += 1
        pending += 1
        if pending >= commit_every:
            store.commit()
            pending = 0
    store.commit()
    return result


def _answer(item: dict[str, Any]) -> tuple[str, int, int, str | None]:
    """(text, prompt tokens, completion tokens, error or None) of one output line. An empty reply
    is an error, as online: it is never cached."""
    if item.get("error"):
        err = item["error"]
        return "", 0, 0, f"{err.get('code', 'error')}: {err.get('message', '')}" if isinstance(err, dict) else str(err)
    response = item.get("response") or {}
    status = response.get("status_code")
    body = response.get("body") or {}
    if status != 200:
        message = (body.get("error") or {}).get("message", "") if isinstance(body, dict) else str(body)
        return "", 0, 0, f"HTTP {status}: {message}"[:500]
    try:
        text = body["choices"][0]["message"]["content"] or ""
    except (KeyError, IndexError, TypeError):
        return "", 0, 0, "reply without choices"
    if not isinstance(text, str) or not text.strip():
        return "", 0, 0, "empty reply"
    usage = body.get("usage") or {}
    return text, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0), None


async def _download(client: Any, file_id: str) -> list[str]:
    content = await client.files.content(file_id)
    return content.text.splitlines()


async def collect(store: Store, config: Config, *, failed: str = "keep", max_requests: int = MAX_REQUESTS,
                  max_bytes: int = MAX_BYTES, on_event: EventHook = _quiet) -> Collected:
    """Refresh every open provider batch; download and file the results of finished ones. Then
    ``failed``: 'keep' (leave failed items for a later choice), 'rebatch' (queue and submit them
    again), or 'online' (the stage's next run sends them online)."""
    if failed not in ("keep", "rebatch", "online"):
        raise StageError(f"--failed: one of keep, rebatch, online; got {failed!r}")
    started = time.perf_counter()
    out = Collected()
    rows = store.query("SELECT * FROM batches WHERE kind = 'provider' AND collected_at IS NULL"
                       " AND remote_id IS NOT NULL ORDER BY created_at")
    for row in rows:
        ep = config.endpoint(row["endpoint"])
        client = _client(ep)
        try:
            remote = await client.batches.retrieve(row["remote_id"])
            counts = remote.request_counts
            _set(store, row["id"], state=remote.status, output_file_id=remote.output_file_id,
                 error_file_id=remote.error_file_id, completed=counts.completed if counts else None,
                 failed=counts.failed if counts else None)
            out.batches[row["id"]] = remote.status
            if remote.status not in FINISHED_STATES:
                continue
            for file_id in (remote.output_file_id, remote.error_file_id):
                if file_id:
                    out.ingested.add(ingest_lines(store, config, await _download(client, file_id), row["id"]))
        finally:
            await client.close()
        errors = remote.errors.data if getattr(remote, "errors", None) and remote.errors.data else []
        why = "; ".join(f"{e.code}: {e.message}" for e in errors) if errors else f"no result (batch {remote.status})"
        out.ingested.missing += _close_batch(store, row["id"], why)
        on_event(f"batch {row['id']} ({remote.status}) collected")
    if failed == "rebatch":
        out.rebatched = requeue_failed(store, "pending")
        if out.rebatched:
            await submit_pending(store, config, max_requests=max_requests, max_bytes=max_bytes, on_event=on_event)
    elif failed == "online":
        out.online = requeue_failed(store, "online")
    out.seconds = time.perf_counter() - started
    return out


def _close_batch(store: Store, batch_id: str, why: str) -> int:
    """A finished batch's requests that got no line are failed; the batch is collected."""
    t = now()
    cur = store.conn.execute("UPDATE batch_requests SET status = 'failed', error = ?, updated_at = ? WHERE batch_id = ?"
                             " AND status = 'submitted'", (why[:500], t, batch_id))
    store.conn.execute("UPDATE batches SET collected_at = ?, updated_at = ? WHERE id = ?", (t, t, batch_id))
    store.commit()
    return cur.rowcount


def requeue_failed(store: Store, to: str) -> int:
    """Failed items to 'pending' (the next batch takes them) or 'online' (the stage's next run
    sends them online)."""
    cur = store.conn.execute("UPDATE batch_requests SET status = ?, batch_id = NULL, error = NULL, updated_at = ?"
                             " WHERE status = 'failed'", (to, now()))
    store.commit()
    return cur.rowcount


# -- vLLM's offline runner ---------------------------------------------------------------------


def export(store: Store, config: Config, out_dir: str | Path, *, endpoints: Iterable[str] | None = None,
           max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES) -> list[tuple[Path, int]]:
    """Write the pending requests as JSONL input files for ``vllm.entrypoints.openai.run_batch``
    (one per endpoint and chunk); they are marked submitted, so a second export writes only what
    is new. Returns (path, requests) per file."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []

    def write(batch_id: str, name: str, lines: list[tuple[int, str]]) -> None:
        path = out / f"{_safe(name)}-{batch_id}.jsonl"
        tmp = path.with_suffix(".part")
        tmp.write_text("\n".join(line for _, line in lines) + "\n", encoding="utf-8")
        tmp.replace(path)  # whole or absent: run_batch never reads half a file
        _set(store, batch_id, state="exported", path=str(path))
        written.append((path, len(lines)))

    # An export killed between claiming its requests and writing the file: written now.
    for row in _orphans(store, "export"):
        write(row["id"], row["endpoint"], _lines_of(store, config, row["id"]))
    for name in (list(endpoints) if endpoints is not None else pending_endpoints(store)):
        config.endpoint(name)
        while True:
            claimed = _claim(store, name, "export", max_requests, max_bytes, config)
            if claimed is None:
                break
            write(claimed[0], name, claimed[1])
    return written


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def ingest(store: Store, config: Config, paths: Iterable[str | Path]) -> Ingested:
    """Read vLLM run_batch output files back. An exported batch every request of which is filed
    is marked collected; its requests missing from the output stay submitted until
    ``close_exported`` (the run may still be writing)."""
    result = Ingested()
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise StageError(f"{path}: no such output file")
        with path.open(encoding="utf-8") as f:
            result.add(ingest_lines(store, config, f))
    t = now()
    store.conn.execute(
        "UPDATE batches SET state = 'completed', collected_at = ?, updated_at = ? WHERE kind = 'export'"
        " AND collected_at IS NULL AND NOT EXISTS (SELECT 1 FROM batch_requests r WHERE r.batch_id = batches.id"
        " AND r.status = 'submitted')", (t, t))
    store.commit()
    return result


def close_exported(store: Store, batch_ids: Iterable[str] | None = None) -> int:
    """Exported batches given up on: their requests with no result are failed (then
    ``requeue_failed`` or collect --failed chooses)."""
    ids = list(batch_ids) if batch_ids is not None else [
        r[0] for r in store.conn.execute("SELECT id FROM batches WHERE kind = 'export' AND collected_at IS NULL")]
    return sum(_close_batch(store, b, "no result in the ingested run_batch output") for b in ids)


# -- status -----------------------------------------------------------------------------------


async def refresh(store: Store, config: Config) -> None:
    """Ask the provider for the state and counts of every open batch."""
    for row in store.query("SELECT * FROM batches WHERE kind = 'provider' AND collected_at IS NULL"
                           " AND remote_id IS NOT NULL"):
        client = _client(config.endpoint(row["endpoint"]))
        try:
            remote = await client.batches.retrieve(row["remote_id"])
        finally:
            await client.close()
        counts = remote.request_counts
        _set(store, row["id"], state=remote.status, completed=counts.completed if counts else None,
             failed=counts.failed if counts else None)


def status(store: Store) -> dict[str, Any]:
    """Every batch with its state and counts; requests per status; what was paid online and in
    batch (the cache's calls, by how they were paid)."""
    batches = store.query("SELECT id, kind, endpoint, remote_id, state, requests, completed, failed, path, created_at,"
                          " collected_at, error FROM batches ORDER BY created_at")
    requests = {r["status"]: r["n"] for r in store.query(
        "SELECT status, count(*) AS n FROM batch_requests GROUP BY status")}
    # Collected answers not yet taken by a stage are paid too: the provider charged for them.
    waiting = store.one("SELECT count(*) AS n, sum(cost) AS cost FROM batch_requests WHERE status = 'done'")
    return {"batches": batches, "requests": requests, "paid": paid(store),
            "collected_not_used": {"calls": waiting["n"], "cost": waiting["cost"] or 0.0}}


def paid(store: Store) -> dict[str, dict[str, Any]]:
    """What the calls in the cache cost, by how they were paid ('online', 'batch'): calls,
    tokens, cost. Calls cached before batch mode existed were online."""
    return {r["via"]: {"calls": r["n"], "cost": r["cost"] or 0.0, "prompt_tokens": r["pt"] or 0,
                       "completion_tokens": r["ct"] or 0}
            for r in store.query("SELECT coalesce(via, 'online') AS via, count(*) AS n, sum(cost) AS cost,"
                                 " sum(prompt_tokens) AS pt, sum(completion_tokens) AS ct FROM llm_calls GROUP BY 1")}
