"""A scripted OpenAI-compatible server on 127.0.0.1, for tests and benchmarks.

It answers ``POST /v1/chat/completions`` (and ``GET /v1/models``). What it answers is decided by
a *responder*: a function of the request body returning a ``Reply``: a text, an HTTP status,
a delay, a malformed or truncated body, an empty reply. A script (a list of replies served in
order, then the responder) drives exact sequences; ``fault_rate`` injects a share of random
faults (429, 500, timeouts, truncated bodies, wrong-format and empty replies) for soak tests.
``JUNK_KINDS`` are the nastier ones, all with 200 OK: junk text (symbols, words wrapped in
symbols, one word over and over, lorem ipsum), truncated JSON, a refusal, and an error message
echoing the caller's key; none of them may ever be taken as a result.

Every request is recorded in ``requests`` so tests can count calls and inspect prompt layout.

It also fakes the Files and Batches APIs (``POST /v1/files``, ``POST /v1/batches``,
``GET /v1/batches[/ID]``, ``GET /v1/files/ID/content``), nastily: a batch stays
validating / in_progress for ``batch_polls`` polls; ``batch_fail_every`` sends every Nth request
to the error file (HTTP 500); ``batch_expire`` expires the batch with half its requests answered;
``batch_malformed`` adds broken lines to the output and ``batch_duplicate`` repeats one; a
duplicate ``custom_id`` in the input fails the batch at validation, as the real API does.
Batch answers come from the responder, and each request answered is counted in
``batch_calls`` (per request body, so a test can see nothing was asked twice).

Cached prompt tokens: a reply says none unless asked. ``Reply.cached_tokens`` puts that count in its
usage (``prompt_tokens_details.cached_tokens``, as OpenAI and llama.cpp's server say it);
``prompt_cache=True`` has the server keep one prompt cache as llama.cpp does (one slot: the previous
request's messages) and report, for each request, the tokens its messages share with that one's
from the start.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULT_KINDS = ("429", "500", "timeout", "truncated", "wrong_format", "empty")
JUNK_KINDS = ("junk", "junk_wrapped", "junk_repeated", "junk_lorem", "truncated_json", "refusal", "echo_key")
ALL_FAULT_KINDS = FAULT_KINDS + JUNK_KINDS
# What the junk kinds answer (200 OK): a result holding one of these was taken from junk.
JUNK_TEXT = "%%%garbage%%% <html><body>502 Bad Gateway</body></html>"
# Junk that nearly reads as words: each one wrapped in symbols, one word said over and over, and
# lorem ipsum. Each opens with a marker a result taken from it would hold.
JUNK_WRAPPED_TEXT = " ".join(f"%%{w}%%"
                             for w in "the council met and argued about money while "
                                      "the residents waited".split())
JUNK_REPEATED_TEXT = " ".join(["budget"] * 60)
JUNK_LOREM_TEXT = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
                   "incididunt ut labore et "
                   "dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation "
                   "ullamco laboris nisi ut "
                   "aliquip ex ea commodo consequat. Duis aute irure dolor in reprehenderit in "
                   "voluptate velit esse.")
JUNK_TEXTS = {"junk": JUNK_TEXT, "junk_wrapped": JUNK_WRAPPED_TEXT, "junk_repeated": JUNK_REPEATED_TEXT,
              "junk_lorem": JUNK_LOREM_TEXT}
TRUNCATED_JSON = '{"verdicts": [{"id": 1, "verdict": "ye'
REFUSAL_TEXT = "I'm sorry, but I can't help with that."
ECHO_KEY_TEXT = ("Incorrect API key provided: {key}. You can find your API key at "
                 "https://example.invalid/keys.")


@dataclass
class Reply:
    text: str = "ok"
    status: int = 200
    delay_s: float = 0.0
    body: bytes | None = None  # raw body, bypassing the JSON envelope (malformed replies)
    headers: dict[str, str] = field(default_factory=dict)
    # Per reply token, its top alternatives {token: logprob}: sent in OpenAI's form when the request
    # asks for log-probabilities (as llama.cpp's server and vLLM do); None: an endpoint that gives none.
    logprobs: list[dict[str, float]] | None = None
    hang: bool = False  # never answer within the client's timeout
    # Of the prompt tokens, those read from the server's prompt cache: reported in the usage when set.
    cached_tokens: int | None = None

    @staticmethod
    def error(status: int, message: str = "scripted error", retry_after: float | None = None) -> Reply:
        headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
        body = json.dumps({"error": {"message": message, "type": "scripted", "code": status}}).encode()
        return Reply(status=status, body=body, headers=headers)


Responder = Callable[[dict[str, Any]], Reply | str]


def last_user_message(request: dict[str, Any]) -> str:
    for message in reversed(request.get("messages", [])):
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return ""


def dead_url() -> str:
    """An endpoint's base URL on a local port nothing listens on (it was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def echo_responder(request: dict[str, Any]) -> Reply:
    return Reply(text="echo: " + last_user_message(request)[:200])


class FakeOpenAIServer:
    def __init__(
        self,
        responder: Responder = echo_responder,
        *,
        latency_s: float = 0.0,
        fault_rate: float = 0.0,
        fault_kinds: tuple[str, ...] = FAULT_KINDS,
        seed: int = 0,
        hang_s: float = 5.0,
        prompt_cache: bool = False,
        models: tuple[str, ...] = ("fake-model",),
    ) -> None:
        self.responder = responder
        self.models = models  # what GET /v1/models lists
        # A completions request with a list of prompts (pipeline.llm.prompt_batch's form) is answered
        # prompt by prompt by the responder, as the same prompts sent as chats; False: refused (400).
        self.prompt_lists = True
        self.latency_s = latency_s
        self.fault_rate = fault_rate
        self.fault_kinds = fault_kinds
        self.hang_s = hang_s
        # One prompt cache, as llama.cpp's server keeps (see the module's docstring): the last prompt.
        self.prompt_cache = prompt_cache
        self._cached_prompt = ""
        self.script: list[Reply | str] = []
        self.requests: list[dict[str, Any]] = []
        self.faults_served: dict[str, int] = {}
        self._rng = random.Random(seed)
        # The Files and Batches APIs.
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_polls = 2
        self.batch_fail_every = 0
        self.batch_expire = False
        self.batch_malformed = 0
        self.batch_duplicate = False
        self.batch_calls: list[str] = []  # custom_id of every batch request answered
        self.batch_creates = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; with Nagle on, the body waits for the
            # client's delayed ACK: 40 ms added to every keep-alive request.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def handle(self) -> None:
                try:
                    super().handle()
                except (ConnectionResetError, BrokenPipeError):
                    pass  # a client killed mid-request (the crash bench): nothing to answer

            def do_GET(self) -> None:
                if self.path.startswith("/v1/batches") or self.path.startswith("/v1/files"):
                    status, body = server._batch_get(self.path)
                    self._send(status, body, {})
                    return
                body = json.dumps({"object": "list",
                                   "data": [{"id": m, "object": "model"} for m in server.models]}).encode()
                self._send(200, body, {})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                if self.path.startswith("/v1/files") or self.path.startswith("/v1/batches"):
                    status, body = server._batch_post(self.path, self.headers.get("content-type", ""), raw)
                    self._send(status, body, {})
                    return
                try:
                    request = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, b'{"error": {"message": "bad json"}}', {})
                    return
                request["_headers"] = {"authorization": self.headers.get("authorization", "")}
                listed = isinstance(request.get("prompt"),
                                    list) and not self.path.endswith("/chat/completions")
                reply = server._list_reply(request) if listed else server._next_reply(request)
                delay = server.latency_s + reply.delay_s
                if reply.hang:
                    delay += server.hang_s
                if delay:
                    time.sleep(delay)
                if reply.body is not None:
                    self._send(reply.status, reply.body, reply.headers)
                    return
                envelope = _envelope(request, reply.text, reply.logprobs, reply.cached_tokens)
                body = json.dumps(envelope).encode()
                self._send(reply.status, body, reply.headers)

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away

        ThreadingHTTPServer.daemon_threads = True
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.request_queue_size = 128
        # A short poll interval: stop() waits up to one interval, and tests stop many servers.
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # -- behaviour ---------------------------------------------------------------------
    def push(self, *replies: Reply | str) -> None:
        """Queue replies served before the responder is asked."""
        with self._lock:
            self.script.extend(replies)

    @property
    def calls(self) -> int:
        return len(self.requests)

    def _next_reply(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(request)
            scripted = self.script.pop(0) if self.script else None
            fault = None
            if scripted is None and self.fault_rate and self._rng.random() < self.fault_rate:
                fault = self._rng.choice(self.fault_kinds)
                self.faults_served[fault] = self.faults_served.get(fault, 0) + 1
            cached = self._reuse(request) if self.prompt_cache else None
        if scripted is not None:
            reply = _as_reply(scripted)
        elif fault is not None:
            reply = _fault(fault, self.responder, request)
        else:
            reply = _as_reply(self.responder(request))
        if cached is not None and reply.cached_tokens is None:
            reply = dataclasses.replace(reply, cached_tokens=cached)
        return reply

    def _reuse(self, request: dict[str, Any]) -> int:
        """The prompt tokens (four characters each, as the usage counts them) this request's messages
        share from the start with the previous request's; this one's are kept for the next."""
        prompt = "".join(str(m.get("content", "")) for m in request.get("messages", []))
        shared = len(os.path.commonprefix([prompt, self._cached_prompt]))
        self._cached_prompt = prompt
        return min(shared // 4, max(1, len(prompt) // 4))


    def _list_reply(self, request: dict[str, Any]) -> Reply:
        """One request of several prompts (recorded once): a script or a fault answers it whole, else
        each prompt is read back into its chat messages and answered by the responder."""
        if not self.prompt_lists:
            with self._lock:
                self.requests.append(request)
            return Reply.error(400, "prompt must be a string")
        with self._lock:
            self.requests.append(request)
            scripted = self.script.pop(0) if self.script else None
        if scripted is not None:
            return _as_reply(scripted)
        if not request.get("logprobs") and int(request.get("max_tokens") or 16) > 1:
            return self._written_list(request)
        top_n = int(request.get("logprobs") or 1)
        choices = []
        for i, prompt in enumerate(request["prompt"]):
            chat = {"model": request.get("model"), "messages": chatml_messages(prompt), "max_tokens": 1,
                    "logprobs": True, "top_logprobs": top_n}
            reply = _as_reply(self.responder(chat))
            tops = (reply.logprobs or [{reply.text.split()[0] if reply.text.split() else "": 0.0}])[0]
            ranked = sorted(tops.items(), key=lambda kv: -kv[1])[:top_n]
            choices.append({"text": ranked[0][0], "index": i, "finish_reason": "length",
                            "logprobs": {"tokens": [ranked[0][0]], "token_logprobs": [ranked[0][1]],
                                         "top_logprobs": [dict(ranked)], "text_offset": [0]}})
        prompt_tokens = sum(len(p) // 4 for p in request["prompt"])
        usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": len(choices),
                                 "total_tokens": prompt_tokens + len(choices)}
        if self.prompt_cache:  # as pipeline.llm.prompt_batch counts it: the shared start once, reused after
            prompts = [str(p) for p in request["prompt"]]
            shared = len(os.path.commonprefix(prompts))
            with self._lock:
                held = len(os.path.commonprefix([prompts[0][:shared], self._cached_prompt]))
                self._cached_prompt = prompts[-1]
            cached = (held + shared * (len(prompts) - 1)) // 4
            usage["prompt_tokens_details"] = {"cached_tokens": min(cached, prompt_tokens)}
        body = {"id": "cmpl-fake", "object": "text_completion", "created": int(time.time()),
                "model": request.get("model"), "choices": choices, "usage": usage}
        return Reply(body=json.dumps(body).encode())

    def _written_list(self, request: dict[str, Any]) -> Reply:
        """A list of prompts to write (pipeline.llm.prompt_batch's generation): each answered by the
        responder as the same prompt sent as a chat, with the request's sampling and its index."""
        choices = []
        for i, prompt in enumerate(request["prompt"]):
            chat = {k: v for k, v in request.items() if k != "prompt"} | {"messages": chatml_messages(prompt),
                                                                         "list_index": i}
            reply = _as_reply(self.responder(chat))
            if reply.status != 200:
                return reply
            choices.append({"text": reply.text, "index": i, "finish_reason": "stop", "logprobs": None})
        prompt_tokens = sum(len(p) // 4 for p in request["prompt"])
        written = sum(len(c["text"]) // 4 for c in choices)
        body = {"id": "cmpl-fake", "object": "text_completion", "created": int(time.time()),
                "model": request.get("model"), "choices": choices,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": written,
                          "total_tokens": prompt_tokens + written}}
        return Reply(body=json.dumps(body).encode())

    # -- the Files and Batches APIs -------------------------------------------------------
    def _batch_post(self, path: str, content_type: str, raw: bytes) -> tuple[int, bytes]:
        with self._lock:
            if path.rstrip("/") == "/v1/files":
                content = _multipart_file(content_type, raw)
                if content is None:
                    return 400, b'{"error": {"message": "expected a multipart upload with a file"}}'
                file_id = f"file-{len(self.files) + 1}"
                self.files[file_id] = content
                return 200, json.dumps({"id": file_id, "object": "file", "bytes": len(content),
                                        "purpose": "batch",
                                        "filename": "input.jsonl", "created_at": int(time.time()),
                                        "status": "processed"}).encode()
            if path.rstrip("/") == "/v1/batches":
                req = json.loads(raw or b"{}")
                if req.get("input_file_id") not in self.files:
                    return 404, b'{"error": {"message": "no such file"}}'
                self.batch_creates += 1
                batch_id = f"batch_{len(self.batches) + 1}"
                lines = self.files[req["input_file_id"]].decode().splitlines()
                self.batches[batch_id] = {
                    "id": batch_id, "object": "batch", "endpoint": req.get("endpoint"), "errors": None,
                    "input_file_id": req["input_file_id"],
                    "completion_window": req.get("completion_window", "24h"),
                    "status": "validating", "output_file_id": None, "error_file_id": None,
                    "created_at": int(time.time()), "metadata": req.get("metadata"),
                    "request_counts": {"total": len(lines), "completed": 0, "failed": 0}, "_polls": 0,
                }
                return 200, json.dumps(_public(self.batches[batch_id])).encode()
        return 404, b'{"error": {"message": "not found"}}'

    def _batch_get(self, path: str) -> tuple[int, bytes]:
        route = path.split("?")[0].rstrip("/")
        with self._lock:
            if route == "/v1/batches":
                data = [_public(b) for b in reversed(list(self.batches.values()))]
                return 200, json.dumps({"object": "list", "data": data, "has_more": False,
                                        "first_id": data[0]["id"] if data else None,
                                        "last_id": data[-1]["id"] if data else None}).encode()
            if route.startswith("/v1/batches/"):
                batch = self.batches.get(route.rsplit("/", 1)[1])
                if batch is None:
                    return 404, b'{"error": {"message": "no such batch"}}'
                self._advance(batch)
                return 200, json.dumps(_public(batch)).encode()
            if route.startswith("/v1/files/") and route.endswith("/content"):
                content = self.files.get(route.split("/")[3])
                if content is None:
                    return 404, b'{"error": {"message": "no such file"}}'
                return 200, content
        return 404, b'{"error": {"message": "not found"}}'

    def _advance(self, batch: dict[str, Any]) -> None:
        """One poll: validating -> in_progress (for ``batch_polls`` polls) -> finalizing -> done."""
        if batch["status"] in ("completed", "failed", "expired", "cancelled"):
            return
        batch["_polls"] += 1
        polls = batch["_polls"]
        if batch["status"] == "validating":
            lines = [json.loads(x)
                     for x in self.files[batch["input_file_id"]].decode().splitlines() if x.strip()]
            ids = [x["custom_id"] for x in lines]
            if len(set(ids)) != len(ids):
                batch["status"] = "failed"
                batch["errors"] = {"object": "list", "data": [
                    {"code": "duplicate_custom_id",
                     "message": "The custom_id values must be unique", "line": None}]}
                return
            batch["status"] = "in_progress"
        elif batch["status"] == "in_progress" and polls > self.batch_polls:
            batch["status"] = "finalizing"
        elif batch["status"] == "finalizing":
            self._finish(batch)

    def _finish(self, batch: dict[str, Any]) -> None:
        lines = [json.loads(x) for x in self.files[batch["input_file_id"]].decode().splitlines() if x.strip()]
        out, err = [], []
        answered = len(lines) // 2 if self.batch_expire else len(lines)
        for i, line in enumerate(lines):
            cid = line["custom_id"]
            if i >= answered:
                err.append({"id": f"req_{i}", "custom_id": cid, "response": None,
                            "error": {"code": "batch_expired",
                                      "message": "This request could not be executed before "
                                      "the completion window expired."}})
                continue
            if self.batch_fail_every and (i + 1) % self.batch_fail_every == 0:
                err.append({"id": f"req_{i}", "custom_id": cid, "error": None, "response": {
                    "status_code": 500, "request_id": f"r{i}",
                    "body": {"error": {"message": "scripted error"}}}})
                continue
            self.batch_calls.append(cid)
            reply = _as_reply(self.responder(line["body"]))
            out.append({"id": f"req_{i}", "custom_id": cid, "error": None, "response": {
                "status_code": 200, "request_id": f"r{i}",
                "body": _envelope(line["body"], reply.text, reply.logprobs)}})
        text = [json.dumps(x) for x in out]
        if self.batch_duplicate and text:
            text.append(text[0])
        text += ["{not json" for _ in range(self.batch_malformed)]
        for kind, rows in (("output_file_id", text), ("error_file_id", [json.dumps(x) for x in err])):
            if rows:
                file_id = f"file-{len(self.files) + 1}"
                self.files[file_id] = ("\n".join(rows) + "\n").encode()
                batch[kind] = file_id
        batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}
        batch["status"] = "expired" if self.batch_expire else "completed"


def _public(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if not k.startswith("_")}


def _multipart_file(content_type: str, raw: bytes) -> bytes | None:
    """The ``file`` part of a multipart/form-data body."""
    from email.parser import BytesParser
    from email.policy import HTTP

    message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode()
                                                  + b"\r\n\r\n" + raw)
    for part in message.iter_parts():
        if part.get_param("name", header="content-disposition") == "file":
            return part.get_payload(decode=True)
    return None


def _as_reply(value: Reply | str) -> Reply:
    return value if isinstance(value, Reply) else Reply(text=value)


def _fault(kind: str, responder: Responder, request: dict[str, Any]) -> Reply:
    if kind == "429":
        return Reply.error(429, "rate limited", retry_after=0.01)
    if kind == "500":
        return Reply.error(500, "internal error")
    if kind == "timeout":
        return Reply(hang=True)
    if kind == "truncated":
        return Reply(body=b'{"id": "x", "choices": [{"message": {"content": "cut of')
    if kind == "empty":
        return Reply(text="")
    if kind in JUNK_TEXTS:
        return Reply(text=JUNK_TEXTS[kind])
    if kind == "truncated_json":
        return Reply(text=TRUNCATED_JSON)
    if kind == "refusal":
        return Reply(text=REFUSAL_TEXT)
    if kind == "echo_key":
        auth = str(request.get("_headers", {}).get("authorization", ""))
        return Reply(text=ECHO_KEY_TEXT.format(key=auth.removeprefix("Bearer ").strip() or "sk-none"))
    # wrong_format: a reply in prose where the caller wanted its contract
    return Reply(text="I am sorry, but as a language model I would rather write a poem about the sea.")


def chatml_messages(prompt: str) -> list[dict[str, str]]:
    """A ChatML prompt (pipeline.llm.prompts.chatml) read back into its messages; an empty system
    message and the open assistant turn left out."""
    out = []
    for part in prompt.split("<|im_start|>")[1:]:
        role, _, content = part.partition("\n")
        content = content.removesuffix("\n").removesuffix("<|im_end|>")
        if content or role not in ("system", "assistant"):
            out.append({"role": role, "content": content})
    return out


def _envelope(request: dict[str, Any], text: str, logprobs: list[dict[str, float]] | None = None,
              cached_tokens: int | None = None) -> dict[str, Any]:
    prompt_chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
    envelope = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "fake-model"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        # about four characters a token, as a stand-in for a tokenizer
        "usage": {
            "prompt_tokens": max(1, prompt_chars // 4),
            "completion_tokens": max(1, len(text) // 4) if text else 0,
            "total_tokens": max(1, prompt_chars // 4) + (len(text) // 4),
        },
    }
    if cached_tokens is not None:
        envelope["usage"]["prompt_tokens_details"] = {"cached_tokens": cached_tokens}  # type: ignore[index]
    if logprobs is not None and request.get("logprobs"):
        top_n = int(request.get("top_logprobs") or 0)
        content = []
        for tops in logprobs:
            ranked = sorted(tops.items(), key=lambda kv: -kv[1])
            token, logprob = ranked[0]
            content.append({"token": token, "logprob": logprob, "bytes": None,
                            "top_logprobs": [{"token": t, "logprob": lp, "bytes": None}
                                             for t, lp in ranked[:top_n]]})
        envelope["choices"][0]["logprobs"] = {"content": content, "refusal": None}  # type: ignore[index]
    return envelope
