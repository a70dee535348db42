"""Bad input through the command line (pipeline.cli.main): malformed configs, corpora (binary,
a huge single line, no words, a 200,000-word article, mixed encodings, repeated ids) and
stores (a newer schema, corrupt files, read-only files). Each gives an error panel naming
what and where, a non-zero exit code, and nothing already stored is lost: the store's rows
(or, for a damaged store, its bytes) are counted before and after."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.store.database import open_store

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("texts", "articles", "pairs", "runs", "instructions", "constraints", "generations",
          "verdicts", "llm_calls")
# An endpoint nobody answers: every case below must fail before any call.
DEAD = ("[endpoints.f]\nbase_url = 'http://127.0.0.1:9/v1'\nmodel = 'm'\nmax_retries = 0\ntimeout_s = 1\n"
        "[roles]\ngenerator = 'f'\njudges = ['f']\nsummarizer = 'f'\nmodels_under_test = "
        "['f']\nnaturalness_judge = 'f'\n")


@pytest.fixture
def store_copy(seeded_copy: Path) -> Path:
    return seeded_copy


def counts(path: Path) -> dict[str, int]:
    store = open_store(path)
    try:
        return {t: store.scalar(f"SELECT count(*) FROM {t}") for t in TABLES}
    finally:
        store.close()


def flat(text: str) -> str:
    """An error panel's text on one line: box drawing and wrapping removed."""
    return re.sub(r"\s+", " ", re.sub(r"[\u2500-\u257f]", " ", text)).strip()


def cli(capsys, monkeypatch, *argv: str) -> tuple[int, str]:
    monkeypatch.setenv("COLUMNS", "400")  # no wrapping inside the panel
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, flat(captured.err + captured.out)


# -- configs ---------------------------------------------------------------------------------------

CONFIGS = {
    "toml syntax": ("[endpoints.x\nbase_url = 1\n", "build", ["not valid TOML", "line 1"]),
    "unknown section": ("[budget]\nmax = 1\n", "build", ["unknown section(s) budget"]),
    "endpoint without base_url": ("[endpoints.x]\nmodel = 'm'\n", "build",
                                  ["endpoints.x.base_url", "required"]),
    "number as text": ("[endpoints.x]\nbase_url = 'http://h/v1'\nmodel = 'm'\nconcurrency = 'many'\n",
                       "build",
                       ["endpoints.x.concurrency", "'many'"]),
    "not an http url": ("[endpoints.x]\nbase_url = 'ftp://h'\nmodel = 'm'\n", "build",
                        ["endpoints.x.base_url", "ftp://h"]),
    "key variable unset": ("[endpoints.x]\nbase_url = 'http://h/v1'\nmodel = 'm'\napi_key_env = "
                           "'UNSPECIFIC_NO_SUCH_KEY'\n",
                           "build", ["endpoints.x.api_key_env", "UNSPECIFIC_NO_SUCH_KEY"]),
    "role names no endpoint": ("[roles]\ngenerator = 'nope'\n", "build", ["roles.generator", "'nope'"]),
    "build count as text": (DEAD + "[build]\nn_constraints = 'many'\n", "build",
                            ["[build]", "n_constraints", "'many'"]),
    "build conditions a number": (DEAD + "[build]\nconditions = 5\n", "build",
                                  ["[build] conditions", "got 5"]),
    "build unknown condition": (DEAD + "[build]\nconditions = ['single', 'maybe']\n", "build",
                                ["[build]", "maybe"]),
    "evaluate words as text": (DEAD + "[evaluate]\nresponse_words = 'abc'\n", "evaluate",
                               ["[evaluate] response_words", "'abc'"]),
    "evaluate ratios a number": (DEAD + "[evaluate]\nratios = 5\n", "evaluate",
                                 ["[evaluate] ratios", "got 5"]),
    "evaluate ratio out of range": (DEAD + "[evaluate]\nratios = [2.0]\n", "evaluate",
                                    ["[evaluate] ratios", "2.0"]),
    "latin-1 bytes": (b"[roles]\ngenerator = 'caf\xe9'\n", "build", ["not valid TOML", "0xe9"]),
    "a folder": (None, "build", ["cannot read the config file"]),
}


@pytest.mark.parametrize("case", list(CONFIGS))
def test_malformed_config(case, store_copy, tmp_path, capsys, monkeypatch) -> None:
    text, command, expected = CONFIGS[case]
    cfg = tmp_path / "unspecific.toml"
    if text is None:
        cfg.mkdir()
    elif isinstance(text, bytes):
        cfg.write_bytes(text)
    else:
        cfg.write_text(text)
    before = counts(store_copy)
    args = ["build", "--n", "1"] if command == "build" else ["evaluate"]
    code, message = cli(capsys, monkeypatch, "--store", str(store_copy), "--config", str(cfg), *args)
    print(f"\nBAD-INPUT config | {case} | exit {code} | {message[:170]}")
    assert code == 2, message
    assert "unspecific.toml" in message, message  # where
    for part in expected:  # what
        assert part in message, (part, message)
    assert counts(store_copy) == before


def test_missing_config_file(store_copy, tmp_path, capsys, monkeypatch) -> None:
    code, message = cli(capsys, monkeypatch, "--store", str(store_copy), "--config",
                        str(tmp_path / "nope.toml"), "build")
    assert code == 2 and "nope.toml: config file not found" in message


# -- corpora ---------------------------------------------------------------------------------------


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _words(n: int, seed: int = 0) -> str:
    return " ".join(f"word{(i * 7 + seed) % 997}" for i in range(n))


def make_corpus(kind: str, folder: Path) -> tuple[list[str], list[str], int]:
    """(extra CLI args, what the message must say, articles the failed import may still add)."""
    if kind == "binary file":
        path = folder / "data.jsonl"
        path.write_bytes(bytes(range(256)) * 40)
        return [str(path)], ["data.jsonl", "binary file (NUL bytes)"], 0
    if kind == "binary files in a folder":
        (folder / "docs").mkdir()
        (folder / "docs" / "a.txt").write_bytes(b"\x00\x01\x02\x03" * 500)
        (folder / "docs" / "b.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" * 300)
        return [str(folder / "docs"), "--format", "folder"], ["no articles imported", "a.txt", "binary"], 0
    if kind == "huge single line":  # 12 MB on one line, cut off before its closing quote
        path = folder / "huge.jsonl"
        path.write_text('{"id": "h", "text": "' + "word " * 2_400_000)
        return [str(path)], ["huge.jsonl line 1", "not JSON"], 0
    if kind == "huge single line, valid":  # one 2,000,000-word record on one line: stored, but not usable
        path = _jsonl(folder / "oneline.jsonl", [{"id": "h", "text": _words(2_000_000)}])
        return [str(path)], ["oneline.jsonl", "no usable article", "1 over 1000 words"], 1
    if kind == "0 words":
        path = _jsonl(folder / "empty.jsonl", [{"id": "a", "text": ""}, {"id": "b", "text": "  \n\t "}])
        return [str(path)], ["empty.jsonl", "no articles imported", "line 1", "empty 'text'"], 0
    if kind == "no records":
        path = folder / "header_only.csv"
        path.write_text("id,text\n")
        return [str(path)], ["header_only.csv", "no articles imported", "0 item(s) read"], 0
    if kind == "200,000-word article":
        path = _jsonl(folder / "long.jsonl", [{"id": "long", "text": _words(200_000)}])
        return [str(path)], ["long.jsonl", "no usable article", "1 over 1000 words"], 1
    if kind == "mixed encodings":
        path = folder / "mixed.jsonl"
        good = (json.dumps({"id": "1", "text": "café " + _words(400)}, ensure_ascii=False)
                + "\n").encode("utf-8")
        bad = (json.dumps({"id": "2", "text": "x"}, ensure_ascii=False).replace('"x"', '"caf\xe9 '
                                                                                + _words(400) + '"')
               + "\n").encode("latin-1")
        path.write_bytes(good + bad)
        return [str(path)], ["mixed.jsonl", "not UTF-8", "0xe9", "line 2"], 0
    if kind == "mixed encodings in a folder":
        (folder / "enc").mkdir()
        (folder / "enc" / "latin.txt").write_bytes(("Title\n\ncaf\xe9 " + _words(400)).encode("latin-1"))
        return [str(folder / "enc"), "--format", "folder"], ["no articles imported", "latin.txt",
                                                             "not UTF-8", "line 3"], 0
    if kind == "repeated ids":
        path = _jsonl(folder / "ids.jsonl", [{"id": "same", "text": _words(400, seed=i)} for i in range(3)])
        return [str(path)], ["ids.jsonl line 2", "id 'same' repeats", "line 1"], 0
    if kind == "repeated ids in a csv":
        path = folder / "ids.csv"
        path.write_text("id,text\n" + "".join(f"7,\"{_words(400, seed=i)}\"\n" for i in range(2)))
        return [str(path)], ["ids.csv row 2", "id '7' repeats"], 0
    raise AssertionError(kind)


CORPORA = ["binary file", "binary files in a folder", "huge single line",
           "huge single line, valid", "0 words",
           "no records", "200,000-word article", "mixed encodings",
           "mixed encodings in a folder", "repeated ids",
           "repeated ids in a csv"]


@pytest.mark.parametrize("kind", CORPORA)
def test_bad_corpus(kind, store_copy, tmp_path, capsys, monkeypatch) -> None:
    extra, expected, may_add = make_corpus(kind, tmp_path)
    before = counts(store_copy)
    code, message = cli(capsys, monkeypatch, "--store", str(store_copy), "corpus", "add", *extra,
                        "--domain", "news",
                        "--near-dup", "1", "--name", "bad")
    print(f"\nBAD-INPUT corpus | {kind} | exit {code} | {message[-170:]}")
    assert code == 2, message
    for part in expected:
        assert part in message, (part, message)
    after = counts(store_copy)
    assert after["articles"] == before["articles"] + may_add
    assert {t: n for t, n in after.items() if t not in ("articles", "texts")} == \
        {t: n for t, n in before.items() if t not in ("articles", "texts")}
    store = open_store(store_copy)
    added = store.query("SELECT status FROM articles WHERE corpus = 'bad'")
    store.close()
    assert all(r["status"] in ("too_long", "too_short", "duplicate")
               for r in added)  # nothing usable slipped in


def test_a_folder_with_one_bad_file_imports_the_rest_and_names_the_bad_one(tmp_path, capsys,
                                                                           monkeypatch) -> None:
    """A partial import is not an error (the bundled BBC set holds one Latin-1 file): the
    good files come in and the bad one is listed with its reason."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "good.txt").write_text("A title\n\n" + _words(400))
    (tmp_path / "docs" / "latin.txt").write_bytes(("Title\n\ncaf\xe9 " + _words(400, 3)).encode("latin-1"))
    code, message = cli(capsys, monkeypatch, "--store", str(tmp_path / "s.sqlite"), "corpus", "add",
                        str(tmp_path / "docs"), "--format", "folder", "--domain", "blog", "--near-dup", "1")
    assert code == 0 and "1 added" in message and "skipped" in message and "latin.txt: not UTF-8" in message


# -- stores ----------------------------------------------------------------------------------------

COMMANDS = {
    "corpus list": ["corpus", "list"],
    "report": ["report", "--no-copy", "--resamples", "20"],
    "export": ["export", "--out", "{tmp}/out.jsonl"],
    "build": ["build", "--n", "1", "--constraints", "3"],
    "evaluate": ["evaluate"],
    "corpus add": ["corpus", "add", "{tmp}/new.jsonl", "--domain", "news", "--near-dup", "1"],
}


def _newer(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()


def _garbage(path: Path) -> None:
    path.write_bytes(b"this is not a database at all\n" * 200)


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _damaged_pages(path: Path) -> None:
    """Scribble over the b-tree pages of the tables every command reads (found by their root
    pages in the schema, which stays readable): reading them must fail, not return garbage."""
    conn = sqlite3.connect(path)
    roots = [r for (r,) in conn.execute(
        "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name IN"
        " ('articles', 'texts', 'instructions', 'generations', 'verdicts', 'runs', 'llm_calls')")]
    conn.close()
    data = bytearray(path.read_bytes())
    for page in roots:
        start = (page - 1) * 4096
        data[start : start + 400] = b"\xab" * 400  # the page header and its first cells
    path.write_bytes(bytes(data))


DAMAGE = {
    "newer schema": (_newer, ["written by a newer unspecific", "schema 99"]),
    "not SQLite": (_garbage, ["not a readable SQLite store"]),
    "truncated": (_truncated, ["malformed"]),
    "damaged pages": (_damaged_pages, ["malformed"]),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_damaged_store(damage, command, store_copy, tmp_path, capsys, monkeypatch) -> None:
    spoil, expected = DAMAGE[damage]
    _jsonl(tmp_path / "new.jsonl", [{"id": "n1", "text": _words(400)}])
    conn = sqlite3.connect(store_copy)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file, so damage hits real pages
    conn.close()
    spoil(store_copy)
    digest = hashlib.sha256(store_copy.read_bytes()).hexdigest()
    argv = [a.format(tmp=tmp_path) for a in COMMANDS[command]]
    code, message = cli(capsys, monkeypatch, "--store", str(store_copy), "--config",
                        str(_dead(tmp_path)), *argv)
    print(f"\nBAD-INPUT store | {damage}: {command} | exit {code} | {message[:170]}")
    assert code == 2, message
    assert "store.sqlite" in message and "Store error" in message, message
    for part in expected:
        assert part in message, (part, message)
    assert hashlib.sha256(store_copy.read_bytes()).hexdigest() == digest  # left as it was found


def _dead(folder: Path) -> Path:
    cfg = folder / "dead.toml"
    cfg.write_text(DEAD)
    return cfg


def _as_nobody(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run the CLI as an unprivileged user: root ignores file permissions. setpriv drops to
    nobody (the interpreter lives under /root, which it can still read but not write)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: cannot drop the right to write a read-only file")
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400", "HOME": str(cwd)}
    return subprocess.run([*prefix, sys.executable, "-c",
                           "import sys; from pipeline.cli import main; sys.exit(main())",
                           *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("folder_writable", [True, False],
                         ids=["read-only file", "read-only file and folder"])
def test_read_only_store(folder_writable, seeded, capsys) -> None:
    folder = Path(tempfile.mkdtemp(prefix="unspecific-ro-"))
    try:
        store = folder / "store.sqlite"
        shutil.copy(seeded, store)
        before = counts(store)
        for suffix in ("-wal", "-shm"):
            Path(f"{store}{suffix}").unlink(missing_ok=True)
        (folder / "dead.toml").write_text(DEAD)
        _jsonl(folder / "new.jsonl", [{"id": "n1", "text": _words(400)}])
        store.chmod(0o444)
        folder.chmod(0o777 if folder_writable else 0o555)
        digest = hashlib.sha256(store.read_bytes()).hexdigest()
        results = {}
        for name, argv in COMMANDS.items():
            argv = [a.format(tmp="/dev/shm" if name == "export" else folder) for a in argv]
            if name == "export":
                argv[-1] = str(Path(tempfile.gettempdir()) / f"unspecific-ro-export-{os.getpid()}.jsonl")
            done = _as_nobody(["--store", "store.sqlite", "--config", "dead.toml", *argv], folder)
            results[name] = (done.returncode, flat(done.stderr + done.stdout))
        writers = ("build", "evaluate", "corpus add")
        readers = ("corpus list", "report", "export")
        for name, (code, message) in results.items():
            print(f"\nBAD-INPUT store | read-only {'file' if folder_writable else 'file and folder'}: "
                  f"{name} | exit {code} | {message[:170]}")
        for name, (code, message) in results.items():
            if name in readers:
                assert code in (0, 1), (name,
                                        message)  # reading a read-only store works, folder writable or not
                continue
            assert name in writers and code == 2, (name, message)
            # Says read-only, in words: not "unreadable", not SQLite's "readonly".
            assert "store.sqlite" in message and "read-only" in message and "not a readable" not in message, \
                (name, message)
        assert hashlib.sha256(store.read_bytes()).hexdigest() == digest
        store.chmod(0o644)
        assert counts(store) == before
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)
