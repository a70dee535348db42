"""The validation tables: what people are asked to label, and their Yes/No answers.

- ``validation_plans`` / ``validation_items``: a seeded, stratified sample of (constraint,
  response) items for the Core metric's validation (pipeline.analysis.validation);
- ``judge_plans`` / ``judge_items``: (constraint, text) items people answer the judge's own
  question on (pipeline.analysis.judge_validation);
- ``text_labels``: those answers, 1 (yes) / 0 (no) per annotator.

A store opened read-only before its migration to schema 5 (or 6) has no such tables: the
readers then return nothing rather than fail.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pipeline.core.definitions import RATIO_TOLERANCE
from pipeline.store.database import Store, has_table, now
from pipeline.store.scores import current_text_scores, drop_temp_scores

ItemKey = tuple[int, int]  # (constraint id, text id)
# Lists of ids are read in chunks: SQLite caps the number of bound parameters.
_CHUNK = 500
_TEXT_LABEL_UPSERT = (
    "INSERT INTO text_labels(constraint_id, generation_id, annotator, label, note, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(constraint_id, generation_id, annotator)"
    " DO UPDATE SET label = excluded.label, note = excluded.note, created_at = excluded.created_at")
TEXT_KINDS = ("response", "summary")


# -- validation plans --------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanItem:
    position: int  # 1-based place in the plan's shuffled order
    constraint_id: int
    response_id: int
    summary_id: int  # the summary the metric compared the response with at the plan's ratio
    instruction_id: int
    domain: str
    stratum: str  # flipped:<domain> | passed


@dataclass(frozen=True)
class StoredPlan:
    """A ``validation_plans`` row (``params`` decoded) and its items in order."""

    name: str
    ratio: float
    seed: int
    run: str | None
    params: dict[str, Any]
    created_at: str
    items: tuple[PlanItem, ...]


def plan_exists(store: Store, name: str) -> bool:
    return store.conn.execute("SELECT 1 FROM validation_plans WHERE name = ?", (name,)).fetchone() is not None


def _replace_plan_rows(conn: sqlite3.Connection, plans: str, items: str, plan_row: tuple[Any, ...],
                       item_columns: tuple[str, ...], item_rows: list[tuple[Any, ...]]) -> None:
    """Both kinds of plan are stored alike: a row (name, ratio, seed, run, params, created_at) in
    ``plans`` and its items in ``items``, in place of any plan of that name, in one transaction."""
    name = plan_row[0]
    with conn:
        conn.execute(f"DELETE FROM {items} WHERE plan = ?", (name,))
        conn.execute(f"DELETE FROM {plans} WHERE name = ?", (name,))
        conn.execute(f"INSERT INTO {plans}(name, ratio, seed, run, params, created_at)"
                     " VALUES (?, ?, ?, ?, ?, ?)", plan_row)
        conn.executemany(f"INSERT INTO {items}({', '.join(item_columns)})"
                         f" VALUES ({', '.join('?' * len(item_columns))})", item_rows)


def replace_plan(store: Store, plan: StoredPlan) -> None:
    """Write a plan and its items in place of any of that name, in one transaction."""
    _replace_plan_rows(
        store.conn, "validation_plans", "validation_items",
        (plan.name, plan.ratio, plan.seed, plan.run, json.dumps(plan.params), plan.created_at),
        ("plan", "position", "constraint_id", "response_id", "summary_id", "instruction_id", "domain",
         "stratum"),
        [(plan.name, i.position, i.constraint_id, i.response_id, i.summary_id, i.instruction_id, i.domain,
          i.stratum) for i in plan.items])


def stored_plan(store: Store, name: str | None = None) -> StoredPlan | None:
    """A plan by name; with no name, the newest. None when there is none."""
    if not has_table(store.conn, "validation_plans"):
        return None
    conn = store.conn
    if name is None:
        row = conn.execute("SELECT name, ratio, seed, run, params, created_at FROM validation_plans"
                           " ORDER BY created_at DESC, rowid DESC LIMIT 1").fetchone()
    else:
        row = conn.execute("SELECT name, ratio, seed, run, params, created_at FROM "
                           "validation_plans WHERE name = ?",
                           (name,)).fetchone()
    if row is None:
        return None
    plan_name, ratio, seed, run, params, created = row
    items = tuple(PlanItem(*r) for r in conn.execute(
        "SELECT position, constraint_id, response_id, summary_id, instruction_id, domain, stratum"
        " FROM validation_items WHERE plan = ? ORDER BY position", (plan_name,)))
    return StoredPlan(plan_name, float(ratio), int(seed), run, json.loads(params), created, items)


def plan_response_writers(store: Store, plan: str) -> dict[int, tuple[str, str]]:
    """Response id -> (model, mode) for the responses a plan names."""
    return {gid: (model, mode) for gid, model, mode in store.conn.execute(
        "SELECT id, model, coalesce(mode, '') FROM generations WHERE id IN (SELECT response_id "
        "FROM validation_items WHERE plan = ?)", (plan,))}


@dataclass(frozen=True)
class ItemTexts:
    """What a labeller reads for a (constraint, response) item."""

    constraint: str
    main_task: str
    response: str
    summary: str  # "" when the summary is gone


def item_texts(store: Store, constraint_id: int, response_id: int, summary_id: int) -> ItemTexts | None:
    """None when the constraint or the response is no longer in the store."""
    row = store.conn.execute(
        "SELECT c.text, i.main_task, tr.body, ts.body FROM constraints c JOIN instructions i ON "
        "i.id = c.instruction_id JOIN generations r ON r.id = ? JOIN texts tr ON tr.hash = r.text_hash"
        " LEFT JOIN generations s ON s.id = ? LEFT JOIN texts ts ON ts.hash = s.text_hash WHERE c.id = ?",
        (response_id, summary_id, constraint_id)).fetchone()
    return None if row is None else ItemTexts(row[0], row[1], row[2], row[3] or "")


def instruction_domains(store: Store, instruction_ids: Iterable[int]) -> dict[int, str]:
    """Instruction id -> domain."""
    ids = sorted(set(instruction_ids))
    out: dict[int, str] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        out.update(store.conn.execute(
            f"SELECT id, domain FROM instructions WHERE id IN ({','.join('?' * len(chunk))})",
            chunk).fetchall())
    return out


@dataclass(frozen=True)
class SummaryFlips:
    summary_id: int
    response_id: int
    ratio: float
    flipped: int  # items of this summary flipped (pipeline.store.scores, the per-text totals)


def summary_flips(store: Store, run: str | None) -> list[SummaryFlips]:
    """Every summary's flipped count, from the per-text totals (read into temporary tables when the
    store's own are stale, and dropped after)."""
    conn = store.conn
    current_text_scores(conn)
    try:
        rows = conn.execute(
            "SELECT s.id, s.parent_id, s.ratio, t.flipped FROM generations s LEFT JOIN "
            "text_items t ON t.gid = s.id"
            " JOIN generations r ON r.id = s.parent_id JOIN instructions i ON i.id = r.instruction_id"
            " WHERE s.kind = 'summary'" + (" AND i.run_id = ?" if run else ""), (run,) if run
            else ()).fetchall()
    finally:
        drop_temp_scores(conn)
    return [SummaryFlips(sid, parent, float(ratio), flipped or 0) for sid, parent, ratio, flipped in rows]


# -- judge plans -------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeItem:
    position: int
    constraint_id: int
    generation_id: int  # the text: a response, or a summary at the plan's ratio
    text_kind: str  # response | summary
    instruction_id: int
    domain: str


@dataclass(frozen=True)
class StoredJudgePlan:
    name: str
    ratio: float
    seed: int
    run: str | None
    params: dict[str, Any]
    items: tuple[JudgeItem, ...]


@dataclass(frozen=True)
class JudgedText:
    """A (constraint, text) a judge has a verdict on: what a judge plan samples from."""

    constraint_id: int
    generation_id: int
    text_kind: str
    instruction_id: int
    domain: str


def judged_texts(store: Store, ratio: float, run: str | None) -> list[JudgedText]:
    """Active constraints on responses, and on summaries at ``ratio``, with a Yes/No verdict; in
    (constraint, text) order."""
    params: list[Any] = [ratio]
    where = ""
    if run is not None:
        where = " AND i.run_id = ?"
        params.append(run)
    return [JudgedText(*row) for row in store.conn.execute(
        "SELECT DISTINCT v.constraint_id, v.generation_id, g.kind, i.id, i.domain FROM verdicts v"
        " JOIN generations g ON g.id = v.generation_id JOIN constraints c ON c.id = "
        "v.constraint_id AND c.active = 1"
        " JOIN instructions i ON i.id = g.instruction_id WHERE v.verdict IS NOT NULL"
        f" AND (g.kind = 'response' OR (g.kind = 'summary' AND abs(g.ratio - ?) < {RATIO_TOLERANCE}))" + where
        + " ORDER BY v.constraint_id, v.generation_id", params)]


@dataclass(frozen=True)
class VerdictText:
    """A (constraint, text) one judge has a verdict on, with the model under test (a summary's is its
    response's writer) and that judge's latest verdict: what a real-text check is drawn from."""

    constraint_id: int
    generation_id: int
    text_kind: str
    instruction_id: int
    domain: str
    model: str
    verdict: int


def judge_raters(store: Store) -> list[tuple[str, str]]:
    """Every (judge, judging mode) with a Yes/No verdict, sorted."""
    return [(j, m) for j, m in store.conn.execute(
        "SELECT DISTINCT judge, judging_mode FROM verdicts WHERE verdict IS NOT NULL"
        " ORDER BY judge, judging_mode")]


def judge_verdict_texts(store: Store, ratio: float, run: str | None, judge: str,
                        mode: str) -> list[VerdictText]:
    """Active constraints on responses, and on summaries at ``ratio``, with ``judge``'s latest Yes/No
    in ``mode``; in (constraint, text) order."""
    params: list[Any] = [judge, mode, ratio]
    where = ""
    if run is not None:
        where = " AND i.run_id = ?"
        params.append(run)
    return [VerdictText(*row) for row in store.conn.execute(
        "SELECT v.constraint_id, v.generation_id, g.kind, i.id, i.domain, coalesce(p.model, g.model),"
        " v.verdict FROM verdicts v"
        " JOIN generations g ON g.id = v.generation_id LEFT JOIN generations p ON p.id = g.parent_id"
        " AND g.kind = 'summary' JOIN constraints c ON c.id = v.constraint_id AND c.active = 1"
        " JOIN instructions i ON i.id = g.instruction_id"
        " WHERE v.judge = ? AND v.judging_mode = ? AND v.verdict IS NOT NULL AND v.id = (SELECT max(w.id)"
        " FROM verdicts w WHERE w.generation_id = v.generation_id AND w.constraint_id = v.constraint_id"
        " AND w.judge = v.judge AND w.judging_mode = v.judging_mode AND w.verdict IS NOT NULL)"
        f" AND (g.kind = 'response' OR (g.kind = 'summary' AND abs(g.ratio - ?) < {RATIO_TOLERANCE}))" + where
        + " ORDER BY v.constraint_id, v.generation_id", params)]


def judge_plan_exists(store: Store, name: str) -> bool:
    return store.conn.execute("SELECT 1 FROM judge_plans WHERE name = ?", (name,)).fetchone() is not None


def replace_judge_plan(store: Store, plan: StoredJudgePlan, created_at: str) -> None:
    """Write a judge plan and its items in place of any of that name, in one transaction."""
    _replace_plan_rows(
        store.conn, "judge_plans", "judge_items",
        (plan.name, plan.ratio, plan.seed, plan.run, json.dumps(plan.params), created_at),
        ("plan", "position", "constraint_id", "generation_id", "text_kind", "instruction_id", "domain"),
        [(plan.name, i.position, i.constraint_id, i.generation_id, i.text_kind, i.instruction_id, i.domain)
         for i in plan.items])


def stored_judge_plan(store: Store, name: str | None = None) -> StoredJudgePlan | None:
    """A judge plan by name, or the newest; None when there is none."""
    if not has_table(store.conn, "judge_plans"):
        return None
    conn = store.conn
    row = conn.execute("SELECT name, ratio, seed, run, params FROM judge_plans"
                       + (" WHERE name = ?" if name else " ORDER BY created_at DESC, rowid DESC LIMIT 1"),
                       (name,) if name else ()).fetchone()
    if row is None:
        return None
    items = tuple(JudgeItem(*r) for r in conn.execute(
        "SELECT position, constraint_id, generation_id, text_kind, instruction_id, domain FROM judge_items"
        " WHERE plan = ? ORDER BY position", (row[0],)))
    return StoredJudgePlan(row[0], float(row[1]), int(row[2]), row[3], json.loads(row[4]), items)


def constraint_places(store: Store, judge_plan: str) -> dict[int, tuple[int, int]]:
    """Constraint id -> (its position, the active constraints of its instruction) for a judge
    plan's constraints."""
    return {cid: (pos, n) for cid, pos, n in store.conn.execute(
        "SELECT c.id, c.position, (SELECT count(*) FROM constraints d WHERE "
        "d.instruction_id = c.instruction_id"
        " AND d.active = 1) FROM constraints c JOIN judge_items j ON j.constraint_id = c.id WHERE j.plan = ?",
        (judge_plan,))}


def judge_plan_words(store: Store, judge_plan: str) -> dict[int, int | None]:
    """Text id -> its length in words, for a judge plan's texts."""
    return dict(store.conn.execute("SELECT g.id, g.words FROM generations g JOIN judge_items j"
                                   " ON j.generation_id = g.id WHERE j.plan = ?", (judge_plan,)))


@dataclass(frozen=True)
class ConstraintText:
    """What a person reads to answer the judge's question on a (constraint, text) item."""

    constraint: str
    main_task: str
    text: str


def constraint_text(store: Store, constraint_id: int, generation_id: int) -> ConstraintText | None:
    """None when the constraint or the text is no longer in the store."""
    row = store.conn.execute(
        "SELECT c.text, ins.main_task, t.body FROM constraints c JOIN instructions ins ON "
        "ins.id = c.instruction_id"
        " JOIN generations g ON g.id = ? JOIN texts t ON t.hash = g.text_hash WHERE c.id = ?",
        (generation_id, constraint_id)).fetchone()
    return None if row is None else ConstraintText(*row)


# -- text labels: people's Yes/No -------------------------------------------------------------


@dataclass(frozen=True)
class TextLabel:
    answer: int  # 1 yes, 0 no
    note: str


@dataclass(frozen=True)
class TextLabelRow:
    constraint_id: int
    generation_id: int
    annotator: str
    answer: int
    note: str


def text_labels(store: Store) -> dict[ItemKey, dict[str, int]]:
    """(constraint, text) -> annotator -> 1 (yes) / 0 (no)."""
    out: dict[ItemKey, dict[str, int]] = {}
    if not has_table(store.conn, "text_labels"):
        return out
    for cid, gid, who, label in store.conn.execute(
            "SELECT constraint_id, generation_id, annotator, label FROM text_labels"):
        out.setdefault((cid, gid), {})[who] = int(label)
    return out


def annotator_text_labels(store: Store, annotator: str) -> dict[ItemKey, TextLabel]:
    return {(c, g): TextLabel(int(label), note or "") for c, g, label, note in store.conn.execute(
        "SELECT constraint_id, generation_id, label, note FROM text_labels WHERE annotator = ?",
        (annotator,))}


def save_text_label(store: Store, constraint_id: int, generation_id: int, annotator: str, yes: bool,
                    note: str = "", when: str | None = None) -> None:
    """One person's Yes/No on a constraint and a text (a response or a summary), committed at once
    (an answer is saved the moment it is given). ``when``: now by default."""
    conn = store.conn
    kind = conn.execute("SELECT kind FROM generations WHERE id = ?", (generation_id,)).fetchone()
    if kind is None or kind[0] not in TEXT_KINDS:
        raise ValueError(f"generation {generation_id} is not a response or a summary")
    conn.execute(_TEXT_LABEL_UPSERT,
                 (constraint_id, generation_id, annotator, int(bool(yes)), note, when or now()))
    conn.commit()


def save_text_labels(store: Store, rows: Iterable[TextLabelRow], when: str) -> None:
    """Many answers in one transaction: all of them or none."""
    with store.conn:
        store.conn.executemany(_TEXT_LABEL_UPSERT,
                               [(r.constraint_id, r.generation_id, r.annotator, r.answer, r.note,
                                                     when) for r in rows])
