"""Secrets out of every error text before it is stored or printed.

An endpoint may echo the key it was sent ("Incorrect API key provided: sk-...") and that text
travels into exceptions, ``runs.error``, ``instructions.error``, logs and the terminal. Two
nets catch it:

- known keys: the values of the environment variables the config names in ``api_key_env``
  (``remember_env``, called as the config is read), and of any variable whose name says it
  holds a key (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``);
- key shapes: ``sk-...``, ``Bearer <token>``, common provider prefixes, and
  ``api_key=...``-style assignments, whoever's key it is.

Each is replaced by ``[REDACTED]``; a known key keeps its last 4 characters, so a user can still
tell which of their keys was refused.
"""

from __future__ import annotations

import os
import re

MARK = "[REDACTED]"
_MIN_SECRET = 8  # shorter values (a "1", "true") would redact ordinary words

_ENV_NAMES: set[str] = set()
_SECRET_ENV = re.compile(r"(?:API_?KEY|_TOKEN|_SECRET|_PASSWORD)$", re.IGNORECASE)

_SHAPES = [
    # OpenAI-style keys, project and service-account keys included (sk-..., sk-proj-...).
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    # Other providers' prefixes: Anthropic sk-ant- is caught above; Groq, xAI, Hugging Face,
    # GitHub, Google, Replicate, Together.
    re.compile(r"\b(?:gsk|xai|hf|ghp|gho|ghs|github_pat|r8|tgp_v1)_[A-Za-z0-9_\-]{10,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"),
    # An Authorization header's credentials.
    re.compile(r"(?i)\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=\-]{8,}"),
]
# key=value / "api_key": "value" (the value only is replaced).
_ASSIGNED = re.compile(r"(?i)\b((?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password)"
                       r"[\"']?\s*[:=]\s*[\"']?)"
                       r"([^\s\"',;&]{8,})")


def remember_env(name: str | None) -> None:
    """The config names this environment variable as holding a key: never show its value."""
    if name:
        _ENV_NAMES.add(name)


def known_secrets() -> list[str]:
    """The values of the key-holding environment variables that are set, longest first."""
    names = _ENV_NAMES | {n for n in os.environ if _SECRET_ENV.search(n)}
    values = {os.environ[n].strip() for n in names if len(os.environ.get(n, "").strip()) >= _MIN_SECRET}
    return sorted(values, key=len, reverse=True)


def redact(text: str | None, secrets: list[str] | None = None) -> str | None:
    """``text`` with every known key and anything shaped like a key replaced. ``secrets``:
    known_secrets() read once by a caller that redacts many texts (reading them scans the
    environment)."""
    if not text:
        return text
    for secret in known_secrets() if secrets is None else secrets:
        if secret in text:
            text = text.replace(secret, f"{MARK}...{secret[-4:]}")
    for shape in _SHAPES:
        text = shape.sub(lambda m: _keep_scheme(m.group(0)), text)
    return _ASSIGNED.sub(lambda m: m.group(1) + MARK, text)


def _keep_scheme(found: str) -> str:
    """'Bearer abc...' -> 'Bearer [REDACTED]'; a bare key -> '[REDACTED]'."""
    head = found.split(None, 1)
    if len(head) == 2 and head[0].lower() in ("bearer", "basic"):
        return f"{head[0]} {MARK}"
    return MARK
