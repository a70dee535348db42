"""Prompt templates as files in ``prompts/`` (one per stage step), rendered with named fields.

A template is a text file with a ``### system`` and a ``### user`` section; fields are written
``{{name}}``. A field the template uses but the caller did not give is an error, never an empty
string; a field given but unused is an error too (it is almost always a typo). The template's
hash goes into the LLM cache key, so editing a prompt re-runs exactly the calls that used it.

Inputs that are data (articles, responses, constraints) are fenced by the templates between
``<<<NAME`` and ``NAME>>>`` lines, and fence-like lines inside the data are defused, so an
article that says "ignore previous instructions" stays data.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pipeline.core.errors import PromptError

FIELD = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
SECTION = re.compile(r"^###\s*(system|user)\s*$", re.MULTILINE)
FENCE_LIKE = re.compile(r"^(\s*)(<<<|>>>|\w+(?=>>>))", re.MULTILINE)


def prompts_dir() -> Path:
    override = os.environ.get("UNSPECIFIC_PROMPTS")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "prompts"


@dataclass(frozen=True)
class Template:
    name: str
    system: str
    user: str
    hash: str

    @property
    def fields(self) -> set[str]:
        return set(FIELD.findall(self.system)) | set(FIELD.findall(self.user))

    def render(self, **values: object) -> list[dict[str, str]]:
        missing = self.fields - set(values)
        if missing:
            raise PromptError(f"prompt '{self.name}': missing field(s) {', '.join(sorted(missing))}")
        extra = set(values) - self.fields
        if extra:
            raise PromptError(f"prompt '{self.name}': unknown field(s) {', '.join(sorted(extra))}")

        def fill(text: str) -> str:
            return FIELD.sub(lambda m: _as_text(values[m.group(1)]), text)

        messages = []
        if self.system.strip():
            messages.append({"role": "system", "content": fill(self.system).strip()})
        messages.append({"role": "user", "content": fill(self.user).strip()})
        return messages


def _as_text(value: object) -> str:
    if value is None:
        raise PromptError("a prompt field was given None")
    return str(value)


# Every line break str.splitlines() knows (and a model's tokenizer may take as one): made "\n"
# first, so a fence-like line cannot hide behind "\r" or U+2028.
LINE_BREAKS = re.compile(r"\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def defuse(data: str) -> str:
    """Make a data block unable to open or close a fence: a line starting <<< or >>> gets a
    space before it, and a closing marker such as ``TEXT>>>`` becomes ``TEXT >>>``."""
    data = LINE_BREAKS.sub("\n", data)
    return FENCE_LIKE.sub(
        lambda m: f"{m.group(1)} {m.group(2)}" if m.group(2) in ("<<<", ">>>")
        else f"{m.group(1)}{m.group(2)} ",
        data,
    )


def numbered(items: list[str]) -> str:
    return "\n".join(f"{i}. {defuse(item.strip())}" for i, item in enumerate(items, 1))


@lru_cache(maxsize=64)
def _load(path: Path, mtime: float) -> Template:
    raw = path.read_text(encoding="utf-8")
    parts = SECTION.split(raw)
    # parts = [preamble, name1, body1, name2, body2, ...]
    sections = {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}
    if "user" not in sections:
        raise PromptError(f"{path}: a template needs a '### user' section")
    return Template(
        name=path.stem,
        system=sections.get("system", ""),
        user=sections["user"],
        hash=hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16],
    )


def load_template(name: str) -> Template:
    path = prompts_dir() / f"{name}.md"
    if not path.exists():
        raise PromptError(f"{path}: no such prompt template")
    return _load(path, path.stat().st_mtime)


def chatml(messages: list[dict[str, str]]) -> str:
    """The messages as one ChatML prompt, ending where the assistant's reply begins: the text
    llama-cpp-python's ``chatml`` chat format builds from them, so a prompt sent whole shares the
    server's cached prefix with the same messages sent as a chat."""
    system = "".join(m["content"] for m in messages if m["role"] == "system")
    out = [f"<|im_start|>system\n{system}<|im_end|>\n"]
    out += [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages if m["role"] != "system"]
    return "".join(out) + "<|im_start|>assistant\n"

