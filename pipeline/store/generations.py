"""The ``generations`` table: base articles, responses of the models under test, and summaries.

A row's text lives in ``texts`` (by hash). Conventions (pipeline.stages.generation): a response
has ``model`` = the model under test and ``mode`` = direct | edit; a summary has ``parent_id`` =
the response, ``ratio`` = its target share of the response's words, ``model`` = the summarizer
and ``mode`` = the response's. Nothing here commits: the stages commit as each unit finishes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.core.definitions import RATIO_TOLERANCE
from pipeline.store.database import Store, and_where, now


@dataclass(frozen=True)
class NewGeneration:
    kind: str  # base | response | summary
    instruction_id: int
    model: str
    mode: str
    text_hash: str
    words: int
    call_id: int | None
    ratio: float | None = None
    parent_id: int | None = None
    achieved_ratio: float | None = None
    refusal: int | None = None


@dataclass(frozen=True)
class StoredResponse:
    id: int
    instruction_id: int
    model: str
    mode: str
    words: int | None


@dataclass(frozen=True)
class StoredSummary:
    id: int
    instruction_id: int
    parent_id: int
    ratio: float
    model: str


def insert_generation(store: Store, generation: NewGeneration) -> int:
    """Add a generation row; returns its id (not committed)."""
    g = generation
    cur = store.conn.execute(
        "INSERT INTO generations (kind, instruction_id, model, mode, ratio, parent_id, text_hash, words,"
        " achieved_ratio, call_id, refusal, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (g.kind, g.instruction_id, g.model, g.mode, g.ratio, g.parent_id, g.text_hash, g.words,
         g.achieved_ratio,
         g.call_id, g.refusal, now()),
    )
    return int(cur.lastrowid or 0)


def generation_text(store: Store, generation_id: int) -> str | None:
    """The text of a generation; None when there is no such generation."""
    row = store.conn.execute(
        "SELECT t.body FROM generations g JOIN texts t ON t.hash = g.text_hash WHERE g.id = ?",
        (generation_id,)
    ).fetchone()
    return None if row is None else row[0]


def find_response(store: Store, instruction_id: int, model: str, mode: str) -> int | None:
    """The first stored response of ``model`` in ``mode`` to the instruction."""
    row = store.conn.execute(
        "SELECT id FROM generations WHERE kind = 'response' AND instruction_id = ? AND model = ? AND mode = ?"
        " ORDER BY id LIMIT 1", (instruction_id, model, mode)).fetchone()
    return None if row is None else row[0]


def find_summary(store: Store, response_id: int, ratio: float, summarizer: str) -> int | None:
    """The first stored summary of the response at ``ratio`` by ``summarizer``."""
    row = store.conn.execute(
        "SELECT id FROM generations WHERE kind = 'summary' AND parent_id = ? AND model = ? "
        "AND abs(ratio - ?) < ?"
        " ORDER BY id LIMIT 1", (response_id, summarizer, ratio, RATIO_TOLERANCE)).fetchone()
    return None if row is None else row[0]


def summary_ratios(store: Store, run_id: str | None = None) -> list[float]:
    """The ratios summaries are stored at (of ``run_id``'s instructions), largest first: what a
    command checks an asked-for --ratio against before any work."""
    run_sql, args = (" AND g.instruction_id IN (SELECT id FROM instructions WHERE run_id = ?)",
                     (run_id,)) if run_id else ("", ())
    rows = store.conn.execute("SELECT DISTINCT g.ratio FROM generations g WHERE g.kind = 'summary'"
                              " AND g.ratio IS NOT NULL" + run_sql, args).fetchall()
    return sorted((float(r[0]) for r in rows), reverse=True)


def shared_base_article(store: Store, instruction_id: int) -> int | None:
    """The base article of the instruction, else that of an instruction of the same run and pair
    with the same main task (the common conditions share their synthesis and its base article)."""
    row = store.conn.execute(
        "SELECT g.id FROM generations g JOIN instructions i ON i.id = g.instruction_id"
        " JOIN instructions me ON me.id = ? WHERE g.kind = 'base' AND (i.id = me.id OR (i.run_id = me.run_id"
        " AND i.article_a IS me.article_a AND i.article_b IS me.article_b AND i.main_task = me.main_task))"
        " ORDER BY i.id = me.id DESC, g.id LIMIT 1", (instruction_id,)).fetchone()
    return None if row is None else row[0]


def stored_response(store: Store, response_id: int) -> StoredResponse | None:
    """The response generation ``response_id`` (None when it is not a response)."""
    row = store.conn.execute(
        "SELECT id, instruction_id, model, mode, words FROM generations WHERE id = ? AND kind = 'response'",
        (response_id,)).fetchone()
    return None if row is None else StoredResponse(*row)


def achieved_ratio(store: Store, generation_id: int) -> float | None:
    row = store.conn.execute("SELECT achieved_ratio FROM generations WHERE id = ?",
                             (generation_id,)).fetchone()
    return None if row is None else row[0]


def responses_to(store: Store, instruction_ids: Sequence[int], models: Sequence[str] | None = None,
                 mode: str | None = None) -> list[StoredResponse]:
    """Responses to these instructions (of these models, in this mode when given), by instruction,
    model and id."""
    if not instruction_ids:
        return []
    where, params = and_where(instruction_id=list(instruction_ids), model=models, mode=mode)
    return [StoredResponse(*row) for row in store.conn.execute(
        "SELECT id, instruction_id, model, mode, words FROM generations WHERE kind = 'response'" + where
        + " ORDER BY instruction_id, model, id", params)]


def summaries_of(store: Store, response_ids: Sequence[int]) -> list[StoredSummary]:
    """Summaries of these responses, by response, ratio (largest first) and id."""
    if not response_ids:
        return []
    return [StoredSummary(*row) for row in store.conn.execute(
        f"SELECT id, instruction_id, parent_id, ratio, model FROM generations WHERE kind = 'summary'"
        f" AND parent_id IN ({', '.join('?' for _ in response_ids)}) ORDER BY parent_id, ratio DESC, id",
        list(response_ids))]


def base_generation_id(store: Store, instruction_id: int) -> int | None:
    """The instruction's own base article (the first written), or None."""
    row = store.conn.execute("SELECT id FROM generations WHERE kind = 'base' AND instruction_id = "
                             "? ORDER BY id LIMIT 1",
                             (instruction_id,)).fetchone()
    return None if row is None else int(row[0])


def judged_on_response_and_summary(store: Store, instruction_id: int) -> bool:
    """A response to the instruction and a summary of it exist, and each has a verdict a judge gave
    (a missing verdict is not one)."""
    row = store.conn.execute(
        "SELECT count(*) FROM generations r JOIN generations s ON s.parent_id = r.id AND s.kind = 'summary'"
        " WHERE r.instruction_id = ? AND r.kind = 'response'"
        " AND EXISTS (SELECT 1 FROM verdicts v WHERE v.generation_id = r.id AND v.verdict IS NOT NULL)"
        " AND EXISTS (SELECT 1 FROM verdicts v WHERE v.generation_id = s.id AND v.verdict IS NOT NULL)",
        (instruction_id,),
    ).fetchone()
    return bool(row and row[0])


def model_has_responses(store: Store, model: str) -> bool:
    """Whether ``model`` wrote any response (a model under test named in a filter)."""
    return store.conn.execute("SELECT 1 FROM generations WHERE kind = 'response' AND model = ? LIMIT 1",
                              (model,)).fetchone() is not None
