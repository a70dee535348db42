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

Each setting of an endpoint is declared once, as a field of ``Endpoint`` (a pydantic dataclass): its
type, default, bounds and what it decides. The file is checked against those declarations (a refusal
is a ConfigError naming the file, the key and the value), and docs/configuration.md's table of
settings is written from them (pipeline.outputs.config_docs; tests/test_config.py keeps the two equal).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass as plain_dataclass
from dataclasses import field, fields, replace
from pathlib import Path
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlparse

from pydantic import ConfigDict, Field, ValidationError, field_validator
from pydantic.dataclasses import dataclass
from pydantic.fields import FieldInfo

from pipeline.core.definitions import JUDGING_MODES
from pipeline.core.errors import ConfigError, UnspecificError

DEFAULT_CONFIG = Path("unspecific.toml")
LOCAL = "local"  # base_url meaning "the embedded llama.cpp server"
POOL = "pool"  # a pool endpoint's base_url: it has no server of its own

StructuredMode = Literal["json_object_schema", "json_schema", "json_object", "none"]
JudgeFormat = Literal["json", "lines"]
BatchVia = Literal["api", "files"]
JudgingMode = Literal[JUDGING_MODES]  # type: ignore[valid-type]
STRUCTURED_MODES: tuple[str, ...] = get_args(StructuredMode)
JUDGE_FORMATS: tuple[str, ...] = get_args(JudgeFormat)
BATCH_VIA: tuple[str, ...] = get_args(BatchVia)
# A value of the file is taken as written: no "4" for 4, no 1 for true, no 2.5 for a count.
STRICT = ConfigDict(strict=True, extra="forbid")


@dataclass(frozen=True, config=STRICT)
class Endpoint:
    """Where calls go and how: one [endpoints.NAME] table of unspecific.toml, each setting declared
    once here with its type, default, bounds and what it decides (``description``)."""

    name: str
    base_url: Annotated[str, Field(description='an http(s) URL of an OpenAI-compatible server, or "local" '
        "(the embedded llama.cpp server, started by the run)")]
    model: Annotated[str, Field(min_length=1, description="the model's name at the server (a local "
        "endpoint: the embedded model unless set)")]
    api_key_env: Annotated[str | None, Field(min_length=1, description="the environment variable holding "
        "the key, read when a call is made (a key is never in the file)")] = None
    concurrency: Annotated[int, Field(ge=1, description="requests in flight at once")] = 4
    requests_per_minute: Annotated[float | None, Field(gt=0, description="the most requests a minute "
        "(unset: no limit)")] = None
    price_prompt_per_mtok: Annotated[float, Field(ge=0, description="dollars per million prompt "
        "tokens")] = 0.0
    price_completion_per_mtok: Annotated[float, Field(ge=0, description="dollars per million completion "
        "tokens")] = 0.0
    # OpenAI"s and others" cached input price; the reply says how many (usage.prompt_tokens_details).
    price_cached_prompt_per_mtok: Annotated[float | None, Field(ge=0, description="dollars per million "
        "prompt tokens read from the endpoint's prompt cache (unset: the prompt price)")] = None
    timeout_s: Annotated[float, Field(gt=0, description="seconds one call may take")] = 300.0
    max_retries: Annotated[int, Field(ge=0, description="attempts after a failed call (a pool: over all "
        "its members)")] = 5
    # llama.cpp's server wants {"type": "json_object", "schema": ...}; OpenAI {"type": "json_schema", ...}.
    structured: Annotated[StructuredMode, Field(description="how the server takes structured output")] = \
        "json_object_schema"
    # "lines": the research code's `3. Yes - "quote"` lines, fewer tokens, what a small local model
    # writes fastest (held to capped lines by a grammar where ``gbnf``).
    judge_format: Annotated[JudgeFormat, Field(description="how a batched judge replies: a JSON verdicts "
        'object, or lines (`3. Yes - "quote"`)')] = "json"
    gbnf: Annotated[bool, Field(description="whether the server takes a GBNF `grammar` field (llama.cpp's "
        "server does)")] = False
    # yes_no for the embedded model, whose batched verdicts measured at chance on the built-in check.
    judging: Annotated[JudgingMode, Field(description="how it judges when the run names no mode "
        "([evaluate] judging, --judging)")] = "batched"
    judge_prompt: Annotated[str | None, Field(min_length=1, description="the prompt template in prompts/ a "
        "yes_no judge asks with (unset: judge_yes_no): another framing, a second judge from the same "
        "model")] = None
    # A small model held to 39 items by a grammar runs out of ideas and repeats itself to the end.
    list_items: Annotated[int | None, Field(ge=1, description="the most list items (constraints, an eval "
        "revision's replacements) one reply is asked for, the rest in rounds (unset: all at once)")] = None
    extra_body: Annotated[dict[str, Any], Field(description="fields added to every request's body")] = \
        field(default_factory=dict)
    batch: Annotated[BatchVia, Field(description="how --batch sends its calls: the provider's Batch API, "
        "or files left for `unspecific batch export`")] = "api"
    batch_discount: Annotated[float, Field(ge=0, description="batch prices as a share of the online ones "
        "(providers' batch APIs charge half)")] = 0.5
    batch_price_prompt_per_mtok: Annotated[float | None, Field(ge=0, description="dollars per million "
        "prompt tokens in a batch (unset: the discount)")] = None
    batch_price_completion_per_mtok: Annotated[float | None, Field(ge=0, description="dollars per million "
        "completion tokens in a batch (unset: the discount)")] = None
    # A pool's: least outstanding requests first, each member with its own concurrency and rate.
    members: Annotated[tuple[str, ...], Field(description="a pool's member endpoints (plain ones), which "
        "its requests are spread over")] = ()
    drain_after: Annotated[int, Field(ge=1, description="a pool member failing this many times in a row is "
        "set aside ...")] = 3
    drain_s: Annotated[float, Field(ge=0, description="... for this many seconds, then tried again")] = 30.0
    # A local model under test beyond the embedded one, served by the same llama.cpp server.
    gguf: Annotated[str | None, Field(min_length=1, description="a local model's GGUF file (must exist), "
        "held under ``model`` as its alias")] = None
    chat_format: Annotated[str | None, Field(min_length=1, description="a local model's chat format "
        "(llama-cpp-python's name for its chat template)")] = None
    judge_batch: Annotated[bool, Field(description="whether a yes_no judge sends a text's constraints as "
        "one list of prompts (the embedded server, vLLM)")] = False
    batch_generation: Annotated[bool, Field(description="whether independent replies (rounds, summary "
        "sections) go as one list of prompts, written together")] = False

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if value in (LOCAL, POOL):
            return value
        parsed = urlparse(value)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"'{value}' is not an http(s) URL")
        return value

    @field_validator("judge_prompt")
    @classmethod
    def _template_name(cls, value: str | None) -> str | None:
        if value is not None and ("/" in value or value.endswith(".md")):
            raise ValueError('the name of a prompt template in prompts/ (e.g. "judge_yes_no_evidence"), '
                             f"got {value!r}")
        return value

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


@dataclass(frozen=True, config=STRICT)
class Roles:
    """Which endpoint does what: the [roles] table, each role declared once."""

    generator: Annotated[str, Field(description="writes the constraints and the revisions")] = LOCAL
    judges: Annotated[tuple[str, ...], Field(description="judge every text; their verdicts are averaged")] = \
        (LOCAL,)
    summarizer: Annotated[str, Field(description="summarises the responses")] = LOCAL
    naturalness_judge: Annotated[str, Field(description="rates how natural an instruction reads")] = LOCAL
    models_under_test: Annotated[tuple[str, ...], Field(description="write the responses")] = (LOCAL,)


def declared(cls: type) -> dict[str, FieldInfo]:
    """The settings a pydantic dataclass declares (Endpoint, Roles), by name, in order."""
    return cls.__pydantic_fields__  # type: ignore[attr-defined]


# Roles naming one endpoint, and roles naming several (a name alone is a list of one).
ROLES_SINGLE = tuple(name for name, info in declared(Roles).items() if info.annotation is str)
ROLES_MANY = tuple(f.name for f in fields(Roles) if f.name not in ROLES_SINGLE)


@plain_dataclass(frozen=True)
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


# The file's tables: endpoints and roles (declared here), and the stages' sections (declared with the
# stages, pipeline.stages.settings, which check them when a stage reads its own).
_SECTIONS = {"endpoints", "roles", "build", "evaluate", "pair"}
# What an [endpoints.NAME] table may set: a plain endpoint's settings, or a pool's.
_NOT_IN_FILE = ("name", "members", "drain_after", "drain_s")
PLAIN_FIELDS = tuple(f.name for f in fields(Endpoint) if f.name not in _NOT_IN_FILE)
POOL_FIELDS = ("pool", "model", "drain_after", "drain_s", "max_retries", "structured", "judge_format", "gbnf",
               "judging", "judge_prompt")
# The settings a pool's short form (a list of base URLs) keeps for the pool, not its members.
_POOL_ONLY = ("pool", "drain_after", "drain_s", "max_retries")
# A local endpoint's settings that take the embedded model's values unless the file sets them.
LOCAL_DEFAULTS = ("model", "concurrency", "timeout_s", "judge_format", "gbnf", "list_items", "judging",
                   "judge_batch", "batch_generation")


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
            pool_spec = {k: v for k, v in spec.items() if k in POOL_FIELDS}
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


def choices(info: FieldInfo) -> tuple[Any, ...]:
    """A setting's allowed names when it takes one of a few (a Literal), else ()."""
    for arg in (info.annotation, *get_args(info.annotation)):
        if getattr(arg, "__origin__", None) is Literal or str(arg).startswith("typing.Literal"):
            return get_args(arg)
    return ()


def _expected(info: FieldInfo, error: dict[str, Any]) -> str:
    """What a setting takes, in words, from the pydantic error on its value and its declaration."""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "literal_error":
        return "one of " + ", ".join(str(v) for v in choices(info))
    if kind in ("greater_than_equal", "greater_than"):
        return f"at least {ctx['ge']:g}" if kind == "greater_than_equal" else f"more than {ctx['gt']:g}"
    if kind in ("less_than_equal", "less_than"):
        return f"at most {ctx['le']:g}" if kind == "less_than_equal" else f"less than {ctx['lt']:g}"
    return {"int_type": "a whole number", "float_type": "a number", "bool_type": "true or false",
            "string_type": "a string", "string_too_short": "a non-empty string", "dict_type": "a table",
            "tuple_type": "a list"}.get(kind, error["msg"])


def refusal(at: str, cls: type, exc: ValidationError, *, sep: str = ".",
            error: type[UnspecificError] = ConfigError) -> UnspecificError:
    """The first refused value of a table as an error naming the key (after ``at`` and ``sep``), what
    it takes (and what it decides), and the value given."""
    first: dict[str, Any] = dict(exc.errors()[0])
    key = str(first["loc"][0]) if first["loc"] else "?"
    info = declared(cls)[key]
    if first["type"] in ("missing", "missing_argument"):
        return error(f"{at}{sep}{key}: required ({info.description})")
    if first["type"] == "value_error":  # a validator's own words, which name the value
        return error(f"{at}{sep}{key}: {first.get('ctx', {}).get('error', first['msg'])}")
    return error(f"{at}{sep}{key}: {_expected(info, first)} ({info.description}), got {first['input']!r}")


def _parse_endpoint(name: str, spec: dict[str, Any], where: str, need_keys: bool = True) -> Endpoint:
    at = f"{where}: endpoints.{name}"
    for key in spec:
        if key == "api_key":
            raise ConfigError(f"{at}.api_key: put the key in an environment variable and name it in "
                              "api_key_env")
        if key not in PLAIN_FIELDS:
            raise ConfigError(f"{at}.{key}: unknown field (known: {', '.join(sorted(PLAIN_FIELDS))})")
    values = dict(spec)
    local = spec.get("base_url") == LOCAL
    if local:
        defaults = local_endpoint()
        values = {**{k: getattr(defaults, k) for k in LOCAL_DEFAULTS}, **values}
    for key in ("gguf", "chat_format"):
        if key in spec and not local:
            raise ConfigError(f"{at}.{key}: only for a local model (base_url = \"local\")")
    try:
        endpoint = Endpoint(name=name, **values)
    except ValidationError as exc:
        raise refusal(at, Endpoint, exc) from None
    if endpoint.api_key_env is not None:
        if need_keys and not os.environ.get(endpoint.api_key_env):
            raise ConfigError(f"{at}.api_key_env: environment variable {endpoint.api_key_env} is not set")
        from pipeline.core.redact import remember_env

        remember_env(endpoint.api_key_env)  # its value is never shown in an error
    if endpoint.gguf is not None:
        gguf = Path(endpoint.gguf).expanduser()
        if not gguf.is_file():
            raise ConfigError(f"{at}.gguf: no such file: {gguf}")
        endpoint = replace(endpoint, gguf=str(gguf.resolve()))
    return endpoint


def _parse_pool(name: str, spec: dict[str, Any], endpoints: dict[str, Endpoint], where: str,
                pool_names: set[str]) -> Endpoint:
    """A pool: ``pool = ["gpu1", "gpu2"]`` names member endpoints. Requests go to the member with
    the fewest outstanding requests for its concurrency; each member keeps its own limits."""
    at = f"{where}: endpoints.{name}"
    for key in spec:
        if key not in POOL_FIELDS:
            raise ConfigError(f"{at}.{key}: not a pool field (a pool takes "
                              f"{', '.join(sorted(POOL_FIELDS))}; "
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
    models = {endpoints[m].model for m in members}
    if "model" not in spec and len(models) > 1:
        # The cache key is the pool's model: members serving differently named models must say
        # which one the pool stands for, or two models' replies would share a key.
        raise ConfigError(f"{at}.model: the members serve {', '.join(sorted(models))}; "
                          "set the pool's model "
                          "(the name its cached calls are kept under) if they are the same model")
    values: dict[str, Any] = {
        "base_url": POOL, "model": first.model, "members": tuple(members),
        "concurrency": sum(endpoints[m].concurrency for m in members),
        "structured": first.structured, "judge_format": first.judge_format, "judging": first.judging,
        "judge_prompt": first.judge_prompt,
        # Attempts over the whole pool: enough to try every member a few times.
        "max_retries": max(first.max_retries, 2 * len(members)),
        "timeout_s": max(endpoints[m].timeout_s for m in members),
        # A grammar goes to whichever member answers: the pool takes one only when every member does.
        "gbnf": all(endpoints[m].gbnf for m in members),
        **{k: v for k, v in spec.items() if k != "pool"},
    }
    try:
        pool = Endpoint(name=name, **values)
    except ValidationError as exc:
        raise refusal(at, Endpoint, exc) from None
    if pool.gbnf and not all(endpoints[m].gbnf for m in members):
        plain = ", ".join(m for m in members if not endpoints[m].gbnf)
        raise ConfigError(f"{at}.gbnf: true, but member(s) {plain} do not take a GBNF grammar (set "
                          "gbnf = true on them)")
    return pool


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
