"""unspecific.toml: endpoints, roles and stage settings.

Keys never live in the file: an endpoint names the environment variable that holds its key
(``api_key_env``), and the value is read only when a request is made. With no config file,
every role uses the embedded local model (``base_url = "local"``), started by the run itself.

Example::

    [endpoints.gpt]
    base_url = "https://api.openai.com/v1"
    model = "gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"
    concurrency = 8
    requests_per_minute = 500
    price_prompt_per_mtok = 0.15
    price_completion_per_mtok = 0.60

    [roles]
    generator = "gpt"
    judges = ["gpt", "local"]
    summarizer = "gpt"
    models_under_test = ["local", "gpt"]
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pipeline.core.definitions import JUDGING_MODES
from pipeline.core.errors import ConfigError

DEFAULT_CONFIG = Path("unspecific.toml")
LOCAL = "local"  # base_url meaning "the embedded llama.cpp server"
POOL = "pool"  # a pool endpoint's base_url: it has no server of its own

ROLES_SINGLE = ("generator", "summarizer", "naturalness_judge")
ROLES_MANY = ("judges", "models_under_test")
STRUCTURED_MODES = ("json_object_schema", "json_schema", "json_object", "none")
JUDGE_FORMATS = ("json", "lines")
BATCH_VIA = ("api", "files")


@dataclass(frozen=True)
class Endpoint:
    name: str
    base_url: str
    model: str
    api_key_env: str | None = None
    concurrency: int = 4
    requests_per_minute: float | None = None
    price_prompt_per_mtok: float = 0.0
    price_completion_per_mtok: float = 0.0
    # What a prompt token the endpoint read from its prompt cache costs (OpenAI's and others' cached
    # input price; the reply says how many: usage.prompt_tokens_details.cached_tokens). None: the
    # prompt price, as if it had no cache.
    price_cached_prompt_per_mtok: float | None = None
    timeout_s: float = 300.0
    max_retries: int = 5
    # How the endpoint takes structured output: llama.cpp's server wants
    # {"type": "json_object", "schema": ...}; OpenAI wants {"type": "json_schema", ...}.
    structured: str = "json_object_schema"
    # How a batched judge replies: "json" (a verdicts object, under the structured format above)
    # or "lines" (the research code's `3. Yes - "quote"` lines: fewer tokens, what a small local
    # model writes fastest; free text, or held to capped lines by a grammar where ``gbnf``).
    judge_format: str = "json"
    # The server takes a GBNF `grammar` field in the request body (llama.cpp's server, and so the
    # embedded local model): a lines judge is then held to one capped line per constraint.
    gbnf: bool = False
    # How this endpoint judges unless the run says otherwise ([evaluate] judging, --judging): one of
    # core.definitions.JUDGING_MODES. ``yes_no`` for the embedded model, whose batched verdicts measured
    # at chance on the built-in check; ``batched`` (the cheap way) for a strong remote judge.
    judging: str = "batched"
    # The prompt template a yes_no judge asks with (prompts/<name>.md): another framing makes a second
    # judge from the same model. None: judge_yes_no.
    judge_prompt: str | None = None
    # The most list items (constraints, or an eval revision's replacements) the model is asked
    # for in one reply; a longer list is completed in rounds that ask for the missing ones.
    # None: the whole list at once. A small model held to 39 items by a grammar runs out of
    # ideas and repeats itself to the end.
    list_items: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    # Batch prices: explicit per-million prices for batch calls, else the online prices times
    # ``batch_discount`` (providers' batch APIs charge half).
    # How --batch sends this endpoint's calls: "api" (the provider's Files and Batches API) or
    # "files" (left for `unspecific batch export`, e.g. vLLM's offline run_batch).
    batch: str = "api"
    batch_discount: float = 0.5
    batch_price_prompt_per_mtok: float | None = None
    batch_price_completion_per_mtok: float | None = None
    # A pool: the names of the member endpoints requests are spread over (least outstanding
    # requests, each member with its own concurrency and rate). Empty for a plain endpoint.
    members: tuple[str, ...] = ()
    drain_after: int = 3  # a member failing this many times in a row is set aside ...
    drain_s: float = 30.0  # ... for this long, then tried again
    # A local model under test beyond the embedded one (base_url "local"): its GGUF file, served by
    # the same llama.cpp server under ``model`` as its alias, and the chat format it speaks.
    gguf: str | None = None
    chat_format: str | None = None
    # A yes_no judge sends all of one text's constraints as one completions request with a list of
    # ChatML prompts (the embedded server, pipeline.llm.prompt_batch; vLLM takes lists too, for a
    # ChatML model): one evaluation of the text, no per-call cost. Off: one call a constraint.
    judge_batch: bool = False
    # Independent asks of one prompt's continuation (the "more constraints" rounds) sent as one
    # completions request with a list of ChatML prompts, written together (the embedded server,
    # pipeline.llm.prompt_batch). Off: one call a round.
    batch_generation: bool = False

    @property
    def is_local(self) -> bool:
        return self.base_url == LOCAL

    def items_per_ask(self, n: int) -> int:
        """How many of ``n`` list items one reply is asked for: ``list_items``, if fewer."""
        return min(n, self.list_items or n)

    @property
    def is_pool(self) -> bool:
        return bool(self.members)

    @property
    def cache_url(self) -> str:
        """The server part of the cache key. A pool's calls are keyed on the model alone: the
        member that answered is not part of the key, so the pool never pays twice for a call."""
        return POOL if self.is_pool else self.base_url

    def batch_cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """What a call costs through a batch API."""
        pp = self.batch_price_prompt_per_mtok
        pc = self.batch_price_completion_per_mtok
        pp = self.price_prompt_per_mtok * self.batch_discount if pp is None else pp
        pc = self.price_completion_per_mtok * self.batch_discount if pc is None else pc
        return (prompt_tokens * pp + completion_tokens * pc) / 1e6

    def api_key(self) -> str:
        """The key's value, read from the environment at call time. Never stored."""
        if not self.api_key_env:
            return "not-needed"
        value = os.environ.get(self.api_key_env)
        if not value:
            raise ConfigError(
                f"endpoint '{self.name}': environment variable {self.api_key_env} (api_key_env) is not set"
            )
        return value

    def public_dict(self) -> dict[str, Any]:
        """What may be shown, stored or exported: the key's variable name, masked value."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in ("members", "drain_after", "drain_s"):
            out.pop(key)
        for key in ("judge_prompt", "gguf", "chat_format"):
            if out[key] is None:
                out.pop(key)
        if self.is_pool:  # in the config's own form, so the public form parses back
            out = {"pool": list(self.members), "model": self.model, "drain_after": self.drain_after,
                   "drain_s": self.drain_s, "max_retries": self.max_retries, "structured": self.structured,
                   "judge_format": self.judge_format, "gbnf": self.gbnf, "judging": self.judging,
                   "name": self.name, **({"judge_prompt": self.judge_prompt} if self.judge_prompt else {})}
        if self.api_key_env:
            present = bool(os.environ.get(self.api_key_env))
            out["api_key"] = "****" + ("(set)" if present else "(NOT SET)")
        return out


def local_endpoint() -> Endpoint:
    return Endpoint(
        name=LOCAL,
        base_url=LOCAL,
        model="qwen2.5-coder-1.5b-instruct-q4_k_m",
        concurrency=1,  # llama.cpp's server answers one request at a time on 2 cores
        timeout_s=900.0,
        max_retries=2,
        structured="json_object_schema",
        judge_format="lines",
        gbnf=True,  # llama-cpp-python's server takes a GBNF grammar
        # One token per constraint, read from its Yes/No probabilities: on the built-in check (205 items)
        # the batched lines judge was at chance (kappa -0.10 on the quick set); docs/measurements.md.
        judging="yes_no",
        judge_batch=True,
        batch_generation=True,
        # Asked for 39, it wrote 6 and 15 distinct items, then repeated them to 39 (615 and 865 tokens).
        list_items=15,
    )


@dataclass(frozen=True)
class Roles:
    generator: str = LOCAL
    judges: tuple[str, ...] = (LOCAL,)
    summarizer: str = LOCAL
    naturalness_judge: str = LOCAL
    models_under_test: tuple[str, ...] = (LOCAL,)


@dataclass(frozen=True)
class Config:
    endpoints: dict[str, Endpoint]
    roles: Roles
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # [build], [evaluate], ...
    path: Path | None = None

    def endpoint(self, name: str) -> Endpoint:
        try:
            return self.endpoints[name]
        except KeyError:
            raise ConfigError(
                f"{self.path or 'config'}: no endpoint named '{name}' (known: "
                f"{', '.join(sorted(self.endpoints))})"
            ) from None

    def role(self, role: str) -> Endpoint:
        return self.endpoint(getattr(self.roles, role))

    def setting(self, section: str, key: str, default: Any) -> Any:
        return self.settings.get(section, {}).get(key, default)

    @property
    def uses_local(self) -> bool:
        names = {self.roles.generator, self.roles.summarizer, self.roles.naturalness_judge}
        names |= set(self.roles.judges) | set(self.roles.models_under_test)
        return any(self.endpoints[n].is_local for n in names)

    def public_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path) if self.path else None,
            "endpoints": {n: e.public_dict() for n, e in self.endpoints.items()},
            "roles": {
                "generator": self.roles.generator,
                "judges": list(self.roles.judges),
                "summarizer": self.roles.summarizer,
                "naturalness_judge": self.roles.naturalness_judge,
                "models_under_test": list(self.roles.models_under_test),
            },
            "settings": self.settings,
        }


def default_config() -> Config:
    return Config(endpoints={LOCAL: local_endpoint()}, roles=Roles())


def load_config(path: str | Path | None = None, *, need_keys: bool = True) -> Config:
    """Load a config file. ``None`` means unspecific.toml if present, else the local default.
    ``need_keys``: an endpoint whose key variable is unset is an error now (commands that call
    endpoints); False for commands that only read the store (report), which must not need a key."""
    if path is None:
        if not DEFAULT_CONFIG.exists():
            return default_config()
        path = DEFAULT_CONFIG
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: config file not found")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    except OSError as exc:  # a folder, no permission
        raise ConfigError(f"{path}: cannot read the config file ({exc.strerror})") from exc
    return parse_config(raw, path, need_keys=need_keys)


_SECTIONS = {"endpoints", "roles", "build", "evaluate", "corpus", "pair", "report"}


def parse_config(raw: dict[str, Any], path: Path | None = None, *, need_keys: bool = True) -> Config:
    where = str(path) if path else "config"
    unknown = set(raw) - _SECTIONS
    if unknown:
        raise ConfigError(f"{where}: unknown section(s) {', '.join(sorted(unknown))} (known: "
                          f"{', '.join(sorted(_SECTIONS))})")
    endpoints = {LOCAL: local_endpoint()}
    pools: dict[str, dict[str, Any]] = {}
    for name, spec in (raw.get("endpoints") or {}).items():
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: [endpoints.{name}] must be a table")
        if "pool" in spec:
            pools[name] = spec  # after the plain endpoints: a pool names them
        elif isinstance(spec.get("base_url"), list):
            # The short form of a pool: several servers with the same settings, one member each.
            urls = spec["base_url"]
            if not urls or not all(isinstance(u, str) for u in urls):
                raise ConfigError(f"{where}: endpoints.{name}.base_url: a URL or a non-empty list of URLs")
            members = []
            for i, url in enumerate(urls, 1):
                member = f"{name}[{i}]"
                member_spec = {k: v for k, v in spec.items() if k not in _POOL_ONLY}
                endpoints[member] = _parse_endpoint(member, {**member_spec, "base_url": url},
                                                    where, need_keys)
                members.append(member)
            pool_spec = {k: v for k, v in spec.items()
                         if k in _POOL_ONLY
                         or k in ("model", "structured", "judge_format", "gbnf", "judging", "judge_prompt")}
            pools[name] = {**pool_spec, "pool": members}
        else:
            endpoints[name] = _parse_endpoint(name, spec, where, need_keys)
    for name, spec in pools.items():
        endpoints[name] = _parse_pool(name, spec, endpoints, where, set(pools))
    roles = _parse_roles(raw.get("roles") or {}, endpoints, where)
    settings = {k: v for k, v in raw.items() if k not in ("endpoints", "roles")}
    for section, value in settings.items():
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: [{section}] must be a table")
    return Config(endpoints=endpoints, roles=roles, settings=settings, path=path)


def _parse_endpoint(name: str, spec: dict[str, Any], where: str, need_keys: bool = True) -> Endpoint:
    known = {f.name for f in fields(Endpoint)} - {"name", "members", "drain_after", "drain_s"}
    field_at = f"{where}: endpoints.{name}"
    for key in spec:
        if key not in known:
            raise ConfigError(f"{field_at}.{key}: unknown field (known: {', '.join(sorted(known))})")
    if "api_key" in spec:  # pragma: no cover - caught above; kept for the message's sake
        raise ConfigError(f"{field_at}.api_key: put the key in an environment variable and "
                          "name it in api_key_env")
    base_url = spec.get("base_url")
    if not isinstance(base_url, str) or not base_url:
        raise ConfigError(f"{field_at}.base_url: required (an http(s) URL, or \"local\")")
    if base_url != LOCAL:
        parsed = urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigError(f"{field_at}.base_url: '{base_url}' is not an http(s) URL")
    model = spec.get("model", local_endpoint().model if base_url == LOCAL else None)
    if not isinstance(model, str) or not model:
        raise ConfigError(f"{field_at}.model: required")
    key_env = spec.get("api_key_env")
    if key_env is not None:
        if not isinstance(key_env, str) or not key_env:
            raise ConfigError(f"{field_at}.api_key_env: must name an environment variable")
        if need_keys and not os.environ.get(key_env):
            raise ConfigError(f"{field_at}.api_key_env: environment variable {key_env} is not set")
        from pipeline.core.redact import remember_env

        remember_env(key_env)  # its value is never shown in an error
    values: dict[str, Any] = {"name": name, "base_url": base_url, "model": model, "api_key_env": key_env}
    numeric = {
        "concurrency": (int, 1),
        "requests_per_minute": (float, None),
        "price_prompt_per_mtok": (float, 0.0),
        "price_completion_per_mtok": (float, 0.0),
        "price_cached_prompt_per_mtok": (float, 0.0),
        "timeout_s": (float, None),
        "max_retries": (int, 0),
        "list_items": (int, 1),
        "batch_discount": (float, 0.0),
        "batch_price_prompt_per_mtok": (float, 0.0),
        "batch_price_completion_per_mtok": (float, 0.0),
    }
    for key, (kind, minimum) in numeric.items():
        if key not in spec:
            continue
        value = spec[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int
                                                                              and not isinstance(value, int)):
            raise ConfigError(f"{field_at}.{key}: must be a{'n integer' if kind is int else ' number'}, got "
                              f"{value!r}")
        if (minimum is not None
            and value < minimum) or value < 0 or (key in ("timeout_s", "requests_per_minute") and value <= 0):
            raise ConfigError(f"{field_at}.{key}: must be positive, got {value!r}")
        values[key] = kind(value)
    values.update(_choice_fields(spec, field_at))
    values.update(_judging_fields(spec, field_at))
    if "extra_body" in spec:
        if not isinstance(spec["extra_body"], dict):
            raise ConfigError(f"{field_at}.extra_body: must be a table")
        values["extra_body"] = spec["extra_body"]
    values.update(_local_file_fields(spec, field_at, base_url))
    if base_url == LOCAL:
        defaults = local_endpoint()
        values.setdefault("concurrency", defaults.concurrency)
        values.setdefault("timeout_s", defaults.timeout_s)
        values.setdefault("judge_format", defaults.judge_format)
        values.setdefault("gbnf", defaults.gbnf)
        values.setdefault("list_items", defaults.list_items)
        values.setdefault("judging", defaults.judging)
        values.setdefault("judge_batch", defaults.judge_batch)
        values.setdefault("batch_generation", defaults.batch_generation)
    return Endpoint(**values)


# An endpoint's fields that take one of a few names: the names, and what the field decides.
_CHOICES: dict[str, tuple[tuple[str, ...], str]] = {
    "structured": (STRUCTURED_MODES, ""),
    "judge_format": (JUDGE_FORMATS, ""),
    "batch": (BATCH_VIA, " (how --batch sends its calls)"),
}
# Its fields that are true or false: what each decides.
_FLAGS = {
    "judge_batch": "whether a yes_no judge sends a text's constraints as one list of prompts",
    "batch_generation": "whether independent replies (rounds, summary sections) go as one list of prompts",
    "gbnf": "whether the server takes a GBNF `grammar` field",
}


def _choice_fields(spec: dict[str, Any], at: str) -> dict[str, Any]:
    """The endpoint's ``_CHOICES`` and ``_FLAGS`` fields it sets, checked."""
    out: dict[str, Any] = {}
    for key, (names, decides) in _CHOICES.items():
        if key in spec:
            if spec[key] not in names:
                raise ConfigError(f"{at}.{key}: one of {', '.join(names)}{decides}")
            out[key] = spec[key]
    for key, decides in _FLAGS.items():
        if key in spec:
            if not isinstance(spec[key], bool):
                raise ConfigError(f"{at}.{key}: true or false ({decides}), got {spec[key]!r}")
            out[key] = spec[key]
    return out


def _local_file_fields(spec: dict[str, Any], at: str, base_url: str) -> dict[str, Any]:
    """``gguf`` (a GGUF file that must exist) and ``chat_format``, for a local model only."""
    out: dict[str, Any] = {}
    for key in ("gguf", "chat_format"):
        if key not in spec:
            continue
        value = spec[key]
        if base_url != LOCAL:
            raise ConfigError(f"{at}.{key}: only for a local model (base_url = \"local\")")
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{at}.{key}: must be a non-empty string, got {value!r}")
        out[key] = value
    if "gguf" in out:
        path = Path(out["gguf"]).expanduser()
        if not path.is_file():
            raise ConfigError(f"{at}.gguf: no such file: {path}")
        out["gguf"] = str(path.resolve())
    return out


def _judging_fields(spec: dict[str, Any], at: str) -> dict[str, Any]:
    """``judging`` and ``judge_prompt`` of an endpoint or pool, checked."""
    out: dict[str, Any] = {}
    if "judging" in spec:
        if spec["judging"] not in JUDGING_MODES:
            raise ConfigError(f"{at}.judging: one of {', '.join(JUDGING_MODES)}, got {spec['judging']!r}")
        out["judging"] = spec["judging"]
    if "judge_prompt" in spec:
        name = spec["judge_prompt"]
        if not isinstance(name, str) or not name or "/" in name or name.endswith(".md"):
            raise ConfigError(f"{at}.judge_prompt: the name of a prompt template in prompts/ (e.g. "
                              f"\"judge_yes_no_evidence\"), got {name!r}")
        out["judge_prompt"] = name
    return out


_POOL_ONLY = ("pool", "drain_after", "drain_s", "max_retries")
_POOL_FIELDS = {"pool", "model", "drain_after", "drain_s", "max_retries", "structured", "judge_format",
                "gbnf", "judging",
                "judge_prompt"}


def _parse_pool(name: str, spec: dict[str, Any], endpoints: dict[str, Endpoint], where: str,
                pool_names: set[str]) -> Endpoint:
    """A pool: ``pool = ["gpu1", "gpu2"]`` names member endpoints. Requests go to the member with
    the fewest outstanding requests for its concurrency; each member keeps its own limits."""
    at = f"{where}: endpoints.{name}"
    for key in spec:
        if key not in _POOL_FIELDS:
            raise ConfigError(f"{at}.{key}: not a pool field (a pool takes "
                              f"{', '.join(sorted(_POOL_FIELDS))}; "
                              "concurrency, rates, prices and keys belong to its members)")
    members = spec["pool"]
    if not isinstance(members, list) or not members or not all(isinstance(m, str) for m in members):
        raise ConfigError(f"{at}.pool: a non-empty list of endpoint names")
    if len(set(members)) != len(members):
        raise ConfigError(f"{at}.pool: a member is listed twice")
    for m in members:
        if m in pool_names:
            raise ConfigError(f"{at}.pool: '{m}' is a pool; list its members instead")
        if m not in endpoints:
            known = ", ".join(sorted(n for n, e in endpoints.items() if not e.is_pool))
            raise ConfigError(f"{at}.pool: no endpoint named '{m}' (a member must be a plain "
                              f"endpoint; known: {known})")
        if endpoints[m].is_local:
            raise ConfigError(f"{at}.pool: '{m}' is the embedded local model, which runs "
                              "one server per machine")
    first = endpoints[members[0]]
    model = spec.get("model")
    models = {endpoints[m].model for m in members}
    if model is None:
        if len(models) > 1:
            # The cache key is the pool's model: members serving differently named models must say
            # which one the pool stands for, or two models' replies would share a key.
            raise ConfigError(f"{at}.model: the members serve {', '.join(sorted(models))}; "
                              "set the pool's model "
                              "(the name its cached calls are kept under) if they are the same model")
        model = first.model
    if not isinstance(model, str) or not model:
        raise ConfigError(f"{at}.model: a model name")
    values: dict[str, Any] = {
        "name": name, "base_url": POOL, "model": model, "members": tuple(members),
        "concurrency": sum(endpoints[m].concurrency for m in members),
        "structured": spec.get("structured", first.structured),
        "judge_format": spec.get("judge_format", first.judge_format),
        "judging": first.judging,
        "judge_prompt": first.judge_prompt,
        # Attempts over the whole pool: enough to try every member a few times.
        "max_retries": spec.get("max_retries", max(first.max_retries, 2 * len(members))),
        "timeout_s": max(endpoints[m].timeout_s for m in members),
    }
    if values["structured"] not in STRUCTURED_MODES:
        raise ConfigError(f"{at}.structured: one of {', '.join(STRUCTURED_MODES)}")
    if values["judge_format"] not in JUDGE_FORMATS:
        raise ConfigError(f"{at}.judge_format: one of {', '.join(JUDGE_FORMATS)}")
    # A grammar goes to whichever member answers: the pool takes one only when every member does.
    gbnf = spec.get("gbnf", all(endpoints[m].gbnf for m in members))
    if not isinstance(gbnf, bool):
        raise ConfigError(f"{at}.gbnf: true or false (whether the server takes a GBNF `grammar` "
                          f"field), got {gbnf!r}")
    if gbnf and not all(endpoints[m].gbnf for m in members):
        plain = ", ".join(m for m in members if not endpoints[m].gbnf)
        raise ConfigError(f"{at}.gbnf: true, but member(s) {plain} do not take a GBNF grammar (set "
                          "gbnf = true on them)")
    values["gbnf"] = gbnf
    values.update(_judging_fields(spec, at))
    for key, kind in (("drain_after", int), ("drain_s", float), ("max_retries", int)):
        if key in spec:
            value = spec[key]
            if isinstance(value, bool) or not isinstance(value,
                                                         (int, float)) or (kind is int
                                                                           and not isinstance(value, int)) \
                    or value < (0 if key == "max_retries" else 1 if kind is int else 0):
                raise ConfigError(f"{at}.{key}: a positive {'integer' if kind is int else 'number'}, got "
                                  f"{value!r}")
            values[key] = kind(value)
    return Endpoint(**values)


def _parse_roles(spec: dict[str, Any], endpoints: dict[str, Endpoint], where: str) -> Roles:
    values: dict[str, Any] = {}
    for key, value in spec.items():
        at = f"{where}: roles.{key}"
        if key in ROLES_SINGLE:
            if not isinstance(value, str):
                raise ConfigError(f"{at}: must name one endpoint")
            names: list[str] = [value]
            values[key] = value
        elif key in ROLES_MANY:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{at}: must be a non-empty list of endpoint names")
            names = value
            values[key] = tuple(value)
        else:
            raise ConfigError(f"{at}: unknown role (known: {', '.join(ROLES_SINGLE + ROLES_MANY)})")
        for n in names:
            if n not in endpoints:
                raise ConfigError(f"{at}: no endpoint named '{n}' (known: {', '.join(sorted(endpoints))})")
    return Roles(**values)
