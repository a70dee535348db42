"""The ``verdicts`` table: judge x text x constraint, Yes/No (NULL: missing, never a No), the
quote a Yes carries and whether it was found in the text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.store.database import Store
from pipeline.store.scores import LATEST_VERDICT, SHOWN_VERDICT

# Lists of ids are read in chunks: SQLite caps the number of bound parameters.
_CHUNK = 500


@dataclass(frozen=True)
class Verdict:
    """A rater's (judge x judging mode) latest verdict on one text for one constraint.

    ``verdict`` is 1 (Yes), 0 (No) or None: missing, the rater gave no usable verdict, never a No.
    ``model`` and ``mode`` name the model under test and its response mode: for a summary, those of
    its response (a summary's own model is the summarizer)."""

    generation_id: int
    constraint_id: int
    judge: str
    judging_mode: str
    verdict: int | None
    quote: str
    reason: str
    quote_found: str | None  # "found" | "missing" | ... as judging recorded it; None when not checked
    quote_score: float | None
    kind: str  # the text's kind: response | summary | base
    model: str
    mode: str
    ratio: float | None
    p_yes: float | None = None  # a yes_no judge's P(Yes) (None: the judge wrote its verdict)


_VERDICT_COLUMNS = (
    "SELECT v.generation_id, v.constraint_id, v.judge, v.judging_mode, v.verdict, coalesce(v.quote, ''),"
    " coalesce(v.reason, ''), v.quote_found, v.quote_score, g.kind, coalesce(coalesce(r.model, g.model), ''),"
    " coalesce(coalesce(r.mode, g.mode), ''), g.ratio, v.p_yes FROM verdicts v JOIN generations g ON "
    "g.id = v.generation_id LEFT JOIN generations r ON r.id = g.parent_id AND g.kind = 'summary'")


def _verdicts_of_texts(store: Store, generation_ids: Sequence[int], rule: str) -> list[Verdict]:
    ids = list(generation_ids)
    out: list[Verdict] = []
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        out += [Verdict(*row) for row in store.conn.execute(
            f"{_VERDICT_COLUMNS} WHERE v.generation_id IN ({','.join('?' * len(chunk))}) AND "
            f"{rule} ORDER BY v.id",
            chunk)]
    return out


def latest_verdicts(store: Store, generation_ids: Sequence[int]) -> list[Verdict]:
    """Each rater's latest Yes/No (LATEST_VERDICT) on every constraint of the given texts, in
    the order they were given; missing verdicts are left out."""
    return _verdicts_of_texts(store, generation_ids, LATEST_VERDICT)


def shown_verdicts(store: Store, generation_ids: Sequence[int]) -> list[Verdict]:
    """What a screen lists per rater on the given texts (SHOWN_VERDICT): the verdict LATEST_VERDICT
    counts or, when the rater never gave one, its missing row (verdict None, counted nowhere)."""
    return _verdicts_of_texts(store, generation_ids, SHOWN_VERDICT)


def shown_verdicts_on_constraint(store: Store, constraint_id: int) -> list[Verdict]:
    """SHOWN_VERDICT rows of one constraint on every text (base, responses, summaries), by judge."""
    return [Verdict(*row) for row in store.conn.execute(
        f"{_VERDICT_COLUMNS} WHERE v.constraint_id = ? AND {SHOWN_VERDICT} ORDER BY v.judge",
        (constraint_id,))]


# -- writing verdicts (pipeline.stages.judging) -------------------------------------------------


@dataclass(frozen=True)
class NewVerdict:
    """A verdict row to write. ``verdict`` None: missing (the judge gave no usable verdict), never a No."""

    generation_id: int
    constraint_id: int
    judge: str
    judging_mode: str
    prompt_hash: str
    verdict: int | None
    quote: str | None
    reason: str | None
    quote_found: str | None
    quote_score: float | None
    call_id: int | None
    created_at: str
    p_yes: float | None = None


def put_verdicts(store: Store, verdicts: Sequence[NewVerdict]) -> None:
    """Write verdicts, replacing those of the same text, constraint, judge, mode and prompt (not
    committed)."""
    store.conn.executemany(
        "INSERT OR REPLACE INTO verdicts (generation_id, constraint_id, judge, judging_mode, "
        "prompt_hash, verdict,"
        " quote, reason, quote_found, quote_score, call_id, created_at, p_yes) VALUES "
        "(?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [(v.generation_id, v.constraint_id, v.judge, v.judging_mode, v.prompt_hash, v.verdict,
          v.quote, v.reason,
          v.quote_found, v.quote_score, v.call_id, v.created_at, v.p_yes) for v in verdicts],
    )


def apply_threshold(store: Store, judge: str, judging_mode: str, threshold: float) -> int:
    """Read a judge's stored P(Yes) verdicts at a new threshold (its new calibration): no call is made,
    the texts' scores go stale through the verdicts' triggers. Returns the verdicts that changed.
    Commits."""
    with store.conn:
        cur = store.conn.execute(
            "UPDATE verdicts SET verdict = (p_yes >= ?1) WHERE judge = ?2 AND judging_mode = ?3 AND p_yes IS "
            "NOT NULL AND verdict IS NOT (p_yes >= ?1)",
            (threshold, judge, judging_mode))
    return cur.rowcount


def judged_constraint_ids(store: Store, generation_id: int, judge: str, judging_mode: str,
                          prompt_hash: str) -> set[int]:
    """Constraints this judge, mode and prompt gave a usable (non-missing) verdict on, on this text."""
    return {row[0] for row in store.conn.execute(
        "SELECT constraint_id FROM verdicts WHERE generation_id = ? AND judge = ? AND judging_mode = "
        "? AND prompt_hash = ? AND verdict IS NOT NULL", (generation_id, judge, judging_mode, prompt_hash))}


def yes_count(store: Store, generation_id: int, judge: str, judging_mode: str) -> int:
    """The Yes verdicts stored for this text by this judge and mode (every prompt)."""
    row = store.conn.execute(
        "SELECT sum(verdict) FROM verdicts WHERE generation_id = ? AND judge = ? AND judging_mode = ?",
        (generation_id, judge, judging_mode)).fetchone()
    return int(row[0] or 0)


def verdicts_by_constraint(store: Store, generation_id: int, judge: str, judging_mode: str,
                           prompt_hash: str) -> dict[int, int | None]:
    """Constraint id -> verdict (None: missing) this judge, mode and prompt stored on this text."""
    return {row[0]: row[1] for row in store.conn.execute(
        "SELECT constraint_id, verdict FROM verdicts WHERE generation_id = ? AND judge = ? "
        "AND judging_mode = ? AND prompt_hash = ?", (generation_id, judge, judging_mode, prompt_hash))}


@dataclass(frozen=True)
class BaseVerdict:
    """A judge's stored verdict on one constraint of the base article (what eval revision reads)."""

    verdict: int | None  # 1 Yes, 0 No, None missing
    quote: str | None
    quote_found: str | None


def base_verdicts(store: Store, instruction_id: int, generation_id: int, judge: str, judging_mode: str,
                  prompt_hash: str) -> dict[int, BaseVerdict]:
    """Constraint id -> the verdict stored on text ``generation_id`` for each constraint of the
    instruction (replaced ones included), by this judge, mode and prompt."""
    return {row[0]: BaseVerdict(*row[1:]) for row in store.conn.execute(
        "SELECT v.constraint_id, v.verdict, v.quote, v.quote_found FROM verdicts v JOIN constraints c"
        " ON c.id = v.constraint_id WHERE c.instruction_id = ? AND v.generation_id = ? AND v.judge = ?"
        " AND v.judging_mode = ? AND v.prompt_hash = ?",
        (instruction_id, generation_id, judge, judging_mode, prompt_hash))}


def judge_has_verdicts(store: Store, judge: str) -> bool:
    """Whether ``judge`` gave any verdict (a judge named in a filter)."""
    return store.conn.execute("SELECT 1 FROM verdicts WHERE judge = ? LIMIT 1",
                              (judge,)).fetchone() is not None
