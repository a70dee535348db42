"""`unspecific pair`: a similar-but-different partner for each article of a domain."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from pipeline.cli.common import positive_int

    p = sub.add_parser(
        "pair", help="pair each article with a similar-but-different one (paper or research rule)",
        description="paper: the most similar other article with cosine < --max-cos. research: a "
                    "partner with cosine "
        "in [--min-cos, --max-cos), each article in at most one pair (greedy, in import "
        "order). Stores the cosine, "
        "the partner's rank and the next candidates. Re-running a rule updates its pairs in place.",
    )
    p.add_argument("--domain", default="news", help="domain to pair (default news)")
    p.add_argument("--rule", choices=["paper", "research"], default="paper",
                   help="pairing rule (default paper)")
    p.add_argument("--max-cos", type=float, default=0.85,
                   help="partners must be below this cosine (default 0.85)")
    p.add_argument("--min-cos", type=float, default=0.70,
                   help="research rule: lowest partner cosine (default 0.70)")
    p.add_argument("--floor", type=float, default=None,
                   help="report pairs less similar than this cosine; a build refuses them unless "
                        "--allow-dissimilar (default: [pair] floor in the config, else 0.70)")
    p.add_argument("--model", default="mpnet", help="embedding model: mpnet (default, the paper's) | minilm")
    p.add_argument("--candidates", type=int, default=5, help="next candidates stored per pair (default 5)")
    p.add_argument("--brute-force-limit", type=positive_int, default=4000,
                   help="exact search up to this many articles, a usearch index beyond (default 4000)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def _floor(args: argparse.Namespace) -> float:
    """--floor, else [pair] floor of the config (when one is found), else PAIR_FLOOR."""
    from pipeline.core.definitions import PAIR_FLOOR
    from pipeline.core.errors import ConfigError

    if args.floor is not None:
        return float(args.floor)
    try:
        from pipeline.cli.common import load_config_from
        from pipeline.stages.pairing import pair_floor

        return pair_floor(load_config_from(args))
    except (ConfigError, AttributeError):
        return PAIR_FLOOR


def run(args: argparse.Namespace) -> int:
    import json
    from dataclasses import asdict

    from pipeline.analysis.embeddings import get_embedder
    from pipeline.cli.common import console, open_store_from
    from pipeline.cli.corpus_cmd import rich_progress
    from pipeline.stages.pairing import PairOptions, pair_domain, summary_dict
    from pipeline.store.pairs import pair_stats

    options = PairOptions(domain=args.domain, rule=args.rule, max_cos=args.max_cos, min_cos=args.min_cos,
                          candidates=max(0, args.candidates), brute_force_limit=args.brute_force_limit,
                          floor=_floor(args))
    embedder = get_embedder(args.model)
    store = open_store_from(args, create=False)
    out = console()
    try:
        with rich_progress(out) as hook:
            s = pair_domain(store, embedder, options, progress=hook)
        stats = asdict(pair_stats(store, args.domain, args.rule))
    finally:
        store.close()
    if args.json:
        print(json.dumps(summary_dict(s) | {"stored": stats}, indent=2, default=str))
        return 0
    window = f"[{args.min_cos}, {args.max_cos})" if args.rule == "research" else f"< {args.max_cos}"
    out.print(f"domain [bold]{s.domain}[/], rule [bold]{s.rule}[/] (cosine {window}), {s.model}, "
              f"{s.search} search: {s.articles} kept articles -> {s.pairs} pairs, "
              f"{len(s.unpaired)} articles in no pair")
    out.print(f"  stored: {s.inserted} new, {s.updated} changed, {s.unchanged} unchanged, {s.removed} removed"
              + (f", {s.kept_in_use} old pairs kept (used by instructions)" if s.kept_in_use else ""))
    if stats and stats["n"]:
        out.print(f"  cosine min {stats['lo']:.3f} / mean {stats['mean']:.3f} / max {stats['hi']:.3f}; "
                  f"mean partner rank {stats['rank']:.2f}")
    if s.search_detail:
        out.print(f"  {s.search_detail}")
    if s.below_floor:
        shown = ", ".join(f"{a}-{b} ({c:.2f})" for a, b, c in s.below_floor[:8])
        out.print(f"[yellow]  {len(s.below_floor)} of {s.pairs} pairs are less similar than the floor "
                  f"{s.floor:.2f} (articles A-B, cosine): {shown}{' ...' if len(s.below_floor) > 8 else ''}. "
                  "A build refuses them unless --allow-dissimilar; import more articles of the domain "
                  "for closer partners.[/]")
    timing = ", ".join(f"{k} {v:.1f} s" for k, v in s.seconds.items())
    out.print(f"  time: {timing}")
    if s.pending:
        out.print(f"[yellow]{s.pending} articles still await the near-duplicate check: run "
                  "`unspecific corpus add` again to settle them, then pair again[/]")
    return 0
