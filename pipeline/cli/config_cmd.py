"""`unspecific config show|check`: the effective configuration, keys masked."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show or check the configuration (keys masked)")
    p.add_argument("action", choices=["show", "check"], nargs="?", default="show")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from pipeline.cli.common import console, load_config_from

    config = load_config_from(args)
    data = config.public_dict()
    out = console()
    if args.action == "check":
        out.print(f"config OK: {len(config.endpoints)} endpoint(s), source "
                  f"{data['path'] or '(built-in default)'}")
        return 0
    if args.json:
        print(json.dumps(data, indent=2, default=str))
        return 0
    from pipeline.outputs.tables import Block, Sheet, render_sheet

    out.print(
        f"config: [bold]{data['path'] or '(built-in default: every role on the embedded local model)'}[/]")
    # A cached prompt price only where one is set: most endpoints have none.
    cached = any(ep.get("price_cached_prompt_per_mtok") is not None for ep in data["endpoints"].values())
    prices = ("$/M in", *(("$/M cached in",) if cached else ()), "$/M out")
    endpoints = Sheet("endpoints", ("endpoint",),
                      (Block("where", ("base_url", "model", "key")),
                       Block("limits and prices", ("concurrency", "rpm", *prices))))
    for name, ep in data["endpoints"].items():
        key = f"${ep['api_key_env']} {ep.get('api_key', '')}" if ep["api_key_env"] else "-"
        in_cache = ep.get("price_cached_prompt_per_mtok")
        said = (f"{in_cache:g}" if in_cache is not None else "-",) if cached else ()
        endpoints.add(name, ep["base_url"], ep["model"], key, str(ep["concurrency"]),
                      str(ep["requests_per_minute"] or "-"),
                      f"{ep['price_prompt_per_mtok']:g}", *said, f"{ep['price_completion_per_mtok']:g}")
    render_sheet(out, endpoints)
    roles = Sheet("roles", ("role",), (Block("", ("endpoint(s)",)),))
    for role, value in data["roles"].items():
        roles.add(role, ", ".join(value) if isinstance(value, list) else value)
    render_sheet(out, roles)
    return 0
