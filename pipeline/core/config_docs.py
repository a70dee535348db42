"""docs/configuration.md's table of settings, written from their declarations in pipeline.core.config
(``Endpoint``, ``Roles``): the docs never say another default or bound than the code holds
(tests/test_config.py keeps the two equal)."""

from __future__ import annotations

from typing import Any

from annotated_types import Ge, Gt, MinLen
from pydantic.fields import FieldInfo

from pipeline.core.config import (
    LOCAL_DEFAULTS,
    PLAIN_FIELDS,
    POOL_FIELDS,
    Endpoint,
    Roles,
    choices,
    declared,
    local_endpoint,
)


def _type_words(info: FieldInfo) -> str:
    names = choices(info)
    if names:
        return " \\| ".join(f"`{c}`" for c in names)
    text = str(info.annotation)
    for name, words in (("dict", "table"), ("tuple", "list of names"), ("bool", "true/false"),
                        ("int", "whole number"), ("float", "number"), ("str", "text")):
        if name in text:
            return words
    return text


def _value_words(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, tuple):
        return "`[" + ", ".join(f'"{v}"' for v in value) + "]`"
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
    return "\n".join(rows) + "\n"
