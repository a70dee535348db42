"""The ``instructions`` table: a main task and its constraints for one condition (single,
none, direct, eval; ``common`` for the shared synthesis) of one pair or article, in a run.

Status: pending -> synthesized -> [base_judged ->] [revised ->] done, or failed (with its
error); ``source`` for the shared common synthesis when ``none`` is not built.
Written by the build (pipeline.stages.build, synthesis, revision). None of these functions
commits: the stage decides when a unit of work is done."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pipeline.store.database import Store, and_where

_COLUMNS = ("id, run_id, domain, condition, pair_id, article_a, article_b, main_task, "
            "n_constraints, status, error, base_generation_id, created_at")


@dataclass(frozen=True)
class Instruction:
    id: int
    run_id: str
    domain: str
    condition: str
    pair_id: int | None
    article_a: int | None
    article_b: int | None
    main_task: str | None
    n_constraints: int
    status: str
    error: str | None
    base_generation_id: int | None
    created_at: str


@dataclass
class ConditionCounts:
    """What a build made for one condition: instructions per status, and of the done ones the
    active constraints, how many of them a revision wrote, and their quality flags."""

    statuses: dict[str, int]
    constraints: int
    replaced: int
    flags: dict[str, int] = field(default_factory=dict)


def _many(store: Store, where: str, params: Sequence[object]) -> list[Instruction]:
    rows = store.conn.execute(f"SELECT {_COLUMNS} FROM instructions WHERE {where}", list(params))
    return [Instruction(*r) for r in rows]


def find_instruction(store: Store, run_id: str, condition: str, article_a: int, article_b: int
                     | None) -> Instruction | None:
    found = _many(store, "run_id = ? AND condition = ? AND article_a = ? AND article_b IS ?",
                  [run_id, condition, article_a, article_b])
    return found[0] if found else None


def insert_instruction(store: Store, *, run_id: str, domain: str, condition: str,
                       pair_id: int, article_a: int,
                       article_b: int | None, n_constraints: int, created_at: str) -> None:
    """A new instruction, pending, with no main task yet."""
    store.conn.execute(
        "INSERT INTO instructions(run_id, domain, condition, pair_id, article_a, article_b, "
        "main_task, n_constraints,"
        " status, error, base_generation_id, created_at) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, "
        "'pending', NULL, NULL, ?)",
        (run_id, domain, condition, pair_id, article_a, article_b, n_constraints, created_at))


def set_instruction_status(store: Store, instruction_id: int, status: str, error: str | None = None, *,
                           base_generation_id: int | None = None) -> None:
    """The instruction's status and error (None clears it), and its base article when given."""
    if base_generation_id is None:
        store.conn.execute("UPDATE instructions SET status = ?, error = ? WHERE id = ?",
                           (status, error, instruction_id))
    else:
        store.conn.execute("UPDATE instructions SET status = ?, error = ?, "
                           "base_generation_id = ? WHERE id = ?",
                           (status, error, base_generation_id, instruction_id))


def set_base_generation(store: Store, instruction_id: int, generation_id: int) -> None:
    store.conn.execute("UPDATE instructions SET base_generation_id = ? WHERE id = ?",
                       (generation_id, instruction_id))


def instructions_awaiting_base(store: Store, run_id: str) -> list[Instruction]:
    """The run's eval instructions with constraints and no judged base article yet, in id order."""
    return _many(store, "run_id = ? AND condition = 'eval' AND status = 'synthesized' ORDER BY id", [run_id])


def instructions_to_revise(store: Store, run_id: str, conditions: Sequence[str]) -> list[Instruction]:
    """The run's instructions of these conditions ready for revision and flags, in id order: single and
    none once synthesized, direct once synthesized (or revised), eval once its base article is judged
    (or revised)."""
    marks = ",".join("?" * len(conditions))
    return _many(
        store,
        f"run_id = ? AND condition IN ({marks}) AND ("
        " (condition IN ('single', 'none') AND status = 'synthesized')"
        " OR (condition = 'direct' AND status IN ('synthesized', 'revised'))"
        " OR (condition = 'eval' AND status IN ('base_judged', 'revised'))) ORDER BY id",
        [run_id, *conditions],
    )


def count_finished(store: Store, run_id: str, conditions: Sequence[str]) -> int:
    """The run's instructions of these conditions that are done or failed."""
    marks = ",".join("?" * len(conditions))
    row = store.conn.execute(
        f"SELECT count(*) FROM instructions WHERE run_id = ? AND condition IN ({marks}) AND status "
        "IN ('done', 'failed')",
        [run_id, *conditions]).fetchone()
    return int(row[0])


def done_instructions_of_pair(store: Store, run_id: str, pair_id: int) -> list[int]:
    """Ids of the run's done instructions built on one pair, in id order."""
    rows = store.conn.execute(
        "SELECT id FROM instructions WHERE run_id = ? AND pair_id = ? AND status = 'done' ORDER BY id",
        (run_id, pair_id))
    return [int(r[0]) for r in rows]


def pair_ids_in_use(store: Store) -> set[int]:
    """Pairs some instruction was built on (re-pairing must not remove them)."""
    return {r[0]
            for r in store.conn.execute("SELECT DISTINCT pair_id FROM instructions "
                                        "WHERE pair_id IS NOT NULL")}


def condition_counts(store: Store, run_id: str, condition: str) -> ConditionCounts:
    """What the run made for one condition (see ConditionCounts)."""
    statuses = dict(store.conn.execute(
        "SELECT status, count(*) FROM instructions WHERE run_id = ? AND condition = ? GROUP BY status",
        (run_id, condition)).fetchall())
    done_ids = "SELECT id FROM instructions WHERE run_id = ? AND condition = ? AND status = 'done'"
    constraints = store.conn.execute(
        f"SELECT count(*) FROM constraints WHERE active = 1 AND instruction_id IN ({done_ids})",
        (run_id, condition)).fetchone()[0]
    replaced = store.conn.execute(
        f"SELECT count(*) FROM constraints WHERE active = 1 AND origin = 'revised' AND "
        f"instruction_id IN ({done_ids})",
        (run_id, condition)).fetchone()[0]
    flags = dict(store.conn.execute(
        "SELECT f.flag, count(*) FROM constraint_flags f JOIN constraints c ON c.id = f.constraint_id"
        f" WHERE c.active = 1 AND c.instruction_id IN ({done_ids}) GROUP BY f.flag",
        (run_id, condition)).fetchall())
    return ConditionCounts(statuses, constraints or 0, replaced or 0, flags)


def instruction_exists(store: Store, instruction_id: int) -> bool:
    return store.conn.execute("SELECT 1 FROM instructions WHERE id = ?",
                              (instruction_id,)).fetchone() is not None


# -- reads of the evaluation and naturalness stages --------------------------------------------

# The columns an instruction filter may name (pipeline.stages.evaluate.check_selection).
_FILTER_COLUMNS = ("id", "run_id", "domain", "condition")


def get_instruction(store: Store, instruction_id: int) -> Instruction | None:
    found = _many(store, "id = ?", [instruction_id])
    return found[0] if found else None


def finished_instruction_ids(store: Store, *, run_id: str | None = None,
                             conditions: Sequence[str] | None = None,
                             domain: str | None = None, ids: Sequence[int] | None = None) -> list[int]:
    """Done instructions matching every filter given, in id order."""
    where, params = and_where(run_id=run_id, condition=conditions, domain=domain, id=ids)
    return [r[0] for r in store.conn.execute(
        "SELECT id FROM instructions WHERE status = 'done'" + where + " ORDER BY id", params)]


def any_instruction_with(store: Store, column: str, value: object) -> bool:
    """Whether some instruction (of any status) has ``value`` in ``column`` (id, run_id, domain,
    condition)."""
    if column not in _FILTER_COLUMNS:
        raise ValueError(f"not an instruction filter column: {column!r}")
    return store.conn.execute(f"SELECT 1 FROM instructions WHERE {column} = ? LIMIT 1",
                              (value,)).fetchone() is not None


def instruction_values(store: Store, column: str, limit: int = 12) -> list[str]:
    """The first ``limit`` distinct values of ``column`` (run_id, domain, condition), sorted."""
    if column not in _FILTER_COLUMNS:
        raise ValueError(f"not an instruction filter column: {column!r}")
    return [r[0] for r in store.conn.execute(
        f"SELECT DISTINCT {column} FROM instructions WHERE {column} IS NOT NULL ORDER BY {column} LIMIT ?",
        (limit,))]


@dataclass(frozen=True)
class ConstraintSet:
    """An instruction as naturalness compares it: its condition and reference article."""

    id: int
    condition: str
    article_a: int


def comparable_sets(store: Store, *, run_id: str | None, domain: str | None,
                    imported_condition: str) -> list[ConstraintSet]:
    """Instructions with a reference article, in id order: the done ones (of ``run_id`` when given)
    and the imported ones of ``imported_condition`` (human-written sets), of ``domain`` when given."""
    sql = ("SELECT id, condition, article_a FROM instructions WHERE article_a IS NOT NULL AND"
           " ((status = 'done'" + (" AND run_id = ?" if run_id else "") + ")"
           " OR (status = 'imported' AND condition = ?))")
    params: list[object] = [run_id] if run_id else []
    params.append(imported_condition)
    if domain:
        sql += " AND domain = ?"
        params.append(domain)
    return [ConstraintSet(*row) for row in store.conn.execute(sql + " ORDER BY id", params)]


def insert_reference_set(store: Store, *, run_id: str, domain: str, condition: str,
                         article_a: int, main_task: str,
                         n_constraints: int, created_at: str) -> int:
    """An instruction of status ``imported`` written outside the build for one reference article (a
    human-written constraint set); returns its id (not committed)."""
    cur = store.conn.execute(
        "INSERT INTO instructions (run_id, domain, condition, article_a, main_task, "
        "n_constraints, status, created_at) VALUES (?, ?, ?, ?, ?, ?, 'imported', ?)",
        (run_id, domain, condition, article_a, main_task, n_constraints, created_at))
    return int(cur.lastrowid or 0)


def instructions_matching(store: Store, *, conditions: Sequence[str], run_id: str | None = None,
                          domain: str | None = None, condition: str | None = None,
                          status: str | None = None) -> list[Instruction]:
    """Instructions of one of ``conditions`` matching every other filter given, in id order."""
    where, params = [f"condition IN ({','.join('?' * len(conditions))})"], list(conditions)
    for column, value in (("run_id", run_id), ("domain", domain), ("condition", condition),
                          ("status", status)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    return _many(store, " AND ".join(where) + " ORDER BY id", params)
