"""`unspecific report`: condition x model tables per domain; --out writes CSV, JSON and charts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    from pipeline.cli.common import add_bootstrap_arguments, ratio, share
    from pipeline.core.definitions import DEFAULT_RATIO, JUDGING_MODES

    p = sub.add_parser(
        "report",
        help="Org, Core, superficial share with bootstrap intervals, judge agreement, comparisons",
        description="Condition x model tables per domain: Org and Core with bootstrap 95% intervals over "
        "instructions, the superficial share, judge kappa; with --out, CSV/JSON tables, per-instruction rows "
        "and PNG charts (Org vs Core bars, the depth profile across summary ratios).",
    )
    p.add_argument("--run", help="only instructions of this build run")
    p.add_argument("--domain", help="only this domain")
    p.add_argument("--condition", help="only this condition (single | none | direct | eval)")
    p.add_argument("--models", help="only these models under test (comma-separated)")
    p.add_argument("--judges", help="only these judges (comma-separated)")
    p.add_argument("--judging-mode", choices=JUDGING_MODES, help="only verdicts of this judging mode")
    # None when not given: an asked-for ratio must exist, the default may fall back to the nearest.
    p.add_argument("--ratio", type=ratio, default=None,
                   help=f"summary ratio of the main table (default {DEFAULT_RATIO:g}, else "
                        "the nearest summarised)")
    p.add_argument("--out", metavar="DIR",
                   help="write CSV, JSON and PNG files here (the data: shares in [0, 1], every response's"
                   " row); with --format csv, the report's tables too, one CSV a table")
    p.add_argument("--format", choices=("text", "markdown", "csv", "json"), default="text",
                   help="text (default): tables fitted to the terminal (piped: to COLUMNS, else 100 columns);"
                   " markdown: tables no wider than 100 characters, for a paper; csv: every table as one,"
                   " a 'table' column first (with --out, one file a table); json: numbers as numbers,"
                   " intervals as [low, high]. Each with the suspicion list")
    p.add_argument("--html", metavar="DIR",
                   help="write report.html here: one self-contained page (no network) with the tables, charts"
                   " and, per instruction, the Audit content of every constraint")
    p.add_argument("--compare", metavar="A,B",
                   help="paired test of two models (or two conditions) on the same instructions")
    p.add_argument("--similarity", nargs="?", const="mpnet", metavar="EMBEDDER",
                   help="add constraint-reference and constraint-response similarity (slow on CPU; "
                   "embedder mpnet by default, or minilm)")
    p.add_argument("--no-copy", action="store_true",
                   help="skip copied n-grams between responses and references")
    add_bootstrap_arguments(p)
    p.add_argument("--min-coverage", type=share, default=None, metavar="SHARE",
                   help="mark groups with fewer verdicts given than this share of those "
                        "expected (default 0.95)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipeline.analysis.metrics import Filters
    from pipeline.cli.common import console, open_store_from, parse_csv
    from pipeline.core.config import load_config
    from pipeline.core.definitions import DEFAULT_RATIO
    from pipeline.core.errors import UnspecificError
    from pipeline.outputs.report import (
        ReportOptions,
        build_report,
        check_filters,
        empty_message,
        render,
        write_outputs,
    )
    from pipeline.outputs.report_text import write_csv_tables, write_format
    from pipeline.outputs.suspicion import REPORT_TOP
    from pipeline.store.generations import summary_ratios

    # --config is read by nothing here, but a missing or broken file is an error as in evaluate,
    # never silently ignored. A report calls no endpoint, so it needs no key.
    load_config(args.config, need_keys=False)

    pair = None
    if args.compare:
        names = parse_csv(args.compare)
        if len(names) != 2 or names[0] == names[1]:
            raise UnspecificError(f"--compare {args.compare!r}: give two different names, "
                                  "like model_a,model_b")
        pair = (names[0], names[1])
    filters = Filters(
        run=args.run, domain=args.domain, condition=args.condition,
        models=tuple(parse_csv(args.models)) if args.models else None,
        judges=tuple(parse_csv(args.judges)) if args.judges else None,
        judging_mode=args.judging_mode,
    )
    options = ReportOptions(filters=filters, ratio=DEFAULT_RATIO if args.ratio is None else args.ratio,
                            compare=pair, copy=not args.no_copy, n_resamples=max(1, args.resamples),
                            seed=args.seed, suspicious=REPORT_TOP)
    if args.min_coverage is not None:
        options.min_coverage = args.min_coverage
    store = open_store_from(args, create=False, reading=True)
    out = console()
    try:
        check_filters(store, filters)
        if args.ratio is not None:  # refused before any metric is computed
            _check_ratio(args.ratio, summary_ratios(store, args.run), store.path)
        embedder = None
        if args.similarity:
            from pipeline.analysis.embeddings import get_embedder

            embedder = get_embedder(args.similarity)
        with out.status("computing metrics..."):
            report = build_report(store, options, embedder=embedder)
        if report.empty:
            if report.gate and args.format == "text":
                render(report, out)  # the message, then what the build's gate did
            else:
                out.print(empty_message(filters))
            return 1
        if args.ratio is not None:
            _check_ratio(args.ratio, report.metrics.ratios, store.path)
        # The files first: a line of the report sends the reader to one only when it was written.
        written: list[Path] = []
        if args.out:
            with out.status("writing files..."):
                written = write_outputs(report, args.out)
        # Markdown and JSON go to standard output: what is said about files goes to standard error.
        said = out if args.format == "text" or (args.format == "csv" and args.out) else console(stderr=True)
        if args.format == "text":
            render(report, out, written)
            _print_paid(out, store)
            _print_estimates(out, store)
        elif args.format == "csv" and args.out:
            written += write_csv_tables(report, args.out, written)
        else:
            write_format(report, args.format, sys.stdout, written)
        if args.out:
            said.print(f"wrote {len(written)} files to [bold]{args.out}[/]")
        if args.html:
            from pipeline.outputs.html_report import write_html

            with said.status("writing the HTML report..."):
                page = write_html(store, report, args.html)
            said.print(f"wrote [bold]{page.path}[/] ({page.bytes / 1e6:.1f} MB, "
                       f"{page.instructions} instructions)")
    finally:
        store.close()
    return 0


def _check_ratio(asked: float, ratios: list[float], where: object) -> None:
    """An asked-for --ratio with no summaries is a user error naming the ratios there are, not a
    table quietly shown at another ratio."""
    from pipeline.core.definitions import unknown_ratio
    from pipeline.core.errors import UnspecificError

    why = unknown_ratio(asked, ratios, where)
    if why is not None:
        raise UnspecificError(why)


def _print_paid(out, store) -> None:  # noqa: ANN001
    """What the cached calls cost, online and in batch (all runs: the cache is shared)."""
    from pipeline.llm.batch import paid

    by_mode = paid(store)
    if not by_mode:
        return
    parts = [f"{mode} ${p['cost']:.4f} for {p['calls']:,} calls"
             for mode, p in sorted(by_mode.items(), reverse=True)]
    out.print("[dim]paid for the cached LLM calls (every run): " + ", ".join(parts) + "[/]", highlight=False)


def _print_estimates(out, store) -> None:  # noqa: ANN001
    """Each run made after a dry run: its estimate beside what it spent."""
    from pipeline.stages.runs import estimated_runs

    for r in estimated_runs(store):
        e = r["estimate"]
        out.print(f"[dim]{r['kind']} run {r['id']}: estimated {e['calls']:,} calls, ${e['cost']:.4f} online "
                  f"(${e['batch_cost']:.4f} batch); spent {r['calls']:,} calls, ${r['cost']:.4f}[/]",
                  highlight=False)
