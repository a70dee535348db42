"""The ``llm_calls`` table: every finished LLM call, which is the call cache.

pipeline.llm.cache owns the cache key and the rules (what is cached, when a row answers); this
module only reads and writes the rows. Nothing here commits: the callers keep their transaction
boundaries (a finished call is committed as soon as it is stored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.store.database import Store


@dataclass(frozen=True)
class CachedReply:
    """What a cache hit needs of a stored call."""

    id: int
    response: str  # "" when the row holds none
    prompt_tokens: int
    completion_tokens: int
    endpoint: str
    logprobs: str | None = None  # JSON, as pipeline.llm.call encodes them
    cached_prompt_tokens: int | None = None


@dataclass(frozen=True)
class NewCall:
    """One row of ``llm_calls``, in its column order."""

    cache_key: str
    endpoint: str
    model: str
    template: str | None
    template_hash: str | None
    request: str  # JSON of messages and parameters, redacted
    response: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    latency_s: float
    run_id: str | None
    created_at: str
    via: str  # online | batch
    logprobs: str | None = None  # JSON of the reply tokens' top log-probabilities, when asked and given
    cached_prompt_tokens: int | None = None  # of prompt_tokens, read from the endpoint's cache; None: unsaid


@dataclass(frozen=True)
class TemplatedCall:
    id: int
    template: str
    template_hash: str | None


def cached_reply(store: Store, cache_key: str) -> CachedReply | None:
    row = store.conn.execute(
        "SELECT id, response, prompt_tokens, completion_tokens, endpoint, logprobs, cached_prompt_tokens"
        " FROM llm_calls WHERE cache_key = ?",
        (cache_key,),
    ).fetchone()
    if row is None:
        return None
    return CachedReply(row[0], row[1] or "", row[2] or 0, row[3] or 0, row[4], row[5], row[6])


def put_call(store: Store, call: NewCall) -> int:
    """Store a call (replacing one under the same key); returns its id. Does not commit."""
    cur = store.conn.execute(
        "INSERT OR REPLACE INTO llm_calls (cache_key, endpoint, model, template, "
        "template_hash, request, response,"
        " prompt_tokens, completion_tokens, cost, latency_s, run_id, created_at, via, logprobs,"
        " cached_prompt_tokens)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        # Spelled out, not dataclasses.astuple: that deep-copies every field, a tenth of a
        # millisecond a call on the client's hot path.
        (call.cache_key, call.endpoint, call.model, call.template, call.template_hash,
         call.request, call.response,
         call.prompt_tokens, call.completion_tokens, call.cost, call.latency_s, call.run_id,
         call.created_at, call.via,
         call.logprobs, call.cached_prompt_tokens),
    )
    return int(cur.lastrowid or 0)


def _where(endpoint: str | None = None, template: str | None = None, before: str
           | None = None) -> tuple[str, list[Any]]:
    clauses, params = [], []
    if endpoint is not None:
        clauses.append("endpoint = ?")
        params.append(endpoint)
    if template is not None:
        clauses.append("template = ?")
        params.append(template)
    if before is not None:
        clauses.append("created_at < ?")
        params.append(before)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def newest_calls(store: Store, *, endpoint: str | None, template: str | None,
                 limit: int) -> list[dict[str, Any]]:
    """The newest calls, newest first, with the first 200 characters of each reply."""
    where, params = _where(endpoint, template)
    return store.query(
        "SELECT id, created_at, endpoint, model, template, prompt_tokens, cached_prompt_tokens,"
        " completion_tokens, cost, latency_s, run_id, substr(response, 1, 200) AS response FROM llm_calls"
        + where + " ORDER BY id DESC LIMIT ?",
        [*params, limit],
    )


def calls_by_endpoint_model_template(store: Store) -> list[dict[str, Any]]:
    """Per endpoint, model and template: calls, tokens, cost, bytes, first and last. ``cached_prompt_tokens``
    sums what the endpoint said it read from its prompt cache (NULL when none of the calls said)."""
    return store.query(
        "SELECT endpoint, model, coalesce(template, '') AS template, count(*) AS calls,"
        " sum(prompt_tokens) AS prompt_tokens, sum(cached_prompt_tokens) AS cached_prompt_tokens,"
        " sum(completion_tokens) AS completion_tokens,"
        " round(sum(cost), 6) AS cost, sum(length(request) + length(response)) AS bytes,"
        " min(created_at) AS first, max(created_at) AS last"
        " FROM llm_calls GROUP BY endpoint, model, template ORDER BY endpoint, model, template"
    )


def templated_calls(store: Store) -> list[TemplatedCall]:
    """Every call rendered from a prompt template, with that template's hash then."""
    rows = store.conn.execute("SELECT id, template, template_hash FROM llm_calls WHERE template IS NOT NULL")
    return [TemplatedCall(int(r[0]), r[1], r[2]) for r in rows]


def delete_calls(store: Store, *, endpoint: str | None = None, template: str | None = None,
                 before: str | None = None,
                 ids: list[int] | None = None) -> int:
    """Delete the calls matching every filter given (``ids``: only these); returns how many.
    Commits."""
    where, params = _where(endpoint, template, before)
    if ids is not None:
        # A temporary table rather than bound parameters: SQLite caps their number.
        store.conn.execute("CREATE TEMP TABLE IF NOT EXISTS _stale(id INTEGER PRIMARY KEY)")
        store.conn.execute("DELETE FROM _stale")
        store.conn.executemany("INSERT INTO _stale(id) VALUES (?)", [(i,) for i in ids])
        where += (" AND " if where else " WHERE ") + "id IN (SELECT id FROM _stale)"
    cur = store.conn.execute("DELETE FROM llm_calls" + where, params)
    store.commit()
    return int(cur.rowcount)


def delete_all_calls(store: Store) -> int:
    """Empty the table and give the space back to the file; returns how many calls went."""
    cur = store.conn.execute("DELETE FROM llm_calls")
    store.commit()
    store.conn.execute("VACUUM")
    return int(cur.rowcount)


def paid_by_via(store: Store) -> dict[str, dict[str, Any]]:
    """What the calls cost, by how they were paid ('online', 'batch'): calls, tokens, cost.
    Calls stored before batch mode existed were online."""
    return {r["via"]: {"calls": r["n"], "cost": r["cost"] or 0.0, "prompt_tokens": r["pt"] or 0,
                       "completion_tokens": r["ct"] or 0}
            for r in store.query("SELECT coalesce(via, 'online') AS via, count(*) AS n, sum(cost) AS cost,"
                                 " sum(prompt_tokens) AS pt, sum(completion_tokens) AS ct FROM "
                                 "llm_calls GROUP BY 1")}


def template_token_rates(store: Store) -> dict[str, tuple[float, float]]:
    """Per template with answered calls: (prompt tokens per request character, mean completion tokens).
    What a dry run prices a template's calls by (pipeline.stages.estimate)."""
    rows = store.conn.execute(
        "SELECT template, sum(prompt_tokens), sum(length(request)), avg(completion_tokens) FROM llm_calls"
        " WHERE template IS NOT NULL AND prompt_tokens > 0 AND completion_tokens > 0 GROUP BY template"
    ).fetchall()
    return {r[0]: (r[1] / r[2], float(r[3])) for r in rows if r[2]}


def online_latency_by_endpoint(store: Store) -> dict[str, float]:
    """Per endpoint, the mean latency of its online calls (seconds)."""
    rows = store.conn.execute(
        "SELECT endpoint, avg(latency_s) FROM llm_calls WHERE via = 'online' AND latency_s "
        "> 0 GROUP BY endpoint"
    ).fetchall()
    return {r[0]: float(r[1]) for r in rows}


def prompt_chars_per_token(store: Store) -> dict[str, float]:
    """Per endpoint with answered calls: characters of the messages it read per prompt token it
    reported (the chat template's tokens included). What a dry run counts a prompt by when the
    endpoint's tokenizer is not known here (pipeline.stages.estimate)."""
    rows = store.conn.execute(
        "SELECT endpoint, sum(prompt_tokens), sum((SELECT sum(length(json_extract(m.value, '$.content')))"
        " FROM json_each(request, '$.messages') AS m)) FROM llm_calls"
        " WHERE prompt_tokens > 0 AND json_valid(request) GROUP BY endpoint"
    ).fetchall()
    return {r[0]: r[2] / r[1] for r in rows if r[1] and r[2]}


@dataclass(frozen=True)
class AnsweredCall:
    template: str
    endpoint: str
    model: str
    cache_key: str
    request: str  # JSON of messages and parameters, redacted
    completion_tokens: int


def newest_answered_calls(store: Store, *, per_template: int) -> list[AnsweredCall]:
    """Per template, its newest ``per_template`` calls with a counted reply: what a dry run measures
    a model's reply lengths against its placeholders' on (pipeline.stages.estimate)."""
    rows = store.conn.execute(
        "SELECT template, endpoint, model, cache_key, request, completion_tokens FROM ("
        " SELECT *, row_number() OVER (PARTITION BY template ORDER BY id DESC) AS newest FROM llm_calls"
        " WHERE template IS NOT NULL AND completion_tokens > 0) WHERE newest <= ?",
        (per_template,),
    ).fetchall()
    return [AnsweredCall(r[0], r[1], r[2] or "", r[3], r[4] or "", int(r[5])) for r in rows]
