"""What only imports write (pipeline.importing): import runs, instructions found again by the id
they had in their source file (``instructions.source_id``), imported reference articles found
again by that id, and generations stamped with their ``import_run``.

Rows of the shared tables otherwise go through their own modules (articles, constraints,
generations, instructions, verdicts). An import is one transaction (``begin_immediate``, then
``store.commit()`` or ``rollback``): none of the other functions here commits.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.core.definitions import RATIO_TOLERANCE
from pipeline.store.constraints import insert_constraints
from pipeline.store.database import Store

RUN_KIND = "import"
# An imported reference article: shown and flagged against, never paired.
REFERENCE_STATUS = "reference"


@dataclass(frozen=True)
class StoredText:
    """A row found again by what it is, with the hash of its text (the same text is skipped,
    another is an error)."""

    id: int
    text_hash: str


@dataclass(frozen=True)
class ImportedInstruction:
    id: int
    main_task: str | None
    condition: str


# -- the transaction ---------------------------------------------------------------------------


def begin_immediate(store: Store) -> None:
    """Commit whatever the connection holds, then take the write lock now: one writer, so the
    import's checks see exactly what it will change."""
    conn = store.conn
    if conn.in_transaction:
        conn.commit()
    conn.execute("BEGIN IMMEDIATE")


def rollback(store: Store) -> None:
    store.conn.rollback()


# -- runs --------------------------------------------------------------------------------------


def run_kind(store: Store, run_id: str) -> str | None:
    """The kind of the run with this id, or None when there is none."""
    row = store.conn.execute("SELECT kind FROM runs WHERE id = ?", (run_id,)).fetchone()
    return None if row is None else row[0]


def insert_import_run(store: Store, run_id: str, name: str, config: str, stamp: str) -> None:
    store.conn.execute(
        "INSERT INTO runs (id, kind, name, config, status, started_at, finished_at, calls, cache_hits,"
        " prompt_tokens, completion_tokens, cost) VALUES (?, ?, ?, ?, 'done', ?, ?, 0, 0, 0, 0, 0)",
        (run_id, RUN_KIND, name, config, stamp, stamp))


def touch_import_run(store: Store, run_id: str, stamp: str) -> None:
    """Another file imported under the same name: the run finished again now."""
    store.conn.execute("UPDATE runs SET finished_at = ? WHERE id = ?", (stamp, run_id))


# -- reference articles ------------------------------------------------------------------------


def imported_article(store: Store, corpus: str, source_id: str) -> StoredText | None:
    row = store.conn.execute("SELECT id, text_hash FROM articles WHERE corpus = ? AND source_id = ?",
                             (corpus, source_id)).fetchone()
    return None if row is None else StoredText(int(row[0]), row[1])


# -- instructions and their constraints ---------------------------------------------------------


def imported_instruction(store: Store, run_id: str, source_id: str) -> ImportedInstruction | None:
    """The instruction an import run holds under the id it had in its source file."""
    row = store.conn.execute("SELECT id, main_task, condition FROM instructions WHERE run_id "
                             "= ? AND source_id = ?",
                             (run_id, source_id)).fetchone()
    return None if row is None else ImportedInstruction(int(row[0]), row[1], row[2])


def instruction_in_run(store: Store, run_id: str, instruction_id: int) -> bool:
    row = store.conn.execute("SELECT 1 FROM instructions WHERE run_id = ? AND id = ?",
                             (run_id, instruction_id)).fetchone()
    return row is not None


def insert_imported_instruction(store: Store, *, run_id: str, source_id: str, domain: str, condition: str,
                                main_task: str, constraints: list[str], article_a: int | None,
                                article_b: int | None, stamp: str) -> int:
    """A finished instruction (status ``done``) with its constraints active and numbered 1, 2, 3..."""
    cur = store.conn.execute(
        "INSERT INTO instructions (run_id, domain, condition, pair_id, article_a, article_b, "
        "main_task, n_constraints,"
        " status, error, base_generation_id, created_at, source_id) VALUES (?, ?, ?, NULL, ?, "
        "?, ?, ?, 'done', NULL,"
        " NULL, ?, ?)",
        (run_id, domain, condition, article_a, article_b, main_task, len(constraints), stamp, source_id))
    instruction_id = int(cur.lastrowid or 0)
    insert_constraints(store, instruction_id, constraints, created_at=stamp)
    return instruction_id


# -- generations -------------------------------------------------------------------------------


def imported_generation(store: Store, *, kind: str, instruction_id: int, model: str, mode: str,
                        ratio: float | None, parent_id: int | None) -> StoredText | None:
    """A generation found again by what it is: kind, instruction, model, mode, ratio and parent."""
    row = store.conn.execute(
        "SELECT id, text_hash FROM generations WHERE kind = ? AND instruction_id = ? AND "
        "model = ? AND mode = ?"
        f" AND parent_id IS ? AND (ratio IS ? OR abs(ratio - ?) < {RATIO_TOLERANCE})",
        (kind, instruction_id, model, mode, parent_id, ratio, ratio if ratio is not None else 0.0)).fetchone()
    return None if row is None else StoredText(int(row[0]), row[1])


def insert_imported_generation(store: Store, *, import_run: str, kind: str, instruction_id: int, model: str,
                               mode: str, ratio: float | None, parent_id: int | None,
                               text_hash: str, words: int,
                               achieved_ratio: float | None, refusal: int | None, stamp: str) -> int:
    cur = store.conn.execute(
        "INSERT INTO generations (kind, instruction_id, model, mode, ratio, parent_id, text_hash, words,"
        " achieved_ratio, call_id, refusal, created_at, import_run) VALUES (?,?,?,?,?,?,?,?,?,NULL,?,?,?)",
        (kind, instruction_id, model, mode, ratio, parent_id, text_hash, words,
         achieved_ratio, refusal, stamp,
         import_run))
    return int(cur.lastrowid or 0)


def imported_models(store: Store) -> list[str]:
    """Models whose responses were imported (written elsewhere: no endpoint writes them)."""
    return [r[0] for r in store.conn.execute(
        "SELECT DISTINCT model FROM generations WHERE kind = 'response' AND import_run IS "
        "NOT NULL ORDER BY model")]


def insert_imported_revision(store: Store, *, run_id: str, source_id: str, domain: str, condition: str,
                             main_task: str, original: list[str], revised: list[str], reason: str,
                             article_a: int | None, article_b: int | None, stamp: str) -> int:
    """A finished instruction whose list was revised elsewhere: the revised list active and numbered,
    the original kept as lineage. A revised constraint equal to an original one is that constraint,
    kept; each original the revision dropped is stored retired, and each new constraint replaces one
    of them, paired in list order (the source does not say which replaced which)."""
    instruction_id = insert_imported_instruction(
        store, run_id=run_id, source_id=source_id, domain=domain, condition=condition, main_task=main_task,
        constraints=revised, article_a=article_a, article_b=article_b, stamp=stamp)
    unmatched = list(original)
    new_positions = []
    for position, text in enumerate(revised, 1):
        if text in unmatched:
            unmatched.remove(text)
        else:
            new_positions.append(position)
    dropped = []
    for text in unmatched:
        cur = store.conn.execute(
            "INSERT INTO constraints (instruction_id, position, text, origin, active, created_at)"
            " VALUES (?, NULL, ?, 'synthesized', 0, ?)", (instruction_id, text, stamp))
        dropped.append(int(cur.lastrowid or 0))
    for k, position in enumerate(new_positions):
        store.conn.execute(
            "UPDATE constraints SET origin = 'revised', replaces_id = ?, replaced_reason = ?"
            " WHERE instruction_id = ? AND position = ? AND active = 1",
            (dropped[k] if k < len(dropped) else None, reason, instruction_id, position))
    return instruction_id


def imported_response_with_text(store: Store, instruction_id: int, text_hash: str) -> int | None:
    """The response to the instruction whose text this is, whoever wrote it (a research summary file
    names the summariser, so the response it summarises is found by its text)."""
    row = store.conn.execute(
        "SELECT id FROM generations WHERE kind = 'response' AND instruction_id = ? AND text_hash = "
        "? ORDER BY id LIMIT 1",
        (instruction_id, text_hash)).fetchone()
    return None if row is None else int(row[0])
