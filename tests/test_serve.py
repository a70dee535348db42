"""`unspecific serve`: the app in a browser, read-only, behind a token off the loopback address.

The server runs as `unspecific serve` in a child process; the browser is headless Chromium
(tests/browser.py). The app draws on a canvas, so what the page shows is read from what the app
sent it: the websocket frames, with the terminal escape codes stripped.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from pipeline.cli import build_parser
from pipeline.outputs.serve import ServeOptions, app_command, needs_token
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.browser import chromium

ROOT = Path(__file__).parent.parent
# Not 127.0.0.1: another loopback address, so the server demands its token as on a real network,
# while nothing leaves this machine.
HOST = "127.0.0.2"
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    store = root / "s.sqlite"
    build_synthetic_store(store, SyntheticSpec(n_instructions=8, seed=4))
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "--store", str(store),
                             "serve", "--host", HOST,
                             "--port", str(port)], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    url = None
    printed = []
    try:
        while url is None:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"serve stopped: {''.join(printed)}")
            printed.append(line)
            m = re.search(r"http://\S+\?token=\S+", line)
            url = m.group(0) if m else None
        _wait_listening(port)
        yield {"url": url, "base": f"http://{HOST}:{port}", "proc": proc, "started": started,
               "printed": printed}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _wait_listening(port: int) -> None:
    for _ in range(200):
        with socket.socket() as s:
            if s.connect_ex((HOST, port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError("the server never listened")


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_defaults_are_loopback_and_read_only(tmp_path: Path) -> None:
    args = build_parser().parse_args(["serve"])
    assert args.host == "127.0.0.1" and not args.allow_run
    assert not needs_token("127.0.0.1") and needs_token("0.0.0.0") and needs_token(HOST)
    command = app_command(ServeOptions(store=tmp_path / "s.sqlite"))
    assert command.endswith(" tui --read-only")
    assert "--read-only" not in app_command(ServeOptions(store=tmp_path / "s.sqlite", allow_run=True))


def test_a_request_without_the_token_gets_nothing(server) -> None:
    token = server["url"].split("token=")[1]
    for path in ("/", "/ws", "/static/js/textual.js", "/?token=wrong" + token[:4]):
        status, body = _get(server["base"] + path)
        assert (status, body) == (403, b""), path
    status, body = _get(server["url"])
    assert status == 200 and b"textual" in body.lower()
    # The token is printed once, for the person who started the server, and in no log line.
    assert sum(token in line for line in server["printed"]) == 1


def _session(browser, url: str) -> tuple[object, list[str], float]:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    frames: list[str] = []

    def on_ws(ws) -> None:
        ws.on("framereceived", lambda payload: frames.append(
            ANSI.sub("", payload.decode("utf-8", "ignore") if isinstance(payload, bytes) else payload)))

    page.on("websocket", on_ws)
    start = time.perf_counter()
    page.goto(url)
    return page, frames, start


def _wait_for(page, frames: list[str], text: str, since: int = 0, timeout: float = 60) -> float:
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        if text in "".join(frames[since:]):
            return time.perf_counter()
        page.wait_for_timeout(50)  # not time.sleep: Playwright delivers frames while it runs
    raise AssertionError(f"the app never showed {text!r}; it showed: {''.join(frames[since:])[-2000:]!r}")


def test_sessions_in_a_browser_show_the_app_read_only(server, tmp_path: Path) -> None:
    with chromium() as browser:
        one, frames_one, start = _session(browser, server["url"])
        two, frames_two, _ = _session(browser, server["url"])
        first_screen = _wait_for(one, frames_one, "[read-only]") - start
        _wait_for(two, frames_two, "[read-only]")
        # Each session is its own app: moving in one leaves the other on its Build screen.
        one.locator("body").click()
        mark = len(frames_one)
        one.keyboard.press("3")
        _wait_for(one, frames_one, "Reference A", since=mark)
        one.wait_for_timeout(300)
        one.screenshot(path=str(tmp_path / "serve-audit.png"))
        mark = len(frames_one)
        one.keyboard.press("4")
        _wait_for(one, frames_one, "B=", since=mark)
        one.wait_for_timeout(300)
        one.screenshot(path=str(tmp_path / "serve-compare.png"))
        assert "Reference A" not in "".join(frames_two)
        # The Build screen offers no stage to run: the store is read-only, so no LLM is called.
        two.locator("body").click()
        mark = len(frames_two)
        two.keyboard.press("Enter")
        _wait_for(two, frames_two, "read-only", since=mark)
        for name in ("serve-audit.png", "serve-compare.png"):
            assert (tmp_path / name).stat().st_size > 20_000
        print(f"served app: first screen {first_screen:.2f} s after the page was asked for")
