"""`unspecific validate plan|report|export|import|disagreements`: the Core metric against people.

The library is pipeline.analysis.validation; this module parses and prints.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from typing import TYPE_CHECKING

from pipeline.core.definitions import DEFAULT_RATIO

if TYPE_CHECKING:
    from pipeline.analysis.judge_check import CheckScore
    from pipeline.analysis.stats import Interval
    from pipeline.analysis.validation import ValidationReport
    from pipeline.outputs.tables import Cell
    from pipeline.store.database import Store


def register(sub: argparse._SubParsersAction) -> None:
    from pipeline.cli.common import add_bootstrap_arguments, count, ratio
    from pipeline.core.definitions import JUDGING_MODES

    p = sub.add_parser(
        "validate",
        help="validate the Core metric against human labels (plan, report, export, import, disagreements)",
        description="The reviewers' protocol: `plan` draws and stores a seeded, stratified sample (flipped "
        "constraints per domain, plus constraints passed on both texts) that the Annotate screen and the "
        "sheets serve; `report` gives precision and recall of 'superficial' against the labels, the share "
        "labelled integrated among the flipped, pass/fail per criterion, kappa between annotators and the "
        "depth profile; `export` / `import` move labels through CSV sheets; `disagreements` lists items two "
        "annotators labelled differently (export them for an adjudicator with --out).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    plan = actions.add_parser("plan", help="draw and store the sample to label")
    plan.add_argument("--name", default="default", help="plan name (default: default)")
    plan.add_argument("--ratio", type=ratio, default=DEFAULT_RATIO,
                      help=f"summary ratio of the metric's call (default {DEFAULT_RATIO})")
    plan.add_argument("--per-domain", type=count, default=50,
                      help="flipped constraints per domain (default 50)")
    plan.add_argument("--passed", type=count, default=50,
                      help="constraints passed on both texts (default 50)")
    plan.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    plan.add_argument("--run", help="only instructions of this build run")
    plan.add_argument("--domains", help="only these domains (comma-separated)")
    plan.add_argument("--replace", action="store_true",
                      help="draw a plan of this name again (labels are kept)")
    plan.set_defaults(func=run_plan)

    report = actions.add_parser("report", help="the metric against the labels of a plan")
    report.add_argument("--plan", help="plan name (default: the newest)")
    report.add_argument("--annotator", help="one annotator's labels (default: the consensus)")
    add_bootstrap_arguments(report)
    report.add_argument("--json", action="store_true", help="print JSON")
    report.set_defaults(func=run_report)

    export = actions.add_parser("export", help="write a plan as a CSV sheet to label (texts in, judges out)")
    export.add_argument("--out", required=True, metavar="FILE", help="CSV file ('-' for standard output)")
    export.add_argument("--plan", help="plan name (default: the newest)")
    export.add_argument("--annotator", default="",
                        help="fill the annotator column, and this person's labels so far")
    export.add_argument("--judges", action="store_true",
                        help="the judge plan instead: does this text satisfy this "
                             "constraint? (answer yes / no)")
    export.set_defaults(func=run_export)

    imp = actions.add_parser("import", help="read labelled sheets back (all rows checked first)")
    imp.add_argument("sheets", nargs="+", metavar="FILE",
                     help="CSV sheets written by `validate export` (label sheets and judge "
                          "sheets are told apart)")
    imp.add_argument("--annotator", help="the annotator of every row (default: each row's annotator column)")
    imp.add_argument("--plan", help="plan name (default: each row's plan column)")
    imp.set_defaults(func=run_import)

    dis = actions.add_parser("disagreements", help="items annotators labelled differently, for adjudication")
    dis.add_argument("--plan", help="plan name (default: the newest)")
    dis.add_argument("--out", metavar="FILE",
                     help="write them as a sheet for the adjudicator to label and import")
    dis.set_defaults(func=run_disagreements)

    jplan = actions.add_parser("judge-plan",
                               help="draw and store (constraint, text) items for people to answer "
                               "the judge's question on, blind to the judges (the app's "
                               "judge check: 5, then v)")
    jplan.add_argument("--name", default="judges", help="plan name (default: judges)")
    jplan.add_argument("--ratio", type=ratio, default=DEFAULT_RATIO,
                       help=f"summaries at this ratio (default {DEFAULT_RATIO})")
    jplan.add_argument("--by", choices=("verdict", "domain"), default="verdict",
                       help="verdict (default): a real-text check of one judge, stratified by text kind x "
                            "model x that judge's verdict (its Yes and its No both drawn, each stratum's "
                            "weight kept), which the report's corrected rates then use; domain: per domain "
                            "and text kind, unweighted")
    jplan.add_argument("--judge", help="with --by verdict: the judge whose verdicts stratify the draw "
                                       "(default: the first judge with verdicts)")
    jplan.add_argument("--per-stratum", type=count, default=25,
                       help="items per stratum; default 25")
    jplan.add_argument("--within", type=float, metavar="H",
                       help="instead of --per-stratum: enough items per stratum that its share of true Yes "
                            "is known within +-H (95%%), e.g. 0.1")
    jplan.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    jplan.add_argument("--run", help="only instructions of this build run")
    jplan.add_argument("--replace", action="store_true",
                       help="draw a plan of this name again (answers are kept)")
    jplan.set_defaults(func=run_judge_plan)

    judges = actions.add_parser("judges", help="each judge against people's answers: accuracy, precision and "
                                "recall of Yes, kappa, Yes bias; per domain, text kind, "
                                "list position, length")
    judges.add_argument("--plan", help="judge plan name (default: the newest)")
    add_bootstrap_arguments(judges)
    judges.add_argument("--json", action="store_true", help="print JSON")
    judges.add_argument("--builtin", action="store_true",
                        help="instead: run each configured judge on the shipped constructed "
                             "set (about 200 items, "
                        "news, story, blog; truth known by construction, not human gold), store and score it")
    judges.add_argument("--quick", action="store_true",
                        help="with --builtin (implies it): the quick subset, 42 items on 3 "
                             "texts (about a minute "
                        "for the embedded model)")
    judges.add_argument("--items", metavar="FILE.jsonl",
                        help="instead: run each configured judge on your own set, in the "
                             "shipped set's format (one "
                        "JSON object a line: id, text, items of constraint, truth, kind), store and score it")
    judges.add_argument("--judging", choices=JUDGING_MODES, default=None,
                        help="with --builtin or --items: check every judge in this mode "
                             "(default: each judge's own, "
                        "as the benchmark judges; [evaluate] judging when the config sets it)")
    judges.set_defaults(func=run_judges)


def run_plan(args: argparse.Namespace) -> int:
    from pipeline.analysis.validation_plan import draw_plan, save_plan
    from pipeline.cli.common import console, open_store_from, parse_csv

    store = open_store_from(args, create=False)
    try:
        plan = draw_plan(store, name=args.name, ratio=args.ratio, per_domain=args.per_domain,
                         passed=args.passed,
                         seed=args.seed, run=args.run, domains=parse_csv(args.domains)
                         if args.domains else None)
        plan = save_plan(store, plan, replace=args.replace)
    finally:
        store.close()
    out = console()
    out.print(f"plan [bold]{plan.name}[/]: {len(plan.items)} items at ratio {plan.ratio:g}, seed {plan.seed}")
    for s in plan.strata:
        short = "  (all there are)" if s.drawn == s.population and s.population < (
            args.passed if s.name == "passed" else args.per_domain) else ""
        out.print(f"  {s.name:<16} {s.drawn:>4} of {s.population}{short}")
    out.print("Label it in the app (5 Annotate) or with `unspecific validate export --out sheet.csv`.")
    return 0


def run_report(args: argparse.Namespace) -> int:
    import json

    from pipeline.analysis.validation import validation_report
    from pipeline.analysis.validation_plan import require_plan
    from pipeline.cli.common import open_store_from

    store = open_store_from(args, create=False, reading=True)
    try:
        report = validation_report(store, require_plan(store, args.plan), annotator=args.annotator,
                                   n_resamples=args.resamples, seed=args.seed)
    finally:
        store.close()
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, default=_nan_as_null))
        return 0
    _print_report(report)
    return 0


def _nan_as_null(value: object) -> object:
    return None if isinstance(value, float) and math.isnan(value) else value


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.1f}%"


def _print_report(report: ValidationReport) -> None:
    from pipeline.analysis.report_model import pct
    from pipeline.cli.common import console
    from pipeline.core.intervals import ci_parts
    from pipeline.outputs.tables import Block, Sheet, render_sheet

    out = console()
    plan = report.plan
    assert plan is not None  # `validate report` always scores a plan
    who = report.annotator or "consensus (adjudicator, else majority)"
    out.print(f"[bold]Validation of the Core metric[/], plan {plan.name} (ratio "
              f"{plan.ratio:g}, seed {plan.seed}), labels: {who}")
    out.print(f"items {report.items}, labelled {report.labelled}, ambiguous {report.ambiguous} (left out of"
              f" precision/recall), ties {report.ties}, outside the metric's call {report.out_of_scope}")
    if report.changed:
        out.print(f"[yellow]{report.changed} items' metric call changed since the plan was drawn (verdicts"
                  " changed); the report uses the current call[/]")
    out.print(f"in the sample: TP {report.tp}, FP {report.fp}, FN {report.fn}, TN {report.tn}")
    # Tables, not padded lines: a criterion's line with its verdict ran past 80 columns and wrapped.
    criteria = Sheet("The metric against the labels (%, bootstrap 95% CI; each stratum "
                     "weighted by its population)",
                     ("criterion",), (Block("", ("estimate", "bar", "verdict", "n")),),
                     caption="?: the interval straddles the bar, so the verdict may change with more labels")
    for c in report.criteria:
        if math.isnan(c.value.value):
            verdict = "FAIL (no labels)"
        else:
            verdict = ("PASS" if c.passed else "FAIL") + ("" if c.certain else "?")
        criteria.add(c.name, ci_parts(c.value),
                     f"{'>=' if c.at_least else '<='} {_pct(c.threshold)}", verdict,
                     str(c.value.n))
    if all(c.certain or math.isnan(c.value.value) for c in report.criteria):
        criteria.caption = ""
    render_sheet(out, criteria)
    if report.kappas:
        kappas = Sheet("Annotators' agreement (κ with its bootstrap 95% CI)", ("annotator", "annotator"),
                       (Block("", ("κ", "agree %", "items")),))
        for k in report.kappas:
            kappas.add(k.annotator_a, k.annotator_b, ci_parts(k.kappa, scale=1.0, digits=2), pct(k.percent),
                       str(k.kappa.n))
        render_sheet(out, kappas)
    else:
        out.print("κ needs two annotators on the same items")
    profile = Sheet("Depth profile: share labelled superficial among the labelled items "
                    "flipped at each ratio (%)",
                    ("ratio",), (Block("", ("superficial", "labelled", "flipped")),))
    for point in report.profile:
        profile.add(f"{point.ratio:g}", ci_parts(point.superficial), str(point.labelled), str(point.flipped))
    render_sheet(out, profile)


def run_export(args: argparse.Namespace) -> int:
    import sys

    from pipeline.analysis.judge_validation import JUDGE_SHEET_COLUMNS, judge_sheet_rows, load_judge_plan
    from pipeline.analysis.validation_plan import ValidationError, require_plan
    from pipeline.analysis.validation_sheets import sheet_rows, write_sheet
    from pipeline.cli.common import console, open_store_from

    store = open_store_from(args, create=False, reading=True)
    columns = None
    try:
        if args.judges:
            judge_plan = load_judge_plan(store, args.plan)
            if judge_plan is None:
                raise ValidationError("no judge plan yet: draw one with `unspecific validate judge-plan`")
            rows, columns = judge_sheet_rows(store, judge_plan, annotator=args.annotator), JUDGE_SHEET_COLUMNS
            plan_name = judge_plan.name
        else:
            plan = require_plan(store, args.plan)
            rows = sheet_rows(store, plan, annotator=args.annotator)
            plan_name = plan.name
    finally:
        store.close()
    if args.out == "-":
        write_sheet(rows, sys.stdout, columns=columns)
        return 0
    write_sheet(rows, args.out, columns=columns)
    console().print(f"wrote {len(rows)} items of {'judge ' if args.judges else ''}plan "
                    f"[bold]{plan_name}[/] to [bold]{args.out}[/]")
    return 0


def run_import(args: argparse.Namespace) -> int:
    import sys

    from pipeline.analysis.judge_validation import import_judge_sheets, is_judge_sheet, load_judge_plan
    from pipeline.analysis.validation_plan import ValidationError, load_plan, require_plan
    from pipeline.analysis.validation_sheets import disagreements, import_sheets
    from pipeline.cli.common import console, open_store_from

    judge_sheets = [path for path in args.sheets if is_judge_sheet(path)]
    label_sheets = [path for path in args.sheets if path not in judge_sheets]
    store = open_store_from(args, create=False)
    try:
        results = []
        if label_sheets:
            plan = require_plan(store, args.plan) if args.plan else None
            results.append(("labels",
                            import_sheets(store, label_sheets, annotator=args.annotator, plan=plan)))
        if judge_sheets:
            jplan = load_judge_plan(store, args.plan) if args.plan else None
            if args.plan and jplan is None:
                raise ValidationError(f"no judge plan {args.plan!r}")
            results.append(("answers", import_judge_sheets(store, judge_sheets, annotator=args.annotator,
                                                           plan=jplan)))
        errors = [e for _, r in results for e in r.errors]
        open_plan = None
        if label_sheets and not errors:
            open_plan = (require_plan(store, args.plan) if args.plan else None) or load_plan(store)
        split = disagreements(store, open_plan) if open_plan else []
    finally:
        store.close()
    out = console()
    if errors:
        for error in errors:
            print(error, file=sys.stderr)
        # Label sheets and judge sheets are imported apart: one kind's errors do not hold back the other.
        for what, result in results:
            print(f"{what}: {len(result.errors)} rows wrong, nothing saved; fix them and import again"
                  if result.errors
                  else f"{what}: saved {result.saved}", file=sys.stderr)
        return 2  # wrong rows in the user's sheets: a user error, like every other
    for what, result in results:
        out.print(f"saved {result.saved} {what} from {', '.join(sorted(result.annotators)) or 'nobody'}"
                  f" ({result.blank} rows without one skipped)")
    if split:
        out.print(f"{len(split)} items labelled differently by annotators: `unspecific "
                  "validate disagreements`")
    return 0


def run_disagreements(args: argparse.Namespace) -> int:
    from pipeline.analysis.validation_plan import require_plan
    from pipeline.analysis.validation_sheets import adjudication_rows, disagreements, write_sheet
    from pipeline.cli.common import console, open_store_from

    store = open_store_from(args, create=False, reading=True)
    try:
        plan = require_plan(store, args.plan)
        found = disagreements(store, plan)
        rows, extra = adjudication_rows(store, plan) if args.out else ([], [])
    finally:
        store.close()
    out = console()
    if not found:
        out.print(f"no disagreements in plan {plan.name}")
        return 0
    for d in found:
        labels = ", ".join(f"{who} {label}" for who, label in sorted(d.labels.items()))
        out.print(f"  item {d.item.position}: constraint {d.item.constraint_id} on response "
                  f"{d.item.response_id} ({d.item.domain}): {labels}", markup=False)
    if args.out:
        write_sheet(rows, args.out, extra)
        out.print(f"wrote {len(rows)} items for the adjudicator to [bold]{args.out}[/]; label them and"
                  " `unspecific validate import` the sheet (annotator: adjudicator, whose "
                  "label settles the item)")
    return 0


def run_judge_plan(args: argparse.Namespace) -> int:
    from pipeline.analysis.judge_validation import draw_judge_plan, items_for_width, save_judge_plan
    from pipeline.cli.common import console, open_store_from

    per_stratum = items_for_width(args.within) if args.within is not None else args.per_stratum
    store = open_store_from(args, create=False)
    try:
        judge = _plan_judge(store, args.judge) if args.by == "verdict" else None
        plan = draw_judge_plan(store, name=args.name, ratio=args.ratio, per_stratum=per_stratum,
                               seed=args.seed, run=args.run, judge=judge)
        save_judge_plan(store, plan, replace=args.replace)
    finally:
        store.close()
    out = console()
    from rich.markup import escape

    what = f"a real-text check of {escape(plan.judge or '')}, " if plan.weighted else ""
    out.print(f"judge plan [bold]{plan.name}[/]: {what}{len(plan.items)} items (summaries at ratio "
              f"{plan.ratio:g}), seed {plan.seed}")
    width = max((len(s) for s in plan.strata), default=20)
    for stratum, (population, drawn) in sorted(plan.strata.items()):
        out.print(f"  {escape(stratum):<{width}} {drawn:>4} of {population}")
    out.print(plan_advice(per_stratum, len(plan.items)))
    out.print("Answer them in the app: 5 Annotate, then v (the judges' verdicts show once you answer).")
    return 0


def plan_advice(per_stratum: int, n_items: int) -> str:
    """What labelling the plan buys: each stratum's share of true Yes within +-h (95%, worst case)."""
    if per_stratum <= 0:
        return ""
    half = 1.96 * math.sqrt(0.25 / per_stratum)
    return (f"Label all {n_items} items: each stratum's share of true Yes is then known within "
            f"+-{100 * half:.0f} points (95%, at worst); `--within H` draws the items a half-width H needs "
            f"(+-10 points: {_needed(0.1)} a stratum, +-5: {_needed(0.05)}).")


def _needed(h: float) -> int:
    from pipeline.analysis.judge_validation import items_for_width

    return items_for_width(h)


def _plan_judge(store: Store, name: str | None) -> tuple[str, str]:
    """The (judge, mode) a real-text check is stratified by: ``name`` ("judge" or "judge [mode]"), else
    the first with verdicts."""
    from pipeline.analysis.validation_plan import ValidationError
    from pipeline.store.validation import judge_raters

    raters = judge_raters(store)
    if not raters:
        raise ValidationError("nothing to sample: no judge has a verdict yet (run `unspecific evaluate`)")
    if name is None:
        return raters[0]
    found = [r for r in raters if name in (r[0], f"{r[0]} [{r[1]}]")]
    if not found:
        raise ValidationError(f"no verdicts by judge {name!r}; judges with verdicts: "
                              + ", ".join(f"{j} [{m}]" for j, m in raters))
    return found[0]


def run_judges(args: argparse.Namespace) -> int:
    import json

    if args.items and (args.builtin or args.quick):
        from pipeline.core.errors import UnspecificError

        raise UnspecificError("validate judges: --items runs your own set; --builtin / --quick the "
                              "shipped one: give one")
    if args.builtin or args.quick or args.items:
        return run_builtin_check(args)

    from pipeline.analysis.judge_validation import judge_scores, load_judge_plan
    from pipeline.analysis.validation_plan import ValidationError
    from pipeline.cli.common import console, open_store_from
    from pipeline.outputs.tables import Block, Sheet, render_sheet

    store = open_store_from(args, create=False, reading=True)
    try:
        plan = load_judge_plan(store, args.plan)
        if plan is None:
            raise ValidationError(f"no judge plan {args.plan!r}" if args.plan else
                                  "no judge plan yet: draw one with `unspecific validate judge-plan`")
        scores = judge_scores(store, plan, n_resamples=args.resamples, seed=args.seed)
    finally:
        store.close()
    if args.json:
        print(json.dumps([s.as_dict() for s in scores], indent=2, default=_nan_as_null))
        return 0
    out = console()
    if not any(s.n for s in scores):
        out.print(f"judge plan {plan.name}: no answers yet ({len(plan.items)} items); answer them in the app"
                  " (5 Annotate, then v)")
        return 0
    sheet = Sheet(f"The judges against people, judge plan {plan.name}", ("judge", "by", "group"),
                  (Block("agreement", ("n", "accuracy %", "κ")),
                   Block("Yes", ("Yes precision %", "Yes recall %",
                                                                             "Yes bias"))))
    for s in scores:
        sheet.add(s.judge, s.by, s.group, str(s.n), _cell(s.accuracy), _cell(s.kappa, 2, 1.0),
                  _cell(s.precision),
                  _cell(s.recall), "-" if math.isnan(s.yes_bias) else f"{s.yes_bias:+.2f}")
    render_sheet(out, sheet)
    out.print("Yes bias: the judge's Yes rate minus people's (> 0 lenient). Position: the "
              "constraint's third of its"
              " list; length: the text's half by words.")
    return 0


def run_builtin_check(args: argparse.Namespace) -> int:
    """`validate judges --builtin [--quick]` or `--items FILE`: each configured judge on a constructed set
    (the shipped one, or the user's own), judged as the benchmark judges (each judge's mode), stored per item
    (source builtin or own), scored, and each yes_no judge calibrated on it."""
    import asyncio
    import json

    from pipeline.analysis.judge_check import (
        OWN_SOURCE,
        SOURCE,
        check_scores,
        load_check_file,
        selected_texts,
    )
    from pipeline.cli.common import console, load_config_from, open_store_from
    from pipeline.core.errors import UnspecificError
    from pipeline.llm.pricing import spent_line
    from pipeline.stages.judge_check import CheckRun, run_judge_check
    from pipeline.stages.judging import judging_mode_of
    from pipeline.stages.runs import open_client
    from pipeline.stages.settings import section
    from pipeline.store.judge_checks import all_checks, calibrations

    config = load_config_from(args)
    judges = list(config.roles.judges)
    mode = args.judging or section(config, "evaluate").judging
    if args.items:
        from pipeline.analysis.judge_check import CheckFileError

        try:
            texts = load_check_file(args.items)
        except CheckFileError as exc:
            raise UnspecificError(str(exc)) from None
        source, what = OWN_SOURCE, f"judge check on {args.items}"
    else:
        texts, source = selected_texts(quick=args.quick), SOURCE
        what = f"built-in judge check{' (quick)' if args.quick else ''}"
    out = console()
    modes = {j: judging_mode_of(config, j, mode) for j in judges}
    if not args.json:
        out.print(f"{what}: {sum(len(t.entries) for t in texts)} items on {len(texts)} texts, judges "
                  + ", ".join(f"{j} ({m})" for j, m in modes.items()))
        overridden = [j for j, m in modes.items() if m != config.endpoint(j).judging and not args.judging]
        if overridden:
            out.print(f"[yellow]{config.path or 'the config'} [evaluate] judging = {mode!r} "
                      "overrides the own mode of "
                      + ", ".join(f"{j} ({config.endpoint(j).judging})" for j in overridden)
                      + "; remove it to judge each in its own (`unspecific init` no longer writes it)[/]")
    ran = CheckRun()

    async def check(store: Store) -> None:
        nonlocal ran
        async with open_client(config, store, endpoints=judges) as client:
            ran = await run_judge_check(store, client, judges, mode=mode, quick=args.quick,
                                        texts=texts, source=source)
            u = client.usage
            if not args.json:
                out.print(spent_line(u))

    store = open_store_from(args, create=False)
    try:
        asyncio.run(check(store))
        checks = [c for c in all_checks(store) if c.source == source and c.judge in judges]
        calibrated = calibrations(store)
    finally:
        store.close()
    wanted = {e.key for t in texts for e in t.entries}
    scores = []
    for c in checks:
        # The quick run reports on its own items, even when a full check of the judge is stored.
        scores += check_scores(replace(c, items=tuple(i for i in c.items if i.item_key in wanted)),
                               n_resamples=args.resamples, seed=args.seed, texts=texts)
    thresholds = {j: calibrated.get((j, m)) for j, m in modes.items()}
    if args.json:
        rows = []
        for s in scores:
            cal = thresholds.get(s.judge)
            row = {**s.as_dict(), "judging": modes.get(s.judge), "threshold": cal.threshold if cal else None,
                   "auc": cal.auc if cal else None, "held_out_accuracy": cal.held_out_accuracy
                   if cal else None}
            rows.append({k: _nan_as_null(v) for k, v in row.items()})  # NaN is not JSON
        print(json.dumps(rows, indent=2, default=_nan_as_null))
        return 0
    _print_check(scores, title="the built-in constructed set" if source == SOURCE else args.items)
    for judge, cal in thresholds.items():
        if cal is None:
            continue
        held = "-" if cal.held_out_accuracy is None else f"{100 * cal.held_out_accuracy:.1f}%"
        auc = "-" if cal.auc is None else f"{cal.auc:.3f}"
        changed = ran.rethresholded.get(judge, 0)
        out.print(f"[bold]{judge}[/] (yes_no) calibrated: its verdicts read Yes when P(Yes) >= "
                  f"{cal.threshold:.3f} (max "
                  f"sensitivity + specificity, on {cal.n} items of its {cal.source} check); AUC "
                  f"{auc}. The table reads "
                  f"each text at the threshold chosen on the other texts (accuracy {held}), so "
                  "the choice does not flatter it"
                  + (f"; {changed} stored benchmark verdicts read again at it" if changed else ""))
    return 0


def _print_check(scores: list[CheckScore], *, title: str = "the built-in constructed set") -> None:
    from pipeline.analysis.judge_check import NOT_GOLD
    from pipeline.cli.common import console
    from pipeline.outputs.tables import Block, Sheet, render_sheet

    out = console()
    missing = any(s.missing for s in scores)
    for judge in dict.fromkeys(s.judge for s in scores):
        sheet = Sheet(f"{judge} on {title} (%)", ("items",),
                      (Block("", ("n", *(["missing"] if missing else []), "accuracy",
                                  "sensitivity", "specificity",
                                  "κ", "quote")),))
        for s in (s for s in scores if s.judge == judge):
            group = "all" if s.by == "all" else s.group.replace("_", " ")
            sheet.add(group if s.by != "kind" else f"  {group}", str(s.n),
                      *([str(s.missing)] if missing else []),
                      _whole(s.accuracy), _whole(s.sensitivity), _whole(s.specificity),
                      "-" if math.isnan(s.kappa) else f"{s.kappa:.2f}", _whole(s.quote_found))
        render_sheet(out, sheet)
    out.print(f"[yellow]{NOT_GOLD}[/]")
    out.print("Sensitivity: of the items that satisfy their constraint, the share the judge said "
              "Yes to; specificity:"
              " of those that do not, the share it said No to; quote: of its Yes, the share whose "
              "quote is in the text."
              " [95% bootstrap intervals over items.] Rows: all, per domain, then per "
              "kind of item: direct and"
              " peripheral (one passing sentence) satisfy theirs; absent, changed fact, "
              "wrong role and off by one"
              " (planted near-misses) do not."
              + (" Missing: no verdict given, counted nowhere." if missing else ""),
              markup=False)


def _whole(iv: Interval) -> Cell:
    """('45', '[29, 60]'): whole percents, narrow enough for a terminal (a few hundred items carry no
    decimals)."""
    from pipeline.core.intervals import ci_parts

    return ci_parts(iv, digits=0)


def _cell(iv: Interval, digits: int = 1, scale: float = 100.0) -> Cell:
    """Interval.fmt as a table cell: the value, and its interval apart (pipeline.outputs.tables)."""
    from pipeline.core.intervals import ci_parts

    return ci_parts(iv, digits=digits, scale=scale)
