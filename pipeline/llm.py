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
- token and cost accounting per call (stored) and per client (``usage``).
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

from .config import Config, Endpoint
from .errors import EndpointError, LocalServerDied, ParseError
from .prompts import Template
from .store import Store, now

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


@dataclass
class Params:
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    top_p: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def cache_key(endpoint: Endpoint, messages: list[dict[str, str]], params: dict[str, Any], template_hash: str) -> str:
    """The documented cache key: URL, model, messages, parameters, template hash."""
    blob = json.dumps(
        {
            "base_url": endpoint.base_url,
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
        self.usage = Usage()
        self.usage_by_endpoint: dict[str, Usage] = {}
        self._states: dict[str, _EndpointState] = {}

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
                    return value, hit
        completion = await self._send(ep, messages, p)
        try:
            value = accept_fn(completion.text)
        except ValueError:
            self._usage(ep.name).rejected += 1
            self.usage.rejected += 1
            raise
        if self.use_cache:
            completion.call_id = self._cache_put(key, ep, template, messages, p, completion)
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
        import openai

        state = self._state(ep)
        client = self._openai(ep, state)
        attempt = 0
        while True:
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
                    self._usage(ep.name).failures += 1
                    self.usage.failures += 1
                    raise EndpointError(
                        f"endpoint '{ep.name}' ({_safe_url(ep, self.local_base_url)}, model {ep.model}): "
                        f"HTTP {exc.status_code}, not retried: {_short(exc)}"
                    ) from None
                except openai.BadRequestError as exc:
                    self._usage(ep.name).failures += 1
                    self.usage.failures += 1
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
                            self._usage(ep.name).failures += 1
                            self.usage.failures += 1
                            raise LocalServerDied(death) from None
                    retry_after = _retry_after(exc)
                    reason = _describe(exc, _safe_url(ep, self.local_base_url))
                else:
                    latency = time.monotonic() - started
                    usage = response.get("usage") or {}
                    pt = int(usage.get("prompt_tokens") or 0)
                    ct = int(usage.get("completion_tokens") or 0)
                    cost = (pt * ep.price_prompt_per_mtok + ct * ep.price_completion_per_mtok) / 1e6
                    completion = Completion(text, pt, ct, cost, False, None, latency, ep.name)
                    self._account(ep.name, completion, cached=False)
                    return completion
            attempt += 1
            if attempt > ep.max_retries:
                self._usage(ep.name).failures += 1
                self.usage.failures += 1
                raise EndpointError(
                    f"endpoint '{ep.name}' ({_safe_url(ep, self.local_base_url)}, model {ep.model}): "
                    f"gave up after {attempt} attempt(s); last error: {reason}"
                )
            delay = min(self.backoff_cap_s, self.backoff_base_s * 2 ** (attempt - 1))
            delay = delay * (0.5 + random.random())  # jitter: spread retries of concurrent calls
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.backoff_cap_s))
            self._usage(ep.name).retries += 1
            self.usage.retries += 1
            self._emit("retry", f"{ep.name}: {reason}; retry {attempt}/{ep.max_retries} in {delay:.1f}s")
            await asyncio.sleep(delay)

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
            " prompt_tokens, completion_tokens, cost, latency_s, run_id, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            ),
        )
        self.store.commit()  # a finished call is never paid for twice
        return int(cur.lastrowid)

    def _usage(self, name: str) -> Usage:
        return self.usage_by_endpoint.setdefault(name, Usage())

    def _account(self, name: str, c: Completion, *, cached: bool) -> None:
        for u in (self.usage, self._usage(name), *_SCOPES.get()):
            if cached:
                u.cache_hits += 1
            else:
                u.calls += 1
                u.prompt_tokens += c.prompt_tokens
                u.completion_tokens += c.completion_tokens
                u.cost += c.cost

    def _emit(self, kind: str, detail: str) -> None:
        if self.on_event is not None:
            from .redact import redact

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
    from .redact import redact

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
