"""`unspecific cache list|stats|prune|clear`: the LLM call cache (the store's ``llm_calls`` table).

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

The functions here are the library; the command is a thin layer over them.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store import Store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cache",
        help="list, count, prune or clear the LLM call cache",
        description="The LLM call cache (table llm_calls in the store). A call is answered from it when the "
        "endpoint's base_url, the model, the messages, the sampling parameters (with the structured-output "
        "schema) and the prompt template's hash are all the same. Errors, empty and refused replies are never "
        "cached; keys are never stored. Deleting cached calls loses no results, only the saving on a rerun.",
    )
    p.add_argument("action", choices=["list", "stats", "prune", "clear"])
    p.add_argument("--endpoint", default=None, help="only this endpoint (list, prune)")
    p.add_argument("--template", default=None, help="only calls rendered from this prompt template (list, prune)")
    p.add_argument("--older-than", type=float, default=None, metavar="DAYS", help="prune: calls older than DAYS days")
    p.add_argument("--stale", action="store_true",
                   help="prune: calls whose prompt template file has changed or gone since (they can never hit again)")
    p.add_argument("--limit", type=int, default=30, help="list: newest N calls (default 30)")
    p.add_argument("--yes", action="store_true", help="clear: confirm deleting every cached call")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


# -- library ---------------------------------------------------------------------------


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
    from ..errors import PromptError
    from ..prompts import load_template

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
    from ..errors import UnspecificError

    if older_than_days is None and template is None and endpoint is None and not stale:
        raise UnspecificError("cache prune: give --older-than, --template, --endpoint or --stale (or use `cache clear --yes`)")
    if older_than_days is not None and older_than_days < 0:
        raise UnspecificError(f"cache prune: --older-than must be positive, got {older_than_days}")
    before = None
    if older_than_days is not None:
        from datetime import datetime, timedelta, timezone

        before = (datetime.now(timezone.utc) - timedelta(days=older_than_days)).isoformat(timespec="seconds")
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


# -- command ---------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    import json

    from ..errors import UnspecificError
    from .common import console, open_store_from

    store = open_store_from(args, create=False)
    out = console()
    if args.action == "list":
        rows = list_calls(store, endpoint=args.endpoint, template=args.template, limit=args.limit)
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        _table(out, rows, ["id", "created_at", "endpoint", "model", "template", "prompt_tokens",
                           "completion_tokens", "cost", "latency_s", "response"])
        return 0
    if args.action == "stats":
        rows = cache_stats(store)
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        _table(out, rows, ["endpoint", "model", "template", "calls", "prompt_tokens", "completion_tokens",
                           "cost", "bytes", "first", "last"])
        total = sum(r["calls"] for r in rows)
        cost = sum(r["cost"] or 0 for r in rows)
        out.print(f"{total} cached call(s); a rerun of them costs nothing (they cost {cost:.4f} when made)")
        return 0
    if args.action == "prune":
        n = prune_cache(store, older_than_days=args.older_than, template=args.template,
                        endpoint=args.endpoint, stale=args.stale)
        out.print(f"pruned {n} cached call(s)")
        return 0
    if not args.yes:
        raise UnspecificError("cache clear deletes every cached LLM call: add --yes to confirm")
    n = clear_cache(store)
    out.print(f"cleared {n} cached call(s)")
    return 0


def _table(out: Any, rows: list[dict[str, Any]], columns: list[str]) -> None:
    from rich.table import Table

    if not rows:
        out.print("no cached calls")
        return
    table = Table(*columns)
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    out.print(table)


def _cell(value: Any) -> str:
    from rich.markup import escape

    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value).replace("\n", " ")
    return escape(text if len(text) <= 60 else text[:57] + "...")
