"""The store: one SQLite file (sqlite-utils, WAL) holding every stage's inputs and results.

Each stage reads from here and writes back as each unit of work completes, so a killed run
loses nothing it had finished. The schema carries a version (``PRAGMA user_version``);
``MIGRATIONS`` moves an older store forward, and a store written by a newer version of this
program is refused rather than guessed at.

Tables (see DESIGN.md):
  texts          every body of text, once, keyed by its sha256
  articles       corpus articles (domain, cleaning status) -> texts
  embeddings     one vector per (text, embedding model)
  pairs          article A, partner B, cosine, rank, rule, next candidates
  runs           a build or evaluation run: config (no secrets), status, accounting
  instructions   main task + constraints for one condition of one pair/article
  constraints    the constraints, with lineage (which one a revision replaced, and why)
  constraint_flags  quality flags per constraint (proper noun, leak, copied n-gram ...)
  contradictions pairs of constraints an LLM found jointly unsatisfiable
  generations    base articles, responses, summaries -> texts
  verdicts       judge x text x constraint: yes/no (NULL: missing, never counted), quote, quote found?
  annotations    human labels of flipped constraints
  validation_plans, validation_items
                 the stratified samples people label (pipeline.analysis.validation)
  judge_plans, judge_items, text_labels
                 people's own Yes/No on constraints and texts, to validate the judges
                 (pipeline.analysis.judge_validation)
  naturalness    pairwise preferences between constraint sets
  llm_calls      every finished LLM call; the cache
  batches, batch_requests
                 calls deferred to a provider's batch API or vLLM's run_batch, and their results
  text_scores, text_agreement, text_scores_stale
                 per-text verdict totals for the metrics, kept fresh (pipeline.store.scores)
  copy_stats     copied n-grams of a response against a reference, by the texts' hashes

Imported work (pipeline.importing.importer) lives in the same tables: a run of kind ``import``,
instructions with their ``source_id``, generations with their ``import_run``.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.core.errors import StoreError

if TYPE_CHECKING:
    import sqlite_utils

DEFAULT_STORE = Path("store.sqlite")


def text_hash(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def _v1(db: sqlite_utils.Database) -> None:
    db["meta"].create({"key": str, "value": str}, pk="key")
    db["texts"].create({"hash": str, "body": str}, pk="hash")
    db["articles"].create(
        {
            "id": int,
            "corpus": str,
            "domain": str,
            "source_id": str,
            "title": str,
            "text_hash": str,
            "words": int,
            "status": str,  # kept | duplicate | near_duplicate | too_short | too_long | pending (near-dup check due)
            "duplicate_of": int,
            "imported_at": str,
        },
        pk="id",
        foreign_keys=[("text_hash", "texts", "hash")],
    )
    db["articles"].create_index(["corpus", "source_id"], unique=True)
    db["articles"].create_index(["domain", "status"])
    db["embeddings"].create(
        {"text_hash": str, "model": str, "dim": int, "vector": bytes},
        pk=("text_hash", "model"),
    )
    db["pairs"].create(
        {
            "id": int,
            "domain": str,
            "rule": str,  # paper | research
            "params": str,  # JSON: thresholds, model
            "article_a": int,
            "article_b": int,
            "cosine": float,
            "rank": int,  # partner's rank among A's neighbours (1 = most similar)
            "candidates": str,  # JSON: [{"article": id, "cosine": c}, ...] next candidates
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("article_a", "articles", "id"), ("article_b", "articles", "id")],
    )
    db["pairs"].create_index(["domain", "rule", "article_a"], unique=True)
    db["runs"].create(
        {
            "id": str,
            "kind": str,  # build | evaluate | naturalness
            "name": str,
            "config": str,  # JSON, never holds key values
            "status": str,  # running | paused | done | failed | interrupted (its process was gone)
            "started_at": str,
            "finished_at": str,
            "calls": int,
            "cache_hits": int,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cost": float,
            "error": str,
        },
        pk="id",
    )
    db["instructions"].create(
        {
            "id": int,
            "run_id": str,
            "domain": str,
            "condition": str,  # single | none | direct | eval
            "pair_id": int,
            "article_a": int,
            "article_b": int,
            "main_task": str,
            "n_constraints": int,
            "status": str,  # pending | synthesized | base_judged | done | failed
            "error": str,
            "base_generation_id": int,
            "created_at": str,
        },
        pk="id",
    )
    db["instructions"].create_index(["run_id", "condition", "article_a", "article_b"], unique=True)
    db["instructions"].create_index(["domain", "condition"])
    db["constraints"].create(
        {
            "id": int,
            "instruction_id": int,
            "position": int,  # 1-based place in the final list; NULL when replaced
            "text": str,
            "origin": str,  # synthesized | revised
            "active": int,  # 1 = part of the final list
            "replaces_id": int,  # the constraint this one replaced
            "source_id": int,  # the shared common-synthesis constraint this one is a copy of
            "replaced_reason": str,  # why the replaced one went: "too easy: base article satisfied it"
            "base_verdict": int,  # the base article's verdict on this constraint
            "base_quote": str,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("instruction_id", "instructions", "id")],
    )
    db["constraints"].create_index(["instruction_id", "active", "position"])
    db["constraint_flags"].create(
        {"constraint_id": int, "flag": str, "detail": str},
        pk=("constraint_id", "flag"),
        foreign_keys=[("constraint_id", "constraints", "id")],
    )
    db["constraint_flags"].create_index(["flag"])
    db["contradictions"].create(
        {"instruction_id": int, "constraint_a": int, "constraint_b": int, "reason": str},
        pk=("instruction_id", "constraint_a", "constraint_b"),
    )
    db["generations"].create(
        {
            "id": int,
            "kind": str,  # base | response | summary
            "instruction_id": int,
            "model": str,  # endpoint/model name of the writer
            "mode": str,  # direct | edit ('' for base and summaries)
            "ratio": float,  # summaries: target share of the response's words
            "parent_id": int,  # summaries: the response summarised
            "text_hash": str,
            "words": int,
            "achieved_ratio": float,
            "call_id": int,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("instruction_id", "instructions", "id"), ("text_hash", "texts", "hash")],
    )
    db["generations"].create_index(
        ["kind", "instruction_id", "model", "mode", "ratio", "parent_id"], unique=True
    )
    db["verdicts"].create(
        {
            "id": int,
            "generation_id": int,
            "constraint_id": int,
            "judge": str,
            "judging_mode": str,  # batched | per_constraint
            "prompt_hash": str,  # the judge template's hash: a new prompt judges anew
            "verdict": int,  # 1 yes, 0 no
            "quote": str,
            "reason": str,
            "quote_found": str,  # exact | fuzzy | missing | NULL (no quote)
            "quote_score": float,
            "call_id": int,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[
            ("generation_id", "generations", "id"),
            ("constraint_id", "constraints", "id"),
        ],
    )
    db["verdicts"].create_index(
        ["generation_id", "constraint_id", "judge", "judging_mode", "prompt_hash"], unique=True
    )
    db["verdicts"].create_index(["constraint_id"])
    db["annotations"].create(
        {
            "id": int,
            "constraint_id": int,
            "generation_id": int,  # the response whose summary flipped
            "annotator": str,
            "label": str,  # integrated | superficial | ambiguous
            "note": str,
            "created_at": str,
        },
        pk="id",
    )
    db["annotations"].create_index(["constraint_id", "generation_id", "annotator"], unique=True)
    db["naturalness"].create(
        {
            "id": int,
            "judge": str,
            "instruction_a": int,
            "instruction_b": int,
            "shown_first": int,  # which instruction the judge saw first
            "winner": int,  # instruction id, or NULL for a tie
            "reason": str,
            "call_id": int,
            "created_at": str,
        },
        pk="id",
    )
    db["naturalness"].create_index(["judge", "instruction_a", "instruction_b"], unique=True)
    db["llm_calls"].create(
        {
            "id": int,
            "cache_key": str,
            "endpoint": str,
            "model": str,
            "template": str,
            "template_hash": str,
            "request": str,  # JSON: messages and parameters (no key)
            "response": str,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cost": float,
            "latency_s": float,
            "run_id": str,
            "created_at": str,
        },
        pk="id",
    )
    db["llm_calls"].create_index(["cache_key"], unique=True)
    db["llm_calls"].create_index(["run_id"])


def _v2(db: sqlite_utils.Database) -> None:
    """Derived data that keeps reports fast at scale: per-text verdict totals kept current
    (pipeline.store.scores) and copy statistics computed once."""
    from pipeline.store.scores import create_tables

    create_tables(db.conn)
    # Keyed by the two texts' hashes: a text never changes, so an entry never goes stale.
    db["copy_stats"].create(
        {"text_hash": str, "reference_hash": str, "ngram": int, "shared_ngrams": int, "copied_words": int,
         "words": int, "longest": int},
        pk=("text_hash", "reference_hash", "ngram"),
        if_not_exists=True,
    )


def _v3(db: sqlite_utils.Database) -> None:
    """Rescore every judged text: ``text_items.flipped`` now counts only the raters who judged
    an item on both the response and its summary (pipeline.store.scores.item_outcome_sql), as every
    other consumer does; totals kept under the old rule would disagree with them.

    And naturalness judgments are kept per order: a pair is judged with each set shown first
    (pipeline.stages.naturalness), so the order is part of the key."""
    db.conn.execute("INSERT OR IGNORE INTO text_scores_stale SELECT DISTINCT generation_id FROM verdicts")
    db.conn.execute("DROP INDEX IF EXISTS idx_naturalness_judge_instruction_a_instruction_b")
    db.conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS idx_naturalness_judge_pair_order"
                    " ON naturalness(judge, instruction_a, instruction_b, shown_first)")


# The reason a missing verdict was once stored with (as a No); judging still records it.
UNANSWERED = "no verdict from the judge"


def _v4(db: sqlite_utils.Database) -> None:
    """Missing is not No: a verdict the judge never gave was stored as No with the reason
    ``UNANSWERED``; it becomes NULL (missing), left out of every rate. The update
    triggers of pipeline.store.scores mark those texts for rescoring. Runs record the process that
    runs them (pid, host), so a run whose process is gone can be marked interrupted."""
    db.conn.execute("UPDATE verdicts SET verdict = NULL WHERE call_id IS NULL AND reason = ? AND verdict = 0",
                    (UNANSWERED,))
    # Small (only missing verdicts): finds the raters a coverage figure expects without a scan.
    db.conn.execute("CREATE INDEX IF NOT EXISTS verdicts_missing ON verdicts(generation_id, judge, judging_mode)"
                    " WHERE verdict IS NULL")
    for column in ("pid", "host"):
        if column not in db["runs"].columns_dict:
            db["runs"].add_column(column, int if column == "pid" else str)
    # A response that refuses the task is the model's answer, kept and flagged (pipeline.llm.contract).
    if "refusal" not in db["generations"].columns_dict:
        db["generations"].add_column("refusal", int)
    _flag_refusals(db.conn)


def _flag_refusals(conn: sqlite3.Connection) -> None:
    from pipeline.core.text import is_refusal

    rows = conn.execute("SELECT g.id, t.body FROM generations g JOIN texts t ON t.hash = g.text_hash"
                        " WHERE g.kind = 'response' AND g.refusal IS NULL AND g.words <= 200").fetchall()
    flags = [(int(is_refusal(body)), gid) for gid, body in rows]
    conn.executemany("UPDATE generations SET refusal = ? WHERE id = ?", flags)
    # Longer responses cannot be refusals (pipeline.llm.contract.REFUSAL_MAX_WORDS): no need to read them.
    conn.execute("UPDATE generations SET refusal = 0 WHERE kind = 'response' AND refusal IS NULL")


def _v5(db: sqlite_utils.Database) -> None:
    """Imports (pipeline.importing.importer): an imported instruction keeps its id in the source file
    (``instructions.source_id``), unique within its import run, so importing the same file again
    finds it instead of adding it twice; a text written elsewhere (a response, a summary, a base
    article) records the import run it came from (``generations.import_run``), so evaluation
    summarises and judges it without asking an endpoint to write it."""
    if "source_id" not in db["instructions"].columns_dict:
        db["instructions"].add_column("source_id", str)
    db.conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS instructions_source ON instructions(run_id, source_id)"
                    " WHERE source_id IS NOT NULL")
    if "import_run" not in db["generations"].columns_dict:
        db["generations"].add_column("import_run", str)


def _v6(db: sqlite_utils.Database) -> None:
    """Validation plans (pipeline.analysis.validation): the seeded, stratified sample of (constraint,
    response) items people label, stored so that the app, the sheets and the report all use
    exactly the same items. ``params`` holds each stratum's population and drawn count, which
    the report's weights need."""
    db.conn.execute("CREATE TABLE IF NOT EXISTS validation_plans(name TEXT PRIMARY KEY, ratio REAL NOT NULL,"
                    " seed INTEGER NOT NULL, run TEXT, params TEXT NOT NULL, created_at TEXT)")
    db.conn.execute("CREATE TABLE IF NOT EXISTS validation_items(plan TEXT NOT NULL, position INTEGER NOT NULL,"
                    " constraint_id INTEGER NOT NULL, response_id INTEGER NOT NULL, summary_id INTEGER NOT NULL,"
                    " instruction_id INTEGER NOT NULL, domain TEXT NOT NULL, stratum TEXT NOT NULL,"
                    " PRIMARY KEY (plan, constraint_id, response_id))")
    db.conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS validation_items_order ON validation_items(plan, position)")
    # Judge validation (pipeline.analysis.judge_validation): a sample of (constraint, text) items, texts
    # being responses and summaries, and people's own Yes/No on them, blind to the judges.
    db.conn.execute("CREATE TABLE IF NOT EXISTS judge_plans(name TEXT PRIMARY KEY, ratio REAL NOT NULL,"
                    " seed INTEGER NOT NULL, run TEXT, params TEXT NOT NULL, created_at TEXT)")
    db.conn.execute("CREATE TABLE IF NOT EXISTS judge_items(plan TEXT NOT NULL, position INTEGER NOT NULL,"
                    " constraint_id INTEGER NOT NULL, generation_id INTEGER NOT NULL, text_kind TEXT NOT NULL,"
                    " instruction_id INTEGER NOT NULL, domain TEXT NOT NULL, PRIMARY KEY (plan, constraint_id, generation_id))")
    db.conn.execute("CREATE TABLE IF NOT EXISTS text_labels(id INTEGER PRIMARY KEY, constraint_id INTEGER NOT NULL,"
                    " generation_id INTEGER NOT NULL, annotator TEXT NOT NULL, label INTEGER NOT NULL,"
                    " note TEXT, created_at TEXT, UNIQUE (constraint_id, generation_id, annotator))")  # label: 1 yes, 0 no


def _v7(db: sqlite_utils.Database) -> None:
    """Batch mode (pipeline.llm.batch). ``batch_requests``: calls a stage deferred to a batch, one per
    cache key (so nothing is asked twice), with the result once collected; ``batches``: each
    batch sent to a provider or exported for vLLM, with its state. Cached calls record how they
    were paid (``via``: online or batch), and runs what they paid in batch."""
    db["batches"].create(
        {"id": str, "kind": str, "endpoint": str, "remote_id": str, "input_file_id": str, "output_file_id": str,
         "error_file_id": str, "path": str, "state": str, "requests": int, "completed": int, "failed": int,
         "error": str, "pid": int, "host": str, "created_at": str, "updated_at": str, "collected_at": str},
        pk="id", if_not_exists=True,
    )
    db["batch_requests"].create(
        {"id": int, "cache_key": str, "endpoint": str, "template": str, "template_hash": str,
         "request": str,  # JSON: messages and parameters, as sent (the row goes once the result is cached)
         "status": str,  # pending | submitted | done | failed | online
         "batch_id": str, "response": str, "prompt_tokens": int, "completion_tokens": int, "cost": float,
         "error": str, "run_id": str, "created_at": str, "updated_at": str},
        pk="id", if_not_exists=True,
    )
    db.conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS batch_requests_key ON batch_requests(cache_key)")
    db.conn.execute("CREATE INDEX IF NOT EXISTS batch_requests_batch ON batch_requests(batch_id, status)")
    db.conn.execute("CREATE INDEX IF NOT EXISTS batch_requests_status ON batch_requests(status, endpoint)")
    if "via" not in db["llm_calls"].columns_dict:
        db["llm_calls"].add_column("via", str)  # NULL: online (every call before batch mode)
    for column in ("batch_calls", "batch_cost"):
        if column not in db["runs"].columns_dict:
            db["runs"].add_column(column, int if column == "batch_calls" else float, not_null_default=0)


# Forward migrations: MIGRATIONS[i] brings a store from version i to i + 1.
MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7]
SCHEMA_VERSION = len(MIGRATIONS)


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
