"""`unspecific cache list|stats|prune|clear`: parses and prints; the cache library, and what the
cache key holds, is pipeline/llm/cache.py."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cache",
        help="list, count, prune or clear the LLM call cache",
        description="The LLM call cache (table llm_calls in the store). A call is answered from it when the "
        "endpoint's base_url, the model, the messages, the sampling parameters (with the structured-output "
        "schema) and the prompt template's hash are all the same. Errors, empty and "
        "refused replies are never "
        "cached; keys are never stored. Deleting cached calls loses no results, only the saving on a rerun.",
    )
    p.add_argument("action", choices=["list", "stats", "prune", "clear"])
    p.add_argument("--endpoint", default=None, help="only this endpoint (list, prune)")
    p.add_argument("--template", default=None,
                   help="only calls rendered from this prompt template (list, prune)")
    p.add_argument("--older-than", type=float, default=None, metavar="DAYS",
                   help="prune: calls older than DAYS days")
    p.add_argument("--stale", action="store_true",
                   help="prune: calls whose prompt template file has changed or gone since (they "
                        "can never hit again)")
    p.add_argument("--limit", type=int, default=30, help="list: newest N calls (default 30)")
    p.add_argument("--yes", action="store_true", help="clear: confirm deleting every cached call")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from pipeline.cli.common import console, open_store_from
    from pipeline.core.errors import UnspecificError
    from pipeline.llm.cache import cache_stats, clear_cache, list_calls, prune_cache

    store = open_store_from(args, reading=args.action in ("list", "stats"))
    out = console()
    if args.action == "list":
        rows, cached = _cached_column(list_calls(store, endpoint=args.endpoint, template=args.template,
                                                 limit=args.limit))
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        _table(out, "cached calls, newest first", rows, ("id",),
               (("call", ("created_at", "endpoint", "model", "template")),
                ("size and cost", ("prompt_tokens", *cached, "completion_tokens", "cost", "latency_s")),
                ("reply", ("response",))))
        return 0
    if args.action == "stats":
        rows, cached = _cached_column(cache_stats(store))
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        _table(out, "cached calls per endpoint, model and template", rows, ("endpoint", "model", "template"),
               (("calls", ("calls", "prompt_tokens", *cached, "completion_tokens", "cost", "bytes")),
                ("when", ("first", "last"))))
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


def _cached_column(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """The rows, and ("cached_prompt_tokens",) when an endpoint said how many prompt tokens it read from
    its prompt cache for any of them; else the rows without that field, and no column."""
    if any(r.get("cached_prompt_tokens") is not None for r in rows):
        return rows, ("cached_prompt_tokens",)
    return [{k: v for k, v in r.items() if k != "cached_prompt_tokens"} for r in rows], ()


def _table(out: Any, title: str, rows: list[dict[str, Any]], keys: tuple[str, ...],
           blocks: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
    from pipeline.outputs.tables import Block, Sheet, render_sheet

    if not rows:
        out.print("no cached calls")
        return
    # Headers as words ("prompt tokens"): a header wraps between its words, never inside one.
    sheet = Sheet(title, tuple(_header(k) for k in keys),
                  tuple(Block(name, tuple(_header(c) for c in columns)) for name, columns in blocks))
    for row in rows:
        sheet.add(*(_cell(row.get(c)) for c in (*keys, *(c for _, columns in blocks for c in columns))))
    render_sheet(out, sheet)


def _header(column: str) -> str:
    return {"created_at": "created", "latency_s": "latency s"}.get(column, column.replace("_", " "))


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value).replace("\n", " ")
    if len(text) == 25 and text[10] == "T" and text.endswith("+00:00"):  # a stored UTC time, to the second
        return text[:19].replace("T", " ")
    return text if len(text) <= 60 else text[:57] + "..."
