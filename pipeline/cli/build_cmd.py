"""`unspecific build`: instructions for the chosen conditions (single, none, direct, eval).

Shows a progress bar per stage and prints, per condition: instructions made, constraints
replaced (share), flags raised, calls, tokens, cost and cache hits. Killed or interrupted,
`unspecific build --run RUN_ID` resumes with the run's stored options, without repeating
stored work.
"""

from __future__ import annotations

import argparse

CONDITION_HELP = "comma-separated: single (one article, CS4 style), none (common, no revision), " \
    "direct (common, all hardened), eval (common, only what the base article satisfies replaced)"


def register(sub: argparse._SubParsersAction) -> None:
    from pipeline.cli.common import DRY_RUN_HELP, nonempty_csv, positive_int
    from pipeline.core.definitions import JUDGING_MODES

    p = sub.add_parser("build",
                       help="synthesize and revise instructions per condition (single, none, direct, eval)")
    p.add_argument("--domain", default=None, help="domain of the pairs to build on (default: news)")
    p.add_argument("--n", type=positive_int, default=None,
                   help="number of pairs, one instruction each per condition (default 25)")
    p.add_argument("--conditions", type=nonempty_csv, default=None, help=CONDITION_HELP
                   + " (default: all four)")
    p.add_argument("--constraints", type=positive_int, default=None, dest="n_constraints",
                   help="constraints per instruction (default 39, config [build] n_constraints)")
    p.add_argument("--words", type=positive_int, default=None,
                   help="base article length in words (default 500)")
    p.add_argument("--rule", choices=["paper", "research"], default=None,
                   help="which pairing rule's pairs to use (default paper)")
    named = p.add_mutually_exclusive_group()
    named.add_argument("--run", default=None, dest="run_id", metavar="NAME",
                       help="resume this build run with its stored options (an unknown NAME "
                            "lists the runs, exit 2)")
    named.add_argument("--new-run", default=None, dest="new_run", metavar="NAME",
                       help="start a new build run named NAME (again with the same options: "
                            "resume it); default: "
                       "the id of an identical build, so repeating a command resumes it")
    p.add_argument("--contradictions", action="store_true", default=None,
                   help="also ask the LLM which constraint pairs contradict each other")
    p.add_argument("--embedder", default=None,
                   help="embedding model for the specificity-leak flag (mpnet, minilm); default lexical only")
    p.add_argument("--judging-mode", choices=JUDGING_MODES, default=None, dest="judging_mode",
                   help="how the base article is judged (default: the base judge's own; yes_no "
                        "for the embedded model)")
    p.add_argument("--repair-rounds", type=positive_int, default=None, dest="repair_rounds",
                   help="rounds asking for the missing items of a short list (at most 10 a round) before the "
                        "instruction is recorded as failed (default 1; a 1.5B local model needs "
                        "up to 8 to reach 39)")
    p.add_argument("--no-gate", action="store_false", default=None, dest="gate",
                   help="keep the constraints as the model writes them: no check that each is atomic, "
                        "distinct, and (common conditions) unspecific and held by the judge on both "
                        "references ([build] gate = false)")
    p.add_argument("--allow-dissimilar", action="store_true", default=None, dest="allow_dissimilar",
                   help="build common constraints from pairs less similar than the floor ([pair] floor, "
                        "0.70 by default) too")
    p.add_argument("--batch", action="store_true",
                   help="send the calls nobody answered yet as provider batches (half price, up "
                        "to 24 h) instead of "
                   "online; run the same command again once `unspecific batch status` shows them done")
    p.add_argument("--dry-run", action="store_true", dest="dry_run", help=DRY_RUN_HELP)
    p.add_argument("--step", action="store_true",
                   help="run one stage at a time and show what it wrote before going on")
    p.add_argument("--max-units", type=positive_int, default=None,
                   help="stop after this many units of work (pairs / instructions)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from pipeline.cli.common import console, load_config_from, open_store_from
    from pipeline.stages.build import BuildOptions
    from pipeline.stages.runs import check_build_run

    config = load_config_from(args)
    store = open_store_from(args)
    run_id = args.run_id or getattr(args, "new_run", None)
    given = dict(
        domain=args.domain, n=args.n, conditions=args.conditions,
        n_constraints=args.n_constraints, words=args.words, rule=args.rule, run_id=run_id,
        contradictions=args.contradictions, embedder=args.embedder, judging_mode=args.judging_mode,
        repair_rounds=args.repair_rounds, gate=args.gate, allow_dissimilar=args.allow_dissimilar,
    )
    given = {k: v for k, v in given.items() if v is not None}
    try:
        # Resuming a run: its stored options, with what the command line gives on top.
        stored: dict = {}
        if run_id:
            check_build_run(store, run_id, new=args.run_id is None)
            stored = _stored_options(store, run_id)
            if args.run_id is None and stored:
                _check_same_build(run_id, stored, BuildOptions.from_config(config, **given))
        options = BuildOptions.from_config(config, **{**stored, **given})
    except BaseException:
        store.close()
        raise
    try:
        if getattr(args, "dry_run", False):
            return _dry_run(store, config, options, args, console())
        return asyncio.run(_build(store, config, options, args, console()))
    finally:
        store.close()


def _dry_run(store, config, options, args, out) -> int:  # noqa: ANN001 - CLI glue
    import asyncio

    from pipeline.cli.common import print_estimate
    from pipeline.stages.build import select_pairs
    from pipeline.stages.estimate import estimate_build, estimate_key, save_estimate

    select_pairs(store, options)  # nothing to build: the same error as the run
    est = asyncio.run(estimate_build(store, config, options, max_units=args.max_units))
    print_estimate(out, est)
    save_estimate(store, estimate_key("build", options), est)
    return 0


def _check_same_build(run_id: str, stored: dict, options) -> None:  # noqa: ANN001
    """`--new-run NAME` again with the same options resumes NAME (a killed command is repeated as it
    was); with other options it is a second run under a taken name: exit 2."""
    import dataclasses

    from pipeline.core.errors import StageError

    fresh = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(options).items()}
    differ = sorted(k for k, v in stored.items() if k != "run_id" and fresh.get(k) != v)
    if differ:
        raise StageError(f"--new-run {run_id}: a build run of that name exists with other options "
                         f"({', '.join(differ)});"
                         f" resume it with --run {run_id}, or name the new run otherwise")


def _stored_options(store, run_id: str) -> dict:  # noqa: ANN001
    import dataclasses

    from pipeline.stages.build import BuildOptions
    from pipeline.stages.runs import stored_options

    options = stored_options(store, run_id, "build")
    names = {f.name for f in dataclasses.fields(BuildOptions)}
    return {k: v for k, v in options.items() if k in names and v is not None}


async def _build(store, config, options, args, out) -> int:  # noqa: ANN001 - CLI glue
    import sys

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
    from rich.prompt import Confirm

    from pipeline.core.progress import ProgressEvent, StopFlag
    from pipeline.stages.build import STAGES, BuildSummary, run_build, select_pairs, start_build_run
    from pipeline.stages.estimate import estimate_key, spent_beside, take_estimate
    from pipeline.stages.runs import open_client, record_estimate
    from pipeline.stages.settings import section

    args.batch = args.batch or section(config, "build").batch  # the flag, or [build] batch = true
    pairs = select_pairs(store,
                         options)  # fail early, before any server starts, when there is nothing to build
    estimate = take_estimate(store, estimate_key("build", options))  # from a dry run of this command, if any
    options = start_build_run(store, config, options)
    out.print(f"build run [bold]{options.run_id}[/]: {options.domain}, {len(pairs)} pair(s) "
              f"({options.rule} rule), conditions "
              f"{','.join(options.conditions)}, {options.n_constraints} constraints, store {store.path}")
    if len(pairs) < options.n:
        out.print(f"[yellow]only {len(pairs)} of the {options.n} pairs asked for exist[/]; "
                  "`unspecific pair` makes more")
    stop = StopFlag()
    summaries: list[BuildSummary] = []

    def on_event(kind: str, detail: str) -> None:
        if kind in ("retry", "repair", "local", "batch", "drain"):
            out.print(f"[dim]{kind}: {detail}[/]")

    if args.batch:
        from pipeline.llm.batch import collect

        await collect(store, config, on_event=lambda m: on_event("batch", m))
    async with open_client(config, store, run_id=options.run_id, on_event=on_event,
                           endpoints=options.endpoints(config), batch=args.batch) as client:
        stages_to_run = [[s] for s in STAGES] if args.step else [list(STAGES)]
        for i, stages in enumerate(stages_to_run):
            with Progress(TextColumn("{task.description:<11}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(),
                          console=out, transient=False) as bars:
                tasks: dict[str, TaskID] = {}

                def progress(event: ProgressEvent) -> None:
                    if event.kind in ("error", "log"):
                        style = "red" if event.kind == "error" else "dim"
                        bars.console.print(f"[{style}]{event.message}[/]")
                        return
                    if event.stage not in tasks:
                        tasks[event.stage] = bars.add_task(event.stage, total=event.total or None)
                    bars.update(tasks[event.stage], completed=event.done, total=event.total or None)

                summary = await run_build(store, config, client, options, progress=progress, stop=stop,
                                          max_units=args.max_units, stages=stages)
            summaries.append(summary)
            if args.step:
                _print_stage(out, store, summary)
                last = i == len(stages_to_run) - 1
                if not last and not (sys.stdin.isatty()
                                     and Confirm.ask(f"continue with {STAGES[i + 1]}?", default=True)):
                    out.print(f"stopped after {stages[0]}; resume with --run {options.run_id}")
                    break
        if args.batch:
            from pipeline.llm.batch import submit_stage

            await client.aclose()  # writes the deferred calls, so they are sent now
            sent = await submit_stage(store, config, on_event)
            waiting = sum(s.deferred for summary in summaries for s in summary.stages)
            if waiting:
                out.print(f"[yellow]{waiting} unit(s) wait on a batch[/]: "
                          f"{sum(b.requests for b in sent):,} call(s) "
                          f"sent in {len(sent)} new batch(es). `unspecific batch status` "
                          "follows them; run the same command again when they are done.")
    final = summaries[-1]
    _print_report(out, final)
    if estimate is not None:  # recorded now: each stage run reopens the run and rewrites its config
        record_estimate(store, final.run_id, estimate)
        out.print(spent_beside(estimate, final.usage))
    failed = sum(r.failed for r in final.conditions)
    if not final.complete:
        out.print(f"[yellow]not finished[/]: resume with `unspecific build --run {final.run_id}`")
    return 1 if failed else 0


def _print_stage(out, store, summary) -> None:  # noqa: ANN001
    for s in summary.stages:
        out.print(f"stage [bold]{s.stage}[/]: {s.processed} unit(s) done, {s.failed} "
                  f"failed, {s.remaining} left")
        gate_stage = {"synthesize": "synthesis", "revise": "revision"}.get(s.stage)
        if gate_stage:
            _print_gate(out, store, summary.run_id, gate_stage)


def _print_gate(out, store, run_id: str, stage: str) -> None:  # noqa: ANN001
    """Step mode: what the constraint gate refused in this stage, each candidate with why."""
    from rich.markup import escape

    from pipeline.analysis.gate import Ledger
    from pipeline.store.ledgers import run_ledgers

    for iid, condition, kind, data in run_ledgers(store, run_id):
        if kind != stage or condition == "common":
            continue
        ledger = Ledger.from_json(data)
        out.print(f"  instruction {iid} ({condition}): gate {escape(ledger.line())}")
        for e in ledger.examples:
            out.print(f"    [dim]refused ({e['check']}):[/] {escape(e['text'])} "
                      f"[dim]- {escape(e['reason'])}[/]")


def _print_report(out, summary) -> None:  # noqa: ANN001
    from pipeline.llm.pricing import Usage
    from pipeline.outputs.tables import Block, Sheet, render_sheet

    # The prompt tokens the endpoints read from their own prompt cache: a column only when one said.
    cached = summary.usage.cached_reported > 0
    calls = ("calls", "tokens", *(("prompt tokens cached",) if cached else ()), "cost $", "cache hits")
    sheet = Sheet(f"build {summary.run_id}", ("condition",),
                  (Block("instructions", ("instructions", "failed", "replaced (share)", "flags raised")),
                   Block("calls", calls)))

    def spent(u: Usage) -> tuple[str, ...]:
        said = (f"{u.cached_prompt_tokens:,}" if u.cached_reported else "-",) if cached else ()
        tokens = f"{u.prompt_tokens + u.completion_tokens:,}"
        return (str(u.calls), tokens, *said, f"{u.cost:.4f}", str(u.cache_hits))

    for r in summary.conditions:
        if r.condition == "common":
            sheet.add("common (shared synthesis)", "-", "-", "-", "-", *spent(r.usage))
            continue
        replaced = (f"{r.replaced}/{r.constraints} ({r.replaced_share:.0%})"
                    if r.condition in ("direct", "eval") else "-")
        flags = ", ".join(f"{k} {v}" for k, v in sorted(r.flags.items())) or "none"
        made = f"{r.instructions}" + (f" (+{r.unfinished} unfinished)" if r.unfinished else "")
        raised = f"{sum(r.flags.values())}: {flags}"
        sheet.add(r.condition, made, str(r.failed), replaced, raised, *spent(r.usage))
    sheet.rule()
    sheet.add("total (this run)", "", "", "", "", *spent(summary.usage))
    render_sheet(out, sheet)
