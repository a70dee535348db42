"""The store: one SQLite file (sqlite-utils, WAL) holding every stage's inputs and results.

Each stage reads from here and writes back as each unit of work completes, so a killed run
loses nothing it had finished. The schema carries a version (``PRAGMA user_version``);
``MIGRATIONS`` moves an older store forward, and a store written by a newer version of this
program is refused rather than guessed at.

The tables, and the migrations that build them, are in ``pipeline.store.schema``; this module
holds the handle (``Store``), ``open_store`` and the few helpers every store module uses.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.core.errors import StoreError
from pipeline.store.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    UNANSWERED,  # noqa: F401 - judging imports it from here
)

if TYPE_CHECKING:
    import sqlite_utils

DEFAULT_STORE = Path("store.sqlite")


def text_hash(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


@dataclass
class Store:
    """A handle on the store file: ``conn``, and ``db``, the sqlite-utils Database on it."""

    path: Path
    conn: sqlite3.Connection

    @cached_property
    def db(self) -> sqlite_utils.Database:
        # Imported when first needed: sqlite-utils takes a quarter of a second to import, and
        # reading commands (report, the app) never need it.
        import sqlite_utils

        return sqlite_utils.Database(self.conn)

    # -- texts ---------------------------------------------------------------
    def put_text(self, body: str) -> str:
        """Store a text once; return its hash."""
        h = text_hash(body)
        self.conn.execute("INSERT OR IGNORE INTO texts(hash, body) VALUES (?, ?)", (h, body))
        return h

    def get_text(self, h: str) -> str:
        row = self.conn.execute("SELECT body FROM texts WHERE hash = ?", (h,)).fetchone()
        if row is None:
            raise StoreError(f"{self.path}: no text with hash {h}")
        return row[0]

    # -- convenience -----------------------------------------------------------
    def query(self, sql: str, params: Iterable[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]:
        cursor = self.conn.execute(sql, params if isinstance(params, dict) else tuple(params))
        names = [d[0] for d in cursor.description or ()]
        return [dict(zip(names, row)) for row in cursor]

    def one(self, sql: str, params: Iterable[Any] | dict[str, Any] = ()) -> dict[str, Any] | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql: str, params: Iterable[Any] | dict[str, Any] = ()) -> Any:
        row = self.conn.execute(sql, tuple(params) if not isinstance(params, dict) else params).fetchone()
        return row[0] if row else None

    def commit(self) -> None:
        self.conn.commit()

    def close(self) -> None:
        self.conn.close()

    @property
    def schema_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])


def open_store(path: str | Path = DEFAULT_STORE, *, create: bool = True, readonly: bool = False) -> Store:
    """Open (and if needed create or migrate) a store.

    Raises StoreError naming the file for: a missing file when ``create`` is false, a file that
    is not SQLite, a store written by a newer schema, or a read-only file that needs writing.
    """
    path = Path(path)
    if not path.exists() and (not create or readonly):
        raise StoreError(f"{path}: no store here (run `unspecific init` or pass --store)")
    if path.exists() and path.is_dir():
        raise StoreError(f"{path}: is a folder, not a store file")
    if not readonly and path.exists() and not writable_place(path):
        raise StoreError(f"{path}: the store or its folder is read-only; commands that only read it (report, export, "
                         "corpus list, the app with --read-only) work, but this one writes: fix the permissions, or "
                         "copy the store somewhere writable")
    try:
        if readonly:
            conn = sqlite3.connect(_read_only_uri(path), uri=True, check_same_thread=False)
        else:
            conn = sqlite3.connect(str(path), check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.DatabaseError as exc:
        if "readonly" in str(exc):  # a WAL store needs its folder writable even to be read
            raise StoreError(f"{path}: the store or its folder is read-only ({exc}); fix the permissions, "
                             "or copy the store somewhere writable") from exc
        raise StoreError(f"{path}: not a readable SQLite store ({exc})") from exc
    if version > SCHEMA_VERSION:
        conn.close()
        raise StoreError(
            f"{path}: written by a newer unspecific (schema {version}, this one knows {SCHEMA_VERSION}); "
            "upgrade unspecific to open it"
        )
    store = Store(path=path, conn=conn)
    if readonly:
        if version < SCHEMA_VERSION:
            raise StoreError(f"{path}: schema {version} needs migrating, but the store is opened read-only")
        return store
    try:
        if version == 0 and _has_foreign_tables(conn):
            raise StoreError(f"{path}: an SQLite file, but not an unspecific store")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        for step in range(version, SCHEMA_VERSION):
            with conn:
                MIGRATIONS[step](store.db)
                conn.execute(f"PRAGMA user_version = {step + 1}")
    except sqlite3.OperationalError as exc:
        if "readonly" in str(exc) or "read-only" in str(exc):
            raise StoreError(f"{path}: the file is read-only; open it with readonly=True or fix its permissions") from exc
        raise StoreError(f"{path}: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a readable SQLite store ({exc})") from exc
    mark_interrupted(conn)
    return store


def mark_interrupted(conn: sqlite3.Connection) -> list[str]:
    """Runs still marked running whose process, on this host, is gone (killed, crashed, the
    machine rebooted): marked ``interrupted``, with why, so no run says "running" forever.
    Returns their ids. Runs of another host, or from before runs recorded their process, are
    left alone: nothing here can tell whether they still run."""
    import socket

    host = socket.gethostname()
    gone = [run_id for run_id, pid in conn.execute(
        "SELECT id, pid FROM runs WHERE status = 'running' AND pid IS NOT NULL AND host = ?", (host,))
            if not _alive(int(pid))]
    if gone:
        with conn:
            conn.executemany(
                "UPDATE runs SET status = 'interrupted', finished_at = ?, error = coalesce(error || char(10), '') || ?"
                " WHERE id = ? AND status = 'running'",
                [(now(), "interrupted: its process ended without finishing it (killed or crashed); run the same "
                  "command again to resume", run_id) for run_id in gone])
    return gone


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A killed child its parent has not reaped yet still answers kill(0)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def writable_place(path: Path) -> bool:
    """The file and its folder can be written (SQLite's WAL mode writes beside the file)."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _read_only_uri(path: Path) -> str:
    """A read-only SQLite URI. In a folder nobody can write, a WAL store cannot make its -shm
    file even to be read: opened as immutable then (no one can change it there), unless a -wal
    file holds writes the main file lacks, which immutable would hide."""
    from urllib.parse import quote

    uri = f"file:{quote(str(path))}?mode=ro"
    wal = Path(f"{path}-wal")
    if not os.access(path.parent, os.W_OK) and not (wal.exists() and wal.stat().st_size > 0):
        uri += "&immutable=1"
    return uri


def _has_foreign_tables(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0] > 0


def now() -> str:
    from datetime import datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


def copy_store(store: Store, target: Path) -> None:
    """Copy the store, as committed, to a new SQLite file at ``target`` (SQLite's online backup)."""
    copy = sqlite3.connect(str(target))
    try:
        store.conn.backup(copy)
    finally:
        copy.close()
