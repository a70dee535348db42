"""`unspecific evaluate`: responses, summaries and verdicts; `--rejudge` re-scores stored texts.
`unspecific naturalness` (or `evaluate --naturalness`): pairwise preference between constraint sets.

Thin layers over pipeline.stages.evaluate and pipeline.stages.naturalness, with rich progress bars.
"""

from __future__ import annotations

import argparse
from typing import Any


def _common(p: argparse.ArgumentParser) -> None:
    from pipeline.cli.common import DRY_RUN_HELP, nonempty_csv, positive_int

    p.add_argument("--run", dest="build_run", default=None, metavar="BUILD_RUN",
                   help="only instructions of this build run (default: every finished instruction)")
    p.add_argument("--conditions", type=nonempty_csv, default=None, metavar="C1,C2",
                   help="only these conditions (single, none, direct, eval)")
    p.add_argument("--domain", default=None, help="only this domain")
    p.add_argument("--judges", type=nonempty_csv, default=None, metavar="J1,J2",
                   help="judge endpoints (default: the config's judges role)")
    p.add_argument("--max-units", type=positive_int, default=None, metavar="N",
                   help="stop after N units of work (step mode)")
    p.add_argument("--batch", action="store_true",
                   help="send the calls nobody answered yet as provider batches (half price, up "
                        "to 24 h) instead of "
                   "online; run the same command again once `unspecific batch status` shows them done")
    p.add_argument("--dry-run", action="store_true", dest="dry_run", help=DRY_RUN_HELP)


def register(sub: argparse._SubParsersAction) -> None:
    from pipeline.cli.common import nonempty_csv as parse_csv
    from pipeline.core.definitions import JUDGING_MODES

    p = sub.add_parser("evaluate", help="responses of the models under test, summaries, and judges' verdicts",
                       description="For each finished instruction and model under test: a "
                                   "response (direct or edit "
                       "mode), a summary at each ratio, and every judge's verdict on "
                       "every constraint, on the "
                       "response and on each summary. Stored work is skipped; run again to resume.")
    _common(p)
    p.add_argument("--models", type=parse_csv, default=None, metavar="A,B",
                   help="models under test (endpoint names; default: the config's models_under_test)")
    p.add_argument("--mode", choices=["direct", "edit"], default=None,
                   help="direct: write from the instruction; edit: revise the constraint-blind base article")
    p.add_argument("--ratios", type=_ratios, default=None, metavar="0.5,0.25,0.1",
                   help="summary ratios (default: [evaluate] ratios, else 0.25)")
    p.add_argument("--judging", choices=JUDGING_MODES, default=None,
                   help="for every judge (default: each judge's own; yes_no for the embedded "
                        "model): batched, all "
                   "constraints in one call; per_constraint, one call each; yes_no, one token "
                   "each, read from P(Yes)")
    p.add_argument("--words", dest="response_words", type=int, default=None,
                   help="response length asked for (default 500)")
    p.add_argument("--instructions", type=_ids, default=None, metavar="1,2",
                   help="only these instruction ids")
    p.add_argument("--rejudge", action="store_true",
                   help="judge stored responses and summaries only (a new judge or judge "
                        "prompt); no new texts")
    p.add_argument("--naturalness", action="store_true",
                   help="instead: pairwise naturalness of constraint sets (see `unspecific naturalness -h`)")
    p.add_argument("--human", default=None, metavar="FILE.jsonl",
                   help="with --naturalness: human-written sets")
    p.set_defaults(func=run)

    n = sub.add_parser("naturalness",
                       help="which constraint set reads more like a person's request (pairwise)",
                       description="For each reference article, each pair of constraint "
                                   "sets (conditions, and a "
                       "human-written set from --human) is judged for naturalness in both orders "
                       "(each set shown first "
                       "once). Prints win rates per condition pair, the judge's position "
                       "bias and the agreement between the two orders, with 95%% bootstrap intervals.")
    _common(n)
    n.add_argument("--human", default=None, metavar="FILE.jsonl",
                   help='human-written sets: {"article_id": N, "main_task": "...", '
                        '"constraints": [...]} per line')
    n.add_argument("--seed", type=int, default=0, help="seed of the bootstrap intervals (default 0)")
    n.add_argument("--show", action="store_true", help="only print the win rates of stored comparisons")
    n.set_defaults(func=run_naturalness)


def _ratios(value: str) -> list[float]:
    from pipeline.cli.common import parse_csv, ratio

    return [ratio(v) for v in parse_csv(value)]


def _ids(value: str) -> list[int]:
    from pipeline.cli.common import parse_csv, positive_int

    return [positive_int(v) for v in parse_csv(value)]


class _Bars:
    """ProgressEvents -> one rich progress bar per stage, errors and logs printed above."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress
        self.tasks: dict[str, Any] = {}

    def __call__(self, event: Any) -> None:
        if event.kind in ("error", "log") and event.message:
            style = "red" if event.kind == "error" else "dim"
            self.progress.console.print(f"[{style}]{event.stage}[/] {event.message}", markup=True,
                                        highlight=False)
        if event.kind == "log" and not event.total:
            return
        task = self.tasks.get(event.stage)
        if task is None:
            task = self.tasks[event.stage] = self.progress.add_task(event.stage, total=event.total or None)
        self.progress.update(task, completed=event.done, total=event.total or None)


def _progress():
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("[bold]{task.description:<12}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    transient=False)


def _on_event(console: Any):
    def hook(kind: str, detail: str) -> None:
        if kind in ("retry", "repair", "local", "batch", "drain"):
            console.print(f"[dim]{kind}: {detail}[/]", highlight=False)

    return hook


def run(args: argparse.Namespace) -> int:
    if args.naturalness:
        args.seed, args.show = 0, False
        return run_naturalness(args)
    import asyncio

    from pipeline.cli.common import console, load_config_from, open_store_from
    from pipeline.stages.evaluate import EvaluateOptions, JudgeStopped, evaluate
    from pipeline.stages.settings import section

    config = load_config_from(args)
    batch = args.batch or section(config, "evaluate").batch  # the flag, or [evaluate] batch = true
    options = EvaluateOptions(
        build_run=args.build_run, models=args.models, mode=args.mode, ratios=args.ratios, judges=args.judges,
        judging=args.judging, conditions=args.conditions, domain=args.domain,
        instruction_ids=args.instructions,
        rejudge=args.rejudge, response_words=args.response_words,
    )
    store = open_store_from(args)
    out = console()
    try:
        if args.dry_run:
            from pipeline.cli.common import print_estimate
            from pipeline.stages.estimate import estimate_evaluate, estimate_key, save_estimate

            est = asyncio.run(estimate_evaluate(store, config, options, max_units=args.max_units))
            print_estimate(out, est)
            save_estimate(store, estimate_key("evaluate", options), est)
            return 0
        from pipeline.stages.estimate import estimate_key, take_estimate

        estimate = take_estimate(store, estimate_key("evaluate", options))
        try:
            with _progress() as progress:
                result = asyncio.run(evaluate(store, config, options, progress=_Bars(progress),
                                              max_units=args.max_units, on_event=_on_event(progress.console),
                                              batch=batch))
        except JudgeStopped as stopped:
            # The other judges finished: what was done and its coverage, then the error (exit 2).
            if stopped.result is not None:
                _print_summary(out, store, stopped.result, estimate)
                _print_coverage(out, stopped.result, stopped.result.low_coverage(stopped.result.min_coverage))
            raise
        _print_summary(out, store, result, estimate)
        low = result.low_coverage(result.min_coverage)
        _print_coverage(out, result, low)
    finally:
        store.close()
    # Under the minimum coverage the rates rest on too few verdicts: a failure, not a success.
    return 1 if result.failed or low else 0


def _print_coverage(out: Any, result: Any, low: list[Any]) -> None:
    from rich.text import Text

    from pipeline.analysis.coverage import Coverage
    from pipeline.stages.evaluate import coverage_message

    if not result.coverage:
        return
    total = sum(result.coverage.values(), Coverage())
    out.print(f"judging coverage: {total.judged:,} of {total.expected:,} verdicts given "
              f"({100 * total.rate:.1f}%) over {len(result.coverage)} group(s)", highlight=False)
    if low:
        out.print(Text(coverage_message(low, result.min_coverage), style="red"))


def _print_summary(out: Any, store: Any, result: Any, estimate: Any = None) -> None:
    from pipeline.outputs.tables import Block, Sheet, render_sheet

    table = Sheet(f"evaluate run {result.run_id}", ("step",),
                  (Block("", ("to do", "done", "already stored", "failed")),))
    for name, s in result.stages.items():
        table.add(name, str(s.total), str(s.done), str(s.skipped), str(s.failed))
    render_sheet(out, table)
    from pipeline.stages.runs import run_usage

    run = run_usage(store, result.run_id)
    if run:
        paid = (f" (online ${run['cost'] - run['batch_cost']:.4f}, batch ${run['batch_cost']:.4f} for "
                f"{run['batch_calls']} calls)" if run["batch_calls"] else "")
        out.print(f"LLM calls {run['calls']}, cache hits {run['cache_hits']}, tokens "
                  f"{run['prompt_tokens']:,} in / "
                  f"{run['completion_tokens']:,} out, cost ${run['cost']:.4f}{paid}")
        if estimate is not None:
            from pipeline.stages.estimate import spent_beside
            from pipeline.stages.runs import record_estimate

            record_estimate(store, result.run_id, estimate)
            out.print(spent_beside(estimate, run))
    if result.deferred:
        sent = sum(b.requests for b in result.batches)
        out.print(f"[yellow]{result.deferred} unit(s) wait on a batch[/]: {sent:,} call(s) sent in "
                  f"{len(result.batches)} new batch(es). `unspecific batch status` follows them; "
                  "run the same command again when they are done.")
        waiting_failed = sum(s.waiting_failed for s in result.stages.values())
        if waiting_failed:
            out.print(f"{waiting_failed} of them wait on failed batch items: `unspecific "
                      "batch collect --failed rebatch|online`")
    if result.stopped:
        out.print("[yellow]stopped before the end[/]: run the same command again to continue")
    if result.failed:
        out.print(f"[red]{result.failed} unit(s) failed[/] (the rest is stored; run again to retry them):")
        for f in result.failures[:10]:
            out.print(f"  {f.stage}: {f.unit}: {f.error}", highlight=False, markup=False)
        if result.failed > 10:
            out.print(f"  ... and {result.failed - 10} more (see `runs.error` of run {result.run_id})")


def run_naturalness(args: argparse.Namespace) -> int:
    import asyncio

    from pipeline.analysis.metrics import Filters, naturalness_rates
    from pipeline.cli.common import console, load_config_from, open_store_from
    from pipeline.stages.naturalness import NaturalnessOptions

    config = load_config_from(args)
    options = NaturalnessOptions(build_run=args.build_run, conditions=args.conditions, domain=args.domain,
                                 judges=args.judges, human_file=args.human)
    store = open_store_from(args)
    out = console()
    failed = 0
    try:
        if args.dry_run and not args.show:
            from pipeline.cli.common import print_estimate
            from pipeline.stages.estimate import estimate_key, estimate_naturalness, save_estimate

            est = asyncio.run(estimate_naturalness(store, config, options, max_units=args.max_units))
            print_estimate(out, est)
            save_estimate(store, estimate_key("naturalness", options), est)
            return 0
        if not args.show:
            from pipeline.stages.settings import section

            batch = args.batch or section(config, "evaluate").batch
            summary = asyncio.run(_naturalness(store, config, options, args.max_units, out, batch=batch))
            failed = summary.failed
            if failed:
                out.print(f"[red]{failed} comparison(s) failed[/]; run again to retry them")
        _print_win_rates(out, naturalness_rates(store, Filters(run=args.build_run, domain=args.domain),
                                                seed=args.seed))
    finally:
        store.close()
    return 1 if failed else 0


async def _naturalness(store: Any, config: Any, options: Any, max_units: int | None, out: Any, *,
                       batch: bool = False) -> Any:
    from pipeline.llm.pricing import spent_line
    from pipeline.stages.estimate import estimate_key, spent_beside, take_estimate
    from pipeline.stages.naturalness import run_naturalness as run_stage
    from pipeline.stages.runs import create_run, open_client, record_estimate, recording

    judges = options.judges or [config.roles.naturalness_judge]
    estimate = take_estimate(store, estimate_key("naturalness", options))
    run_id = create_run(store, "naturalness", config,
                        options={k: v for k, v in options.__dict__.items() if v})
    if estimate is not None:
        record_estimate(store, run_id, estimate)
    with recording(store, run_id) as end:
        if batch:
            from pipeline.llm.batch import collect

            await collect(store, config, on_event=lambda m: _on_event(out)("batch", m))
        # The comparisons add their usage to the run as they finish (pipeline.stages.units).
        async with open_client(config, store, run_id=run_id, on_event=_on_event(out), endpoints=judges,
                               batch=batch) as client:
            with _progress() as progress:
                summary = await run_stage(store, config, client, options, progress=_Bars(progress),
                                          max_units=max_units)
        if batch:
            from pipeline.llm.batch import submit_stage

            sent = await submit_stage(store, config, _on_event(out))
            if summary.deferred:
                out.print(f"[yellow]{summary.deferred} comparison(s) wait on a batch[/]: "
                          f"{sum(b.requests for b in sent):,} call(s) sent; run the same command "
                          "again when they are done")
        end.status = "paused" if summary.stopped or summary.deferred else "done"
        u = client.usage
        out.print(spent_line(u))
        if estimate is not None:
            out.print(spent_beside(estimate, u))
        return summary


def _print_win_rates(out: Any, rates: list[Any]) -> None:
    from pipeline.outputs.tables import Block, Sheet, render_sheet

    if not rates:
        out.print("no naturalness comparisons stored yet")
        return
    sheet = Sheet("naturalness: how often a condition's constraints read more like a person's "
                  "request (a tie counts half)",
                  ("condition", "against"),
                  (Block("preference", ("win rate [95% CI]", "wins", "ties", "losses", "comparisons")),
                   Block("position", ("first shown won [CI]", "orders agree [CI]", "pairs"))))
    for r in rates:
        sheet.add(r.condition, r.opponent, r.rate.fmt(), str(r.wins), str(r.ties), str(r.losses), str(r.n),
                  r.first_shown.fmt(), r.order_agreement.fmt(), str(r.both_orders))
    render_sheet(out, sheet)
    out.print("[dim]first shown won: share of decided comparisons won by the set the judge "
              "saw first (50% = no "
              "position bias; each pair is judged in both orders, so the bias cancels in the win rates). "
              "orders agree: share of pairs whose two orders name the same winner (low = position, not "
              "preference, decides).[/]")
