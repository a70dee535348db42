"""The report: condition x model tables per domain, agreement, comparisons, naturalness, charts.

``build_report`` gathers everything from the store (pipeline.analysis.report_model, which computes
every number; importable from here as before); ``render`` prints it with rich; ``write_outputs``
writes CSV, JSON and PNG charts into a folder:

  summary.csv / .json          one row per (domain, condition, model, mode, ratio); ratio empty =
                               Org over every judged response; intervals as *_low / *_high; beside
                               each rate its ``*_corrected`` for the judges' measured error
                               (pipeline.analysis.correction), ``corrected_by`` (each judge's
                               validation) or ``uncorrected_reason`` (e.g. "unvalidated: ...")
  per_instruction.csv / .json  one row per response and ratio (the bootstrap's units); ``judges_validation``:
                               its judges' validation, or "unvalidated: ..." with the command
  agreement.csv                Cohen's kappa and percent agreement per pair of judges
  comparisons.csv              paired tests: every pair of models within a condition, every pair
                               of conditions within a model, direct vs edit mode, at the report
                               ratio (org, core, superficial, gap = org - core); p_value per test
                               and p_holm adjusted over all of them
  naturalness.csv              win rates of each condition's constraint sets (if judged)
  families.csv                 instruction families (CS4's levels of specificity): Org and Core per
                               (import run, number of constraints, model, mode), if any; with
                               ``judges_validation`` as per_instruction
  validation.json              human labels: annotator kappa, the metric's precision/recall
  report.json                  all of the above together, with the filters used, and ``judge_error``:
                               each judge's sensitivity and specificity and where they come from,
                               and ``judges_validation`` (as per_instruction)
  org_core_<domain>.png        Org and Core bars with 95% whiskers per condition x model
  depth_<domain>.png           Core across summary ratios, one line per model (Org at 1.0)

Every group carries its coverage (verdicts given / expected; missing verdicts are left out of
the rates, pipeline.analysis.coverage). ``warnings`` (on screen, in report.json and as ``warning`` in
summary.csv) name the figures not to trust: a group under the minimum coverage.

Rates are shares in [0, 1] in the files and percentages on screen.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.analysis.judge_validation import describe as describe_judge
from pipeline.analysis.judge_validation import validated_score
from pipeline.analysis.metrics import Comparison, Filters, Group, runs_covered
from pipeline.analysis.report_model import (
    CONSTANT_JUDGE_MIN,
    SHARE_SLACK,
    Report,
    ReportOptions,
    ReportWarning,
    all_comparisons,
    any_corrected,
    build_report,
    check_filters,
    ci,
    condition_order,
    corrected_group,
    main_groups,
    pct,
    ranking_changes,
    report_warnings,
    validation_mark,
)
from pipeline.core.definitions import SIGNIFICANCE, same_ratio
from pipeline.outputs.copy_report import copying_chart, copying_rows, render_copying

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

# The report's model (pipeline.analysis.report_model), importable from here as before, and the drawing.
__all__ = [
    "CONSTANT_JUDGE_MIN", "SHARE_SLACK", "Report", "ReportOptions", "ReportWarning", "all_comparisons",
    "any_corrected", "build_report", "charts", "check_filters", "condition_order", "corrected_group",
    "empty_message", "main_groups", "ranking_changes", "render", "report_warnings", "validation_caption",
    "validation_mark", "write_outputs", "write_tables", "writer_label",
]


def writer_label(model: str, mode: str, modes: set[str]) -> str:
    """The model and its response mode, always: a table of direct responses says so too."""
    return f"{model}/{mode}" if mode else model


def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


# -- the terminal ---------------------------------------------------------------------------------


def render(report: Report, console: Console) -> None:
    from rich.table import Table

    m = report.metrics
    if report.empty:
        console.print(empty_message(report.options.filters))
        return
    ratio = report.ratio
    if ratio is not None and not same_ratio(ratio, report.options.ratio):
        console.print(f"[yellow]no summaries at ratio {report.options.ratio:g}; showing ratio {ratio:g}[/]")
    runs = runs_covered(m)
    if runs:
        console.print(f"runs: {', '.join(runs)} [dim](each pair of references counts once per condition, model"
                      " and mode: see README, 'Counting')[/]")
    groups = main_groups(report)
    modes = {g.mode for g in groups}
    extra_names = sorted({name for g in groups for name in g.extra})
    core_label = f"Core@{ratio:g}" if ratio is not None else "Core"
    show_corrected = any_corrected(report)
    for domain in sorted({g.domain for g in groups}):
        table = Table(title=f"{domain}: Org and Core (% of constraints, bootstrap 95% CI over instructions)",
                      title_justify="left", caption=_validation_caption(report), caption_justify="left")
        table.add_column("condition", no_wrap=True)
        table.add_column("model", no_wrap=True)
        for col in ("Org", core_label, "superficial"):
            table.add_column(col, justify="right", no_wrap=True)
            if show_corrected:
                table.add_column(f"{col} corr.", justify="right", no_wrap=True)
        for col in ("judge κ", "n", "coverage %"):
            table.add_column(col, justify="right")
        if "copy_a_ngrams" in extra_names:
            table.add_column("copied 5-grams A/B", justify="right")
            table.add_column("copied words A/B %", justify="right")
        if "sim_ref_a" in extra_names:
            table.add_column("c-ref cos A/B", justify="right")
            table.add_column("c-ref lex A/B", justify="right")
            table.add_column("c-resp cos", justify="right")
        # A narrow terminal gets each interval on its own line rather than squeezed columns.
        sep = "\n" if console.width < 100 + 30 * bool(extra_names) + 60 * show_corrected else " "
        for g in (g for g in groups if g.domain == domain):
            row = [g.condition, writer_label(g.model, g.mode, modes)]
            rates = [ci(g.org, sep), ci(g.core, sep), ci(g.superficial, sep)]
            if show_corrected:  # raw and corrected side by side
                rates = [cell for pair in zip(rates, _corrected_cells(report, g, sep)) for cell in pair]
            row += [*rates, _num(g.kappa), str(g.n), _coverage_cell(g, report)]
            e = g.extra
            if "copy_a_ngrams" in extra_names:
                row.append(f"{_num(e.get('copy_a_ngrams'), 1)} / {_num(e.get('copy_b_ngrams'), 1)}")
                row.append(f"{pct(e.get('copy_a_share', math.nan))} / {pct(e.get('copy_b_share', math.nan))}")
            if "sim_ref_a" in extra_names:
                row.append(f"{_num(e.get('sim_ref_a'))} / {_num(e.get('sim_ref_b'))}")
                row.append(f"{pct(e.get('lex_ref_a', math.nan))} / {pct(e.get('lex_ref_b', math.nan))}")
                row.append(_num(e.get("sim_response")))
            table.add_row(*row)
        console.print(table)
    _render_warnings(report, console)
    render_copying(report.copying, console, lambda model, mode: writer_label(model, mode, modes))
    _render_families(report, console)
    if len(m.ratios) > 1:
        _render_depth(report, console)
    if m.agreement:
        table = Table("judge", "judge", "texts", "κ", "agree %", "items", title="Judge agreement", title_justify="left")
        for a in m.agreement:
            table.add_row(a.rater_a, a.rater_b, a.kind, _num(a.kappa), pct(a.percent), str(a.n))
        console.print(table)
    elif len(m.raters) == 1:
        console.print(f"one judge ({m.raters[0]}): no judge agreement to report; the paper averages two")
    if report.judging:
        console.print("How each judge judged:")
        for note in report.judging:
            console.print(f"  {note.line()}", markup=False, highlight=False)
    if m.raters:
        console.print("Judges against people (every number above rests on them):")
        for rater in m.raters:
            console.print(f"  {describe_judge(rater, report.judges_validated)}", markup=False, highlight=False)
    if report.correction is not None and report.correction.judges:
        console.print("Judges' measured error (the corrected rates, 'corr.', use it):")
        for status in report.correction.judges:
            console.print(f"  {status.line()}", markup=False, highlight=False)
    tested = [c for c in report.comparisons if not math.isnan(c.test.p_value)]
    if tested:
        significant = [c for c in tested if c.p_holm < SIGNIFICANCE]
        console.print(f"{len(significant)} of {len(tested)} paired comparisons (model pairs within a condition, "
                      f"condition pairs within a model, response modes) differ at p < {SIGNIFICANCE:g} after Holm"
                      " correction"
                      + (":" if significant and len(significant) <= 12 else "; see comparisons.csv"))
        if significant and len(significant) <= 12:
            for c in significant:
                console.print(f"  {c.domain} {c.within}: {c.metric} {c.a} {pct(c.test.mean_a)} vs {c.b} "
                              f"{pct(c.test.mean_b)} ({100 * c.test.diff:+.1f} points, p_holm {c.p_holm:.3f})")
    if report.requested:
        _render_comparisons(report.requested, console)
    elif report.options.compare:
        first, second = report.options.compare
        console.print(f"[yellow]--compare {first},{second}: no instructions where both were judged[/]")
    if report.naturalness:
        table = Table("condition", "vs", "n", "win rate % [CI]", "W/T/L", "first shown wins % [CI]",
                      "orders agree % [CI]", "pairs",
                      title="Naturalness (pairwise preference in both orders; ties count half)", title_justify="left")
        for w in report.naturalness:
            table.add_row(w.condition, w.opponent, str(w.n), ci(w.rate), f"{w.wins}/{w.ties}/{w.losses}",
                          ci(w.first_shown), ci(w.order_agreement), str(w.both_orders))
        console.print(table)
    if report.validation is not None:
        v = report.validation
        where = f"plan {v.plan.name}, " if v.plan else ""
        console.print(
            f"Human validation ({where}ratio {v.ratio:g}; label superficial = positive, weighted by stratum as"
            f" `validate report`; ambiguous left out: {v.ambiguous}; ties: {v.ties}; outside the metric's scope:"
            f" {v.out_of_scope}): precision {ci(v.precision)}, recall {ci(v.recall)} (%), n = {v.n}"
        )
        for pair in report.annotators:
            console.print(f"  annotators {pair.annotator_a} / {pair.annotator_b}: κ {_num(pair.kappa.value)}, "
                          f"agree {pct(pair.percent)}%, n = {pair.kappa.n}")


def _corrected_cells(report: Report, g: Group, sep: str) -> list[str]:
    """Org, Core and superficial of the group corrected for its judges' error ('-' where none)."""
    r = corrected_group(report, g.key).rates
    if r is None:
        return ["-", "-", "-"]
    return [ci(r.org, sep), ci(r.core, sep), ci(r.superficial, sep)]


def validation_caption(report: Report) -> tuple[str, bool]:
    """Under each table: which validation corrected the rates, or why they are raw (and the one
    command that validates an unvalidated judge); True when the rates are raw."""
    c = report.correction
    if c is None or not c.judges:
        return "", False
    reasons = {g.reason for g in c.groups.values() if g.reason}
    if reasons:
        return "raw rates, not corrected for the judges' error: " + "; ".join(sorted(reasons)), True
    sources = {"people": "people", "own": "own check set", "builtin": "built-in check"}
    used = "; ".join(f"{s.judge}: {sources.get(s.check.source, s.check.source) if s.check else 'built-in check'}"
                     for s in c.judges)
    return ("corr.: corrected for each judge's measured sensitivity and specificity (Rogan-Gladen, judge by judge; "
            f"95% CI over the instructions and the check's items); validation used: {used}"
            + ("; the built-in check is constructed, not human gold" if "built-in" in used else "")), False


def _validation_caption(report: Report) -> Text:
    from rich.text import Text

    text, raw = validation_caption(report)
    return Text(text, style="yellow" if raw else "")


def _coverage_cell(g: Group, report: Report) -> str:
    """The group's coverage; '!' marks a group the warnings name."""
    mark = " [bold red]![/]" if report.warned(g) else ""
    return f"{pct(g.coverage)}{mark}"


def _render_warnings(report: Report, console: Console) -> None:
    from rich.text import Text

    if not report.warnings:
        return
    console.print(Text(f"! {len(report.warnings)} warning(s): figures not to trust as they stand", style="bold red"))
    for w in report.warnings:
        console.print(Text(f"  ! {w.message}"))


def _render_depth(report: Report, console: Console) -> None:
    from rich.table import Table

    m = report.metrics
    ratios = sorted(m.ratios, reverse=True)
    table = Table("domain", "condition", "model", "Org", *[f"Core@{r:g}" for r in ratios],
                  title="Depth profile: Core across summary ratios (%)", title_justify="left")
    keys = sorted({g.key[:4] for g in m.groups if g.ratio is not None}, key=lambda k: (k[0], condition_order(k[1]), k[2], k[3]))
    modes = {k[3] for k in keys}
    for domain, condition, model, mode in keys:
        org = m.group(domain, condition, model, mode, None)
        cells = []
        for r in ratios:
            g = m.group(domain, condition, model, mode, r)
            cells.append(pct(g.core.value) if g else "-")
        table.add_row(domain, condition, writer_label(model, mode, modes), pct(org.org.value) if org else "-", *cells)
    console.print(table)
    changed = ranking_changes(m)
    if changed:
        console.print("[bold]model ranking by Core changes with the ratio[/] in: " + "; ".join(changed))
    else:
        console.print("model ranking by Core is the same at every ratio")


def _render_comparisons(comparisons: list[Comparison], console: Console) -> None:
    from rich.table import Table

    first = comparisons[0]
    table = Table("domain", "within", "metric", first.a, first.b, "difference [95% CI]", "p", "p Holm",
                  title=f"{first.a} vs {first.b} (paired by {'reference article' if first.by == 'condition' else 'instruction'};"
                        " sign-flip permutation test)", title_justify="left")
    for c in comparisons:
        t = c.test
        diff = "-" if math.isnan(t.diff) else f"{100 * t.diff:+.1f} [{pct(t.low)}, {pct(t.high)}]"
        p = "-" if math.isnan(t.p_value) else (f"{t.p_value:.3f}" + (" *" if t.significant() else ""))
        holm_p = "-" if math.isnan(c.p_holm) else (f"{c.p_holm:.3f}" + (" *" if c.p_holm < SIGNIFICANCE else ""))
        table.add_row(c.domain, c.within, c.metric, pct(t.mean_a), pct(t.mean_b), diff, p, holm_p)
    console.print(table)
    console.print(f"* p < {SIGNIFICANCE:g}; p Holm corrects for every comparison the report made (see comparisons.csv)")


def empty_message(filters: Filters) -> str:
    active = {k: v for k, v in vars(filters).items() if v}
    where = f" matching {active}" if active else ""
    return (f"Nothing to report: no judged responses{where} in this store. Run `unspecific build` and "
            "`unspecific evaluate` first (or check --run / --domain).")


# -- files ----------------------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    """JSON-safe: NaN becomes null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        # Scalars inline: per-instruction files hold millions of values.
        return {k: (v if math.isfinite(v) else None) if isinstance(v, float)
                else _clean(v) if isinstance(v, (dict, list, tuple)) else v for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """``rows`` already _clean: the csv module writes None (and a missing column) as ''."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        writer.writerows([row.get(k) for k in columns] for row in rows)


def _write_json(path: Path, data: Any, *, indent: int | None = 2, clean: bool = True) -> None:
    path.write_text(json.dumps(_clean(data) if clean else data, indent=indent, allow_nan=False) + "\n",
                    encoding="utf-8")


def write_outputs(report: Report, out_dir: str | Path) -> list[Path]:
    """Write the tables, per-instruction rows and charts; return the files written."""
    written = write_tables(report, out_dir)
    if not report.metrics.empty:
        written += charts(report, Path(out_dir))
    written += copying_chart(report.copying, Path(out_dir))
    return written


def write_tables(report: Report, out_dir: str | Path) -> list[Path]:
    """The CSV and JSON files of write_outputs."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    m = report.metrics
    written: list[Path] = []

    def emit(name: str, rows: list[dict[str, Any]]) -> None:
        _write_csv(out / f"{name}.csv", _clean(rows))
        written.append(out / f"{name}.csv")

    summary = [{**g.as_dict(), **_corrected_columns(report, g),
                "warning": "; ".join(w.kind for w in report.warned(g)) or None} for g in m.groups]
    # Each row's raw figures name the validation they rest on (or "unvalidated: ..." and the command).
    rows = _clean([{**r.as_dict(), "judges_validation": validation_mark(report, (r.domain, r.condition, r.model, r.mode,
                                                                          r.ratio))} for r in m.rows])
    emit("summary", summary)
    _write_json(out / "summary.json", summary)
    written.append(out / "summary.json")
    _write_csv(out / "per_instruction.csv", rows)
    written.append(out / "per_instruction.csv")
    _write_json(out / "per_instruction.json", rows, indent=None, clean=False)  # can be 10^5 rows: compact
    written.append(out / "per_instruction.json")
    emit("agreement", [a.as_dict() for a in m.agreement])
    emit("comparisons", [c.as_dict() for c in report.comparisons])
    if report.naturalness:
        emit("naturalness", [w.as_dict() for w in report.naturalness])
    copying, copy_tests = copying_rows(report.copying)
    if copying:
        emit("copying", copying)
        emit("copy_tests", copy_tests)
    if report.families:
        mark = validation_mark(report)
        emit("families", [{**f.as_dict(), "judges_validation": mark} for f in report.families])
    validation = None
    if report.validation is not None:
        validation = {"metric": report.validation.as_dict(), "annotators": [a.as_dict() for a in report.annotators]}
        _write_json(out / "validation.json", validation)
        written.append(out / "validation.json")
    _write_json(out / "report.json", {
        "filters": vars(report.options.filters), "ratio": report.ratio, "raters": m.raters, "ratios": m.ratios,
        "runs": runs_covered(m),
        "summary": summary, "agreement": [a.as_dict() for a in m.agreement],
        "comparisons": [c.as_dict() for c in report.comparisons],
        "requested_comparison": [c.as_dict() for c in report.requested],
        "naturalness": [w.as_dict() for w in report.naturalness], "validation": validation,
        "families": [f.as_dict() for f in report.families], "copying": copying, "copy_tests": copy_tests,
        "judge_validation": {r: (score.as_dict() if (score := validated_score(r, report.judges_validated)) else None)
                             for r in m.raters},
        "judge_error": [s.as_dict() for s in report.correction.judges] if report.correction else [],
        "judges_validation": validation_mark(report),  # what every figure rests on (or "unvalidated: ...")
        "judging": [{"rater": n.rater, "judge": n.judge, "mode": n.mode, "threshold": n.threshold,
                     "calibrated_on": n.calibrated_on, "auc": n.auc} for n in report.judging],
        "ranking_changes_with_ratio": ranking_changes(m), "min_coverage": report.options.min_coverage,
        "warnings": [w.as_dict() for w in report.warnings],
    })
    written.append(out / "report.json")
    return written


def _corrected_columns(report: Report, g: Group) -> dict[str, Any]:
    """summary.csv's corrected rates beside the raw ones: ``*_corrected`` (with ``_low``/``_high``),
    ``corrected_by`` (each judge's validation) and ``uncorrected_reason`` ("unvalidated: ..." with the
    command that validates the judge, or a judge no better than chance)."""
    return corrected_group(report, g.key).as_dict()


def charts(report: Report, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = report.metrics
    written = []
    groups = main_groups(report)
    for domain in sorted({g.domain for g in groups}):
        mine = [g for g in groups if g.domain == domain]
        conditions = sorted({g.condition for g in mine}, key=condition_order)
        systems = sorted({(g.model, g.mode) for g in mine})
        modes = {mode for _, mode in systems}
        fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(conditions) * max(1, len(systems))), 4.2))
        width = 0.8 / (2 * len(systems))
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for s, (model, mode) in enumerate(systems):
            color = colors[s % len(colors)]
            for k, (metric, hatch, alpha) in enumerate((("org", "", 1.0), ("core", "//", 0.55))):
                xs, ys, err_lo, err_hi = [], [], [], []
                for c, condition in enumerate(conditions):
                    g = next((g for g in mine if g.condition == condition and (g.model, g.mode) == (model, mode)), None)
                    if g is None:
                        continue
                    iv = getattr(g, metric)
                    if math.isnan(iv.value):
                        continue
                    xs.append(c + (2 * s + k) * width - 0.4 + width / 2)
                    ys.append(100 * iv.value)
                    err_lo.append(0 if math.isnan(iv.low) else 100 * (iv.value - iv.low))
                    err_hi.append(0 if math.isnan(iv.high) else 100 * (iv.high - iv.value))
                label = f"{writer_label(model, mode, modes)} {'Org' if metric == 'org' else 'Core'}"
                ax.bar(xs, ys, width, yerr=[err_lo, err_hi], capsize=3, color=color, alpha=alpha, hatch=hatch,
                       edgecolor=color, label=label)
        ax.set_xticks(range(len(conditions)), conditions)
        ax.set_ylim(0, 105)
        ratio = report.ratio
        ax.set_ylabel("constraints satisfied (%)")
        ax.set_title(f"{domain}: Org vs Core{f'@{ratio:g}' if ratio is not None else ''} (95% bootstrap CI)")
        ax.legend(fontsize=8, ncol=2, loc="lower right")
        fig.tight_layout()
        path = out / f"org_core_{_slug(domain)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

        if m.ratios:
            conds = sorted({g.condition for g in m.groups if g.domain == domain and g.ratio is not None}, key=condition_order)
            fig, axes = plt.subplots(1, max(1, len(conds)), figsize=(3.6 * max(1, len(conds)), 3.6), squeeze=False,
                                     sharey=True)
            modes = {g.mode for g in m.groups if g.domain == domain}
            for ax, condition in zip(axes[0], conds):
                for model, mode in sorted({(g.model, g.mode) for g in m.groups if g.domain == domain
                                           and g.condition == condition}):
                    xs, ys, lo, hi = [], [], [], []
                    org = m.group(domain, condition, model, mode, None)
                    if org is not None:
                        xs.append(1.0)
                        ys.append(100 * org.org.value)
                        lo.append(0 if math.isnan(org.org.low) else 100 * (org.org.value - org.org.low))
                        hi.append(0 if math.isnan(org.org.high) else 100 * (org.org.high - org.org.value))
                    for r in sorted(m.ratios, reverse=True):
                        g = m.group(domain, condition, model, mode, r)
                        if g is None or math.isnan(g.core.value):
                            continue
                        xs.append(r)
                        ys.append(100 * g.core.value)
                        lo.append(0 if math.isnan(g.core.low) else 100 * (g.core.value - g.core.low))
                        hi.append(0 if math.isnan(g.core.high) else 100 * (g.core.high - g.core.value))
                    ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=writer_label(model, mode, modes))
                ax.set_title(condition)
                ax.set_xlabel("summary ratio (1.0 = full response)")
                ax.set_xlim(1.05, 0)
                ax.set_ylim(0, 105)
            axes[0][0].set_ylabel("constraints satisfied (%)")
            axes[0][-1].legend(fontsize=8)
            fig.suptitle(f"{domain}: depth profile (Core across summary ratios)")
            fig.tight_layout()
            path = out / f"depth_{_slug(domain)}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
    return written


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name) or "all"


# -- CS4's instruction families: satisfaction against the number of constraints --------------------


def _render_families(report: Report, console: Console) -> None:
    """Per import run with families: level x model, Org (and Core where summaries exist)."""
    from rich.table import Table

    for run_id in sorted({f.run_id for f in report.families}):
        rows = [f for f in report.families if f.run_id == run_id]
        modes = {f.mode for f in rows}
        writers = sorted({(f.model, f.mode) for f in rows})
        with_core = {(f.model, f.mode) for f in rows if f.ratio is not None}
        core_label = f"Core@{report.ratio:g}" if report.ratio is not None else "Core"
        table = Table(title=f"{run_id}: satisfaction by number of constraints (% of constraints, bootstrap 95% CI"
                            " over instructions; one family per task)", title_justify="left")
        table.add_column("constraints", justify="right")
        for model, mode in writers:
            label = writer_label(model, mode, modes)
            table.add_column(f"{label} Org", justify="right", no_wrap=True)
            if (model, mode) in with_core:
                table.add_column(f"{label} {core_label}", justify="right", no_wrap=True)
        table.add_column("n", justify="right")
        by_cell = {(f.level, f.model, f.mode): f for f in rows}
        for level in sorted({f.level for f in rows}):
            cells = [str(level)]
            n = 0
            for model, mode in writers:
                f = by_cell.get((level, model, mode))
                cells.append(ci(f.org) if f else "-")
                if (model, mode) in with_core:
                    cells.append(ci(f.core) if f else "-")
                n = max(n, f.n if f else 0)
            table.add_row(*cells, str(n))
        console.print(table)
