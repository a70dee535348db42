"""The one LLM client: every role (generator, judges, summarizer, models under test) calls
through here, against any OpenAI-compatible endpoint, the embedded llama.cpp server included.

What it does for every call:
- a cache in the store (``llm_calls``) keyed on endpoint URL, model, messages, sampling
  parameters and the prompt template's hash: a repeated call costs nothing. Only replies the
  caller accepted are cached: errors, empty replies and replies that break the format never are;
- per-endpoint concurrency (a semaphore) and a requests-per-minute pace;
- retries with exponential backoff and jitter on 429, 5xx, timeouts and connection errors
  (honouring Retry-After), a hard stop on 401/403/404;
- structured output: JSON with a schema in the form the endpoint takes, lenient parsing,
  validation, and one repair round that tells the model what was wrong;
- token and cost accounting per call (stored) and per client (``usage``);
- endpoint pools: a pool's calls go to the member with the fewest outstanding requests for its
  concurrency; a member failing ``drain_after`` times in a row is set aside for ``drain_s``;
  the cache key names the pool's model, not the member;
- pricing mode (``pricing=``, a dry run): a call nobody answered is priced (pipeline.stages.estimate),
  not sent, and answered with a placeholder that is never cached;
- batch mode (``batch=True``): a call nobody answered is recorded for a batch (pipeline.llm.batch)
  and BatchPending raised; answers collected from batches are taken in either mode through the
  same accept-and-cache path as an online reply.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import os
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pipeline.core.config import Config, Endpoint
from pipeline.core.errors import EndpointError, LocalServerDied, ParseError
from pipeline.llm.prompts import Template
from pipeline.store.database import Store, now

T = TypeVar("T")
EventHook = Callable[[str, str], None]


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    cached: bool
    call_id: int | None
    latency_s: float
    endpoint: str
    via: str = "online"  # or "batch": answered through a batch API (pipeline.llm.batch)


@dataclass
class Usage:
    calls: int = 0  # requests actually sent and answered
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    retries: int = 0
    failures: int = 0  # calls given up on
    rejected: int = 0  # replies that broke the format
    batch_calls: int = 0  # of ``calls``, those answered through a batch (priced as batch)
    batch_cost: float = 0.0  # of ``cost``, what the batch calls cost
    deferred: int = 0  # calls left to a batch (batch mode): asked for, not yet answered

    def add(self, other: Usage) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass
class _EndpointState:
    semaphore: asyncio.Semaphore
    pace_lock: asyncio.Lock
    next_slot: float = 0.0
    client: Any = None
    outstanding: int = 0  # requests given to this endpoint and not finished (waiting included)


@dataclass
class _PoolState:
    streak: dict[str, int] = field(default_factory=dict)  # failures in a row, per member
    drained_until: dict[str, float] = field(default_factory=dict)  # monotonic time a member is back
    drains: dict[str, int] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)  # refused us for good (401/403/404)
    waiters: list[asyncio.Future[None]] = field(default_factory=list)  # requests waiting for a free slot

    def has_live_member(self, members: tuple[str, ...], besides: str) -> bool:
        t = time.monotonic()
        return any(m != besides and m not in self.dead and self.drained_until.get(m, 0.0) <= t for m in members)


@dataclass
class Params:
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    top_p: float | None = None
    # A GBNF grammar (llama.cpp's server: a top-level `grammar` field of the body). Only for an
    # endpoint with ``gbnf``; others refuse or ignore it. Part of the cache key, like the rest.
    grammar: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def cache_key(endpoint: Endpoint, messages: list[dict[str, str]], params: dict[str, Any], template_hash: str) -> str:
    """The documented cache key: URL, model, messages, parameters, template hash."""
    blob = json.dumps(
        {
            "base_url": endpoint.cache_url,
            "model": endpoint.model,
            "messages": messages,
            "params": params,
            "template": template_hash,
        },
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class LLMClient:
    """Async client over ``openai.AsyncOpenAI`` with cache, limits, retries and accounting."""

    def __init__(
        self,
        config: Config,
        store: Store,
        *,
        run_id: str | None = None,
        local_base_url: str | None = None,
        on_event: EventHook | None = None,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 30.0,
        use_cache: bool = True,
        local_death: Callable[[], str | None] | None = None,
        batch: bool = False,
        pricing: Any = None,
    ) -> None:
        self.config = config
        self.store = store
        self.run_id = run_id
        self.local_base_url = local_base_url
        self.on_event = on_event
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.use_cache = use_cache
        # Asked on a connection error to the local endpoint: a report when its server died.
        self.local_death = local_death
        # Batch mode: a call nobody has answered yet is not sent; it is recorded for a batch
        # (pipeline.llm.batch) and BatchPending tells the stage this unit waits. Results collected
        # from batches are taken in either mode, through the same accept-and-cache path.
        self.batch = batch
        self._deferred: dict[str, tuple[Any, ...]] = {}  # cache key -> row, written by flush_deferred
        # Pricing mode (a dry run, pipeline.stages.estimate): a call nobody answered is priced, never
        # sent, and answered with a placeholder that is never cached.
        self.pricing = pricing
        self.usage = Usage()
        self.usage_by_endpoint: dict[str, Usage] = {}
        self._states: dict[str, _EndpointState] = {}
        self._pools: dict[str, _PoolState] = {}

    # -- public API ---------------------------------------------------------------
    async def chat(
        self,
        endpoint: str | Endpoint,
        messages: list[dict[str, str]],
        *,
        template: Template | None = None,
        params: Params | None = None,
        response_format: dict[str, Any] | None = None,
        accept: Callable[[str], T] | None = None,
    ) -> tuple[T | str, Completion]:
        """One chat completion. ``accept`` parses the reply and raises ValueError to refuse it;
        a refused reply is not cached (the caller may repair). Returns (accepted value, completion).
        """
        ep = self.config.endpoint(endpoint) if isinstance(endpoint, str) else endpoint
        p = (params or Params()).as_dict()
        if response_format is not None:
            p["response_format"] = response_format
        template_hash = template.hash if template else ""
        key = cache_key(ep, messages, p, template_hash)
        accept_fn: Callable[[str], Any] = accept or (lambda s: s)
        if self.use_cache:
            hit = self._cache_get(key)
            if hit is not None:
                try:
                    value = accept_fn(hit.text)
                except ValueError:
                    value = None  # cached under an older contract: ask again
                else:
                    self._account(ep.name, hit, cached=True)
                    if self.pricing is not None:
                        self.pricing.hit(ep.name)
                    return value, hit
        completion, queued = self._batch_result(key, ep) if self.use_cache else (None, None)
        if completion is not None and self.pricing is not None:
            self.pricing.hit(ep.name)  # a collected batch result: paid already
        if completion is None and self.pricing is not None:
            completion = self.pricing.answer(key, ep, template, messages, p)  # BatchPending when it has none
            try:
                return accept_fn(completion.text), completion
            except ValueError:
                self.pricing.unparsed += 1
                from pipeline.core.errors import BatchPending

                raise BatchPending(ep.name) from None  # the unit stops here: what follows is not priced
        if completion is None:
            if self.batch and queued != "online":  # "online": the user sent a failed batch item online
                self._defer(key, ep, template, messages, p, queued)
            completion = await self._send(ep, messages, p)
        try:
            value = accept_fn(completion.text)
        except ValueError:
            # A batch reply that breaks the format stays with its batch request (never cached):
            # the repair round asks with the reply quoted, as online, in the next batch.
            self._usage(ep.name).rejected += 1
            self.usage.rejected += 1
            raise
        if self.use_cache:
            completion.call_id = self._cache_put(key, ep, template, messages, p, completion)
            if queued == "online":  # a failed batch item the user sent online: answered now
                self.store.conn.execute("DELETE FROM batch_requests WHERE cache_key = ?", (key,))
                self.store.commit()
        return value, completion

    async def chat_json(
        self,
        endpoint: str | Endpoint,
        messages: list[dict[str, str]],
        *,
        schema: dict[str, Any],
        validate: Callable[[Any], T],
        template: Template | None = None,
        params: Params | None = None,
        repair_rounds: int = 1,
    ) -> tuple[T, Completion]:
        """JSON output: schema in the endpoint's form, lenient parse, validate, repair once."""
        ep = self.config.endpoint(endpoint) if isinstance(endpoint, str) else endpoint
        fmt = structured_format(ep, schema)

        def accept(text: str) -> T:
            try:
                return validate(parse_json_lenient(text))
            except ReplyError:
                raise
            except ValueError as exc:
                raise ReplyError(str(exc), reply=text) from None

        return await self.chat_repaired(ep, messages, accept=accept, schema=schema, template=template,
                                        params=params, response_format=fmt, repair_rounds=repair_rounds)

    async def chat_repaired(
        self,
        endpoint: str | Endpoint,
        messages: list[dict[str, str]],
        *,
        accept: Callable[[str], T],
        schema: dict[str, Any] | None,
        template: Template | None = None,
        params: Params | None = None,
        response_format: dict[str, Any] | None = None,
        repair_rounds: int = 1,
        what: str = "reply",
        repair: Callable[[str], str] | None = None,
    ) -> tuple[T, Completion]:
        """``chat`` with repair rounds: a refused reply goes back to the model with what was wrong
        and the schema (or ``repair(error)``, for replies in prose). Still refused after
        ``repair_rounds``: ParseError naming the prompt."""
        ep = self.config.endpoint(endpoint) if isinstance(endpoint, str) else endpoint
        convo = list(messages)
        last_error = ""
        for attempt in range(repair_rounds + 1):
            try:
                value, completion = await self.chat(
                    ep, convo, template=template, params=params, response_format=response_format, accept=accept
                )
                return value, completion  # type: ignore[return-value]
            except ValueError as exc:
                last_error = str(exc)
                reply = getattr(exc, "reply", None)
                self._emit("repair", f"{ep.name}: reply refused ({last_error}); repair round {attempt + 1}")
                convo = list(messages) + [
                    {"role": "assistant", "content": reply if reply is not None else "(unusable reply)"},
                    {"role": "user", "content": repair(last_error) if repair else repair_message(last_error, schema)},
                ]
        prompt = f", prompt {template.name}" if template else ""
        raise ParseError(f"endpoint '{ep.name}' ({ep.model}){prompt}: no usable {what} after {repair_rounds} "
                         f"repair round(s): {last_error}")

    async def aclose(self) -> None:
        self.flush_deferred()
        for state in self._states.values():
            if state.client is not None:
                await state.client.close()
        self._states.clear()

    # -- transport --------------------------------------------------------------
    def _state(self, ep: Endpoint) -> _EndpointState:
        state = self._states.get(ep.name)
        if state is None:
            state = _EndpointState(semaphore=asyncio.Semaphore(ep.concurrency), pace_lock=asyncio.Lock())
            self._states[ep.name] = state
        return state

    def _openai(self, ep: Endpoint, state: _EndpointState) -> Any:
        if state.client is None:
            import openai

            try:  # openai >= 3 runs on httpx2; an httpx 0.x client works there but costs twice the CPU a call
                import httpx2 as httpx
            except ImportError:  # pragma: no cover - older openai
                import httpx  # type: ignore[no-redef]

            base_url = ep.base_url
            if ep.is_local:
                if not self.local_base_url:
                    raise EndpointError(
                        "endpoint 'local': the embedded server is not running (use `unspecific local serve`, "
                        "or run the stage through the CLI, which starts it)"
                    )
                base_url = self.local_base_url
            timeout = httpx.Timeout(ep.timeout_s, connect=min(10.0, ep.timeout_s))
            limits = httpx.Limits(max_connections=max(ep.concurrency * 2, 10), max_keepalive_connections=max(ep.concurrency, 5))
            state.client = openai.AsyncOpenAI(
                base_url=base_url,
                api_key=ep.api_key(),
                max_retries=0,  # ours, with jitter and accounting
                timeout=timeout,
                http_client=_http_client(httpx, limits, timeout),
            )
        return state.client

    async def _pace(self, ep: Endpoint, state: _EndpointState) -> None:
        if not ep.requests_per_minute:
            return
        interval = 60.0 / ep.requests_per_minute
        async with state.pace_lock:
            t = time.monotonic()
            wait = state.next_slot - t
            state.next_slot = max(t, state.next_slot) + interval
        if wait > 0:
            await asyncio.sleep(wait)

    async def _send(self, ep: Endpoint, messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
        """One call with retries: to ``ep``, or for a pool to the member chosen per attempt."""
        attempt = 0
        while True:
            member = await self._pick(ep) if ep.is_pool else ep
            try:
                completion = await self._attempt(member, messages, params, reserved=ep.is_pool)
            except _Retryable as exc:
                retry_after, reason = exc.retry_after, exc.reason
                if ep.is_pool:
                    self._member_failed(ep, member, reason)
                    reason = f"{member.name}: {reason}"
            except (EndpointError, LocalServerDied) as exc:
                if not (ep.is_pool and isinstance(exc, EndpointError) and exc.member_fault):
                    self._usage(ep.name).failures += 1
                    self.usage.failures += 1
                    raise
                # A member with a wrong key or model is taken out of the pool for good; the
                # others go on. Only when none is left does the call fail.
                self._pools[ep.name].dead.add(member.name)
                self._emit("drain", f"{ep.name}: member {member.name} removed: {exc}")
                if len(self._pools[ep.name].dead) == len(ep.members):
                    raise EndpointError(f"endpoint '{ep.name}': every member of the pool failed for good; last: {exc}") from None
                continue
            else:
                if ep.is_pool:
                    self._pools[ep.name].streak[member.name] = 0
                    self._account(member.name, completion, cached=False, scoped=False)  # per member
                self._account(ep.name, completion, cached=False)
                return completion
            attempt += 1
            if attempt > ep.max_retries:
                self._usage(ep.name).failures += 1
                self.usage.failures += 1
                where = "" if ep.is_pool else f" ({_safe_url(ep, self.local_base_url)}, model {ep.model})"
                raise EndpointError(
                    f"endpoint '{ep.name}'{where}: gave up after {attempt} attempt(s); last error: {reason}"
                )
            delay = min(self.backoff_cap_s, self.backoff_base_s * 2 ** (attempt - 1))
            delay = delay * (0.5 + random.random())  # jitter: spread retries of concurrent calls
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.backoff_cap_s))
            if ep.is_pool and self._pools[ep.name].has_live_member(ep.members, member.name):
                delay = 0.0  # another member can take it now; the failed one keeps its own pace
            self._usage(ep.name).retries += 1
            self.usage.retries += 1
            self._emit("retry", f"{ep.name}: {reason}; retry {attempt}/{ep.max_retries} in {delay:.1f}s")
            if delay:
                await asyncio.sleep(delay)

    async def _attempt(self, ep: Endpoint, messages: list[dict[str, str]], params: dict[str, Any], *,
                       reserved: bool = False) -> Completion:
        """One request to one plain endpoint, under its concurrency and pace. Raises _Retryable
        for what a retry may cure, EndpointError for what it cannot."""
        import openai

        state = self._state(ep)
        if not reserved:
            state.outstanding += 1
        try:
            client = self._openai(ep, state)
            async with state.semaphore:
                await self._pace(ep, state)
                started = time.monotonic()
                try:
                    # A plain JSON body through the openai client's post (its auth, errors and
                    # transport): the typed `create` re-walks every message against its TypedDicts
                    # and builds pydantic models, about half our CPU per call. It also lets
                    # llama.cpp's {"type": "json_object", "schema": ...} through as it is.
                    body = {"model": ep.model, "messages": messages, **params, **ep.extra_body}
                    # Serialised here (C encoder) rather than deep-copied and encoded by openai.
                    content = json.dumps(body, ensure_ascii=False).encode("utf-8")
                    response = await client.post("/chat/completions", cast_to=object, content=content)
                    text = _reply_text(response)
                    if not text.strip():
                        raise _EmptyReply("empty reply")
                except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as exc:
                    raise EndpointError(
                        f"endpoint '{ep.name}' ({_safe_url(ep, self.local_base_url)}, model {ep.model}): "
                        f"HTTP {exc.status_code}, not retried: {_short(exc)}", member_fault=True,
                    ) from None
                except openai.BadRequestError as exc:
                    raise EndpointError(
                        f"endpoint '{ep.name}' (model {ep.model}): the request was refused (HTTP 400): {_short(exc)}"
                    ) from None
                except (
                    openai.RateLimitError,
                    openai.InternalServerError,
                    openai.APITimeoutError,
                    openai.APIConnectionError,
                    openai.APIStatusError,
                    openai.APIResponseValidationError,
                    _EmptyReply,
                    json.JSONDecodeError,
                ) as exc:
                    if ep.is_local and self.local_death is not None and isinstance(exc, openai.APIConnectionError):
                        # A dead server is never retried into a timeout: stop the run, say why.
                        death = await asyncio.to_thread(self.local_death)
                        if death is not None:
                            raise LocalServerDied(death) from None
                    raise _Retryable(_describe(exc, _safe_url(ep, self.local_base_url)), _retry_after(exc)) from None
                latency = time.monotonic() - started
                usage = response.get("usage") or {}
                pt = int(usage.get("prompt_tokens") or 0)
                ct = int(usage.get("completion_tokens") or 0)
                cost = (pt * ep.price_prompt_per_mtok + ct * ep.price_completion_per_mtok) / 1e6
                return Completion(text, pt, ct, cost, False, None, latency, ep.name)
        finally:
            self._release(ep)

    # -- pools ------------------------------------------------------------------------
    async def _pick(self, pool: Endpoint) -> Endpoint:
        """The member with the fewest outstanding requests for its concurrency, among those with
        a free slot and not drained. A request waits here for a free slot rather than queueing
        behind one member: a slow member then holds its slots longer and is offered less work.
        When every live member is drained, the first to come back is tried again."""
        state = self._pools.setdefault(pool.name, _PoolState())
        members = [self.config.endpoint(m) for m in pool.members]
        while True:
            if len(state.dead) == len(members):
                raise EndpointError(f"endpoint '{pool.name}': every member of the pool refused us for good")
            t = time.monotonic()
            live = [m for m in members if m.name not in state.dead]
            ready = [m for m in live if state.drained_until.get(m.name, 0.0) <= t]
            free = [m for m in ready if self._state(m).outstanding < m.concurrency]
            if free:
                # min keeps the config order on ties: the first member listed takes the first call.
                chosen = min(free, key=lambda m: self._state(m).outstanding / m.concurrency)
                self._state(chosen).outstanding += 1  # reserved now, before any other task picks
                return chosen
            waiter = asyncio.get_running_loop().create_future()
            state.waiters.append(waiter)
            # Woken by a finished request; or, when nothing runs, by the end of the first drain.
            back = [state.drained_until[m.name] - t for m in live if m not in ready]
            try:
                await asyncio.wait_for(waiter, timeout=max(0.0, min(back)) + 0.001 if back and not ready else None)
            except TimeoutError:
                pass
            finally:
                if waiter in state.waiters:
                    state.waiters.remove(waiter)

    def _release(self, ep: Endpoint) -> None:
        """A request to ``ep`` is over: wake the requests waiting on a pool for a free slot."""
        self._state(ep).outstanding -= 1
        for pool in self._pools.values():
            for waiter in pool.waiters:
                if not waiter.done():
                    waiter.set_result(None)
            pool.waiters.clear()

    def _member_failed(self, pool: Endpoint, member: Endpoint, reason: str) -> None:
        state = self._pools[pool.name]
        if state.drained_until.get(member.name, 0.0) > time.monotonic():
            return  # a request sent before it was set aside: the pause already counts it
        streak = state.streak.get(member.name, 0) + 1
        state.streak[member.name] = streak
        if streak >= pool.drain_after:
            state.drained_until[member.name] = time.monotonic() + pool.drain_s
            state.drains[member.name] = state.drains.get(member.name, 0) + 1
            state.streak[member.name] = 0  # after the pause it gets drain_after tries again
            self._emit("drain", f"{pool.name}: member {member.name} failed {streak} times in a row ({reason}); "
                                f"set aside for {pool.drain_s:g}s")

    def pool_status(self, name: str) -> dict[str, Any]:
        """Per member of a pool: outstanding requests, drained or dead, times drained."""
        state = self._pools.get(name, _PoolState())
        t = time.monotonic()
        out = {}
        for m in self.config.endpoint(name).members:
            st = self._states.get(m)
            out[m] = {
                "outstanding": st.outstanding if st else 0,
                "drained": state.drained_until.get(m, 0.0) > t,
                "dead": m in state.dead,
                "drains": state.drains.get(m, 0),
                "calls": self._usage(m).calls,
            }
        return out

    # -- batch mode -----------------------------------------------------------------
    def _batch_result(self, key: str, ep: Endpoint) -> tuple[Completion | None, str | None]:
        """A collected batch result for this call (as a fresh answer, priced as batch), and the
        status of its batch request when there is one."""
        row = self.store.conn.execute(
            "SELECT id, status, response, prompt_tokens, completion_tokens, cost FROM batch_requests WHERE cache_key = ?",
            (key,),
        ).fetchone()
        if row is None:
            return None, None
        if row[1] != "done" or not (row[2] or "").strip():
            return None, row[1]
        completion = Completion(row[2], row[3] or 0, row[4] or 0, row[5] or 0.0, False, None, 0.0, ep.name, via="batch")
        self._account(ep.name, completion, cached=False)
        return completion, "done"

    def _defer(self, key: str, ep: Endpoint, template: Template | None, messages: list[dict[str, str]],
               params: dict[str, Any], queued: str | None) -> None:
        """Record the call for a batch and raise BatchPending. A call already waiting in a batch
        is not recorded twice; one whose batch failed waits for the user's choice (collect
        --failed rebatch|online)."""
        from pipeline.core.errors import BatchPending

        self._usage(ep.name).deferred += 1
        self.usage.deferred += 1
        if queued in ("pending", "submitted", "failed"):
            raise BatchPending(ep.name, failed=queued == "failed")
        self._deferred[key] = (
            key, ep.name, template.name if template else None, template.hash if template else None,
            # Redacted: a repair round quotes the refused reply, which may echo a key; the batch
            # then sends the redacted text (the cache key was computed from the original above).
            _redacted(json.dumps({"messages": messages, "params": params}, ensure_ascii=False)), self.run_id, now(),
        )
        if len(self._deferred) >= 1000:
            self.flush_deferred()
        raise BatchPending(ep.name)

    def flush_deferred(self) -> int:
        """Write the deferred calls to ``batch_requests`` (pending). A row already there for the
        key (another process deferred it) is left alone: nothing waiting or failed is queued twice."""
        rows = list(self._deferred.values())
        self._deferred.clear()
        if not rows:
            return 0
        self.store.conn.executemany(
            "INSERT OR IGNORE INTO batch_requests (cache_key, endpoint, template, template_hash, request, status,"
            " run_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?7)",
            rows,
        )
        self.store.commit()
        return len(rows)

    # -- cache and accounting -------------------------------------------------------
    def _cache_get(self, key: str) -> Completion | None:
        row = self.store.conn.execute(
            "SELECT id, response, prompt_tokens, completion_tokens, endpoint FROM llm_calls WHERE cache_key = ?",
            (key,),
        ).fetchone()
        if row is None or not (row[1] or "").strip():
            return None
        return Completion(row[1], row[2] or 0, row[3] or 0, 0.0, True, row[0], 0.0, row[4])

    def _cache_put(
        self,
        key: str,
        ep: Endpoint,
        template: Template | None,
        messages: list[dict[str, str]],
        params: dict[str, Any],
        completion: Completion,
    ) -> int:
        cur = self.store.conn.execute(
            "INSERT OR REPLACE INTO llm_calls (cache_key, endpoint, model, template, template_hash, request, response,"
            " prompt_tokens, completion_tokens, cost, latency_s, run_id, created_at, via)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                ep.name,
                ep.model,
                template.name if template else None,
                template.hash if template else None,
                # A repair round carries the refused reply back, which may be an error page echoing
                # the key: the stored request never holds one (the cache key is computed above).
                _redacted(json.dumps({"messages": messages, "params": params}, ensure_ascii=False)),
                completion.text,
                completion.prompt_tokens,
                completion.completion_tokens,
                completion.cost,
                round(completion.latency_s, 4),
                self.run_id,
                now(),
                completion.via,
            ),
        )
        if completion.via == "batch":
            # Consumed: the cache holds it now. Deleted rather than emptied: an emptied row leaves
            # its page mostly unused (about 2 kB a call at scale); a deleted one frees it for reuse.
            self.store.conn.execute("DELETE FROM batch_requests WHERE cache_key = ?", (key,))
        self.store.commit()  # a finished call is never paid for twice
        return int(cur.lastrowid)

    def _usage(self, name: str) -> Usage:
        return self.usage_by_endpoint.setdefault(name, Usage())

    def _account(self, name: str, c: Completion, *, cached: bool, scoped: bool = True) -> None:
        """Count a call in the client's usage, the endpoint's and the task's scopes. A pool's
        member counts its own calls (scoped=False); the pool then counts it once for the rest."""
        targets = (self.usage, self._usage(name), *_SCOPES.get()) if scoped else (self._usage(name),)
        for u in targets:
            if cached:
                u.cache_hits += 1
            else:
                u.calls += 1
                u.prompt_tokens += c.prompt_tokens
                u.completion_tokens += c.completion_tokens
                u.cost += c.cost
                if c.via == "batch":
                    u.batch_calls += 1
                    u.batch_cost += c.cost

    def _emit(self, kind: str, detail: str) -> None:
        if self.on_event is not None:
            from pipeline.core.redact import redact

            self.on_event(kind, redact(detail) or detail)  # repair events quote replies, which may echo a key


# Extra Usage records the calls of the current task are also counted in (see usage_scope).
_SCOPES: contextvars.ContextVar[tuple[Usage, ...]] = contextvars.ContextVar("usage_scopes", default=())


class usage_scope:
    """``with usage_scope(u):`` counts every call made in this task (and tasks it starts) in ``u``
    too, so a stage can report usage per condition while calls for several run concurrently."""

    def __init__(self, usage: Usage) -> None:
        self.usage = usage
        self._token: contextvars.Token[tuple[Usage, ...]] | None = None

    def __enter__(self) -> Usage:
        self._token = _SCOPES.set(_SCOPES.get() + (self.usage,))
        return self.usage

    def __exit__(self, *exc: object) -> None:
        assert self._token is not None
        _SCOPES.reset(self._token)


def _http_client(httpx: Any, limits: Any, timeout: Any) -> Any:
    """openai's aiohttp transport when aiohttp is installed (its C parser: about 0.6 ms less CPU
    a call than httpx2's pure-Python stack, which matters at high concurrency), else httpx."""
    import openai

    if os.environ.get("UNSPECIFIC_HTTP") != "httpx" and hasattr(openai, "DefaultAioHttpClient"):
        try:
            return openai.DefaultAioHttpClient(limits=limits, timeout=timeout)
        except RuntimeError:  # aiohttp not installed
            pass
    return httpx.AsyncClient(limits=limits, timeout=timeout)


class _EmptyReply(Exception):
    pass


class _Retryable(Exception):
    """One attempt failed in a way a retry may cure (429, 5xx, timeout, junk transport)."""

    def __init__(self, reason: str, retry_after: float | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def _reply_text(response: Any) -> str:
    try:
        content = response["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise _EmptyReply("reply without choices") from None
    if content is not None and not isinstance(content, str):
        raise _EmptyReply(f"reply content is {type(content).__name__}, not text")
    return content or ""


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _redacted(text: str) -> str:
    from pipeline.core.redact import redact

    return redact(text) or text


def _describe(exc: Exception, url: str) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    if status:
        return f"HTTP {status} ({name})"
    cause = _root_cause(exc)
    if isinstance(cause, ConnectionRefusedError) or "connection refused" in str(cause).lower():
        return f"connection refused at {url} (nothing listens there)"
    if name == "APITimeoutError":
        return f"no reply from {url} within the timeout"
    if name == "APIConnectionError":
        return f"connection to {url} failed: {type(cause).__name__}: {cause}" if cause is not exc else f"connection to {url} failed"
    return name + (f": {exc}" if str(exc) else "")


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost cause: openai wraps httpx/aiohttp errors, which wrap the OSError."""
    seen = {id(exc)}
    while True:
        inner = exc.__cause__ or exc.__context__
        if inner is None or id(inner) in seen:
            return exc
        seen.add(id(inner))
        exc = inner


def _short(exc: Exception) -> str:
    text = str(exc)
    return text if len(text) < 300 else text[:297] + "..."


def _safe_url(ep: Endpoint, local_url: str | None) -> str:
    return local_url if ep.is_local and local_url else ep.base_url


# -- structured output --------------------------------------------------------------


def structured_format(ep: Endpoint, schema: dict[str, Any]) -> dict[str, Any] | None:
    if ep.structured == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    if ep.structured == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": False}}
    if ep.structured == "json_object":
        return {"type": "json_object"}
    return None


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


class ReplyError(ValueError):
    """A reply that broke the contract; carries the reply for the repair round."""

    def __init__(self, msg: str, reply: str | None = None) -> None:
        super().__init__(msg)
        self.reply = reply


def parse_json_lenient(text: str) -> Any:
    """Parse JSON from a model's reply: fences, preambles, raw control characters, trailing
    chatter. Raises ReplyError (a ValueError) naming what was wrong."""
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if start != -1 and end > start:
            candidates.append(text[start : end + 1])
    decoder = json.JSONDecoder(strict=False)  # small models put raw newlines inside strings
    for cand in candidates:
        if not cand:
            continue
        try:
            return decoder.decode(cand)
        except json.JSONDecodeError:
            pass
        # Valid JSON followed by chatter: take the first complete value.
        for i, ch in enumerate(cand):
            if ch in "{[":
                try:
                    value, _ = decoder.raw_decode(cand, i)
                    return value
                except json.JSONDecodeError:
                    break
    snippet = text.strip().replace("\n", " ")[:120]
    raise ReplyError(f"no JSON found in the reply (starts: {snippet!r})", reply=text)


def repair_message(error: str, schema: dict[str, Any] | None) -> str:
    if schema is None:
        return f"Your previous reply could not be used: {error}.\nReply again with only what was asked for."
    return (
        "Your previous reply could not be used: "
        f"{error}.\nReply again with only a JSON value that matches this schema, and nothing else:\n"
        f"{json.dumps(schema, ensure_ascii=False)}"
    )


async def gather_limited(coros: list[Awaitable[T]]) -> list[T | BaseException]:
    """Run coroutines concurrently (the client limits per endpoint); errors come back as values."""
    return list(await asyncio.gather(*coros, return_exceptions=True))
