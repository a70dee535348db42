"""The store: creation, WAL, schema version, forward migrations, refusals."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess

import pytest

from pipeline.core.errors import StoreError
from pipeline.store import database as store_mod
from pipeline.store.database import SCHEMA_VERSION, open_store

TABLES = {
    "meta", "texts", "articles", "embeddings", "pairs", "runs", "instructions", "constraints",
    "constraint_flags", "contradictions", "generations", "verdicts", "annotations",
    "naturalness", "llm_calls",
}


def test_creates_a_store_with_every_table(store_path):
    s = open_store(store_path)
    assert store_path.exists()
    assert s.schema_version == SCHEMA_VERSION >= 1
    assert TABLES <= set(s.db.table_names())
    assert s.scalar("PRAGMA journal_mode") == "wal"
    assert s.scalar("PRAGMA foreign_keys") == 1
    s.close()


def test_reopening_keeps_data_and_version(store_path):
    s = open_store(store_path)
    h = s.put_text("a body of text")
    assert s.put_text("a body of text") == h  # stored once
    s.commit()
    s.close()
    s = open_store(store_path)
    assert s.get_text(h) == "a body of text"
    assert s.scalar("SELECT count(*) FROM texts") == 1
    assert s.schema_version == SCHEMA_VERSION
    with pytest.raises(StoreError, match="no text with hash"):
        s.get_text("0" * 64)
    s.close()


def test_migrates_an_empty_version_0_file(store_path):
    sqlite3.connect(store_path).close()  # an empty SQLite file: schema 0
    s = open_store(store_path)
    assert s.schema_version == SCHEMA_VERSION
    assert TABLES <= set(s.db.table_names())
    s.close()


def test_migrates_forward_from_an_older_version(store_path, monkeypatch):
    # A store written by this version...
    s = open_store(store_path)
    s.put_text("kept across the migration")
    s.commit()
    s.close()

    # ...opened by a future version with one more migration.
    def add_notes(db):
        db["articles"].add_column("notes", str)
        db["notes_index"].create({"id": int, "note": str}, pk="id")

    monkeypatch.setattr(store_mod, "MIGRATIONS", [*store_mod.MIGRATIONS, add_notes])
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    s = open_store(store_path)
    assert s.schema_version == SCHEMA_VERSION + 1
    assert "notes" in s.db["articles"].columns_dict
    assert "notes_index" in s.db.table_names()
    assert s.scalar("SELECT count(*) FROM texts") == 1
    s.close()


def test_a_store_from_before_cached_prompt_tokens_keeps_its_calls_with_nothing_said(store_path):
    """Schema 18 adds llm_calls.cached_prompt_tokens: the calls stored before keep NULL there (the
    endpoint's cache was not asked about: missing, not 0), and new ones can say."""
    s = open_store(store_path)
    s.conn.execute("ALTER TABLE llm_calls DROP COLUMN cached_prompt_tokens")
    s.db["llm_calls"].insert({"cache_key": "old", "prompt_tokens": 100, "completion_tokens": 5})
    s.conn.execute("PRAGMA user_version = 17")
    s.commit()
    s.close()
    s = open_store(store_path)
    try:
        assert s.schema_version == SCHEMA_VERSION >= 18
        assert s.query("SELECT cache_key, cached_prompt_tokens FROM llm_calls") == [
            {"cache_key": "old", "cached_prompt_tokens": None}]
    finally:
        s.close()


def test_a_failed_migration_leaves_the_old_version(store_path, monkeypatch):
    open_store(store_path).close()

    def broken(db):
        db["articles"].add_column("half_done", str)
        raise sqlite3.OperationalError("simulated failure in migration")

    monkeypatch.setattr(store_mod, "MIGRATIONS", [*store_mod.MIGRATIONS, broken])
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    with pytest.raises(StoreError, match="simulated failure"):
        open_store(store_path)
    monkeypatch.undo()
    s = open_store(store_path)
    assert s.schema_version == SCHEMA_VERSION
    s.close()


def test_newer_schema_is_refused(store_path):
    open_store(store_path).close()
    conn = sqlite3.connect(store_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=rf"newer unspecific \(schema {SCHEMA_VERSION + 1}"):
        open_store(store_path)
    with pytest.raises(StoreError) as err:
        open_store(store_path, readonly=True)
    assert str(store_path) in str(err.value)


def test_non_sqlite_file_is_refused(store_path):
    store_path.write_text("these are notes, not a database\n" * 20)
    with pytest.raises(StoreError, match="not a readable SQLite store") as err:
        open_store(store_path)
    assert str(store_path) in str(err.value)


def test_foreign_sqlite_file_is_refused(store_path):
    conn = sqlite3.connect(store_path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not an unspecific store"):
        open_store(store_path)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(StoreError, match="no store here"):
        open_store(tmp_path / "absent.sqlite", create=False)
    with pytest.raises(StoreError, match="no store here"):
        open_store(tmp_path / "absent.sqlite", readonly=True)
    with pytest.raises(StoreError, match="is a folder"):
        open_store(tmp_path)


def test_readonly_open_reads_and_refuses_writes(store_path):
    s = open_store(store_path)
    s.put_text("read me")
    s.commit()
    s.close()
    ro = open_store(store_path, readonly=True)
    assert ro.scalar("SELECT count(*) FROM texts") == 1
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        ro.put_text("write me")
    ro.close()


def test_readonly_open_of_an_old_store_is_refused(store_path):
    sqlite3.connect(store_path).close()
    with pytest.raises(StoreError, match="needs migrating"):
        open_store(store_path, readonly=True)


def _read_only(path) -> list[str] | None:  # noqa: ANN001
    """Make ``path`` unwritable even by root (as CI runs): root writes past 0o444, not past the
    immutable attribute. The command that undoes the attribute ([] when none was set), or None when
    root cannot be stopped here."""
    path.chmod(0o444)
    if os.geteuid() != 0:
        return []
    if shutil.which("chattr") and subprocess.run(["chattr", "+i", str(path)],
                                                 capture_output=True).returncode == 0:
        return ["chattr", "-i", str(path)]
    return None


def test_read_only_file_is_a_clear_error(store_path):
    sqlite3.connect(store_path).close()  # schema 0: opening must write
    undo = _read_only(store_path)
    if undo is None:
        store_path.chmod(0o644)
        pytest.skip("running as root where the immutable attribute cannot be set: nothing here "
                    "is read-only to root")
    try:
        with pytest.raises(StoreError, match="read-only"):
            open_store(store_path)
    finally:
        if undo:
            subprocess.run(undo, check=True)
        store_path.chmod(0o644)
