"""`unspecific demo`: a small real benchmark, built offline with the embedded model, depth-first.

By default the app opens at once and the demo runs inside its Build screen (as a child process
of the app, so quitting is instant and loses nothing). `--no-app` runs the same demo in the
terminal with progress bars and prints the report. The demo imports the first BBC News
articles, pairs them with all-MiniLM-L6-v2 (similar pairs: cosine in [0.70, 0.85)), then takes one
pair at a time through synthesis, base article, revision, response, 25% summary and judging
(pipeline/stages/demo.py). Every step
resumes: running the demo again pays only for what is missing.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from pipeline.cli.common import positive_int

    p = sub.add_parser("demo", help="build a small real benchmark with the embedded model, inside the app")
    p.add_argument("--pairs", type=positive_int, default=2, help="pairs to build (default 2)")
    p.add_argument("--constraints", type=positive_int, default=39,
                   help="constraints per instruction (default 39)")
    p.add_argument("--articles", type=positive_int, default=150,
                   help="BBC News articles to import, in file order: the first topic is "
                        "business (default 150: enough for similar pairs)")
    p.add_argument("--embedder", default=None,
                   help="embedding model for pairing and the checks (default: MiniLM for the articles, "
                        "mpnet, the paper's, for the constraints)")
    p.add_argument("--no-app", action="store_true",
                   help="run in the terminal with progress bars, then print the report")
    p.add_argument("--no-check", action="store_true",
                   help="skip the quick built-in judge check at the end (42 items, about a "
                        "minute; it calibrates the "
                   "judge and gives the report corrected rates)")
    # The app runs the demo as `demo --no-app --events` and reads one JSON object a line.
    p.add_argument("--events", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def demo_options(args: argparse.Namespace):  # noqa: ANN201 - DemoOptions, imported lazily
    from pipeline.stages.demo import DemoOptions

    return DemoOptions(pairs=args.pairs, constraints=args.constraints, articles=args.articles,
                       embedder=args.embedder,
                       judge_check=not getattr(args, "no_check", False))


def child_argv(args: argparse.Namespace) -> list[str]:
    """The command the app runs for the demo: the same options, headless, events on stdout."""
    argv = [sys.executable, "-m", "pipeline.cli"]
    if args.store:
        argv += ["--store", args.store]
    if args.config:
        argv += ["--config", args.config]
    argv += ["demo", "--no-app", "--events", "--pairs", str(args.pairs), "--constraints",
             str(args.constraints),
             "--articles", str(args.articles)]
    if args.embedder:
        argv += ["--embedder", args.embedder]
    if getattr(args, "no_check", False):
        argv.append("--no-check")
    return argv


def run(args: argparse.Namespace) -> int:
    from pipeline.cli import store_path

    if not args.no_app:
        return _in_app(args, store_path(args))
    from pipeline.cli.common import claim_writer_from

    claim_writer_from(args, store_path(args))  # the demo writes: the store's one writer until it ends
    if args.events:
        return _headless(args, store_path(args), _json_events())
    return _in_terminal(args, store_path(args))


def _in_app(args: argparse.Namespace, path: str) -> int:
    from pipeline.cli.common import command_line
    from pipeline.store.database import open_store

    # Create the store (and its schema) before the app opens it; refused at once, before the app
    # opens, while another command writes it (the demo's child would be).
    open_store(path, writer=command_line(args)).close()
    from unspecific_tui.app import UnspecificApp

    UnspecificApp(path, config_path=args.config, run_id=demo_options(args).run_id,
                  demo_command=child_argv(args)).run()
    offer_judge_check(args)
    return 0


def judge_check_argv(args: argparse.Namespace) -> list[str]:
    """`unspecific validate judges --quick` on the demo's store and config."""
    return ((["--store", args.store] if args.store else [])
            + (["--config", args.config] if args.config else [])
            + ["validate", "judges", "--quick"])


def offer_judge_check(args: argparse.Namespace) -> bool:
    """When the demo's judges are still unvalidated (the demo ran with --no-check, or stopped before its
    check): offer the quick built-in check (asked on a terminal, else named). True when it ran."""
    from pipeline.analysis.judge_check import selected_texts
    from pipeline.cli import main
    from pipeline.cli.common import console

    if _judges_checked(args):
        return False
    texts = selected_texts(quick=True)
    out = console()
    out.print(f"[bold]The demo's judge is unvalidated.[/] The quick built-in check measures it on "
              f"{sum(len(t.entries) for t in texts)} constructed items in {len(texts)} calls "
              "(a few minutes on the embedded model):")
    out.print("  unspecific " + " ".join(judge_check_argv(args)), soft_wrap=True,
              highlight=False, markup=False)
    if not sys.stdin.isatty():
        return False
    try:
        answer = input("Run it now? [y/N] ").strip().lower()
    except EOFError:
        return False
    if answer not in ("y", "yes"):
        return False
    return main(judge_check_argv(args)) == 0


def _judges_checked(args: argparse.Namespace) -> bool:
    """Every configured judge has a built-in check stored in the demo's store."""
    from pathlib import Path

    from pipeline.cli import store_path
    from pipeline.cli.common import load_config_from, open_store_from
    from pipeline.store.judge_checks import all_checks

    if not Path(store_path(args)).exists():
        return False
    store = open_store_from(args, create=False, reading=True)
    try:
        checked = {c.judge for c in all_checks(store) if c.source == "builtin"}
    finally:
        store.close()
    return set(load_config_from(args).roles.judges) <= checked


def _json_events():  # noqa: ANN202 - (progress hook, auditable hook)
    def emit(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    def progress(event) -> None:  # noqa: ANN001 - ProgressEvent
        emit({"stage": event.stage, "done": event.done, "total": event.total, "message": event.message,
              "kind": event.kind})

    def auditable(instruction_id: int) -> None:
        emit({"auditable": instruction_id})

    return progress, auditable


def _headless(args: argparse.Namespace, path: str, hooks) -> int:  # noqa: ANN001
    from pipeline.cli.common import load_config_from
    from pipeline.core.processes import follow_parent, interrupt_on_signals
    from pipeline.core.progress import StopFlag
    from pipeline.stages.demo import run_demo_blocking

    progress, auditable = hooks
    stop = StopFlag()
    # The app stops its child with SIGTERM, a closed terminal sends SIGHUP: finish in order (runs
    # marked paused, server stopped), within seconds. The app's child also stops when the app dies.
    interrupt_on_signals()
    if args.events:
        follow_parent()
    result = run_demo_blocking(path, load_config_from(args), demo_options(args), progress=progress, stop=stop,
                               on_auditable=auditable)
    if args.events:
        sys.stdout.write(json.dumps({"finished": {
            "auditable": result.auditable, "failed": result.failed, "seconds": result.seconds,
            "first_auditable_s": result.first_auditable_s}}) + "\n")
        sys.stdout.flush()
    return 1 if result.failed else 0


def _in_terminal(args: argparse.Namespace, path: str) -> int:
    import time

    from pipeline.cli import main
    from pipeline.cli.common import console
    from pipeline.cli.corpus_cmd import rich_progress

    out = console()
    started = time.monotonic()

    def auditable(instruction_id: int) -> None:
        minutes = (time.monotonic() - started) / 60
        out.print(f"[green]instruction #{instruction_id} is judged on its response and summary "
                  f"({minutes:.1f} min): `unspecific tui` opens it in the Audit screen[/]")

    with rich_progress(out) as hook:
        code = _headless(args, path, (hook, auditable))
    minutes = (time.monotonic() - started) / 60
    if code == 1:
        out.print(f"[yellow]demo built in {minutes:.1f} min; some units failed (recorded in the "
                  "store, shown in the app): `make demo` again retries them[/]")
    else:
        out.print(f"[green]demo built in {minutes:.1f} min[/]")
    asking = sys.stdin.isatty()
    if asking:
        offer_judge_check(args)  # asked before the report, so the report shows the check's result
    main((["--store", args.store] if args.store else []) + ["report"])
    if not asking:
        offer_judge_check(args)  # nobody to ask: the command, after the report
    return code
