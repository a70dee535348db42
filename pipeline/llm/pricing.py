"""Token and cost accounting: what a call costs at an endpoint's prices, and the ``Usage``
counts a client keeps (in total, per endpoint, and per task scope with ``usage_scope``).

The dry run's pricing of calls nobody answered is pipeline.stages.estimate; it prices a call
with ``online_cost`` here and the endpoint's own ``batch_cost``."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any, Literal

from pipeline.core.config import Endpoint
from pipeline.llm.call import Completion


def online_cost(ep: Endpoint, prompt_tokens: int, completion_tokens: int,
                cached_prompt_tokens: int | None = None) -> float:
    """What a call sent online costs at ``ep``'s prices per million tokens: the prompt tokens the
    endpoint read from its prompt cache at its cached price (``price_cached_prompt_per_mtok``; unset,
    the prompt price), the others at the prompt price, the reply at the completion price."""
    cached = min(cached_prompt_tokens or 0, prompt_tokens)
    cached_price = ep.price_cached_prompt_per_mtok
    if cached_price is None:
        cached_price = ep.price_prompt_per_mtok
    return ((prompt_tokens - cached) * ep.price_prompt_per_mtok + cached * cached_price
            + completion_tokens * ep.price_completion_per_mtok) / 1e6


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
    # Of ``prompt_tokens``, those the endpoints said they read from their prompt cache, over the
    # ``cached_reported`` calls whose replies said (a reply that says nothing is not counted as 0).
    cached_prompt_tokens: int = 0
    cached_reported: int = 0

    def add(self, other: Usage) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def spent_line(u: Usage) -> str:
    """What a client spent, in one line; the prompt tokens read from the endpoints' own prompt caches
    only when an endpoint said how many."""
    cached = f" ({u.cached_prompt_tokens:,} of them cached by the endpoint)" if u.cached_reported else ""
    return (f"LLM calls {u.calls}, cache hits {u.cache_hits}, tokens {u.prompt_tokens:,} in{cached} / "
            f"{u.completion_tokens:,} out, cost ${u.cost:.4f}")


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


# The events Accounts.count counts: Usage fields.
Event = Literal["failures", "retries", "rejected", "deferred"]


@dataclass
class Accounts:
    """A client's counts: ``total`` and one Usage per endpoint (a pool and each of its members)."""

    total: Usage = field(default_factory=Usage)
    by_endpoint: dict[str, Usage] = field(default_factory=dict)

    def of(self, name: str) -> Usage:
        return self.by_endpoint.setdefault(name, Usage())

    def answered(self, name: str, c: Completion, *, cached: bool, scoped: bool = True) -> None:
        """Count a call in the total, the endpoint's and the task's scopes. A pool's member
        counts its own calls (scoped=False); the pool then counts it once for the rest."""
        targets = (self.total, self.of(name), *_SCOPES.get()) if scoped else (self.of(name),)
        for u in targets:
            if cached:
                u.cache_hits += 1
            else:
                u.calls += 1
                u.prompt_tokens += c.prompt_tokens
                u.completion_tokens += c.completion_tokens
                u.cost += c.cost
                if c.cached_prompt_tokens is not None:
                    u.cached_reported += 1
                    u.cached_prompt_tokens += c.cached_prompt_tokens
                if c.via == "batch":
                    u.batch_calls += 1
                    u.batch_cost += c.cost

    def count(self, name: str, event: Event) -> None:
        """One more ``event`` in the endpoint's counts and the total: a call given up on (failures),
        tried again (retries), a reply that broke the format (rejected), a call left to a batch
        (deferred)."""
        for u in (self.of(name), self.total):
            setattr(u, event, getattr(u, event) + 1)
