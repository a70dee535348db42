"""pipeline.llm.cache_report: the embedded server's replies say how many prompt tokens it reused from its
KV cache (usage.prompt_tokens_details.cached_tokens), on a stand-in that reuses a prefix as
llama-cpp-python 0.3.36's Llama.generate does, and once for real through the server."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.llm import cache_report


class PrefixLlama:
    """A stand-in for Llama: one context whose longest prefix shared with the next prompt is kept (all but
    the last token when the whole prompt is, as generate replays one to refresh the logits)."""

    def __init__(self) -> None:
        self.n_tokens = 0
        self.input_ids: list[int] = []
        self.evaluated: list[int] = []  # tokens evaluated per eval call

    def eval(self, tokens: list[int]) -> None:
        self.input_ids = self.input_ids[:self.n_tokens] + list(tokens)
        self.n_tokens += len(tokens)
        self.evaluated.append(len(tokens))

    def generate(self, tokens: list[int], reset: bool = True) -> Any:
        kept = 0
        for a, b in zip(self.input_ids[:self.n_tokens], tokens, strict=False):
            if a != b:
                break
            kept += 1
        kept = kept - 1 if kept == len(tokens) else kept
        self.n_tokens = kept
        tokens = tokens[kept:]
        while True:
            self.eval(tokens)
            yield 7
            tokens = [7]

    def create_completion(self, prompt: str, max_tokens: int = 2, stream: bool = False) -> Any:
        tokens = [ord(c) for c in prompt]
        out = []
        for token in self.generate(tokens):
            out.append(token)
            if len(out) >= max_tokens:
                break
        usage = {"prompt_tokens": len(tokens), "completion_tokens": len(out),
                 "total_tokens": len(tokens) + len(out)}
        if stream:
            return iter([{"choices": []}])
        return {"choices": [{"text": "x" * len(out)}], "usage": usage}

    def create_chat_completion(self, messages: list[dict[str, str]], max_tokens: int = 2) -> Any:
        completion = self.create_completion("".join(m["content"] for m in messages), max_tokens)
        # A handler that builds its own usage (as some of llama-cpp-python's do): the chat wrapper says it.
        usage = {k: v for k, v in completion["usage"].items() if k != "prompt_tokens_details"}
        return {"choices": [{"message": {"content": "x"}}], "usage": usage}


@pytest.fixture
def llama() -> PrefixLlama:
    cls = type("PatchedPrefixLlama", (PrefixLlama,), {})
    cache_report.patch(cls)
    cache_report.patch(cls)  # twice changes nothing
    return cls()


def test_replies_say_the_prompt_tokens_reused_from_the_kv_cache(llama: PrefixLlama) -> None:
    start = "The same long instructions in every call. " * 5
    said = []
    for prompt in (start + "First text.", start + "Second text.", start + "Second text.", "Nothing shared."):
        before = len(llama.evaluated)
        usage = llama.create_completion(prompt)["usage"]
        said.append(usage["prompt_tokens_details"]["cached_tokens"])
        # What the reply says is what the context kept: the prompt's eval took the rest.
        assert usage["prompt_tokens"] - said[-1] == llama.evaluated[before]
    # The same prompt again: all but its last token, evaluated again to refresh the logits.
    assert said == [0, len(start), len(start + "Second text.") - 1, 0]


def test_chat_replies_say_it_too_and_streams_are_left_alone(llama: PrefixLlama) -> None:
    start = "System: judge the text below against each constraint, one line each. " * 3
    llama.create_chat_completion([{"role": "user", "content": start + "A."}])
    reply = llama.create_chat_completion([{"role": "user", "content": start + "B."}])
    assert reply["usage"]["prompt_tokens_details"] == {"cached_tokens": len(start)}
    stream = llama.create_completion(start + "C.", stream=True)
    assert list(stream) == [{"choices": []}]


def test_install_declines_another_llama_cpp_or_when_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    import llama_cpp
    from llama_cpp import Llama

    own = Llama.generate
    with pytest.raises(cache_report.NotInstalled, match="turned off by UNSPECIFIC_CACHE_REPORT=0"):
        cache_report.install({cache_report.SWITCH: "0"})
    monkeypatch.setattr(llama_cpp, "__version__", "0.4.0")
    with pytest.raises(cache_report.NotInstalled, match="0.4.0"):
        cache_report.install({})
    monkeypatch.undo()

    def other_eval(self, batch):  # noqa: ANN001, ANN202
        return None

    monkeypatch.setattr(Llama, "eval", other_eval)
    with pytest.raises(cache_report.NotInstalled, match=r"Llama.eval does not take \(tokens"):
        cache_report.install({})
    assert Llama.generate is own  # nothing swapped


def test_installed_on_llama_the_response_model_keeps_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server answers through a response model built on the CompletionUsage TypedDict, which would drop
    the field: once installed, it keeps it."""
    from typing import Union

    import llama_cpp
    from llama_cpp import Llama, llama_types
    from pydantic import TypeAdapter

    for name in ("generate", "eval", "create_completion", "create_chat_completion"):
        monkeypatch.setattr(Llama, name, getattr(Llama, name))  # put back after
    monkeypatch.setattr(llama_types.CompletionUsage, "__pydantic_config__", None, raising=False)
    monkeypatch.delattr(llama_types.CompletionUsage, "__pydantic_config__")
    cache_report.install({})
    assert getattr(Llama.generate, cache_report.MARK)
    reply = {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [],
             "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11,
                       "prompt_tokens_details": {"cached_tokens": 6}}}
    model = TypeAdapter(Union[llama_cpp.ChatCompletion, str])  # noqa: UP007 - as the server declares it
    assert model.dump_python(model.validate_python(reply), mode="json")["usage"]["prompt_tokens_details"] == {
        "cached_tokens": 6}


def test_the_servers_chat_route_keeps_the_field_as_the_bootstrap_orders_the_patches() -> None:
    """The bootstrap installs cache_report before prompt_batch, which imports the server's app: the chat
    route's response model, built at that import, then keeps prompt_tokens_details (in the other order it
    drops it). The server's app stood in for by its module, no model loaded."""
    import os
    import subprocess
    import sys

    from pipeline.llm.local_model import _BOOTSTRAP, PATCH_FILES

    check = """
import asyncio
from fastapi.routing import serialize_response
from llama_cpp.server import app
route = next(r for r in app.router.routes if getattr(r, "path", "") == "/v1/chat/completions")
reply = {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [],
         "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11,
                   "prompt_tokens_details": {"cached_tokens": 6}}}
print(asyncio.run(serialize_response(field=route.response_field, response_content=reply))["usage"])
"""
    run_server = 'runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)'
    code = _BOOTSTRAP.replace(run_server, check)
    files = [str(f) for f in PATCH_FILES]
    result = subprocess.run([sys.executable, "-c", code, str(os.getpid()), *files], capture_output=True,
                            text=True, timeout=120)
    said = result.stderr.splitlines()
    assert "cached prompt tokens: said by pipeline.llm.cache_report" in said, result.stderr
    assert "'prompt_tokens_details': {'cached_tokens': 6}" in result.stdout, result.stderr


@pytest.mark.real_model
def test_the_real_server_reports_the_prefix_it_reused(local_server_url: str) -> None:
    """Two chats sharing a long start, through the embedded server the project starts (its bootstrap loads
    this patch): the second says it reused most of its prompt, the evaluated rest being a few tokens."""
    import json
    import urllib.request

    start = ("You are a careful judge. For each constraint below, say whether the text satisfies it, one "
             "line each, Yes or No with a short quote. " * 6)

    def chat(text: str) -> dict[str, Any]:
        body = json.dumps({"model": "local", "messages": [{"role": "user", "content": start + text}],
                           "max_tokens": 2, "temperature": 0.0}).encode()
        request = urllib.request.Request(f"{local_server_url}/chat/completions", data=body,
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as response:
            return dict(json.loads(response.read())["usage"])

    chat("TEXT: The council met on Monday.")
    second = chat("TEXT: The bridge closed on Friday.")
    cached = second["prompt_tokens_details"]["cached_tokens"]
    assert 0 < cached < second["prompt_tokens"]
    assert second["prompt_tokens"] - cached < 20  # only the differing text was evaluated anew
