"""Whether the embedded llama.cpp server answers, whether it can really work, and, when it died,
a report a person can act on.

``server_answers`` asks ``GET /v1/models``; ``server_alive`` asks a page a busy server still serves.
``prove`` sends a real prompt of 300+ tokens: a 1-token health check passes on a build whose
batched matrix code the CPU forbids, so a server is up only once a real prompt got a reply.
``death_report`` turns an exit into a message: signal or code, the log, its last lines and the
likely cause.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from pipeline.llm.model_file import MODEL_ALIAS


def server_answers(base_url: str, timeout_s: float = 2.0) -> bool:
    """True when an OpenAI-compatible server answers GET /models at base_url (…/v1)."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout_s) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def served_aliases(base_url: str, timeout_s: float = 30.0) -> set[str] | None:
    """The model names the server at base_url answers to (GET /models), or None when it does not say."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout_s) as resp:
            data = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return {str(m.get("id")) for m in data.get("data", []) if isinstance(m, dict)}


def server_alive(base_url: str, timeout_s: float = 3.0) -> bool:
    """True when the server at base_url answers at all, busy or not. (llama-cpp-python serves
    /v1/models under the model's lock, so while it generates, that request waits; its OpenAPI
    document does not.)"""
    root = base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url
    try:
        with urllib.request.urlopen(f"{root}/openapi.json", timeout=timeout_s) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


# A real prompt, processed in one batch as every stage's prompts are: at least 300 tokens, as
# the failures seen so far (AMX code in a native build) only show on a batched prompt.
PROOF_MIN_PROMPT_TOKENS = 300
_PROOF_FACTS = [
    "The council met on {d} to discuss the {n} budget lines that the treasurer had flagged.",
    "Residents from {d} districts asked why the library hours were cut for the {n}th time.",
    "A teacher said that {n} classrooms still had no heating after the storm on {d}.",
    "The mayor's office promised a written answer within {n} days of the {d} meeting.",
    "Local shop owners counted {n} empty storefronts along the high street by {d}.",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def proof_messages() -> list[dict[str, str]]:
    lines = [_PROOF_FACTS[i % len(_PROOF_FACTS)].format(d=_DAYS[i % 7], n=3 + 7 * i) for i in range(24)]
    notes = "\n".join(f"{i + 1}. {line}" for i, line in enumerate(lines))
    return [
        {"role": "system", "content": "You answer with one word."},
        {"role": "user",
         "content": f"Notes from a town meeting:\n{notes}\n\nIn one word, what is the topic of these notes?"},
    ]


@dataclass(frozen=True)
class Proof:
    prompt_tokens: int
    seconds: float


def prove(base_url: str, timeout_s: float) -> Proof:
    """Send one real chat request (300+ prompt tokens, 4 tokens out); raise OSError, ValueError
    or HTTPException (a reply cut off by the server's death) when no usable reply comes back."""
    body = json.dumps({
        "model": MODEL_ALIAS, "messages": proof_messages(), "max_tokens": 4, "temperature": 0.0,
    }).encode("utf-8")
    request = urllib.request.Request(
        f"{base_url}/chat/completions", data=body,
        headers={"content-type": "application/json"}, method="POST",
    )
    t0 = time.monotonic()
    with urllib.request.urlopen(request, timeout=timeout_s) as resp:
        reply = json.loads(resp.read().decode("utf-8"))
    choices = reply.get("choices") or []
    if not choices or not isinstance(choices[0].get("message"), dict):
        raise ValueError(f"the reply to a test prompt has no message: {str(reply)[:200]}")
    tokens = int((reply.get("usage") or {}).get("prompt_tokens") or 0)
    return Proof(prompt_tokens=tokens, seconds=time.monotonic() - t0)


def _likely_cause(returncode: int | None, tail: str) -> str:
    low = tail.lower()
    if "address already in use" in low:
        return "another program holds the port; pick another with --port, or stop it"
    if "failed to load model" in low or ("gguf" in low and "error" in low):
        return ("the model file could not be loaded; delete it from the cache folder and run "
                "again to reassemble it")
    if returncode is not None and returncode < 0:
        sig = -returncode
        if sig in (signal.SIGILL, signal.SIGSEGV, signal.SIGBUS):
            return (
                "llama.cpp ran CPU instructions this machine (or its VM) does not allow: a build with native "
                "CPU flags holds AMX or AVX-512 code. Rebuild it portable: `rm -rf .wheels "
                ".venv && make install` (see the Makefile's LLAMA_CMAKE_ARGS)"
            )
        if sig == signal.SIGKILL:
            return ("it was killed from outside, most often by the kernel's out-of-memory killer (the "
                    "model needs about 2 GB)")
        return "it was stopped by a signal from outside"
    return "see the log"


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "is gone"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "an unknown signal"
        return f"was killed by signal {-returncode} ({name})"
    return f"exited with code {returncode}"


def death_report(returncode: int | None, log_path: Path | None, tail: str, *, when: str = "") -> str:
    """What a person needs when the server died: how, where its log is, its last lines, why."""
    when = f" {when}" if when else ""
    return (
        f"the llama.cpp server {describe_exit(returncode)}{when}.\n"
        f"likely cause: {_likely_cause(returncode, tail)}\n"
        f"log: {log_path}\nlast lines of the log:\n{tail}"
    )


def last_log_lines(path: Path | None, lines: int = 20) -> str:
    """The last ``lines`` lines of a server's log, or why there are none."""
    if path is None or not path.exists():
        return "(no log)"
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return "\n".join(text[-lines:]) or "(empty log)"
