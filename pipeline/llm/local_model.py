"""The embedded default model behind llama.cpp's OpenAI-compatible server on 127.0.0.1: the server's
life, and the lease a run holds on one.

``LocalServer`` runs ``python -m llama_cpp.server`` as a child process (log in the cache folder) on
the model file (pipeline.llm.model_file), waits until ``GET /v1/models`` answers, then proves it can
work before anyone is told it is up (pipeline.llm.server_health). It stops it with SIGTERM, then
SIGKILL. The child watches its parent and exits when the parent dies, so a killed run leaves no
server behind.

``acquire_server`` is what a run calls: it reuses the server of ``unspecific local serve`` (found
through a state file in the cache folder) or starts one for the run.

In the cache folder (pipeline.llm.model_file.cache_root): the server logs in ``logs/``, the serve
state in ``local-server.json``.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.config import Config
from pipeline.core.errors import LocalModelError, LocalServerDied
from pipeline.core.processes import process_alive
from pipeline.llm.model_file import (
    EMBEDDED_NAME,
    MODEL_ALIAS,
    ByteProgress,
    cache_root,
    model_path,
    shipped_model,
)
from pipeline.llm.server_health import (
    PROOF_MIN_PROMPT_TOKENS,
    Proof,
    death_report,
    last_log_lines,
    prove,
    server_alive,
    server_answers,
)

STATE_FILE = "local-server.json"

# The embedded model's chat format, from its registry entry (pipeline.llm.model_file): ChatML,
# named so the GGUF's Jinja template and its default system prompt stay out of every call.
CHAT_FORMAT = shipped_model(EMBEDDED_NAME).chat_format
N_CTX = 8192
N_THREADS = 2


# -- the server -----------------------------------------------------------------------


def llama_cpp_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Runs in the child: a daemon thread exits the process when its parent dies (so a killed run
# leaves no server eating the CPU); grammar-held requests get pipeline.llm.grammar_sampling,
# log-probabilities pipeline.llm.fast_logprobs, prompts their last token's logits only
# pipeline.llm.prompt_logits, replies their cached prompt tokens pipeline.llm.cache_report (whose wrapper
# of Llama.eval must wrap prompt_logits' eval) and lists of prompts pipeline.llm.prompt_batch, each loaded
# from its file (the server's Python need not have this project installed: the project's folder goes on
# the path for pipeline.llm.server_patch, which they share) and skipped, with a line in the log saying
# why, if it cannot be or declines (another llama-cpp-python, or its switch set to 0); then
# llama_cpp.server runs as if started with -m. cache_report comes before prompt_batch, which imports
# the server's app: the response models built then must keep the field cache_report adds.
_BOOTSTRAP = """
import importlib.util, os, runpy, sys, threading, time
parent = int(sys.argv.pop(1))
patches = [("grammar-held requests: sampled by pipeline.llm.grammar_sampling", "grammar sampling", \
sys.argv.pop(1)),
           ("log-probabilities: read by pipeline.llm.fast_logprobs", "fast log-probabilities", \
sys.argv.pop(1)),
           ("prompt logits: the last token's only, by pipeline.llm.prompt_logits", "last logits", \
sys.argv.pop(1)),
           ("cached prompt tokens: said by pipeline.llm.cache_report", "cached-token count", sys.argv.pop(1)),
           ("lists of prompts: scored by pipeline.llm.prompt_batch", "prompt lists", sys.argv.pop(1))]
def watch():
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)
threading.Thread(target=watch, daemon=True).start()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(patches[0][2])))))
for done, name, path in patches:
    try:
        spec = importlib.util.spec_from_file_location("unspecific_" + os.path.basename(path)[:-3], path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.install()
        print(done, file=sys.stderr, flush=True)
    except Exception as exc:
        print(f"{name} not installed, llama-cpp-python's own is used: {type(exc).__name__}: {exc}",
              file=sys.stderr, flush=True)
sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""
_GRAMMAR_SAMPLING_FILE = Path(__file__).with_name("grammar_sampling.py")
_FAST_LOGPROBS_FILE = Path(__file__).with_name("fast_logprobs.py")
_CACHE_REPORT_FILE = Path(__file__).with_name("cache_report.py")
_PROMPT_LOGITS_FILE = Path(__file__).with_name("prompt_logits.py")
_PROMPT_BATCH_FILE = Path(__file__).with_name("prompt_batch.py")
# The bootstrap's patches, in the order it takes them (its list of names is in the same order).
PATCH_FILES = (_GRAMMAR_SAMPLING_FILE, _FAST_LOGPROBS_FILE, _PROMPT_LOGITS_FILE, _CACHE_REPORT_FILE,
               _PROMPT_BATCH_FILE)


@dataclass(frozen=True)
class ServedModel:
    """A further model the server holds beside the embedded one, asked for by its alias."""

    alias: str
    path: Path
    chat_format: str | None = CHAT_FORMAT


@dataclass
class LocalServer:
    """llama.cpp's OpenAI-compatible server as a child process. With ``others``, one server holds
    every model and loads the one a request names (llama-cpp-python keeps one in memory at a time:
    switching costs a load from the page cache, measured in docs/measurements.md, where a second
    server would cost a second process and its memory for models that never run at once)."""

    model: Path
    port: int | None = None
    host: str = "127.0.0.1"
    n_ctx: int = N_CTX
    n_threads: int = N_THREADS
    chat_format: str | None = CHAT_FORMAT
    log_path: Path | None = None
    python: str = sys.executable
    process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    started_s: float = field(default=0.0, init=False)
    proof: Proof | None = field(default=None, init=False)
    # The process we stopped on purpose is not a death; one that ended by itself is kept to report.
    _ended: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    others: tuple[ServedModel, ...] = ()

    @property
    def aliases(self) -> tuple[str, ...]:
        return (MODEL_ALIAS, *(m.alias for m in self.others))

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        boot = [self.python, "-c", _BOOTSTRAP, str(os.getpid()), *(str(f) for f in PATCH_FILES)]
        if self.others:
            return [*boot, "--config_file", str(self._config_file())]
        cmd = [
            *boot,
            "--model", str(self.model),
            "--model_alias", MODEL_ALIAS,
            "--host", self.host,
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),
        ]
        if self.chat_format:
            cmd += ["--chat_format", self.chat_format]
        return cmd

    def _model_settings(self, alias: str, path: Path, chat_format: str | None) -> dict[str, Any]:
        settings: dict[str, Any] = {"model": str(path), "model_alias": alias, "n_ctx": self.n_ctx,
                                    "n_threads": self.n_threads, "n_threads_batch": self.n_threads}
        return settings | ({"chat_format": chat_format} if chat_format else {})

    def _config_file(self) -> Path:
        """llama-cpp-python's multi-model config (JSON), beside the log; the embedded model first,
        so it is the one loaded at start and the one a request naming no known alias gets."""
        assert self.port is not None
        models = [self._model_settings(MODEL_ALIAS, self.model, self.chat_format)]
        models += [self._model_settings(m.alias, m.path, m.chat_format) for m in self.others]
        path = cache_root() / "logs" / f"llama-server-{self.port}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"host": self.host, "port": self.port, "models": models}, indent=2),
                        encoding="utf-8")
        return path

    def start(self, timeout_s: float = 180.0) -> str:
        """Start and wait until the server answers; returns its base URL.

        With no port given, a free one is picked; if another program takes it before the server
        binds it, the start is tried again on another port.
        """
        pick_port, pick_log = self.port is None, self.log_path is None
        for attempt in range(3):
            try:
                return self._start(timeout_s)
            except LocalModelError as exc:
                if not (pick_port and attempt < 2 and "address already in use" in str(exc).lower()):
                    raise
                self.port = None
                if pick_log:
                    self.log_path = None
        raise AssertionError("unreachable")

    def _start(self, timeout_s: float) -> str:
        if not llama_cpp_available_for(self.python):
            raise LocalModelError(
                "llama-cpp-python is not installed; install it with `pip install "
                "'llama-cpp-python[server]==0.3.36'` "
                "(or `pip install -e '.[local]'`; it builds from source in a few minutes)"
            )
        if self.port is None:
            self.port = free_port()
        if self.log_path is None:
            self.log_path = cache_root() / "logs" / f"llama-server-{self.port}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        env = server_environment(os.environ)
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,  # Ctrl-C in the terminal reaches us, and we stop it in order
            )
        try:
            return self._wait_ready(t0, timeout_s)
        except BaseException:
            self.stop()  # Ctrl-C or a failure while waiting: leave no half-started server
            raise

    def _wait_ready(self, t0: float, timeout_s: float) -> str:
        assert self.process is not None
        deadline = t0 + timeout_s
        while True:
            self._raise_if_dead("while starting")
            if server_answers(self.base_url, timeout_s=1.0):
                break
            if time.monotonic() > deadline:
                raise LocalModelError(
                    f"the llama.cpp server did not answer within {timeout_s:.0f}s (log "
                    f"{self.log_path}):\n{self.log_tail()}"
                )
            time.sleep(0.25)
        try:
            self.proof = prove(self.base_url, timeout_s=max(5.0, deadline - time.monotonic()))
        except (OSError, ValueError, http.client.HTTPException) as exc:
            self._raise_if_dead("on its first real prompt", wait_s=3.0)
            raise LocalModelError(
                f"the llama.cpp server answered its health check but not a real prompt of "
                f"{PROOF_MIN_PROMPT_TOKENS}+ tokens: {exc} (log {self.log_path}):\n{self.log_tail()}"
            ) from None
        self._raise_if_dead("on its first real prompt")
        self.started_s = time.monotonic() - t0
        return self.base_url

    def _raise_if_dead(self, when: str, wait_s: float = 0.0) -> None:
        message = self.death(wait_s=wait_s, when=when)
        if message is not None:
            raise LocalServerDied(message)

    def death(self, *, wait_s: float = 0.0, when: str = "") -> str | None:
        """The death report when the server ended by itself, else None. ``wait_s``: how long to
        wait for it to be reaped (a dropped connection comes a moment before the exit status)."""
        proc = self.process or self._ended
        if proc is None:
            return None
        try:
            code = proc.wait(wait_s) if wait_s > 0 else proc.poll()
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            return None
        self.process, self._ended = None, proc
        return death_report(code, self.log_path, self.log_tail(), when=when)

    def stop(self, grace_s: float = 2.0) -> None:
        # Short: a server has nothing to save, and a stop on a closed terminal must end within seconds.
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5.0)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        return last_log_lines(self.log_path, lines)

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def llama_cpp_available_for(python: str) -> bool:
    if python == sys.executable:
        return llama_cpp_available()
    result = subprocess.run([python, "-c", "import llama_cpp.server"], capture_output=True)
    return result.returncode == 0


# OpenMP threads wait for each other hundreds of times per token. Spinning a short while before
# sleeping, 256 tokens on 2 threads (tokens/s): idle cores 22.0 against 14.5 sleeping at once
# (PASSIVE); one core busy elsewhere 9.1 against 11.4; both busy 9.2 against 6.5. OpenMP's own
# default spins far longer: 21 idle, but 256 tokens took over 10 minutes beside one busy process.
OMP_SPIN_COUNT = "1000"


def server_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: the caller's, with a short OpenMP spin unless the caller set a
    wait policy or spin count of their own."""
    env = dict(environ)
    if "OMP_WAIT_POLICY" not in env and "GOMP_SPINCOUNT" not in env:
        env["GOMP_SPINCOUNT"] = OMP_SPIN_COUNT
    return env


# -- the serve state and leases -----------------------------------------------------------


def state_path() -> Path:
    return cache_root() / STATE_FILE


def write_state(server: LocalServer) -> None:
    assert server.process is not None
    state = {
        "owner_pid": os.getpid(),
        "server_pid": server.process.pid,
        "port": server.port,
        "base_url": server.base_url,
        "model": str(server.model),
        "aliases": list(server.aliases),
        "log": str(server.log_path),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path = state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(state, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def read_state() -> dict[str, Any] | None:
    try:
        return json.loads(state_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def clear_state(owner_pid: int | None = None) -> None:
    """Remove the state file (only ours, when ``owner_pid`` is given)."""
    state = read_state()
    if state is not None and owner_pid is not None and state.get("owner_pid") != owner_pid:
        return
    state_path().unlink(missing_ok=True)


def running_server() -> dict[str, Any] | None:
    """The state of a `local serve` server that is alive and answering, else None."""
    state = read_state()
    if not state or not process_alive(state.get("server_pid")):
        return None
    if not server_alive(str(state.get("base_url"))):
        return None
    return state


@dataclass
class Lease:
    """A server for a run: ``base_url`` to call, ``release()`` when done (stops it if we own it)."""

    base_url: str
    server: LocalServer | None = None  # None: borrowed from `unspecific local serve`
    borrowed: dict[str, Any] | None = None  # the serve state of a borrowed server

    @property
    def owned(self) -> bool:
        return self.server is not None

    def death(self, wait_s: float = 1.0) -> str | None:
        """A report when the server behind this lease died, else None (the client asks on a
        connection error, so a dead server stops the run at once instead of being retried)."""
        if self.server is not None:
            return self.server.death(wait_s=wait_s, when="during the run")
        state = self.borrowed
        if state is None:
            return None
        deadline = time.monotonic() + wait_s
        while process_alive(state.get("server_pid")):
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)
        log = Path(str(state["log"])) if state.get("log") else None
        return death_report(None, log, last_log_lines(log), when="during the run") + (
            "\n(the server of `unspecific local serve`: its terminal shows how it ended)"
        )

    def release(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def served_models(config: Config, names: Iterable[str] | None = None, *,
                  resolve: bool = True) -> tuple[ServedModel, ...]:
    """The local models beyond the embedded one that these endpoints (default: every role's) ask for:
    a GGUF named by path (``gguf``), else a shipped model by its alias; LocalModelError names the
    endpoint whose model is neither. ``resolve=False``: the aliases alone, no file assembled."""
    from pipeline.llm.model_file import shipped_model

    if names is None:
        roles = config.roles
        names = [roles.generator, roles.summarizer, roles.naturalness_judge, *roles.judges,
                 *roles.models_under_test]
    out: dict[str, ServedModel] = {}
    for name in dict.fromkeys(names):
        ep = config.endpoint(name)
        if not ep.is_local or (ep.model == MODEL_ALIAS and not ep.gguf) or ep.model in out:
            continue
        if ep.gguf:
            out[ep.model] = ServedModel(ep.model, Path(ep.gguf), ep.chat_format or CHAT_FORMAT)
            continue
        try:
            shipped = shipped_model(ep.model)
        except LocalModelError as exc:
            raise LocalModelError(f"endpoint '{name}': model '{ep.model}' is no shipped "
                                  "model; give its GGUF file "
                                  f"as endpoints.{name}.gguf ({exc})") from None
        path = shipped.path() if resolve else Path(shipped.file)
        out[ep.model] = ServedModel(shipped.alias, path, ep.chat_format or shipped.chat_format)
    return tuple(out.values())


def acquire_server(*, timeout_s: float = 180.0, progress: ByteProgress | None = None,
                   **server_options: Any) -> Lease:
    """Reuse the server of `unspecific local serve`, or start one for this run.

    ``server_options`` go to LocalServer (n_ctx, n_threads, python, ...) when one is started.
    """
    state = running_server()
    others: tuple[ServedModel, ...] = tuple(server_options.pop("others", ()))
    if state is not None and {m.alias for m in others} <= set(state.get("aliases") or (MODEL_ALIAS,)):
        return Lease(base_url=str(state["base_url"]), borrowed=state)
    server = LocalServer(model=model_path(progress), others=others, **server_options)
    server.start(timeout_s=timeout_s)
    return Lease(base_url=server.base_url, server=server)
