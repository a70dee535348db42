"""The LLM call cache (the store's ``llm_calls`` table): list, stats, prune, clear.

The cache key is the sha256 of a JSON object holding
  - ``base_url``  the endpoint's URL as configured ("local" for the embedded model, whatever
    port it runs on; "pool" for a pool of endpoints, so the member that answered is not part of it),
  - ``model``     the model name sent to the endpoint,
  - ``messages``  the rendered chat messages, exactly as sent,
  - ``params``    the sampling parameters (temperature, max_tokens, seed, top_p) and the
    structured-output format (``response_format``, schema included),
  - ``template``  the hash of the prompt template file that rendered the messages.
So a repeated call is free; editing a prompt file, changing a parameter or pointing a role at
another model asks again. Only replies the caller accepted are stored: errors, empty replies and
replies that broke the output format never are. The API key is not part of the key or the row.

Deleting cache rows loses no results: stages keep what they produced in their own tables;
the cache only saves paying again for a call that is repeated.

The functions here are the library; ``unspecific cache`` (pipeline/cli/cache_cmd.py) is a thin
layer over them.
"""

from __future__ import annotations

from datetime import UTC
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.store.database import Store


def _where(endpoint: str | None = None, template: str | None = None, before: str | None = None) -> tuple[str, list[Any]]:
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


def list_calls(store: Store, *, endpoint: str | None = None, template: str | None = None, limit: int = 30) -> list[dict[str, Any]]:
    where, params = _where(endpoint, template)
    return store.query(
        "SELECT id, created_at, endpoint, model, template, prompt_tokens, completion_tokens, cost, latency_s,"
        " run_id, substr(response, 1, 200) AS response FROM llm_calls" + where + " ORDER BY id DESC LIMIT ?",
        [*params, limit],
    )


def cache_stats(store: Store) -> list[dict[str, Any]]:
    """Per endpoint, model and template: calls, tokens, cost (what the cache saves on a rerun), bytes."""
    return store.query(
        "SELECT endpoint, model, coalesce(template, '') AS template, count(*) AS calls,"
        " sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,"
        " round(sum(cost), 6) AS cost, sum(length(request) + length(response)) AS bytes,"
        " min(created_at) AS first, max(created_at) AS last"
        " FROM llm_calls GROUP BY endpoint, model, template ORDER BY endpoint, model, template"
    )


def stale_call_ids(store: Store) -> list[int]:
    """Calls whose template file changed (another hash) or no longer exists."""
    from pipeline.core.errors import PromptError
    from pipeline.llm.prompts import load_template

    current: dict[str, str | None] = {}
    stale = []
    for row in store.conn.execute("SELECT id, template, template_hash FROM llm_calls WHERE template IS NOT NULL"):
        call_id, name, h = row
        if name not in current:
            try:
                current[name] = load_template(name).hash
            except PromptError:
                current[name] = None
        if current[name] != h:
            stale.append(int(call_id))
    return stale


def prune_cache(
    store: Store,
    *,
    older_than_days: float | None = None,
    template: str | None = None,
    endpoint: str | None = None,
    stale: bool = False,
) -> int:
    """Delete the calls matching every filter given; returns how many. At least one filter."""
    from pipeline.core.errors import UnspecificError

    if older_than_days is None and template is None and endpoint is None and not stale:
        raise UnspecificError("cache prune: give --older-than, --template, --endpoint or --stale (or use `cache clear --yes`)")
    if older_than_days is not None and older_than_days < 0:
        raise UnspecificError(f"cache prune: --older-than must be positive, got {older_than_days}")
    before = None
    if older_than_days is not None:
        from datetime import datetime, timedelta

        before = (datetime.now(UTC) - timedelta(days=older_than_days)).isoformat(timespec="seconds")
    where, params = _where(endpoint, template, before)
    if stale:
        ids = stale_call_ids(store)
        if not ids:
            return 0
        store.conn.execute("CREATE TEMP TABLE IF NOT EXISTS _stale(id INTEGER PRIMARY KEY)")
        store.conn.execute("DELETE FROM _stale")
        store.conn.executemany("INSERT INTO _stale(id) VALUES (?)", [(i,) for i in ids])
        where += (" AND " if where else " WHERE ") + "id IN (SELECT id FROM _stale)"
    cur = store.conn.execute("DELETE FROM llm_calls" + where, params)
    store.commit()
    return int(cur.rowcount)


def clear_cache(store: Store) -> int:
    cur = store.conn.execute("DELETE FROM llm_calls")
    store.commit()
    store.conn.execute("VACUUM")
    return int(cur.rowcount)
