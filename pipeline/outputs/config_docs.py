"""docs/configuration.md's table of settings, written from their declarations (pipeline.core.config's
``Endpoint`` and ``Roles``, pipeline.stages.settings' sections): the docs never say another default
or bound than the code holds (tests/test_config.py keeps the two equal)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt, MinLen
from pydantic.fields import FieldInfo

from pipeline.core.config import (
    LOCAL_DEFAULTS,
    PLAIN_FIELDS,
    POOL_FIELDS,
    Endpoint,
    Roles,
    declared,
    local_endpoint,
)
from pipeline.stages.settings import SECTIONS


def _words(annotation: Any) -> str:
    """A declared type in words: "whole number", "list of numbers", "`a` \\| `b`"."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin is Annotated:
        return _words(args[0])
    if origin is tuple:
        inner = _words(args[0])
        return "list of " + {"text": "names", "number": "numbers"}.get(inner, inner)
    if args:  # a union with None: the type it takes when set
        return _words(next(a for a in args if a is not type(None)))
    return {dict: "table", bool: "true/false", int: "whole number", float: "number", str: "text"}.get(
        annotation, origin.__name__ if origin else str(annotation))


def _type_words(info: FieldInfo) -> str:
    return _words(info.annotation)


def _value_words(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, tuple):
        return "`[" + ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in value) + "]`"
    if isinstance(value, dict):
        return "`{}`"
    return f"`{value}`"


def _bounds_words(info: FieldInfo) -> str:
    words = []
    for m in info.metadata:
        if isinstance(m, Ge):
            words.append(f">= {m.ge}")
        elif isinstance(m, Gt):
            words.append(f"> {m.gt}")
        elif isinstance(m, Le):
            words.append(f"<= {m.le}")
        elif isinstance(m, Lt):
            words.append(f"< {m.lt}")
        elif isinstance(m, MinLen) and m.min_length == 1:
            words.append("not empty")
    return ", ".join(words)


def _default_of(info: FieldInfo) -> Any:
    if info.default_factory is not None:
        return info.default_factory()  # type: ignore[call-arg]
    return info.default


def settings_table() -> str:
    """docs/configuration.md's table of settings, written from the declarations (Endpoint, Roles): one
    row per setting with its type, default (and the embedded model's, where it differs), bounds and
    what it decides."""
    settings = declared(Endpoint)
    local = local_endpoint()
    rows = ["| table | setting | type | default | local model | bounds | what it decides |",
            "|---|---|---|---|---|---|---|"]

    def row(table: str, key: str, info: FieldInfo, default: str, local_default: str = "") -> None:
        rows.append(f"| {table} | `{key}` | {_type_words(info)} | {default} | {local_default} | "
                    f"{_bounds_words(info)} | {info.description} |")

    for key in PLAIN_FIELDS:
        info = settings[key]
        default = "required" if info.is_required() else _value_words(_default_of(info))
        mine = getattr(local, key)
        local_default = _value_words(mine) if key in LOCAL_DEFAULTS and (
            info.is_required() or mine != _default_of(info)) else ""
        row("`[endpoints.NAME]`", key, info, default, local_default)
    for key in POOL_FIELDS:
        info = settings["members" if key == "pool" else key]
        from_members = {"pool": "required", "model": "the members'", "max_retries": "twice the members",
                        "gbnf": "`true` when every member has it", "drain_after": _value_words(info.default),
                        "drain_s": _value_words(info.default)}
        row("a pool", key, info, from_members.get(key, "the first member's"))
    for key, info in declared(Roles).items():
        row("`[roles]`", key, info, "`local`")
    for name, cls in SECTIONS.items():
        for key, info in declared(cls).items():
            row(f"`[{name}]`", key, info, _value_words(_default_of(info)))
    return "\n".join(rows) + "\n"
