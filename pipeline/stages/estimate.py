"""A price before the work: what `build`, `evaluate` and `naturalness` would send (``--dry-run``).

How: the command's stages run unchanged against a throwaway copy of the store, with the client
in pricing mode (``LLMClient(pricing=...)``). A call the cache already answers is counted as a
hit. A call nobody answered is not sent: it is priced from its real rendered messages and
answered with a placeholder, the reply a well-behaved model would give (pipeline.llm.placeholders),
so the stage goes on to the calls that depend on it. The placeholder
is never cached, and it lands only in the copy, which is deleted at the end: the store is not
touched, and no server is asked anything.

What is estimated, and how (``Estimate.method`` says it in the output):
- prompt tokens: the rendered messages' characters times the template's measured tokens per
  character in ``llm_calls`` (its calls' prompt tokens over their stored request's length);
  with no history, 4 characters a token;
- completion tokens: the template's mean completion tokens per call in ``llm_calls``; with no
  history, the placeholder's length at 4 characters a token (it writes the asked lengths);
- cost: the endpoint's online prices, and its batch prices (``batch_discount`` or explicit);
- wall time: per endpoint, when its online calls have a measured latency, calls x mean latency
  / concurrency, the endpoints' times added (stages run one after another); otherwise unknown.
A unit whose placeholder a stage refuses stops there: what it would have asked after is not
priced (``unparsed`` counts them).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.config import Config, Endpoint
from pipeline.llm.placeholders import placeholder_reply
from pipeline.llm.prompts import Template
from pipeline.store.database import Store, copy_store, open_store
from pipeline.store.llm_calls import online_latency_by_endpoint, template_token_rates

CHARS_PER_TOKEN = 4.0


@dataclass
class EndpointEstimate:
    endpoint: str
    calls: int = 0  # calls that would be sent
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0  # calls the cache already answers
    cost: float = 0.0  # online
    batch_cost: float = 0.0
    wall_s: float | None = None  # None: no measured latency for this endpoint

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Estimate:
    command: str
    endpoints: dict[str, EndpointEstimate] = field(default_factory=dict)
    unparsed: int = 0  # units whose placeholder the stage refused: their later calls are not priced
    measured_templates: list[str] = field(default_factory=list)  # templates priced from llm_calls history
    guessed_templates: list[str] = field(default_factory=list)  # priced at 4 characters a token

    def total(self, name: str) -> Any:
        return sum(getattr(e, name) for e in self.endpoints.values())

    @property
    def calls(self) -> int:
        return int(self.total("calls"))

    @property
    def cost(self) -> float:
        return float(self.total("cost"))

    @property
    def batch_cost(self) -> float:
        return float(self.total("batch_cost"))

    @property
    def wall_s(self) -> float | None:
        times = [e.wall_s for e in self.endpoints.values() if e.calls]
        return None if not times or any(t is None for t in times) else float(sum(times))  # type: ignore[arg-type]

    @property
    def method(self) -> str:
        parts = []
        if self.measured_templates:
            parts.append("tokens of " + ", ".join(sorted(self.measured_templates)) + " from their calls in the cache")
        if self.guessed_templates:
            parts.append("tokens of " + ", ".join(sorted(self.guessed_templates)) + " guessed at 4 characters a token "
                         "(completions: a well-behaved model's reply at the asked lengths)")
        return "; ".join(parts) or "nothing to send"

    def as_dict(self) -> dict[str, Any]:
        return {
            "command": self.command, "calls": self.calls, "prompt_tokens": self.total("prompt_tokens"),
            "completion_tokens": self.total("completion_tokens"), "cache_hits": self.total("cache_hits"),
            "cost": round(self.cost, 6), "batch_cost": round(self.batch_cost, 6), "wall_s": self.wall_s,
            "unparsed": self.unparsed, "method": self.method,
            "endpoints": {k: v.as_dict() for k, v in self.endpoints.items()},
        }


class Pricer:
    """The client's pricing mode: prices each call nobody answered and answers it with a
    placeholder (never cached). Built on the real store, whose ``llm_calls`` give the history."""

    def __init__(self, config: Config, store: Store, command: str) -> None:
        self.config = config
        self.estimate = Estimate(command)
        self.unparsed = 0
        self._priced: dict[str, Any] = {}  # cache key -> placeholder: a call asked twice is priced once
        self._history = template_token_rates(store)
        self._latency = online_latency_by_endpoint(store)

    def answer(self, key: str, ep: Endpoint, template: Template | None, messages: list[dict[str, str]],
               params: dict[str, Any]) -> Any:
        from pipeline.core.errors import BatchPending
        from pipeline.llm.client import Completion
        from pipeline.stages.judging import QUOTE_CAP

        if key in self._priced:
            return self._priced[key]
        request = {"messages": messages, **{k: v for k, v in params.items() if k != "response_format"}}
        try:
            text = placeholder_reply(request, quote_cap=QUOTE_CAP)
        except Exception:  # noqa: BLE001 - no placeholder for this request: the unit stops here
            text = None
        name = template.name if template else "(no template)"
        chars = len(json.dumps({"messages": messages, "params": params}, ensure_ascii=False))
        hist = self._history.get(name)
        if hist is not None:
            prompt = round(chars * hist[0])
            completion = round(hist[1])
            _add(self.estimate.measured_templates, name)
        else:
            prompt = round(chars / CHARS_PER_TOKEN)
            completion = round(len(text or "") / CHARS_PER_TOKEN)
            if params.get("max_tokens"):
                completion = min(completion, int(params["max_tokens"]))
            _add(self.estimate.guessed_templates, name)
        e = self.estimate.endpoints.setdefault(ep.name, EndpointEstimate(ep.name))
        if ep.members:  # a pool's prices are its members': priced at the first one's
            ep = self.config.endpoint(ep.members[0])
        e.calls += 1
        e.prompt_tokens += prompt
        e.completion_tokens += completion
        e.cost += (prompt * ep.price_prompt_per_mtok + completion * ep.price_completion_per_mtok) / 1e6
        e.batch_cost += ep.batch_cost(prompt, completion)
        if text is None:
            self.unparsed += 1
            raise BatchPending(e.endpoint)
        placeholder = Completion(text, 0, 0, 0.0, False, None, 0.0, e.endpoint, via="estimate")
        self._priced[key] = placeholder
        return placeholder

    def hit(self, endpoint: str) -> None:
        """A call the cache already answers."""
        self.estimate.endpoints.setdefault(endpoint, EndpointEstimate(endpoint)).cache_hits += 1

    def finish(self) -> Estimate:
        """The estimate, with the wall times."""
        est = self.estimate
        est.unparsed = self.unparsed
        for name, e in est.endpoints.items():
            latency = self._latency.get(name)
            if latency is not None and e.calls:
                e.wall_s = e.calls * latency / max(1, _concurrency(self.config, name))
        return est


def _add(names: list[str], name: str) -> None:
    if name not in names:
        names.append(name)


def _concurrency(config: Config, name: str) -> int:
    ep = config.endpoint(name)
    if ep.members:
        return sum(config.endpoint(m).concurrency for m in ep.members)
    return ep.concurrency


async def dry_run(store: Store, config: Config, command: str,
                  work: Callable[[Store, Pricer], Awaitable[Any]]) -> Estimate:
    """Run ``work(copy, pricer)`` (the command's stages, with a client made with ``pricing=pricer``)
    against a copy of the store, and return what it would have sent. The store is not written."""
    store.commit()
    pricer = Pricer(config, store, command)
    tmp = Path(tempfile.mkdtemp(prefix="unspecific-dry-run-"))
    try:
        copy_store(store, tmp / "store.db")
        copy = open_store(tmp / "store.db")
        try:
            await work(copy, pricer)
        finally:
            pricer.finish()  # the wall times, also when the work stopped on an error
            copy.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return pricer.estimate


async def estimate_build(store: Store, config: Config, options: Any, *, max_units: int | None = None) -> Estimate:
    from pipeline.llm.client import LLMClient
    from pipeline.stages.build import run_build

    async def work(copy: Store, pricer: Pricer) -> None:
        await run_build(copy, config, LLMClient(config, copy, pricing=pricer), options, max_units=max_units)

    return await dry_run(store, config, "build", work)


async def estimate_evaluate(store: Store, config: Config, options: Any, *, max_units: int | None = None) -> Estimate:
    from pipeline.stages.evaluate import evaluate

    async def work(copy: Store, pricer: Pricer) -> None:
        await evaluate(copy, config, options, max_units=max_units, pricing=pricer)

    return await dry_run(store, config, "evaluate", work)


async def estimate_naturalness(store: Store, config: Config, options: Any, *,
                               max_units: int | None = None) -> Estimate:
    from pipeline.llm.client import LLMClient
    from pipeline.stages.naturalness import run_naturalness

    async def work(copy: Store, pricer: Pricer) -> None:
        await run_naturalness(copy, config, LLMClient(config, copy, pricing=pricer), options, max_units=max_units)

    return await dry_run(store, config, "naturalness", work)


def spent_beside(estimate: dict[str, Any] | None, usage: Any) -> str | None:
    """One line: the dry run's estimate beside what the run spent (``usage``: a Usage or run row)."""
    if not estimate:
        return None
    get = (lambda k: usage[k]) if isinstance(usage, dict) else (lambda k: getattr(usage, k))
    return (f"estimate before the run: {estimate['calls']:,} call(s), {estimate['prompt_tokens']:,} + "
            f"{estimate['completion_tokens']:,} tokens, ${estimate['cost']:.4f} online; spent: {get('calls'):,} call(s), "
            f"{get('prompt_tokens'):,} + {get('completion_tokens'):,} tokens, ${get('cost'):.4f}")


# -- the estimate beside what the run spent ----------------------------------------------
# A dry run keeps its estimate in a small file beside the store (never in the store: a dry run
# writes nothing there); the same command run for real takes it up, records it in its run's
# config and prints it beside what it spent.

def estimate_key(command: str, options: Any) -> str:
    import dataclasses

    # An options instance or a plain mapping (a dataclass class itself is neither).
    if dataclasses.is_dataclass(options) and not isinstance(options, type):
        fields = dataclasses.asdict(options)
    else:
        fields = dict(options)
    return command + ":" + json.dumps({k: v for k, v in fields.items() if v is not None}, sort_keys=True, default=str)


def _estimates_file(store: Store) -> Path:
    return Path(str(store.path) + ".estimates.json")


def save_estimate(store: Store, key: str, estimate: Estimate) -> None:
    path = _estimates_file(store)
    try:
        saved = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except ValueError:
        saved = {}
    saved[key] = estimate.as_dict()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(saved, indent=1), encoding="utf-8")
    tmp.replace(path)


def take_estimate(store: Store, key: str) -> dict[str, Any] | None:
    """The estimate a dry run of this command saved (None when there is none), and forget it."""
    path = _estimates_file(store)
    try:
        saved = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, ValueError):
        return None
    found = saved.pop(key, None)
    if found is not None:
        if saved:
            path.write_text(json.dumps(saved, indent=1), encoding="utf-8")
        else:
            path.unlink(missing_ok=True)
    return found
