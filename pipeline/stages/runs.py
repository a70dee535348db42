"""Runs: one record per build or evaluation, with its config (no secrets), status and cost.

And ``open_client``: the one way a stage gets an LLM client. When a role uses the embedded
local model and no server is running, it starts llama.cpp's server for the run and stops it
after.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.core.config import Config
from pipeline.llm.client import EventHook, LLMClient, Usage
from pipeline.store import runs
from pipeline.store.database import Store, now, open_store
from pipeline.store.imports import run_kind


def create_run(store: Store, kind: str, config: Config, *, name: str = "",
               options: dict[str, Any] | None = None,
               run_id: str | None = None) -> str:
    """Create (or reopen, when ``run_id`` exists) a run and mark it running, recording the
    process (pid, host) that runs it."""
    run_id = run_id or f"{kind}-{uuid.uuid4().hex[:8]}"
    cfg = json.dumps({"options": options or {}, "config": config.public_dict()}, default=str)
    # The process running it: a later command finding it gone marks the run interrupted.
    pid, host = os.getpid(), socket.gethostname()
    if runs.exists_run(store, run_id):
        runs.reopen_run(store, run_id, config=cfg, pid=pid, host=host)
    else:
        runs.insert_run(store, run_id=run_id, kind=kind, name=name or run_id, config=cfg,
                        started_at=now(), pid=pid,
                        host=host)
    store.commit()
    return run_id


def new_paused_run(store_path: str | Path, config: Config) -> str:
    """A new build run, paused, for the app's Build screen to fill stage by stage (on a store of
    its own: the app never opens one)."""
    store = open_store(store_path)
    try:
        run_id = create_run(store, "build", config)
        finish_run(store, run_id, status="paused")
    finally:
        store.close()
    return run_id


def add_usage(store: Store, run_id: str, usage: Usage) -> None:
    """Add a client's usage since the last call to the run's totals."""
    runs.add_run_usage(store, run_id, calls=usage.calls, cache_hits=usage.cache_hits,
                       prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                       cost=usage.cost,
                       batch_calls=usage.batch_calls, batch_cost=usage.batch_cost)
    store.commit()


def stored_options(store: Store, run_id: str, kind: str) -> dict[str, Any]:
    """The options a run of ``kind`` was started with ({} when unknown or unreadable)."""
    config = runs.run_config(store, run_id, kind)
    try:
        return json.loads(config).get("options") or {} if config is not None else {}
    except ValueError:
        return {}


def record_estimate(store: Store, run_id: str, estimate: dict[str, Any]) -> None:
    """Keep a dry run's estimate in the run's config (``estimate``), beside its options."""
    if not runs.exists_run(store, run_id):
        return
    try:
        cfg = json.loads(runs.run_config(store, run_id) or "{}")
    except ValueError:
        cfg = {}
    cfg["estimate"] = estimate
    runs.set_run_config(store, run_id, json.dumps(cfg, default=str))
    store.commit()


def estimated_runs(store: Store) -> list[dict[str, Any]]:
    """The runs made after a dry run: id, kind, the estimate (calls, cost, batch_cost) and what
    they spent (calls, cost), oldest first."""
    out = []
    for run in runs.runs_with_estimate(store):
        try:
            est = json.loads(run.config).get("estimate")
        except ValueError:
            continue
        if isinstance(est, dict):
            out.append({"id": run.id, "kind": run.kind, "estimate": est, "calls": run.calls,
                        "cost": run.cost})
    return out


def run_usage(store: Store, run_id: str) -> dict[str, Any] | None:
    """A run's accounting: calls, cache hits, prompt and completion tokens, cost (of which
    ``batch_cost`` paid at batch prices, for ``batch_calls`` calls)."""
    return runs.run_accounting(store, run_id)


def finish_run(store: Store, run_id: str, status: str = "done", error: str | None = None) -> None:
    from pipeline.core.redact import redact

    runs.end_run(store, run_id, status=status, finished_at=now(), error=redact(error))
    store.commit()


@dataclass
class RunEnd:
    """How a run ends: set ``status`` (and ``error``) inside ``recording``; left alone, a run
    that raised is failed, one interrupted is paused."""

    status: str = "failed"
    error: str | None = None


@contextmanager
def recording(store: Store, run_id: str) -> Iterator[RunEnd]:
    """The one run lifecycle: whatever happens inside, the run row ends with a status and the
    error (redacted) that ended it, so no run stays `running` after its work stopped."""
    end = RunEnd()
    try:
        yield end
    except (asyncio.CancelledError, KeyboardInterrupt):
        end.status = "paused"
        raise
    except Exception as exc:
        end.status, end.error = "failed", str(exc) or type(exc).__name__
        raise
    finally:
        finish_run(store, run_id, end.status, end.error)


@asynccontextmanager
async def open_client(
    config: Config, store: Store, *, run_id: str | None = None, on_event: EventHook | None = None,
    endpoints: list[str] | None = None, batch: bool = False, pricing: Any = None,
) -> AsyncIterator[LLMClient]:
    """An LLM client for a stage; starts the embedded server when a role needs it.

    ``endpoints``: the endpoint names the stage will call (default: every role's), so a stage
    that only needs a remote endpoint never starts the local server. ``batch``: calls nobody
    answered yet are left to a batch (pipeline.llm.batch) instead of sent."""
    import asyncio

    local_url = os.environ.get("UNSPECIFIC_LOCAL_URL")
    lease = None
    needs_local = config.uses_local if endpoints is None else any(config.endpoint(n).is_local
                                                                  for n in endpoints)
    # batch mode sends nothing: the local model has no batch API
    needs_local = needs_local and not batch and pricing is None
    if needs_local and local_url:
        _check_served(config, endpoints, local_url)
    if needs_local and not local_url:
        from pipeline.llm.local_model import acquire_server, served_models

        others = served_models(config, endpoints)
        if on_event:
            also = f", with {', '.join(m.alias for m in others)}" if others else ""
            on_event("local",
                     f"starting the embedded llama.cpp server{also} (first start assembles the model)")
        lease = await asyncio.to_thread(acquire_server, others=others)
        local_url = lease.base_url
    client = LLMClient(config, store, run_id=run_id, local_base_url=local_url, on_event=on_event,
                       local_death=lease.death if lease is not None else None, batch=batch, pricing=pricing)
    try:
        yield client
    finally:
        await client.aclose()
        if lease is not None:
            await asyncio.to_thread(lease.release)


def _check_served(config: Config, endpoints: list[str] | None, local_url: str) -> None:
    """A server named by UNSPECIFIC_LOCAL_URL must hold every further local model the run asks for:
    llama-cpp-python answers a model it does not know with its first one, which would store one
    model's replies under another's name."""
    from pipeline.core.errors import LocalModelError
    from pipeline.llm.local_model import served_models
    from pipeline.llm.server_health import served_aliases

    wanted = {m.alias for m in served_models(config, endpoints, resolve=False)}
    if not wanted:
        return
    have = served_aliases(local_url)
    missing = sorted(wanted - have) if have is not None else []
    if missing:
        raise LocalModelError(f"the local server at {local_url} (UNSPECIFIC_LOCAL_URL) does not serve "
                              f"{', '.join(missing)} (it serves "
                              f"{', '.join(sorted(have or ())) or 'nothing'}); "
                              "start it with every model the run needs, or unset UNSPECIFIC_LOCAL_URL")


def check_build_run(store: Store, run_id: str, *, new: bool) -> None:
    """`build --run NAME` resumes a stored build run: an unknown NAME is a typo, whatever else the
    command says, never a new run under that name; a new run is named on purpose (``new``:
    `--new-run NAME`), and then NAME must not be another kind of run."""
    from pipeline.core.errors import StageError

    kind = run_kind(store, run_id)
    flag = "--new-run" if new else "--run"
    if kind is not None and kind != "build":
        raise StageError(f"{flag} {run_id}: that is a {kind} run, not a build run")
    if kind is None and not new:
        known = runs.recent_runs(store, "build", 8)
        listed = f"build runs here: {', '.join(known)}" if known else "this store has no build run yet"
        raise StageError(f"--run {run_id}: no build run of that name ({listed}). To start a new "
                         "run with this name, "
                         f"say so with --new-run {run_id}; to start one with a name of its "
                         "own, leave --run out.")
