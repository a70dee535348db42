"""`unspecific export`: the benchmark as JSONL, one instruction per line, or as a task folder of
another harness (``--format inspect`` for inspect_ai, ``--format lm-eval`` for lm-evaluation-harness)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write the benchmark as JSONL (instruction, constraints, lineage) for other harnesses",
    )
    p.add_argument("--out", required=True, metavar="FILE",
                   help="JSONL file to write ('-' for standard output); inspect, lm-eval: the folder")
    p.add_argument("--format", choices=("jsonl", "inspect", "lm-eval"), default="jsonl", metavar="FORMAT",
                   help="jsonl (default); inspect: an inspect_ai task folder (task.py, samples, the Core "
                        "scorer); lm-eval: an lm-evaluation-harness task folder (YAML + JSONL)")
    p.add_argument("--words", type=int, default=None,
                   help="inspect, lm-eval: the response length the instruction asks for (default 500, "
                        "evaluate's)")
    p.add_argument("--run", help="only instructions of this build run")
    p.add_argument("--domain", help="only this domain")
    p.add_argument("--condition",
                   help="only this condition (single | common+none | common+direct | common+eval;"
                                       " none | direct | eval also work)")
    p.add_argument("--all", action="store_true", dest="include_unfinished",
                   help="also unfinished and failed instructions (each line has a status); "
                        "default: done ones only")
    p.add_argument("--with-references", action="store_true",
                   help="include the reference articles' texts (mind the corpus licence)")
    from pipeline.cli.common import ratio
    from pipeline.core.definitions import DEFAULT_RATIO

    p.add_argument("--suspicious", action="store_true",
                   help="write the suspicion ranking instead: every (constraint, "
                        "response) with a reason, most"
                   " suspicious first (JSONL; CSV when --out ends in .csv)")
    p.add_argument("--reasons", metavar="LIST",
                   help="with --suspicious: only these reasons, comma-separated, of"
                   " similar,copied,echo,lost,split,unquoted,uncertain "
                   "(pipeline.analysis.suspicion.REASONS; default all)")
    p.add_argument("--ratio", type=ratio, default=None,
                   help=f"with --suspicious: the summary ratio (default {DEFAULT_RATIO:g}, else "
                        "the nearest summarised); inspect: the scorer's summary ratio")
    p.add_argument("--limit", type=int, default=None, help="with --suspicious: at most this many rows")
    p.set_defaults(func=run)


def _run_suspicious(args: argparse.Namespace) -> int:
    from pipeline.analysis.metrics import Filters
    from pipeline.analysis.suspicion import REASONS, parse_reasons
    from pipeline.cli.common import console, open_store_from
    from pipeline.outputs.report import check_filters
    from pipeline.outputs.suspicion import MISSING_COPY, write_suspicious

    # a bad name: error before the store opens
    enabled = parse_reasons(args.reasons) if args.reasons else REASONS
    store = open_store_from(args, create=False, reading=True)
    try:
        check_filters(store, Filters(run=args.run))
        ratio = _shown_ratio(store, args.run, args.ratio)
        n, missing = write_suspicious(store, args.out, ratio=ratio, enabled=enabled, run_id=args.run,
                                      limit=args.limit)
    finally:
        store.close()
    if args.out != "-":
        out = console()
        out.print(f"wrote {n} suspicious items to [bold]{args.out}[/]")
        if missing:
            out.print(f"[yellow]{MISSING_COPY}[/]")
    return 0


def _shown_ratio(store, run_id: str | None, asked: float | None) -> float | None:  # noqa: ANN001
    """The ratio the ranking is written at: the rule `report` and the app share; an asked-for
    ratio with no summaries is refused (exit 2) before any ranking."""
    from pipeline.core.definitions import shown_ratio, unknown_ratio
    from pipeline.core.errors import UnspecificError
    from pipeline.store.generations import summary_ratios

    ratios = summary_ratios(store, run_id)
    if asked is not None and (why := unknown_ratio(asked, ratios, store.path)) is not None:
        raise UnspecificError(why)
    return shown_ratio(ratios, asked)


def run(args: argparse.Namespace) -> int:
    import sys

    from pipeline.analysis.metrics import Filters
    from pipeline.cli.common import console, open_store_from
    from pipeline.outputs.export import export_jsonl
    from pipeline.outputs.report import check_filters

    if args.suspicious:
        return _run_suspicious(args)
    if args.format != "jsonl":
        return _run_harness(args)
    store = open_store_from(args, create=False, reading=True)
    try:
        # A --run or --domain the store does not hold is a typo: exit 2 naming it and what is there,
        # never the "nothing to export" of a real but unfinished selection.
        check_filters(store, Filters(run=args.run, domain=args.domain))
        if args.out == "-":
            n = export_jsonl(store, sys.stdout, run=args.run, domain=args.domain, condition=args.condition,
                             with_references=args.with_references, include_unfinished=args.include_unfinished)
            return 0 if n else 1
        n = export_jsonl(store, args.out, run=args.run, domain=args.domain, condition=args.condition,
                         with_references=args.with_references, include_unfinished=args.include_unfinished)
    finally:
        store.close()
    out = console()
    if not n:
        out.print("Nothing to export: no finished instructions with active constraints match (check "
                  "--run / --condition; --all adds unfinished ones).")
        return 1
    out.print(f"wrote {n} instructions to [bold]{args.out}[/]")
    return 0


def _run_harness(args: argparse.Namespace) -> int:
    """A task folder of inspect_ai or lm-evaluation-harness (pipeline.outputs.harness_export)."""
    from pipeline.analysis.metrics import Filters
    from pipeline.cli.common import console, open_store_from
    from pipeline.core.definitions import DEFAULT_RATIO
    from pipeline.core.errors import UnspecificError
    from pipeline.outputs.harness_export import export_inspect, export_lm_eval
    from pipeline.outputs.report import check_filters
    from pipeline.stages.settings import DEFAULT_WORDS

    if args.out == "-":
        raise UnspecificError(f"--format {args.format} writes a folder: give --out DIR")
    words = DEFAULT_WORDS if args.words is None else args.words
    if words < 20:
        raise UnspecificError(f"--words: at least 20, got {words}")
    filters = {"run": args.run, "domain": args.domain, "condition": args.condition,
               "include_unfinished": args.include_unfinished}
    store = open_store_from(args, create=False, reading=True)
    try:
        check_filters(store, Filters(run=args.run, domain=args.domain))
        try:
            if args.format == "inspect":
                done = export_inspect(store, args.out, words=words,
                                      ratio=DEFAULT_RATIO if args.ratio is None else args.ratio, **filters)
            else:
                done = export_lm_eval(store, args.out, words=words, **filters)
        except FileExistsError as exc:
            raise UnspecificError(str(exc)) from None
    finally:
        store.close()
    out = console()
    if not done.instructions:
        out.print("Nothing to export: no finished instructions with active constraints match (check "
                  "--run / --condition; --all adds unfinished ones).")
        return 1
    out.print(f"wrote {done.instructions} instructions as an {args.format} task to [bold]{done.folder}[/] "
              f"({', '.join(done.files)})", soft_wrap=True)
    if args.format == "inspect":
        out.print(f"run it: inspect eval {done.folder}/task.py --model MODEL --model-role grader=JUDGE",
                  markup=False, soft_wrap=True)
    return 0
