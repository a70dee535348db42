"""Transport: one request to an endpoint over ``openai.AsyncOpenAI``, under the endpoint's
concurrency (a semaphore) and requests-per-minute pace, with retries: exponential backoff and
jitter on 429, 5xx, timeouts, connection errors and junk replies (honouring Retry-After), a hard
stop on 401/403/404, and for a pool, each attempt at the member pipeline.llm.pools chooses.

A dead embedded server is reported (LocalServerDied) rather than retried into a timeout."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pipeline.core.config import LOCAL, Config, Endpoint
from pipeline.core.errors import EndpointError, LocalServerDied
from pipeline.llm.call import (
    Completion,
    prompt_list_logprobs,
    prompt_list_texts,
    reply_cached_tokens,
    reply_logprobs,
)
from pipeline.llm.pools import Pools
from pipeline.llm.pricing import Accounts, online_cost


@dataclass
class EndpointState:
    semaphore: asyncio.Semaphore
    pace_lock: asyncio.Lock
    next_slot: float = 0.0
    client: Any = None
    outstanding: int = 0  # requests given to this endpoint and not finished (waiting included)


class Transport:
    """Sends calls; keeps one openai client, semaphore and pace per endpoint, and the pools."""

    def __init__(
        self,
        config: Config,
        accounts: Accounts,
        emit: Callable[[str, str], None],
        *,
        local_base_url: str | None,
        local_death: Callable[[], str | None] | None,
        backoff_base_s: float,
        backoff_cap_s: float,
    ) -> None:
        self.config = config
        self.accounts = accounts
        self._emit = emit
        self.local_base_url = local_base_url
        # Asked on a connection error to the local endpoint: a report when its server died.
        self.local_death = local_death
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self._states: dict[str, EndpointState] = {}
        self.pools = Pools(config, self.state, emit)

    def state(self, ep: Endpoint) -> EndpointState:
        # Every local model is one server answering one request at a time: one state (one
        # semaphore, one client) for all, so two models' calls never interleave their loads.
        key = LOCAL if ep.is_local else ep.name
        state = self._states.get(key)
        if state is None:
            state = EndpointState(semaphore=asyncio.Semaphore(ep.concurrency), pace_lock=asyncio.Lock())
            self._states[key] = state
        return state

    def _openai(self, ep: Endpoint, state: EndpointState) -> Any:
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
            limits = httpx.Limits(max_connections=max(ep.concurrency * 2, 10),
                                  max_keepalive_connections=max(ep.concurrency, 5))
            state.client = openai.AsyncOpenAI(
                base_url=base_url,
                api_key=ep.api_key(),
                max_retries=0,  # ours, with jitter and accounting
                timeout=timeout,
                http_client=_http_client(httpx, limits, timeout),
            )
        return state.client

    async def _pace(self, ep: Endpoint, state: EndpointState) -> None:
        if not ep.requests_per_minute:
            return
        interval = 60.0 / ep.requests_per_minute
        async with state.pace_lock:
            t = time.monotonic()
            wait = state.next_slot - t
            state.next_slot = max(t, state.next_slot) + interval
        if wait > 0:
            await asyncio.sleep(wait)

    async def send(self, ep: Endpoint, messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
        """One call with retries: to ``ep``, or for a pool to the member chosen per attempt."""
        attempt = 0
        while True:
            member = await self.pools.pick(ep) if ep.is_pool else ep
            try:
                completion = await self._attempt(member, messages, params, reserved=ep.is_pool)
            except _Retryable as exc:
                retry_after, reason = exc.retry_after, exc.reason
                if ep.is_pool:
                    self.pools.member_failed(ep, member, reason)
                    reason = f"{member.name}: {reason}"
            except (EndpointError, LocalServerDied) as exc:
                if not (ep.is_pool and isinstance(exc, EndpointError) and exc.member_fault):
                    self.accounts.count(ep.name, "failures")
                    raise
                self.pools.member_refused(ep, member, exc)
                continue
            else:
                if ep.is_pool:
                    self.pools.member_answered(ep, member)
                    self.accounts.answered(member.name, completion, cached=False, scoped=False)  # per member
                self.accounts.answered(ep.name, completion, cached=False)
                return completion
            attempt += 1
            if attempt > ep.max_retries:
                self.accounts.count(ep.name, "failures")
                where = "" if ep.is_pool else f" ({_safe_url(ep, self.local_base_url)}, model {ep.model})"
                raise EndpointError(
                    f"endpoint '{ep.name}'{where}: gave up after {attempt} attempt(s); last error: {reason}"
                )
            delay = min(self.backoff_cap_s, self.backoff_base_s * 2 ** (attempt - 1))
            delay = delay * (0.5 + random.random())  # jitter: spread retries of concurrent calls
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.backoff_cap_s))
            if ep.is_pool and self.pools.state(ep).has_live_member(ep.members, member.name):
                delay = 0.0  # another member can take it now; the failed one keeps its own pace
            self.accounts.count(ep.name, "retries")
            self._emit("retry", f"{ep.name}: {reason}; retry {attempt}/{ep.max_retries} in {delay:.1f}s")
            if delay:
                await asyncio.sleep(delay)

    async def _attempt(self, ep: Endpoint, messages: list[dict[str, str]], params: dict[str, Any], *,
                       reserved: bool = False) -> Completion:
        """One request to one plain endpoint, under its concurrency and pace. Raises _Retryable
        for what a retry may cure, EndpointError for what it cannot."""
        import openai

        state = self.state(ep)
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
                    path, body = _request(ep, messages, params)
                    # Serialised here (C encoder) rather than deep-copied and encoded by openai.
                    content = json.dumps(body, ensure_ascii=False).encode("utf-8")
                    response = await client.post(path, cast_to=object, content=content)
                    if params.get("prompt_list") and params.get("logprobs"):
                        logprobs = prompt_list_logprobs(response, len(messages))
                        if logprobs is None:
                            raise _EmptyReply(f"a reply to {len(messages)} prompts without "
                                              "one scored choice each")
                        text = json.dumps([max(top, key=top.__getitem__) if top else "" for top in logprobs])
                    elif params.get("prompt_list"):
                        logprobs = None
                        texts = prompt_list_texts(response, len(messages))
                        if texts is None:
                            raise _EmptyReply(f"a reply to {len(messages)} prompts without "
                                              "one written choice each")
                        text = json.dumps(texts)
                    else:
                        text = _reply_text(response)
                        logprobs = reply_logprobs(response["choices"][0]) if params.get("logprobs") else None
                    if not text.strip():
                        raise _EmptyReply("empty reply")
                except (openai.AuthenticationError, openai.PermissionDeniedError,
                        openai.NotFoundError) as exc:
                    raise EndpointError(
                        f"endpoint '{ep.name}' ({_safe_url(ep, self.local_base_url)}, model {ep.model}): "
                        f"HTTP {exc.status_code}, not retried: {_short(exc)}", member_fault=True,
                    ) from None
                except openai.BadRequestError as exc:
                    raise EndpointError(
                        f"endpoint '{ep.name}' (model {ep.model}): the request was refused "
                        f"(HTTP 400): {_short(exc)}"
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
                    if ep.is_local and self.local_death is not None and isinstance(exc,
                                                                                   openai.APIConnectionError):
                        # A dead server is never retried into a timeout: stop the run, say why.
                        death = await asyncio.to_thread(self.local_death)
                        if death is not None:
                            raise LocalServerDied(death) from None
                    raise _Retryable(_describe(exc, _safe_url(ep, self.local_base_url)),
                                     _retry_after(exc)) from None
                latency = time.monotonic() - started
                usage = response.get("usage") or {}
                pt = int(usage.get("prompt_tokens") or 0)
                ct = int(usage.get("completion_tokens") or 0)
                cached = reply_cached_tokens(usage, pt)
                cost = online_cost(ep, pt, ct, cached)
                return Completion(text, pt, ct, cost, False, None, latency, ep.name, logprobs=logprobs,
                                  cached_prompt_tokens=cached)
        finally:
            self._release(ep)

    def _release(self, ep: Endpoint) -> None:
        """A request to ``ep`` is over: wake the requests waiting on a pool for a free slot."""
        self.state(ep).outstanding -= 1
        self.pools.wake()

    def pool_status(self, name: str) -> dict[str, Any]:
        """Per member of a pool: outstanding requests, drained or dead, times drained, calls."""

        def outstanding(member: str) -> int:
            st = self._states.get(member)
            return st.outstanding if st else 0

        return self.pools.status(name, calls=lambda m: self.accounts.of(m).calls, outstanding=outstanding)

    async def aclose(self) -> None:
        for state in self._states.values():
            if state.client is not None:
                await state.client.close()
        self._states.clear()


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


def _request(ep: Endpoint, messages: list[dict[str, str]],
             params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The path and body of a call: a chat completion, or for ``prompt_list`` one completions request
    whose prompts are the messages' contents, each scored for one token (with ``logprobs``: legacy
    ``logprobs``, a count) or written (without)."""
    if not params.get("prompt_list"):
        return "/chat/completions", {"model": ep.model, "messages": messages, **params, **ep.extra_body}
    if not params.get("logprobs"):  # written: each prompt's reply, sampled as a chat call's would be
        rest = {k: v for k, v in params.items() if k != "prompt_list"}
        return "/completions", {"model": ep.model, "prompt": [m["content"] for m in messages], **rest,
                                **ep.extra_body}
    rest = {k: v for k, v in params.items()
            if k not in ("prompt_list", "logprobs", "top_logprobs", "max_tokens")}
    body = {"model": ep.model, "prompt": [m["content"] for m in messages], "max_tokens": 1,
            "logprobs": params.get("top_logprobs") or 1, **rest, **ep.extra_body}
    return "/completions", body


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
        return (f"connection to {url} failed: {type(cause).__name__}: {cause}" if cause is not exc
                else f"connection to {url} failed")
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
