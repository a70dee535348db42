"""The embedded model: assembling the GGUF, the server's lifecycle, leases, and one real call."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.core.errors import LocalModelError, LocalServerDied
from pipeline.core.processes import process_alive
from pipeline.llm import local_model as lm
from pipeline.llm import model_file, server_health
from tests.fakes import fake_llama
from tests.fakes.fake_server import FakeOpenAIServer
from tests.support.model_parts import fake_model


@pytest.fixture
def small_parts(tmp_path, monkeypatch) -> model_file.ShippedModel:
    """A small model of three parts in the embedded model's place (tests/support/model_parts.py;
    the model file's own tests are tests/test_model_file.py)."""
    return fake_model(tmp_path, monkeypatch, register_as=model_file.EMBEDDED_NAME)


# -- the installed llama.cpp is portable ---------------------------------------------------------

# AMX tile instructions, and AVX-512 (zmm registers, mask registers, AVX-512-only opcodes): a
# VM may forbid them although its CPU lists them, and the server then dies on its first prompt.
FORBIDDEN = re.compile(
    r"\b(ldtilecfg|sttilecfg|tileloadd\w*|tilestored|tilezero|tilerelease|tdp\w+ps|tdpb\w+)\b|"
    r"%zmm\d|\{%k[1-7]\}|\bvpternlog[dq]\b"
)


def test_installed_llama_cpp_holds_no_amx_or_avx512_code():
    """Never skipped: `make install` installs llama-cpp-python, built portable (the Makefile)."""
    import importlib.util
    import shutil
    import subprocess

    spec = importlib.util.find_spec("llama_cpp")
    assert spec is not None and spec.origin, "llama-cpp-python is not installed: run `make install`"
    objdump = shutil.which("objdump")
    assert objdump, "objdump (binutils) is needed to check the llama.cpp build"
    libs = sorted({p.resolve() for p in Path(spec.origin).parent.rglob("lib*.so*")
                   if p.is_file()})  # not symlinks twice
    assert any("ggml" in p.name for p in libs), f"no ggml libraries under {Path(spec.origin).parent}"
    found: dict[str, list[str]] = {}
    for lib in libs:
        proc = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(lib)], capture_output=True,
                              text=True, check=True)
        hits = [line.strip() for line in proc.stdout.splitlines() if FORBIDDEN.search(line)]
        if hits:
            found[lib.name] = hits[:3] + [f"... {len(hits)} in all"]
    assert not found, (f"AMX/AVX-512 code in the installed llama.cpp (rebuild portable: `rm -rf .wheels "
                       f".venv && make install`): {found}")


def test_the_scan_finds_what_it_looks_for():
    assert FORBIDDEN.search("  4c1a2b:\tldtilecfg (%rax)")
    assert FORBIDDEN.search("  4c1a2b:\tvfmadd231ps %zmm1,%zmm2,%zmm3")
    assert FORBIDDEN.search("  4c1a2b:\ttdpbssd %tmm2,%tmm1,%tmm0")
    assert FORBIDDEN.search("  4c1a2b:\tvmovups %ymm0,(%rax){%k1}")
    assert not FORBIDDEN.search("  4c1a2b:\tvfmadd231ps %ymm1,%ymm2,%ymm3")
    assert not FORBIDDEN.search("  4c1a2b:\tcall 4c1000 <ggml_compute_forward_mul_mat@plt>")


# -- the server's lifecycle, with a stand-in for llama_cpp.server --------------------------------



@pytest.fixture
def fake_python(tmp_path) -> str:
    script = tmp_path / "fake-python"
    script.write_text(f"#!{sys.executable}\n{fake_llama.SOURCE.read_text()}")
    script.chmod(0o755)
    return str(script)


def test_server_starts_answers_and_stops(model_cache, fake_python, tmp_path, monkeypatch):
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        monkeypatch.delenv(name, raising=False)
    server = lm.LocalServer(model=tmp_path / "m.gguf", python=fake_python)
    url = server.start(timeout_s=20)
    try:
        assert url == server.base_url and url.startswith("http://127.0.0.1:")
        assert server_health.server_answers(url)
        assert server.running
        assert "fake llama: loading" in server.log_tail()
        assert "fake llama: openmp None 1000" in server.log_tail()  # a short spin, then sleep
        cmd = server.command()
        for flag, value in (("--n_ctx", "8192"), ("--n_threads", "2"), ("--chat_format", "chatml"),
                            ("--host", "127.0.0.1")):
            assert cmd[cmd.index(flag) + 1] == value
    finally:
        server.stop()
    assert not server.running
    assert not server_health.server_answers(url, timeout_s=0.5)


def test_openmp_waits_as_the_caller_says_else_a_short_spin():
    assert lm.server_environment({"PATH": "/bin"}) == {"PATH": "/bin", "GOMP_SPINCOUNT": "1000"}
    assert lm.server_environment({"OMP_WAIT_POLICY": "ACTIVE"}) == {"OMP_WAIT_POLICY": "ACTIVE"}
    assert lm.server_environment({"GOMP_SPINCOUNT": "0"}) == {"GOMP_SPINCOUNT": "0"}


def test_server_proves_itself_with_a_real_prompt_before_it_is_up(model_cache, fake_python, tmp_path):
    server = lm.LocalServer(model=tmp_path / "m.gguf", python=fake_python)
    server.start(timeout_s=20)
    try:
        assert (server.proof is not None
                and server.proof.prompt_tokens >= server_health.PROOF_MIN_PROMPT_TOKENS)
        assert "fake llama: prompt of" in server.log_tail()
    finally:
        server.stop()
    assert server.death() is None  # stopped on purpose: not a death


def test_proof_prompt_is_long_enough_for_a_batch():
    words = sum(len(m["content"].split()) for m in server_health.proof_messages())
    # about 4/3 tokens a word in English for Qwen's tokenizer; 300 tokens needs 225+ words
    assert words * 4 // 3 >= server_health.PROOF_MIN_PROMPT_TOKENS


def test_server_that_crashes_on_its_first_real_prompt_is_never_reported_up(model_cache, fake_python, tmp_path,
                                                                           monkeypatch):
    """The AMX failure: /v1/models answers, the first batched prompt kills the process."""
    monkeypatch.setenv("FAKE_LLAMA_MODE", "crash_on_prompt")
    server = lm.LocalServer(model=tmp_path / "m.gguf", python=fake_python)
    t0 = time.monotonic()
    with pytest.raises(LocalServerDied) as err:
        server.start(timeout_s=60)
    assert time.monotonic() - t0 < 20
    message = str(err.value)
    assert "killed by signal 11 (SIGSEGV)" in message and "first real prompt" in message
    assert f"log: {server.log_path}" in message
    assert "ggml: computing a batch" in message  # the log's last lines
    assert "AMX" in message and "make install" in message  # the likely cause and the way out
    assert server.process is None


def test_server_that_answers_junk_to_the_real_prompt_is_not_up(model_cache, fake_python, tmp_path,
                                                               monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "junk_on_prompt")
    server = lm.LocalServer(model=tmp_path / "m.gguf", python=fake_python)
    with pytest.raises(LocalModelError, match="not a real prompt"):
        server.start(timeout_s=20)
    assert server.process is None


async def test_a_server_dying_mid_run_stops_the_client_at_once(model_cache, small_parts, fake_python, store,
                                                               monkeypatch):
    """Never a timeout after retries: the first failed call reports the death and the log."""
    from pipeline.core.config import parse_config
    from pipeline.llm.client import LLMClient

    monkeypatch.setenv("FAKE_LLAMA_MODE", "crash_later")
    lease = lm.acquire_server(python=fake_python, timeout_s=20)
    config = parse_config({"endpoints": {"local": {"base_url": "local", "max_retries": 5,
                                                   "timeout_s": 60.0}}})
    client = LLMClient(config, store, local_base_url=lease.base_url, local_death=lease.death,
                       backoff_base_s=1.0)
    t0 = time.monotonic()
    try:
        with pytest.raises(LocalServerDied) as err:
            await client.chat("local",
                              [{"role": "user", "content": "write a short article about the harbour"}])
    finally:
        await client.aclose()
        lease.release()
    assert time.monotonic() - t0 < 10
    assert client.usage.retries == 0
    assert "killed by signal 11 (SIGSEGV) during the run" in str(err.value)
    assert "ggml: computing a batch" in str(err.value)
    assert store.scalar("SELECT count(*) FROM llm_calls") == 0


def test_a_borrowed_server_that_is_gone_is_reported_with_its_log(model_cache, tmp_path):
    log = tmp_path / "served.log"
    log.write_text("llama: loaded\nSegmentation fault\n")
    lease = lm.Lease(base_url="http://127.0.0.1:9/v1",
                     borrowed={"server_pid": 2**22 + 12345, "log": str(log)})
    report = lease.death(wait_s=0.1)
    assert report is not None and "Segmentation fault" in report and str(log) in report


def test_server_that_dies_reports_its_log(model_cache, fake_python, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "die")
    server = lm.LocalServer(model=tmp_path / "m.gguf", python=fake_python)
    with pytest.raises(LocalModelError, match="exited with code 3") as err:
        server.start(timeout_s=20)
    assert "failed to load model" in str(err.value)


def test_server_that_never_answers_times_out_and_is_stopped(model_cache, fake_python, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "hang")
    server = lm.LocalServer(model=tmp_path / "m.gguf", python=fake_python)
    t0 = time.monotonic()
    with pytest.raises(LocalModelError, match="did not answer within 2s") as err:
        server.start(timeout_s=2)
    assert time.monotonic() - t0 < 15
    assert "fake llama: loading" in str(err.value)
    assert server.process is None


def test_stop_kills_a_server_that_ignores_sigterm(model_cache, fake_python, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "stubborn")
    server = lm.LocalServer(model=tmp_path / "m.gguf", python=fake_python)
    server.start(timeout_s=20)
    proc = server.process
    assert proc is not None
    t0 = time.monotonic()
    server.stop(grace_s=0.5)
    assert proc.returncode == -9  # SIGKILL after the grace period
    assert time.monotonic() - t0 < 5


def test_a_port_taken_meanwhile_is_retried_on_another(model_cache, fake_python, tmp_path, monkeypatch):
    marker = tmp_path / "first-port"
    monkeypatch.setenv("FAKE_LLAMA_MODE", "portrace")
    monkeypatch.setenv("FAKE_LLAMA_MARKER", str(marker))
    server = lm.LocalServer(model=tmp_path / "m.gguf", python=fake_python)
    try:
        server.start(timeout_s=20)
        assert marker.exists() and server.port != int(marker.read_text())
        assert server_health.server_answers(server.base_url)
    finally:
        server.stop()


def test_a_fixed_port_in_use_is_reported(model_cache, fake_python, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_MODE", "portrace")
    monkeypatch.setenv("FAKE_LLAMA_MARKER", str(tmp_path / "first-port"))
    with pytest.raises(LocalModelError, match="address already in use"):
        lm.LocalServer(model=tmp_path / "m.gguf", python=fake_python, port=lm.free_port()).start(timeout_s=20)


def test_a_busy_served_server_is_still_found(model_cache, fake_python, tmp_path, monkeypatch):
    """While the model generates, /v1/models waits; a run must still borrow the server."""
    monkeypatch.setenv("FAKE_LLAMA_MODE", "busy")
    server = lm.LocalServer(model=tmp_path / "m.gguf", python=fake_python)
    server.start(timeout_s=20)
    try:
        lm.write_state(server)
        assert not server_health.server_answers(server.base_url, timeout_s=0.5)  # busy
        t0 = time.monotonic()
        lease = lm.acquire_server()
        assert lease.base_url == server.base_url and not lease.owned
        assert time.monotonic() - t0 < 5
    finally:
        server.stop()


def test_missing_llama_cpp_is_a_clear_error(model_cache, tmp_path):
    script = tmp_path / "no-llama-python"
    script.write_text("#!/bin/sh\nexit 1\n")
    script.chmod(0o755)
    with pytest.raises(LocalModelError, match="llama-cpp-python is not installed"):
        lm.LocalServer(model=tmp_path / "m.gguf", python=str(script)).start()


# -- leases ------------------------------------------------------------------------------------


def write_state(base_url: str, pid: int) -> None:
    lm.state_path().parent.mkdir(parents=True, exist_ok=True)
    lm.state_path().write_text(json.dumps({"owner_pid": pid, "server_pid": pid,
                                           "base_url": base_url, "port": 0}))


def test_lease_borrows_a_served_server(model_cache):
    with FakeOpenAIServer() as served:
        write_state(served.base_url, os.getpid())
        lease = lm.acquire_server()
        assert lease.base_url == served.base_url and not lease.owned
        lease.release()  # borrowing never stops it
        assert server_health.server_answers(served.base_url)


def test_stale_state_starts_an_own_server_and_release_stops_it(model_cache, small_parts, fake_python):
    write_state("http://127.0.0.1:9/v1", os.getpid())  # alive pid, but nothing answers there
    lease = lm.acquire_server(python=fake_python, timeout_s=20)
    try:
        assert lease.owned and server_health.server_answers(lease.base_url)
        url = lease.base_url
    finally:
        lease.release()
    assert not server_health.server_answers(url, timeout_s=0.5)
    lease.release()  # twice is harmless


def test_child_exits_when_its_parent_dies(model_cache, tmp_path):
    """The bootstrap's watchdog: a server whose run was killed does not live on."""
    import subprocess

    marker = tmp_path / "child.pid"
    # parent: starts a child running the bootstrap's watchdog, records its pid, then dies hard.
    parent_code = f"""
import os, subprocess, sys, time
from pipeline.llm.local_model import _BOOTSTRAP, PATCH_FILES
code = _BOOTSTRAP.replace('runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)', \
'time.sleep(60)')
patches = ["/nonexistent/" + path.name for path in PATCH_FILES]
child = subprocess.Popen([sys.executable, "-c", code, str(os.getpid()), *patches], start_new_session=True)
open({str(marker)!r}, "w").write(str(child.pid))
time.sleep(0.5)
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", parent_code], check=True,
                   cwd=Path(__file__).parent.parent, timeout=30)
    child = int(marker.read_text())
    deadline = time.monotonic() + 10
    while process_alive(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not process_alive(child)


def test_the_patches_find_what_they_share_in_a_python_without_this_project(tmp_path):
    """The bootstrap loads each patch from its file, and the project's folder goes on the path for
    pipeline.llm.server_patch: a Python with nothing installed (here: no site-packages at all,
    from another folder) gets as far as wanting llama_cpp, not this project."""
    import subprocess

    from pipeline.llm.local_model import _BOOTSTRAP, PATCH_FILES

    code = _BOOTSTRAP.replace('runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)',
                              'print("server started")')
    result = subprocess.run([sys.executable, "-S", "-c", code, str(os.getpid()), *map(str, PATCH_FILES)],
                            capture_output=True, text=True, cwd=tmp_path, timeout=30)
    said = result.stderr.splitlines()
    assert ("cached-token count not installed, llama-cpp-python's own is used: "
            "ModuleNotFoundError: No module named 'llama_cpp'") in said, result.stderr
    assert "No module named 'pipeline'" not in result.stderr
    assert result.stdout.strip() == "server started"


# -- the real thing ----------------------------------------------------------------------------


@pytest.mark.real_model
async def test_real_json_reply_through_the_client(local_server_url, store):
    """The path every stage takes: default config (every role local) -> open_client -> chat_json."""
    from pipeline.core.config import parse_config
    from pipeline.llm.client import Params
    from pipeline.stages.runs import open_client

    schema = {
        "type": "object",
        "properties": {"colour": {"type": "string"}, "legs": {"type": "integer"}},
        "required": ["colour", "legs"],
    }

    def validate(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict) or not isinstance(value.get("legs"),
                                                         int) or not isinstance(value.get("colour"), str):
            raise ValueError("expected {'colour': str, 'legs': int}")
        return value

    config = parse_config({})
    messages = [{"role": "user",
                 "content": "A typical zebra: its main colour and how many legs it has. Reply in JSON."}]
    async with open_client(config, store) as client:
        assert client.local_base_url == local_server_url
        endpoint = config.role("generator")
        value, completion = await client.chat_json(endpoint, messages, schema=schema, validate=validate,
                                                   params=Params(max_tokens=64, temperature=0.0))
        _, again = await client.chat_json(endpoint, messages, schema=schema, validate=validate,
                                          params=Params(max_tokens=64, temperature=0.0))
    assert value["legs"] == 4
    assert completion.prompt_tokens > 10 and 0 < completion.completion_tokens <= 64
    assert not completion.cached and again.cached
    row = store.one("SELECT endpoint, model, request FROM llm_calls")
    assert row["endpoint"] == "local"
    assert json.loads(row["request"])["params"]["response_format"] == {"type": "json_object",
                                                                       "schema": schema}
