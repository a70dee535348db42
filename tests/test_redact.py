"""Secrets redacted from every error text before it is stored or printed (issue 13, item 4)."""

from __future__ import annotations

import pytest

from pipeline.core.errors import EndpointError
from pipeline.core.redact import MARK, redact, remember_env
from pipeline.store.database import open_store
from tests.fakes.fake_server import FakeOpenAIServer, Reply
from tests.support.evaluate_world import config_file, make_instructions

KEY = "s3cr3t-not-shaped-like-a-key-4242"  # a known key: found by value, whatever its shape


@pytest.mark.parametrize(("text", "gone"), [
    ("Incorrect API key provided: sk-proj-AbCdEf0123456789xyz. You can find...",
     "sk-proj-AbCdEf0123456789xyz"),
    ("header was Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9.payload.sig"),
    ('{"error": {"api_key": "abcdef0123456789"}}', "abcdef0123456789"),
    ("url https://x/v1?api_key=abcdef0123456789&model=m", "abcdef0123456789"),
    ("groq said gsk_0123456789abcdefghij", "gsk_0123456789abcdefghij"),
    ("google key AIzaSyA0123456789abcdefghijklmn", "AIzaSyA0123456789abcdefghijklmn"),
])
def test_anything_shaped_like_a_key_is_redacted(text, gone):
    out = redact(text)
    assert gone not in out and MARK in out


def test_ordinary_text_is_left_alone():
    text = "task-force met; the key point: 12 of 39 constraints; scikit-learn; Bearer of bad news"
    assert redact(text) == text


def test_a_known_key_is_redacted_by_value_keeping_its_last_four(monkeypatch):
    monkeypatch.setenv("MY_ENDPOINT_CRED", KEY)
    remember_env("MY_ENDPOINT_CRED")
    out = redact(f"endpoint said: bad credential {KEY}!")
    assert KEY not in out and f"{MARK}...4242" in out
    # Errors carry it redacted from the start: the app's modal and the CLI's panel read .msg.
    err = EndpointError(f"HTTP 401: {KEY}")
    assert KEY not in err.msg and KEY not in str(err)


def test_an_endpoint_echoing_the_key_in_a_401_never_puts_it_in_the_store_or_on_screen(
        store_path, tmp_path, capsys, monkeypatch):
    from pipeline.cli import main

    monkeypatch.setenv("JUDGE_CRED", KEY)
    s = open_store(store_path)
    make_instructions(s, n=1, k=2)
    s.close()

    def echo_key(request: dict) -> Reply | str:
        return Reply.error(401, f"Incorrect API key provided: {KEY}. Also sk-live-0123456789abcdef.")

    with FakeOpenAIServer(echo_key) as server:
        cfg = config_file(tmp_path, server.base_url, each='api_key_env = "JUDGE_CRED"\n', response_words=None)
        code = main(["--store", str(store_path), "--config", str(cfg), "evaluate"])
        assert server.calls >= 1
    captured = capsys.readouterr()
    shown = captured.out + captured.err
    assert code in (1, 2)
    assert "401" in shown  # the message still says what happened
    assert KEY not in shown and "sk-live-0123456789abcdef" not in shown
    s = open_store(store_path)
    errors = [r[0] or "" for r in s.conn.execute("SELECT error FROM runs")]
    s.close()
    assert errors and any("401" in e for e in errors)
    for name in ("store.sqlite", "store.sqlite-wal"):
        path = tmp_path / name
        if path.exists():
            data = path.read_bytes()
            assert KEY.encode() not in data and b"sk-live-0123456789abcdef" not in data

