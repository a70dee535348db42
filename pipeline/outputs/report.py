"""The report: condition x model tables per domain, agreement, comparisons, naturalness, charts.

``build_report`` gathers everything from the store (pipeline.analysis.metrics); ``render`` prints it
with rich; ``write_outputs`` writes CSV, JSON and PNG charts into a folder:

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
from dataclasses import dataclass, field, replace
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from pipeline.analysis.calibration import JudgingNote, judging_notes
from pipeline.analysis.correction import CorrectedGroup, Correction, corrected_metrics
from pipeline.analysis.coverage import MIN_COVERAGE, describe
from pipeline.analysis.families import FamilyLevel, family_levels
from pipeline.analysis.judge_validation import JudgeScore, judge_scores, judge_validation_by_name, validated_score
from pipeline.analysis.judge_validation import describe as describe_judge
from pipeline.analysis.metrics import (
    CONDITION_ORDER,
    Comparison,
    Filters,
    Group,
    Metrics,
    WinRate,
    compare,
    compute_metrics,
    naturalness_rates,
    runs_covered,
)
from pipeline.analysis.stats import DEFAULT_RESAMPLES, holm
from pipeline.analysis.validation import AnnotatorKappa, ValidationReport, human_validation
from pipeline.core.definitions import DEFAULT_RATIO, same_ratio, shown_ratio
from pipeline.store.annotations import annotation_count
from pipeline.store.generations import model_has_responses
from pipeline.store.instructions import any_instruction_with, instruction_values
from pipeline.store.judge_checks import calibrations
from pipeline.store.verdicts import judge_has_verdicts

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from pipeline.analysis.embeddings import Embedder
    from pipeline.store.database import Store


@dataclass
class ReportOptions:
    filters: Filters = field(default_factory=Filters)
    ratio: float = DEFAULT_RATIO  # the summary ratio of the main table
    compare: tuple[str, str] | None = None  # two models or two conditions to test on screen
    copy: bool = True  # copied n-grams between responses and references
    n_resamples: int = DEFAULT_RESAMPLES
    seed: int = 0
    min_coverage: float = MIN_COVERAGE  # groups under it are marked


@dataclass(frozen=True)
class ReportWarning:
    """A figure of the report not to trust as it stands, and why."""

    kind: str  # low_coverage
    group: tuple[str, str, str, str, float | None] | None  # the group's key, when it is about one
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "group": describe(self.group) if self.group else None, "message": self.message}


# A judge with at least this many verdicts, all the same, is flagged: fewer can be chance.
CONSTANT_JUDGE_MIN = 20


def report_warnings(metrics: Metrics, options: ReportOptions) -> list[ReportWarning]:
    """What the report must say beside its figures: groups in the report's order, then judges.

    - low_coverage: fewer verdicts given than ``min_coverage`` of those expected;
    - core_above_org: Core above Org's 95% interval at a ratio; a summary cannot keep what its
      response lacks, so a lenient judge on short texts or a summary that is not one;
    - refusals: responses that refuse the task (the model's answer, scored as such);
    - one_instruction: a group of one instruction has no interval, and is no benchmark figure;
    - constant_judge: a judge whose every verdict is the same measures nothing."""
    out = []
    for g in metrics.groups:
        if g.expected_items and g.judged_items < options.min_coverage * g.expected_items:
            out.append(ReportWarning("low_coverage", g.key,
                               f"{describe(g.key)}: coverage {_pct(g.coverage)}% ({g.judged_items} of "
                               f"{g.expected_items} verdicts given, under {_pct(options.min_coverage, 0)}%); its rates "
                               "leave the missing verdicts out"))
        if g.ratio is not None and _above(g.core, g.org):
            out.append(ReportWarning("core_above_org", g.key,
                               f"{describe(g.key)}: Core {_ci(g.core)} is above Org {_ci(g.org)}, beyond Org's "
                               "interval; a summary cannot keep what its response lacks: suspect the judge (lenient "
                               "on short texts) or the summaries"))
        refused = g.extra.get("refusal", 0.0)
        if g.ratio is None and refused > 0:
            out.append(ReportWarning("refusals", g.key,
                               f"{describe(g.key)}: {_pct(refused)}% of the responses refuse the task (kept as the "
                               "model's answers and scored so; 'refusal' in per_instruction marks them)"))
        if g.n == 1 and g.ratio is None:
            out.append(ReportWarning("one_instruction", g.key,
                               f"{describe(g.key)}: one instruction only; no interval, and no benchmark figure"))
    for rater, (judged, yes) in sorted(metrics.rater_totals.items()):
        if judged >= CONSTANT_JUDGE_MIN and yes in (0, judged):
            said = "Yes" if yes else "No"
            out.append(ReportWarning("constant_judge", None,
                               f"judge {rater} said {said} to every one of its {judged} verdicts: a judge that "
                               "never varies measures nothing (check its model and prompt)"))
    return out


# Shares computed two ways (a mean of means, a bootstrap bound) differ in the last bits: "above"
# means above by more than that.
SHARE_SLACK = 1e-9


def _above(core: Any, org: Any) -> bool:
    """Core above Org beyond Org's interval (above Org itself when it has none)."""
    if math.isnan(core.value) or math.isnan(org.value):
        return False
    ceiling = org.value if math.isnan(org.high) else org.high
    return core.value > ceiling + SHARE_SLACK


@dataclass
class Report:
    options: ReportOptions
    metrics: Metrics
    comparisons: list[Comparison]  # every model pair and condition pair (files)
    requested: list[Comparison]  # the --compare pair (screen)
    naturalness: list[WinRate]
    annotators: list[AnnotatorKappa]
    validation: ValidationReport | None  # pipeline.analysis.validation's one rule, as `validate report`
    warnings: list[ReportWarning] = field(default_factory=list)
    # Each judge's accuracy against people (pipeline.analysis.judge_validation), by rater name; a judge
    # not in it is unvalidated, and the report says so beside its numbers.
    judges_validated: dict[str, JudgeScore] = field(default_factory=dict)
    # CS4's instruction families, level x model (family_levels); empty when no family is selected.
    families: list[FamilyLevel] = field(default_factory=list)
    # Every group's rates corrected for its judges' measured error (pipeline.analysis.correction), and
    # which validation each judge has; None before build_report fills it.
    correction: Correction | None = None
    # How each rater judged (its mode; a yes_no judge's threshold and where it was chosen).
    judging: list[JudgingNote] = field(default_factory=list)

    def warned(self, group: Group) -> list[ReportWarning]:
        return [w for w in self.warnings if w.group == group.key]

    @property
    def empty(self) -> bool:
        return self.metrics.empty and not self.naturalness

    @property
    def ratio(self) -> float | None:
        """The ratio the main table shows, by the rule the app, export and HTML report share
        (pipeline.core.definitions.shown_ratio)."""
        return shown_ratio(self.metrics.ratios, self.options.ratio)


class _CompareSettings(TypedDict):
    """The keyword arguments every compare() call of a report shares."""

    ratio: float | None
    n_resamples: int
    seed: int


def build_report(store: Store, options: ReportOptions | None = None, *, embedder: Embedder | None = None) -> Report:
    options = options or ReportOptions()
    metrics = compute_metrics(store, options.filters, n_resamples=options.n_resamples, seed=options.seed,
                              copy=options.copy, embedder=embedder)
    report = Report(options, metrics, [], [], [], [], None, report_warnings(metrics, options))
    ratio = report.ratio
    kw: _CompareSettings = {"ratio": ratio, "n_resamples": options.n_resamples, "seed": options.seed}
    report.comparisons = all_comparisons(metrics, options, ratio)
    if options.compare:
        family = {(c.by, frozenset((c.a, c.b)), c.domain, c.within, c.metric): c.p_holm for c in report.comparisons}
        report.requested = [replace(c, p_holm=family.get((c.by, frozenset((c.a, c.b)), c.domain, c.within, c.metric),
                                                         math.nan))
                            for c in compare(metrics, *options.compare, **kw)]
    report.naturalness = naturalness_rates(store, options.filters, n_resamples=options.n_resamples, seed=options.seed)
    report.judges_validated = judge_validation_by_name(
        judge_scores(store, n_resamples=options.n_resamples, seed=options.seed))
    report.correction = corrected_metrics(store, metrics, options.filters, n_resamples=options.n_resamples,
                                          seed=options.seed)
    report.warnings += [ReportWarning("judge_at_chance", None, line) for line in report.correction.warnings()]
    if annotation_count(store):
        report.validation = human_validation(store, ratio=ratio or options.ratio, filters=options.filters,
                                             n_resamples=options.n_resamples, seed=options.seed)
        report.annotators = report.validation.kappas
    report.families = family_levels(store, metrics, ratio, n_resamples=options.n_resamples, seed=options.seed)
    report.judging = judging_notes(metrics.rater_keys, metrics.raters, calibrations(store))
    return report


def all_comparisons(metrics: Metrics, options: ReportOptions, ratio: float | None) -> list[Comparison]:
    """Every model pair within a condition, condition pair within a model and mode pair, Holm-adjusted
    together."""
    kw: _CompareSettings = {"ratio": ratio, "n_resamples": options.n_resamples, "seed": options.seed}
    out: list[Comparison] = []
    for a, b in combinations(sorted({r.model for r in metrics.rows}), 2):
        out += compare(metrics, a, b, by="model", **kw)
    for a, b in combinations(sorted({r.condition for r in metrics.rows}, key=condition_order), 2):
        out += compare(metrics, a, b, by="condition", **kw)
    for a, b in combinations(sorted({r.mode for r in metrics.rows}), 2):
        out += compare(metrics, a, b, by="mode", **kw)
    adjusted = holm([c.test.p_value for c in out])
    return [replace(c, p_holm=p) for c, p in zip(out, adjusted)]


def condition_order(condition: str) -> tuple[int, str]:
    return (CONDITION_ORDER.index(condition) if condition in CONDITION_ORDER else len(CONDITION_ORDER), condition)


def _pct(x: float, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f}"


def _ci(iv: Any, sep: str = " ") -> str:
    """'83.7 [81.2-87.1]' in percent; ``sep="\n"`` puts the interval under the value."""
    if math.isnan(iv.value):
        return "-"
    if math.isnan(iv.low):
        return f"{100 * iv.value:.1f}"
    return f"{100 * iv.value:.1f}{sep}[{100 * iv.low:.1f}-{100 * iv.high:.1f}]"


def writer_label(model: str, mode: str, modes: set[str]) -> str:
    """The model and its response mode, always: a table of direct responses says so too."""
    return f"{model}/{mode}" if mode else model


def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


# -- the terminal ---------------------------------------------------------------------------------


def main_groups(report: Report) -> list[Group]:
    """The main table's rows: each (domain, condition, model, mode) at the report ratio, or its
    Org-only row when it has no summary at that ratio."""
    ratio = report.ratio
    chosen: dict[tuple, Group] = {}
    for g in report.metrics.groups:
        key = g.key[:4]
        if g.ratio is None:
            chosen.setdefault(key, g)
        elif ratio is not None and same_ratio(g.ratio, ratio) and (g.n or key not in chosen):
            chosen[key] = g  # (summaries with no verdict at all keep the Org row; the warnings name them)
    return list(chosen.values())


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
            rates = [_ci(g.org, sep), _ci(g.core, sep), _ci(g.superficial, sep)]
            if show_corrected:  # raw and corrected side by side
                rates = [cell for pair in zip(rates, _corrected_cells(report, g, sep)) for cell in pair]
            row += [*rates, _num(g.kappa), str(g.n), _coverage_cell(g, report)]
            e = g.extra
            if "copy_a_ngrams" in extra_names:
                row.append(f"{_num(e.get('copy_a_ngrams'), 1)} / {_num(e.get('copy_b_ngrams'), 1)}")
                row.append(f"{_pct(e.get('copy_a_share', math.nan))} / {_pct(e.get('copy_b_share', math.nan))}")
            if "sim_ref_a" in extra_names:
                row.append(f"{_num(e.get('sim_ref_a'))} / {_num(e.get('sim_ref_b'))}")
                row.append(f"{_pct(e.get('lex_ref_a', math.nan))} / {_pct(e.get('lex_ref_b', math.nan))}")
                row.append(_num(e.get("sim_response")))
            table.add_row(*row)
        console.print(table)
    _render_warnings(report, console)
    _render_families(report, console)
    if len(m.ratios) > 1:
        _render_depth(report, console)
    if m.agreement:
        table = Table("judge", "judge", "texts", "κ", "agree %", "items", title="Judge agreement", title_justify="left")
        for a in m.agreement:
            table.add_row(a.rater_a, a.rater_b, a.kind, _num(a.kappa), _pct(a.percent), str(a.n))
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
        significant = [c for c in tested if c.p_holm < 0.05]
        console.print(f"{len(significant)} of {len(tested)} paired comparisons (model pairs within a condition, "
                      "condition pairs within a model, response modes) differ at p < 0.05 after Holm correction"
                      + (":" if significant and len(significant) <= 12 else "; see comparisons.csv"))
        if significant and len(significant) <= 12:
            for c in significant:
                console.print(f"  {c.domain} {c.within}: {c.metric} {c.a} {_pct(c.test.mean_a)} vs {c.b} "
                              f"{_pct(c.test.mean_b)} ({100 * c.test.diff:+.1f} points, p_holm {c.p_holm:.3f})")
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
            table.add_row(w.condition, w.opponent, str(w.n), _ci(w.rate), f"{w.wins}/{w.ties}/{w.losses}",
                          _ci(w.first_shown), _ci(w.order_agreement), str(w.both_orders))
        console.print(table)
    if report.validation is not None:
        v = report.validation
        where = f"plan {v.plan.name}, " if v.plan else ""
        console.print(
            f"Human validation ({where}ratio {v.ratio:g}; label superficial = positive, weighted by stratum as"
            f" `validate report`; ambiguous left out: {v.ambiguous}; ties: {v.ties}; outside the metric's scope:"
            f" {v.out_of_scope}): precision {_ci(v.precision)}, recall {_ci(v.recall)} (%), n = {v.n}"
        )
        for pair in report.annotators:
            console.print(f"  annotators {pair.annotator_a} / {pair.annotator_b}: κ {_num(pair.kappa.value)}, "
                          f"agree {_pct(pair.percent)}%, n = {pair.kappa.n}")


def any_corrected(report: Report) -> bool:
    """Some group has a corrected rate: the tables show the corrected columns."""
    return report.correction is not None and any(c.rates for c in report.correction.groups.values())


def corrected_group(report: Report, key: tuple[str, str, str, str, float | None]) -> CorrectedGroup:
    """The group's corrected rates and which validation they used, or why it has none."""
    fixed = report.correction.group(key) if report.correction else None
    return fixed if fixed is not None else CorrectedGroup(key, None, "no verdicts to correct")


def validation_mark(report: Report, key: tuple[str, str, str, str, float | None] | None = None) -> str:
    """What an exported figure rests on: each judge's validation ("judge-a: builtin"), or why its judges'
    error is not corrected ("unvalidated: judge-a (`unspecific validate judges --builtin`)"); of the
    group ``key``, or of every group (a figure over several, as a family level)."""
    if key is not None:
        fixed = corrected_group(report, key)
        return fixed.validation if fixed.rates is not None else fixed.reason
    groups = report.correction.groups.values() if report.correction else []
    reasons = sorted({g.reason for g in groups if g.reason})
    return "; ".join(reasons) if reasons else next((g.validation for g in groups), "")


def _corrected_cells(report: Report, g: Group, sep: str) -> list[str]:
    """Org, Core and superficial of the group corrected for its judges' error ('-' where none)."""
    r = corrected_group(report, g.key).rates
    if r is None:
        return ["-", "-", "-"]
    return [_ci(r.org, sep), _ci(r.core, sep), _ci(r.superficial, sep)]


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
    return f"{_pct(g.coverage)}{mark}"


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
            cells.append(_pct(g.core.value) if g else "-")
        table.add_row(domain, condition, writer_label(model, mode, modes), _pct(org.org.value) if org else "-", *cells)
    console.print(table)
    changed = ranking_changes(m)
    if changed:
        console.print("[bold]model ranking by Core changes with the ratio[/] in: " + "; ".join(changed))
    else:
        console.print("model ranking by Core is the same at every ratio")


def ranking_changes(metrics: Metrics) -> list[str]:
    """(domain, condition) cells whose ordering of models by Core differs between ratios."""
    out = []
    cells: dict[tuple[str, str], dict[float, list[tuple[float, str]]]] = {}
    for g in metrics.groups:
        if g.ratio is None or math.isnan(g.core.value):
            continue
        cells.setdefault((g.domain, g.condition), {}).setdefault(g.ratio, []).append((g.core.value, f"{g.model}/{g.mode}"))
    for (domain, condition), by_ratio in sorted(cells.items()):
        orders = {tuple(name for _, name in sorted(v, reverse=True)) for v in by_ratio.values() if len(v) > 1}
        if len(orders) > 1:
            out.append(f"{domain}/{condition}")
    return out


def _render_comparisons(comparisons: list[Comparison], console: Console) -> None:
    from rich.table import Table

    first = comparisons[0]
    table = Table("domain", "within", "metric", first.a, first.b, "difference [95% CI]", "p", "p Holm",
                  title=f"{first.a} vs {first.b} (paired by {'reference article' if first.by == 'condition' else 'instruction'};"
                        " sign-flip permutation test)", title_justify="left")
    for c in comparisons:
        t = c.test
        diff = "-" if math.isnan(t.diff) else f"{100 * t.diff:+.1f} [{_pct(t.low)}, {_pct(t.high)}]"
        p = "-" if math.isnan(t.p_value) else (f"{t.p_value:.3f}" + (" *" if t.significant() else ""))
        holm_p = "-" if math.isnan(c.p_holm) else (f"{c.p_holm:.3f}" + (" *" if c.p_holm < 0.05 else ""))
        table.add_row(c.domain, c.within, c.metric, _pct(t.mean_a), _pct(t.mean_b), diff, p, holm_p)
    console.print(table)
    console.print("* p < 0.05; p Holm corrects for every comparison the report made (see comparisons.csv)")


def check_filters(store: Store, filters: Filters) -> None:
    """A filter naming what the store does not hold is a typo: UnspecificError (exit 2) naming
    it, rather than an empty report that reads as "nothing judged yet"."""
    from pipeline.core.errors import UnspecificError

    single = (("--run", "run_id", filters.run), ("--domain", "domain", filters.domain),
              ("--condition", "condition", filters.condition))
    for flag, column, value in single:
        if value is not None and not any_instruction_with(store, column, value):
            known = instruction_values(store, column)
            raise UnspecificError(f"{flag} {value}: matches no instruction in {store.path}"
                                  + (f" (here: {', '.join(map(str, known))})" if known else " (it has none yet)"))
    lists = (("--models", model_has_responses, filters.models), ("--judges", judge_has_verdicts, filters.judges))
    for flag, known_name, values in lists:
        unknown = [v for v in values or () if not known_name(store, v)]
        if unknown:
            raise UnspecificError(f"{flag}: {', '.join(unknown)} matches nothing in {store.path}")


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
        "families": [f.as_dict() for f in report.families],
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
                cells.append(_ci(f.org) if f else "-")
                if (model, mode) in with_core:
                    cells.append(_ci(f.core) if f else "-")
                n = max(n, f.n if f else 0)
            table.add_row(*cells, str(n))
        console.print(table)
