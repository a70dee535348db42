"""The one LLM client: every role (generator, judges, summarizer, models under test) calls
through here, against any OpenAI-compatible endpoint, the embedded llama.cpp server included.
A call is one line: ``value, completion = await client.chat(...)`` (or ``chat_json``,
``chat_repaired``). The client puts together the parts, each in its own module:

- the cache (pipeline.llm.cache): keyed on endpoint URL, model, messages, sampling parameters and
  the prompt template's hash, so a repeated call costs nothing. Only replies the caller accepted
  are cached: errors, empty replies and replies that break the format never are;
- the transport (pipeline.llm.transport): per-endpoint concurrency and pace, retries with
  exponential backoff and jitter on 429, 5xx, timeouts and connection errors (honouring
  Retry-After), a hard stop on 401/403/404;
- endpoint pools (pipeline.llm.pools): a pool's calls go to the member with the fewest
  outstanding requests for its concurrency; a member failing ``drain_after`` times in a row is set
  aside for ``drain_s``;
- structured output (pipeline.llm.structured): JSON with a schema in the form the endpoint takes,
  lenient parsing, validation, and repair rounds that tell the model what was wrong (here);
- token and cost accounting (pipeline.llm.pricing): per call (stored) and per client (``usage``);
- pricing mode (``pricing=``, a dry run): a call nobody answered is priced (pipeline.stages.estimate),
  not sent, and answered with a placeholder that is never cached;
- batch mode (``batch=True``, pipeline.llm.batch): a call nobody answered is recorded for a batch
  and BatchPending raised; answers collected from batches are taken in either mode through the
  same accept-and-cache path as an online reply.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from pipeline.core.config import Config, Endpoint
from pipeline.core.errors import EndpointError, ParseError
from pipeline.llm import batch as batch_mode
from pipeline.llm.cache import cache_get, cache_key, cache_put
from pipeline.llm.call import Completion, Params
from pipeline.llm.pricing import Accounts, Usage, usage_scope
from pipeline.llm.prompts import Template
from pipeline.llm.structured import (
    ReplyError,
    accept_json,
    parse_json_lenient,
    repair_message,
    structured_format,
)
from pipeline.llm.transport import Transport
from pipeline.store.database import Store

# The client's public names, wherever they are defined: callers import them from here.
__all__ = [
    "Completion", "EventHook", "LLMClient", "Params", "ReplyError", "Usage", "accept_json", "cache_key",
    "gather_limited", "parse_json_lenient", "repair_message", "structured_format", "usage_scope",
]

T = TypeVar("T")
EventHook = Callable[[str, str], None]


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
        self.on_event = on_event
        self.use_cache = use_cache
        # Batch mode: a call nobody has answered yet is not sent; it is recorded for a batch
        # (pipeline.llm.batch) and BatchPending tells the stage this unit waits. Results collected
        # from batches are taken in either mode, through the same accept-and-cache path.
        self.batch = batch
        self._deferred = batch_mode.DeferredCalls()
        # Pricing mode (a dry run, pipeline.stages.estimate): a call nobody answered is priced, never
        # sent, and answered with a placeholder that is never cached.
        self.pricing = pricing
        self.accounts = Accounts()
        # Per endpoint: whether its replies carry the log-probabilities asked for (None: not known yet).
        self._logprobs: dict[str, bool] = {}
        self._lists_refused: set[str] = set()  # endpoints that refused a list of prompts (note_refused_lists)
        self.transport = Transport(config, self.accounts, self.emit, local_base_url=local_base_url,
                                   local_death=local_death, backoff_base_s=backoff_base_s,
                                   backoff_cap_s=backoff_cap_s)

    # The transport's settings and the accounts' counts, under the client's names.
    @property
    def usage(self) -> Usage:
        return self.accounts.total

    @property
    def usage_by_endpoint(self) -> dict[str, Usage]:
        return self.accounts.by_endpoint

    @property
    def local_base_url(self) -> str | None:
        return self.transport.local_base_url

    @local_base_url.setter
    def local_base_url(self, value: str | None) -> None:
        self.transport.local_base_url = value

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
            hit = cache_get(self.store, key)
            if hit is not None:
                try:
                    value = accept_fn(hit.text)
                except ValueError:
                    value = None  # cached under an older contract: ask again
                else:
                    self.accounts.answered(ep.name, hit, cached=True)
                    if self.pricing is not None:
                        self.pricing.hit(ep.name)
                    return value, hit
        completion, queued = batch_mode.collected_answer(self.store, key,
                                                         ep) if self.use_cache else (None, None)
        if completion is not None:
            self.accounts.answered(ep.name, completion, cached=False)
            if self.pricing is not None:
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
            completion = await self.transport.send(ep, messages, p)
        try:
            value = accept_fn(completion.text)
        except ValueError:
            # A batch reply that breaks the format stays with its batch request (never cached):
            # the repair round asks with the reply quoted, as online, in the next batch.
            self.accounts.count(ep.name, "rejected")
            raise
        if self.use_cache:
            completion.call_id = cache_put(self.store, key, ep, template, messages, p,
                                           completion, self.run_id)
            if queued == "online":  # a failed batch item the user sent online: answered now
                batch_mode.answered_online(self.store, key)
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

        accept = partial(accept_json, validate=validate)
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
                    ep, convo, template=template, params=params,
                    response_format=response_format, accept=accept
                )
                return value, completion  # type: ignore[return-value]
            except ValueError as exc:
                last_error = str(exc)
                reply = getattr(exc, "reply", None)
                self.emit("repair", f"{ep.name}: reply refused ({last_error}); repair round {attempt + 1}")
                convo = list(messages) + [
                    {"role": "assistant", "content": reply if reply is not None else "(unusable reply)"},
                    {"role": "user", "content": repair(last_error) if repair
                     else repair_message(last_error, schema)},
                ]
        prompt = f", prompt {template.name}" if template else ""
        raise ParseError(f"endpoint '{ep.name}' ({ep.model}){prompt}: no usable {what} after {repair_rounds} "
                         f"repair round(s): {last_error}")

    # -- log-probabilities ------------------------------------------------------------
    def gives_logprobs(self, endpoint: Endpoint) -> bool | None:
        """Whether ``endpoint`` returns the log-probabilities asked for: known from check_logprobs or
        an earlier reply; None when not known yet."""
        return self._logprobs.get(endpoint.name)

    def note_logprobs(self, endpoint: Endpoint, given: bool) -> None:
        """Record what a reply showed; an endpoint found without them is said once."""
        if self._logprobs.get(endpoint.name) is given:
            return
        self._logprobs[endpoint.name] = given
        if not given:
            self.emit("notice",
                      f"{endpoint.name} ({endpoint.model}) returns no log-probabilities: its yes_no verdicts "
                                 "read the word it writes (no P(Yes), no calibration)")

    def takes_prompt_lists(self, endpoint: Endpoint) -> bool:
        """Whether ``endpoint`` may be sent one request of several whole prompts (ChatML, as the
        client writes them): it speaks ChatML and has not refused a list in this client's life."""
        return endpoint.chat_format in (None, "chatml") and not self.refused_lists(endpoint)

    async def write_together(
        self, endpoint: Endpoint, prompts: list[str], *, template: Template, params: Params,
        accept: Callable[[str], list[T | None]], response_format: dict[str, Any] | None = None,
    ) -> tuple[list[T | None], Completion | None] | None:
        """Whole ``prompts`` (ChatML) written together as one list request: ``accept`` reads the JSON
        list of replies into one value or None each. A reply it refuses whole gives None for every
        prompt (each may be asked alone); an endpoint that refuses the list is noted (said once, and
        never sent a list again) and gives None."""
        try:
            values, completion = await self.chat(
                endpoint, [{"role": "user", "content": p} for p in prompts], template=template,
                params=replace(params, prompt_list=True), response_format=response_format, accept=accept)
        except ReplyError:
            return [None] * len(prompts), None
        except EndpointError as exc:
            self.note_refused_lists(endpoint, str(exc))
            return None
        return values, completion  # type: ignore[return-value]  # accept's own value

    def writes_lists_together(self, endpoint: Endpoint) -> bool:
        """Whether independent replies (the "more constraints" rounds, a summary's sections) go to
        ``endpoint`` as one list of prompts written together: its ``batch_generation`` is on and it
        takes lists, and this client is neither pricing a dry run nor queueing for a batch API,
        whose answers are one request each."""
        return (endpoint.batch_generation and self.takes_prompt_lists(endpoint) and self.pricing is None
                and not self.batch)

    def refused_lists(self, endpoint: Endpoint) -> bool:
        """Whether ``endpoint`` refused a request of several prompts in this client's life."""
        return endpoint.name in self._lists_refused

    def note_refused_lists(self, endpoint: Endpoint, why: str) -> None:
        """A list of prompts was refused: said once, and the endpoint is asked one prompt a call from
        now on (its yes_no judge one call a constraint, the "more constraints" rounds one at a time)."""
        if endpoint.name not in self._lists_refused:
            self._lists_refused.add(endpoint.name)
            self.emit("notice",
                      f"{endpoint.name} ({endpoint.model}) refused a list of prompts; it is asked one "
                                 f"prompt a call from now on ({why})")

    async def check_logprobs(self, endpoint: str | Endpoint) -> bool:
        """Ask the endpoint once (one token, cached like any call) whether it returns log-probabilities,
        so a yes_no judge says at the start of a run what it will do. A dry run or a batch run cannot
        ask: they assume it does, and the first real reply tells."""
        ep = self.config.endpoint(endpoint) if isinstance(endpoint, str) else endpoint
        known = self._logprobs.get(ep.name)
        if known is not None:
            return known
        if self.pricing is not None or self.batch:
            return True
        messages = [{"role": "user", "content": "Is water wet? Answer with one word: Yes or No."}]
        _, completion = await self.chat(ep, messages,
                                        params=Params(max_tokens=1, logprobs=True, top_logprobs=5))
        self.note_logprobs(ep, bool(completion.logprobs))
        return bool(completion.logprobs)

    async def aclose(self) -> None:
        self.flush_deferred()
        await self.transport.aclose()

    def pool_status(self, name: str) -> dict[str, Any]:
        """Per member of a pool: outstanding requests, drained or dead, times drained, calls."""
        return self.transport.pool_status(name)

    # -- batch mode -----------------------------------------------------------------
    def _defer(self, key: str, ep: Endpoint, template: Template | None, messages: list[dict[str, str]],
               params: dict[str, Any], queued: str | None) -> None:
        """Record the call for a batch and raise BatchPending. A call already waiting in a batch
        is not recorded twice; one whose batch failed waits for the user's choice (collect
        --failed rebatch|online)."""
        from pipeline.core.errors import BatchPending

        self.accounts.count(ep.name, "deferred")
        if queued in ("pending", "submitted", "failed"):
            raise BatchPending(ep.name, failed=queued == "failed")
        if self._deferred.add(key, ep, template, messages, params, self.run_id):
            self.flush_deferred()
        raise BatchPending(ep.name)

    def flush_deferred(self) -> int:
        """Write the deferred calls to ``batch_requests`` (pending). A row already there for the
        key (another process deferred it) is left alone: nothing waiting or failed is queued twice."""
        return self._deferred.flush(self.store)

    def emit(self, kind: str, detail: str) -> None:
        if self.on_event is not None:
            from pipeline.core.redact import redact

            self.on_event(kind, redact(detail) or detail)  # repair events quote replies, which may echo a key


async def gather_limited(coros: list[Awaitable[T]]) -> list[T | BaseException]:
    """Run coroutines concurrently (the client limits per endpoint); errors come back as values."""
    return list(await asyncio.gather(*coros, return_exceptions=True))
