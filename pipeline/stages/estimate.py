"""A price before the work: what `build`, `evaluate` and `naturalness` would send (``--dry-run``).

How: the command's stages run unchanged against a throwaway copy of the store, with the client
in pricing mode (``LLMClient(pricing=...)``). A call the cache already answers is counted as a
hit. A call nobody answered is not sent: it is priced from its real rendered messages and
answered with a placeholder, the reply a well-behaved model would give (pipeline.llm.placeholders),
so the stage goes on to the calls that depend on it. The placeholder
is never cached, and it lands only in the copy, which is deleted at the end: the store is not
touched, and no server is asked anything.

What is estimated, and how (``Estimate.method`` says it in the output):
- prompt tokens: what the model reads, the messages' text (never the JSON around it, nor the
  schema or grammar in the parameters, which constrain the reply and are not prompt tokens),
  counted by the endpoint's own tokenizer and chat template when it is known here (the embedded
  model: its GGUF's vocabulary, loaded alone); else at the endpoint's characters per prompt token
  measured in ``llm_calls``; else 4 characters a token;
- completion tokens: the placeholder's length (it writes the asked lengths), counted as a prompt
  is, times how long the model's replies ran against the placeholders for the same requests in
  ``llm_calls`` (per endpoint and template, else per template; the newest calls of each); a call
  with no placeholder: the template's mean completion tokens there;
- cost: the endpoint's online prices, and its batch prices (``batch_discount`` or explicit);
- wall time: per endpoint, when its online calls have a measured latency, calls x mean latency
  / concurrency, the endpoints' times added (stages run one after another); otherwise unknown.
A unit whose placeholder a stage refuses stops there: what it would have asked after is not
priced (``unparsed`` counts them). Each placeholder is seeded by its call's cache key, which
covers the endpoint and model: two models' texts differ, so their summaries and verdicts are
priced as the calls the real run pays for, not counted as cache hits.
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
from pipeline.store.llm_calls import (
    newest_answered_calls,
    online_latency_by_endpoint,
    prompt_chars_per_token,
    template_token_rates,
)

CHARS_PER_TOKEN = 4.0  # with no tokenizer and no measured rate
LENGTH_SAMPLE = 200  # per template, the newest calls a reply length is measured on

Messages = list[dict[str, str]]


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
    measured_templates: list[str] = field(default_factory=list)  # completions from llm_calls history
    guessed_templates: list[str] = field(default_factory=list)  # completions: the placeholder's length
    token_counts: dict[str, str] = field(default_factory=dict)  # endpoint -> how its tokens were counted

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
        return None if not times or any(t is None
                                        for t in times) else float(sum(times))  # type: ignore[arg-type]

    @property
    def method(self) -> str:
        parts = [f"{name}'s tokens {how}" for name, how in sorted(self.token_counts.items())]
        if self.measured_templates:
            parts.append("completion tokens of " + ", ".join(sorted(self.measured_templates))
                         + " from their calls in the cache")
        if self.guessed_templates:
            parts.append("completion tokens of " + ", ".join(sorted(self.guessed_templates))
                         + ": a well-behaved model's reply at the asked lengths")
        return "; ".join(parts) or "nothing to send"

    def as_dict(self) -> dict[str, Any]:
        return {
            "command": self.command, "calls": self.calls, "prompt_tokens": self.total("prompt_tokens"),
            "completion_tokens": self.total("completion_tokens"), "cache_hits": self.total("cache_hits"),
            "cost": round(self.cost, 6), "batch_cost": round(self.batch_cost, 6), "wall_s": self.wall_s,
            "unparsed": self.unparsed, "method": self.method,
            "endpoints": {k: v.as_dict() for k, v in self.endpoints.items()},
        }


class TokenCounter:
    """Counts what a model reads and writes in its tokens: the endpoint's tokenizer when one is
    known here, else its measured characters per token (``llm_calls``), else 4. A pool counts as
    its first member."""

    def __init__(self, config: Config, store: Store,
                 tokenizers: dict[str, Callable[[Messages], int] | None] | None = None) -> None:
        self.config = config
        self._rates = prompt_chars_per_token(store)
        self._tokenizers = dict(tokenizers or {})  # endpoint -> messages -> tokens; None: none known

    def _counted_as(self, ep: Endpoint) -> Endpoint:
        return self.config.endpoint(ep.members[0]) if ep.members else ep

    def tokenizer(self, ep: Endpoint) -> Callable[[Messages], int] | None:
        ep = self._counted_as(ep)
        if ep.name not in self._tokenizers:
            self._tokenizers[ep.name] = local_tokenizer() if ep.is_local else None
        return self._tokenizers[ep.name]

    def chars_per_token(self, ep: Endpoint) -> float | None:
        return self._rates.get(ep.name) or self._rates.get(self._counted_as(ep).name)

    def how(self, ep: Endpoint) -> str:
        """How this endpoint's tokens are counted, in words."""
        if self.tokenizer(ep) is not None:
            return "by its own tokenizer"
        rate = self.chars_per_token(ep)
        if rate is not None:
            return f"at {rate:.2f} characters a token, measured on its calls in the cache"
        return f"guessed at {CHARS_PER_TOKEN:.0f} characters a token"

    def prompt(self, ep: Endpoint, messages: Messages) -> int:
        """The prompt tokens of these messages (the chat template's own, with a tokenizer)."""
        tokenize = self.tokenizer(ep)
        if tokenize is not None:
            return tokenize(messages)
        return self._by_rate(ep, sum(len(str(m.get("content", ""))) for m in messages))

    def text(self, ep: Endpoint, text: str) -> int:
        """The tokens of a reply's text."""
        tokenize = self.tokenizer(ep)
        if tokenize is not None:  # the messages' tokens less the template's: the text's own
            return max(0, tokenize([{"role": "assistant", "content": text}])
                       - tokenize([{"role": "assistant", "content": ""}]))
        return self._by_rate(ep, len(text))

    def _by_rate(self, ep: Endpoint, chars: int) -> int:
        return round(chars / (self.chars_per_token(ep) or CHARS_PER_TOKEN))


def local_tokenizer() -> Callable[[Messages], int] | None:
    """The embedded model's tokenizer and chat format, from its GGUF file loaded vocabulary only
    (about a second; no server, no weights): counts a request's prompt tokens as its server does
    (the same chat format, ``local_model.CHAT_FORMAT``, the same tokenizing call). None when
    llama.cpp or the model file is not on this machine."""
    from pipeline.llm import local_model, model_file

    if not (local_model.llama_cpp_available() and model_file.model_ready()):
        return None
    try:
        import llama_cpp
        from llama_cpp import _internals, llama_chat_format

        render = getattr(llama_chat_format,
                         f"format_{(local_model.CHAT_FORMAT or '').replace('-', '')}", None)
        if render is None:
            return None
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True  # the model alone, no context: Llama() would make one and warn about it
        model = _internals.LlamaModel(path_model=str(model_file.target_path()), params=params, verbose=False)
    except Exception:  # noqa: BLE001 - an unreadable model file: counted by rate instead
        return None

    def count(messages: Messages) -> int:
        chat = render(messages=messages)
        # As llama-cpp-python's server tokenizes a formatted chat (a BOS only where the vocabulary asks one).
        return len(model.tokenize(chat.prompt.encode("utf-8"), add_bos=not chat.added_special, special=True))

    return count


class Pricer:
    """The client's pricing mode: prices each call nobody answered and answers it with a
    placeholder (never cached). Built on the real store, whose ``llm_calls`` give the history."""

    def __init__(self, config: Config, store: Store, command: str, tokens: TokenCounter
                 | None = None) -> None:
        self.config = config
        self.estimate = Estimate(command)
        self.unparsed = 0
        self._priced: dict[str, Any] = {}  # cache key -> placeholder: a call asked twice is priced once
        self._history = template_token_rates(store)
        self._latency = online_latency_by_endpoint(store)
        self.tokens = tokens or TokenCounter(config, store)
        self._lengths = reply_length_scales(config, store, self.tokens)

    def answer(self, key: str, ep: Endpoint, template: Template | None, messages: list[dict[str, str]],
               params: dict[str, Any]) -> Any:
        from pipeline.core.errors import BatchPending
        from pipeline.llm.client import Completion

        if key in self._priced:
            return self._priced[key]
        text = stand_in(messages, ep.model, params, key)  # None: no placeholder, the unit stops here
        name = template.name if template else "(no template)"
        prompt = self.tokens.prompt(ep, messages)
        self.estimate.token_counts.setdefault(ep.name, self.tokens.how(ep))
        hist = self._history.get(name)
        scale = self._lengths.get((ep.name, name)) or self._lengths.get(("", name))
        if text is not None and scale is not None:
            completion = round(self.tokens.text(ep, text) * scale)
            _add(self.estimate.measured_templates, name)
        elif text is None and hist is not None:
            completion = round(hist[1])
            _add(self.estimate.measured_templates, name)
        else:
            completion = self.tokens.text(ep, text or "")
            _add(self.estimate.guessed_templates, name)
        if params.get("max_tokens"):
            completion = min(completion, int(params["max_tokens"]))
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


def stand_in(messages: Messages, model: str, params: dict[str, Any], key: str) -> str | None:
    """The placeholder reply to a call (seeded by its cache key), or None when its prompt has none."""
    from pipeline.stages.judging import QUOTE_CAP

    request = {"messages": messages, "model": model,
               **{k: v for k, v in params.items() if k != "response_format"}}
    try:
        return placeholder_reply(request, quote_cap=QUOTE_CAP, seed=key)
    except Exception:  # noqa: BLE001 - a prompt the placeholders cannot read has none
        return None


def reply_length_scales(config: Config, store: Store, tokens: TokenCounter) -> dict[tuple[str, str], float]:
    """How long a model's replies run against the placeholders for the same requests: per
    (endpoint, template), and per ("", template) over every endpoint, the tokens of its newest
    answered calls over their placeholders' tokens. A small model writing half the asked words
    gets 0.5; the fake server's scripted model, which writes what the placeholders write, 1."""
    written: dict[tuple[str, str], int] = {}  # the model's completion tokens
    placeholders: dict[tuple[str, str], int] = {}  # its placeholders' for the same requests
    for call in newest_answered_calls(store, per_template=LENGTH_SAMPLE):
        if call.endpoint not in config.endpoints:
            continue  # no longer configured: its tokens cannot be counted as its endpoint's
        try:
            request = json.loads(call.request)
        except ValueError:
            continue
        text = stand_in(request.get("messages", []), call.model, request.get("params", {}), call.cache_key)
        if not text:
            continue  # a request with no placeholder measures nothing
        placeholder = tokens.text(config.endpoint(call.endpoint), text)
        for key in ((call.endpoint, call.template), ("", call.template)):
            written[key] = written.get(key, 0) + call.completion_tokens
            placeholders[key] = placeholders.get(key, 0) + placeholder
    return {key: written[key] / n for key, n in placeholders.items() if n}


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


async def estimate_build(store: Store, config: Config, options: Any, *, max_units: int
                         | None = None) -> Estimate:
    from pipeline.llm.client import LLMClient
    from pipeline.stages.build import run_build

    async def work(copy: Store, pricer: Pricer) -> None:
        await run_build(copy, config, LLMClient(config, copy, pricing=pricer), options, max_units=max_units)

    return await dry_run(store, config, "build", work)


async def estimate_evaluate(store: Store, config: Config, options: Any, *, max_units: int
                            | None = None) -> Estimate:
    from pipeline.stages.evaluate import evaluate

    async def work(copy: Store, pricer: Pricer) -> None:
        await evaluate(copy, config, options, max_units=max_units, pricing=pricer)

    return await dry_run(store, config, "evaluate", work)


async def estimate_naturalness(store: Store, config: Config, options: Any, *,
                               max_units: int | None = None) -> Estimate:
    from pipeline.llm.client import LLMClient
    from pipeline.stages.naturalness import run_naturalness

    async def work(copy: Store, pricer: Pricer) -> None:
        await run_naturalness(copy, config, LLMClient(config, copy, pricing=pricer), options,
                              max_units=max_units)

    return await dry_run(store, config, "naturalness", work)


def spent_beside(estimate: dict[str, Any] | None, usage: Any) -> str | None:
    """One line: the dry run's estimate beside what the run spent (``usage``: a Usage or run row)."""
    if not estimate:
        return None
    get = (lambda k: usage[k]) if isinstance(usage, dict) else (lambda k: getattr(usage, k))
    return (f"estimate before the run: {estimate['calls']:,} call(s), {estimate['prompt_tokens']:,} + "
            f"{estimate['completion_tokens']:,} tokens, ${estimate['cost']:.4f} online; spent: "
            f"{get('calls'):,} call(s), "
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
    return command + ":" + json.dumps({k: v for k, v in fields.items() if v is not None},
                                      sort_keys=True, default=str)


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
