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
from typing import TYPE_CHECKING, Any

from pipeline.core.config import Config, Endpoint
from pipeline.core.errors import ConfigError, EndpointError, StageError
from pipeline.llm.call import Completion, decode_logprobs, encode_logprobs, reply_logprobs, stored_request
from pipeline.store import batches as batch_table
from pipeline.store.batches import DeferredCall, QueuedRequest
from pipeline.store.database import Store, now
from pipeline.store.llm_calls import paid_by_via

if TYPE_CHECKING:
    from pipeline.llm.prompts import Template

MAX_REQUESTS = 50_000  # the OpenAI Batch API's limits per input file
MAX_BYTES = 200 * 1024 * 1024
URL = "/v1/chat/completions"
FINISHED_STATES = ("completed", "failed", "expired", "cancelled")
EventHook = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


# -- the client's side: calls deferred, answers collected ------------------------------------


class DeferredCalls:
    """Calls a client in batch mode left to a batch, held and written to ``batch_requests`` in
    bulk (one insert for many calls, not one commit a call)."""

    FLUSH_AT = 1000

    def __init__(self) -> None:
        self._calls: dict[str, DeferredCall] = {}  # cache key -> its pending request

    def add(self, key: str, ep: Endpoint, template: Template | None, messages: list[dict[str, str]],
            params: dict[str, Any], run_id: str | None) -> bool:
        """Hold a call; True when enough are held to write them now."""
        # Redacted: a repair round quotes the refused reply, which may echo a key; the batch then
        # sends the redacted text (the cache key was computed from the original).
        self._calls[key] = DeferredCall(key, ep.name, template.name if template else None,
                                        template.hash if template else None, stored_request(messages, params),
                                        run_id, now())
        return len(self._calls) >= self.FLUSH_AT

    def flush(self, store: Store) -> int:
        """Write the held calls as pending and commit; returns how many. A call already there
        (another process deferred it) is left alone: nothing waiting or failed is queued twice."""
        calls = list(self._calls.values())
        self._calls.clear()
        if not calls:
            return 0
        batch_table.queue_requests(store, calls)
        store.commit()
        return len(calls)


def collected_answer(store: Store, key: str, ep: Endpoint) -> tuple[Completion | None, str | None]:
    """A collected batch result for this call (as a fresh answer, priced as batch), and the
    status of its batch request when there is one."""
    request = batch_table.request_for_key(store, key)
    if request is None:
        return None, None
    if request.status != "done" or not request.response.strip():
        return None, request.status
    return Completion(request.response, request.prompt_tokens, request.completion_tokens,
                      request.cost, False, None,
                      0.0, ep.name, via="batch", logprobs=decode_logprobs(request.logprobs)), "done"


def answered_online(store: Store, key: str) -> None:
    """A failed batch item the user sent online is answered now: its request goes."""
    batch_table.delete_request(store, key)
    store.commit()


# -- the JSONL -------------------------------------------------------------------------------


def custom_id(request_id: int, key: str) -> str:
    return f"{request_id}-{key[:12]}"


def request_line(request_id: int, key: str, ep: Endpoint, request_json: str) -> str:
    """One batch input line: the same body the online client sends (pipeline.llm.transport)."""
    req = json.loads(request_json)
    body = {"model": ep.model, "messages": req["messages"], **req.get("params", {}), **ep.extra_body}
    return json.dumps({"custom_id": custom_id(request_id, key), "method": "POST", "url": URL, "body": body},
                      ensure_ascii=False)


def chunks(lines: Iterable[tuple[int, str]], max_requests: int,
           max_bytes: int) -> Iterator[list[tuple[int, str]]]:
    """(request id, line) split so no file holds more than ``max_requests`` lines or ``max_bytes``."""
    chunk: list[tuple[int, str]] = []
    size = 0
    for rid, line in lines:
        n = len(line.encode("utf-8")) + 1
        if n > max_bytes:
            raise StageError(f"batch request {rid} alone is {n:,} bytes, over the {max_bytes:,}-byte "
                             "limit of a batch file")
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
        raise ConfigError(f"endpoint '{name}': the embedded local model has no batch API; "
                          "run the stage online, or use `unspecific batch export` for vLLM")
    if ep.batch == "files":
        raise ConfigError(f"endpoint '{name}' has batch = \"files\": its calls wait for "
                          "`unspecific batch export`")
    if ep.is_pool:
        raise ConfigError(f"endpoint '{name}' is a pool; a provider's batch API belongs to one "
                          "endpoint: point the "
                          "role at one member for --batch, or use `unspecific batch export` for vLLM")
    return ep


def _has_api(ep: Endpoint) -> bool:
    return not (ep.is_local or ep.is_pool or ep.batch == "files")


def _client(ep: Endpoint) -> Any:
    import openai

    return openai.AsyncOpenAI(base_url=ep.base_url, api_key=ep.api_key(), max_retries=3, timeout=ep.timeout_s)


def pending_endpoints(store: Store) -> list[str]:
    return batch_table.pending_endpoints(store)


def _lines(ep: Endpoint, requests: list[QueuedRequest]) -> Iterator[tuple[int, str]]:
    return ((r.id, request_line(r.id, r.cache_key, ep, r.request)) for r in requests)


def _claim(store: Store, endpoint: str, kind: str, max_requests: int, max_bytes: int, config: Config,
           path: str | None = None) -> tuple[str, list[tuple[int, str]]] | None:
    """Take up to one file's worth of pending requests of ``endpoint`` for a new batch, in one
    write transaction: two processes never claim the same request."""
    ep = config.endpoint(endpoint)
    batch_id = f"ub-{uuid.uuid4().hex[:16]}"
    first = batch_table.claim_pending(store, endpoint, max_requests, batch_id, kind, pid=os.getpid(),
                               host=socket.gethostname(), path=path,
                               first_file=lambda queued: next(chunks(_lines(ep, queued),
                                                                     max_requests, max_bytes)))
    return (batch_id, first) if first is not None else None


def _lines_of(store: Store, config: Config, batch_id: str) -> list[tuple[int, str]]:
    ep = config.endpoint(batch_table.batch_endpoint(store, batch_id))
    return list(_lines(ep, batch_table.requests_of_batch(store, batch_id)))


def _set(store: Store, batch_id: str, **values: Any) -> None:
    batch_table.update_batch(store, batch_id, **values)


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


def _orphans(store: Store, kind: str = "provider") -> list[batch_table.BatchRow]:
    """Batches left in 'preparing' by a process that is gone (killed between claiming its
    requests and recording the remote batch, or writing the export file)."""
    from pipeline.core.processes import process_alive

    host = socket.gethostname()
    # pid NULL: its own process gave up on sending it (an error); the next submit finishes it.
    return [r for r in batch_table.preparing_batches(store, kind)
            if r.host == host and (r.pid is None or not process_alive(int(r.pid)))]


async def submit_pending(store: Store, config: Config, *, endpoints: Iterable[str] | None = None,
                         max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES,
                         on_event: EventHook = _quiet) -> list[Submitted]:
    """Send every pending request as provider batches; first finish any batch a killed process
    left half-sent. Returns what was sent."""
    out = []
    for orphan in _orphans(store):
        ep = _batchable(config, orphan.endpoint)
        on_event(f"batch {orphan.id}: left half-sent by process {orphan.pid}; finishing it")
        _set(store, orphan.id, pid=os.getpid())
        out.append(await _send_batch(store, ep, orphan.id, _lines_of(store, config, orphan.id),
                                     {"input_file_id": orphan.input_file_id}))
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
                                    "`unspecific batch submit` again: it is found or "
                                    "sent then, never twice") from None
            on_event(f"batch {batch_id}: {sent.requests} requests ({sent.bytes:,} bytes) sent to "
                     f"{name} as {sent.remote_id}")
            out.append(sent)
    return out


async def submit_stage(store: Store, config: Config, on_event: Callable[[str, str], None]
                       | None = None) -> list[Submitted]:
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
        request = batch_table.request_by_id(store, rid)
        if request is None or not request.cache_key.startswith(prefix) or (
                batch_id is not None and request.batch_id != batch_id):
            result.unknown += 1
            continue
        if request.status != "submitted":
            result.duplicates += 1
            continue
        ep = eps.get(request.endpoint) or eps.setdefault(request.endpoint, config.endpoint(request.endpoint))
        text, pt, ct, error = _answer(item)
        if error is None:
            # Held until a stage takes it (and for good if refused): a reply echoing a key never
            # sits in the store with it (pipeline.core.redact), as no refused online reply is stored.
            batch_table.file_answer(store, rid, redact(text) or text, pt, ct, ep.batch_cost(pt, ct),
                                    encode_logprobs(_line_logprobs(item)))
            result.done += 1
        else:
            batch_table.file_error(store, rid, redact(error) or error)
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
        return ("", 0, 0, f"{err.get('code', 'error')}: {err.get('message', '')}"
                if isinstance(err, dict) else str(err))
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


def _line_logprobs(item: dict[str, Any]) -> list[dict[str, float]] | None:
    """The reply's top log-probabilities in a batch output line, as online (reply_logprobs)."""
    try:
        return reply_logprobs(item["response"]["body"]["choices"][0])
    except (KeyError, IndexError, TypeError):
        return None


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
    for row in batch_table.open_provider_batches(store):
        ep = config.endpoint(row.endpoint)
        client = _client(ep)
        try:
            remote = await client.batches.retrieve(row.remote_id)
            counts = remote.request_counts
            _set(store, row.id, state=remote.status, output_file_id=remote.output_file_id,
                 error_file_id=remote.error_file_id, completed=counts.completed if counts else None,
                 failed=counts.failed if counts else None)
            out.batches[row.id] = remote.status
            if remote.status not in FINISHED_STATES:
                continue
            for file_id in (remote.output_file_id, remote.error_file_id):
                if file_id:
                    out.ingested.add(ingest_lines(store, config, await _download(client, file_id), row.id))
        finally:
            await client.close()
        errors = remote.errors.data if getattr(remote, "errors", None) and remote.errors.data else []
        why = "; ".join(f"{e.code}: {e.message}"
                        for e in errors) if errors else f"no result (batch {remote.status})"
        out.ingested.missing += _close_batch(store, row.id, why)
        on_event(f"batch {row.id} ({remote.status}) collected")
    if failed == "rebatch":
        out.rebatched = requeue_failed(store, "pending")
        if out.rebatched:
            await submit_pending(store, config, max_requests=max_requests, max_bytes=max_bytes,
                                 on_event=on_event)
    elif failed == "online":
        out.online = requeue_failed(store, "online")
    out.seconds = time.perf_counter() - started
    return out


def _close_batch(store: Store, batch_id: str, why: str) -> int:
    """A finished batch's requests that got no line are failed; the batch is collected."""
    return batch_table.close_batch(store, batch_id, why[:500])


def requeue_failed(store: Store, to: str) -> int:
    """Failed items to 'pending' (the next batch takes them) or 'online' (the stage's next run
    sends them online)."""
    return batch_table.requeue_failed(store, to)


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
    for orphan in _orphans(store, "export"):
        write(orphan.id, orphan.endpoint, _lines_of(store, config, orphan.id))
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
    batch_table.complete_filed_exports(store)
    return result


def close_exported(store: Store, batch_ids: Iterable[str] | None = None) -> int:
    """Exported batches given up on: their requests with no result are failed (then
    ``requeue_failed`` or collect --failed chooses)."""
    ids = list(batch_ids) if batch_ids is not None else batch_table.open_export_ids(store)
    return sum(_close_batch(store, b, "no result in the ingested run_batch output") for b in ids)


# -- status -----------------------------------------------------------------------------------


async def refresh(store: Store, config: Config) -> None:
    """Ask the provider for the state and counts of every open batch."""
    for row in batch_table.open_provider_batches(store):
        client = _client(config.endpoint(row.endpoint))
        try:
            remote = await client.batches.retrieve(row.remote_id)
        finally:
            await client.close()
        counts = remote.request_counts
        _set(store, row.id, state=remote.status, completed=counts.completed if counts else None,
             failed=counts.failed if counts else None)


def status(store: Store) -> dict[str, Any]:
    """Every batch with its state and counts; requests per status; what was paid online and in
    batch (the cache's calls, by how they were paid)."""
    # Collected answers not yet taken by a stage are paid too: the provider charged for them.
    waiting, cost = batch_table.collected_not_used(store)
    return {"batches": batch_table.batch_listing(store), "requests": batch_table.request_counts(store),
            "paid": paid(store), "collected_not_used": {"calls": waiting, "cost": cost}}


def paid(store: Store) -> dict[str, dict[str, Any]]:
    """What the calls in the cache cost, by how they were paid ('online', 'batch'): calls,
    tokens, cost. Calls cached before batch mode existed were online."""
    return paid_by_via(store)
