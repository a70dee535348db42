"""The report's numbers: what ``report``, its files, the HTML report and the app's Report screen show.

``build_report`` gathers everything from the store: the condition x model groups with their
intervals (pipeline.analysis.metrics), every paired comparison Holm-adjusted together, naturalness,
the judges' validation and the rates corrected for their error (pipeline.analysis.correction),
human validation, CS4's instruction families, how each judge judged, the method's copy numbers
and, when asked, the top of the suspicion ranking. ``report_warnings`` names
the figures not to trust; ``main_groups`` picks the main table's rows at the shown ratio
(pipeline.core.definitions.shown_ratio); ``check_filters`` refuses a filter naming nothing in the
store. Drawing and writing them (terminal tables, CSV, JSON, charts) is pipeline.outputs.report's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import TYPE_CHECKING, Any, TypedDict

from pipeline.analysis.calibration import JudgingNote, judging_notes
from pipeline.analysis.copy_numbers import CopyNumbers, copy_numbers
from pipeline.analysis.correction import CorrectedGroup, Correction, corrected_metrics
from pipeline.analysis.coverage import MIN_COVERAGE, describe
from pipeline.analysis.families import FamilyLevel, family_levels
from pipeline.analysis.gate import GateSummary, summarize_ledgers
from pipeline.analysis.judge_validation import JudgeScore, judge_scores, judge_validation_by_name
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
)
from pipeline.analysis.model_duel import ModelDuel, copy_paste_comparisons, copy_paste_units, model_duel
from pipeline.analysis.stats import DEFAULT_RESAMPLES, holm
from pipeline.analysis.suspicion import Queue, suspicion_queue
from pipeline.analysis.validation import AnnotatorKappa, ValidationReport, human_validation
from pipeline.core.definitions import DEFAULT_RATIO, same_ratio, shown_ratio
from pipeline.core.intervals import ci
from pipeline.store.annotations import annotation_count
from pipeline.store.generations import model_has_responses
from pipeline.store.instructions import any_instruction_with, instruction_values
from pipeline.store.judge_checks import calibrations
from pipeline.store.ledgers import ledger_rows
from pipeline.store.verdicts import judge_has_verdicts
from pipeline.store.view import StoreReader

if TYPE_CHECKING:
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
    suspicious: int = 0  # the top of the suspicion ranking the report lists ("Most suspicious"); 0: none


@dataclass(frozen=True)
class ReportWarning:
    """A figure of the report not to trust as it stands, and why."""

    kind: str  # low_coverage
    group: tuple[str, str, str, str, float | None] | None  # the group's key, when it is about one
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "group": describe(self.group) if self.group else None,
                "message": self.message}


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
                               f"{describe(g.key)}: coverage {pct(g.coverage)}% ({g.judged_items} of "
                               f"{g.expected_items} verdicts given, under "
                               f"{pct(options.min_coverage, 0)}%); its rates "
                               "leave the missing verdicts out"))
        if g.ratio is not None and _above(g.core, g.org):
            out.append(ReportWarning("core_above_org", g.key,
                               f"{describe(g.key)}: Core {ci(g.core)} is above Org {ci(g.org)}, beyond Org's "
                               "interval; a summary cannot keep what its response lacks: "
                               "suspect the judge (lenient on short texts) or the summaries"))
        refused = g.extra.get("refusal", 0.0)
        if g.ratio is None and refused > 0:
            out.append(ReportWarning("refusals", g.key,
                               f"{describe(g.key)}: {pct(refused)}% of the responses refuse "
                               "the task (kept as the "
                               "model's answers and scored so; 'refusal' in per_instruction marks them)"))
        if g.n == 1 and g.ratio is None:
            out.append(ReportWarning("one_instruction", g.key,
                               f"{describe(g.key)}: one instruction only; no interval, "
                               "and no benchmark figure"))
    for rater, (judged, yes) in sorted(metrics.rater_totals.items()):
        if judged >= CONSTANT_JUDGE_MIN and yes in (0, judged):
            said = "Yes" if yes else "No"
            out.append(ReportWarning("constant_judge", None,
                               f"judge {rater} said {said} to every one of its {judged} "
                               "verdicts: a judge that "
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
    # Every model pair on the same instructions, with the copy-paste score's tests, each model's refusals
    # (pipeline.analysis.model_duel); None before build_report fills it.
    models: ModelDuel | None = None
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
    # The method's copy numbers (pipeline.analysis.copy_numbers): the copy-paste score and the
    # constraint-reference similarity per condition x model x mode, and single against the common ones.
    copying: CopyNumbers | None = None
    # The top ``options.suspicious`` of the suspicion ranking (pipeline.analysis.suspicion), at the
    # report's ratio; None when not asked for.
    suspicious: Queue | None = None
    # What the constraint gate rejected and kept, per condition and stage (pipeline.analysis.gate).
    gate: list[GateSummary] = field(default_factory=list)

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


def build_report(store: Store, options: ReportOptions | None = None, *, embedder: Embedder
                 | None = None) -> Report:
    options = options or ReportOptions()
    metrics = compute_metrics(store, options.filters, n_resamples=options.n_resamples, seed=options.seed,
                              copy=options.copy, embedder=embedder)
    report = Report(options, metrics, [], [], [], [], None, report_warnings(metrics, options))
    ratio = report.ratio
    kw: _CompareSettings = {"ratio": ratio, "n_resamples": options.n_resamples, "seed": options.seed}
    report.comparisons, report.models = compare_models(store, metrics, options, ratio)
    if options.compare:
        family = {(c.by, frozenset((c.a, c.b)), c.domain, c.within, c.metric): c.p_holm
                  for c in report.comparisons}
        report.requested = [replace(c, p_holm=family.get((c.by, frozenset((c.a, c.b)), c.domain,
                                                          c.within, c.metric),
                                                         math.nan))
                            for c in compare(metrics, *options.compare, **kw)]
    report.naturalness = naturalness_rates(store, options.filters, n_resamples=options.n_resamples,
                                           seed=options.seed)
    report.judges_validated = judge_validation_by_name(
        judge_scores(store, n_resamples=options.n_resamples, seed=options.seed))
    report.correction = corrected_metrics(store, metrics, options.filters, n_resamples=options.n_resamples,
                                          seed=options.seed)
    report.warnings += [ReportWarning("judge_at_chance", None, line) for line in report.correction.warnings()]
    report.warnings += [ReportWarning("judge_checks_disagree", None, line)
                        for line in report.correction.disagreements()]
    if annotation_count(store):
        report.validation = human_validation(store, ratio=ratio or options.ratio, filters=options.filters,
                                             n_resamples=options.n_resamples, seed=options.seed)
        report.annotators = report.validation.kappas
    report.families = family_levels(store, metrics, ratio, n_resamples=options.n_resamples, seed=options.seed)
    report.judging = judging_notes(metrics.rater_keys, metrics.raters, calibrations(store))
    report.copying = copy_numbers(store, options.filters, n_resamples=options.n_resamples, seed=options.seed)
    f = options.filters
    report.gate = summarize_ledgers([r for r in ledger_rows(store, run_id=f.run, domain=f.domain,
                                                            condition=f.condition)
                                     if r[0] != "common"])  # the shared synthesis: each condition's copy
    if options.suspicious:
        report.suspicious = suspicion_queue(store, ratio=ratio or options.ratio, run_id=options.filters.run,
                                            limit=options.suspicious)
    return report


def compare_models(reader: StoreReader, metrics: Metrics, options: ReportOptions,
                   ratio: float | None) -> tuple[list[Comparison], ModelDuel]:
    """Every paired test of the report (all_comparisons, copy-paste's among them) and the models
    compared on them (model_duel): what `report` and the app's Report screen conclude from."""
    copy_units = copy_paste_units(reader, metrics, options.filters)
    draws = {"n_resamples": options.n_resamples, "seed": options.seed}
    copy_paste = copy_paste_comparisons(metrics, copy_units, **draws)
    comparisons = all_comparisons(metrics, options, ratio, copy_paste)
    return comparisons, model_duel(metrics, comparisons, copy_units, ratio, **draws)


def all_comparisons(metrics: Metrics, options: ReportOptions, ratio: float | None,
                    copy_paste: Sequence[Comparison] = ()) -> list[Comparison]:
    """Every model pair within a condition, condition pair within a model and mode pair, Holm-adjusted
    together; with ``copy_paste``, the model pairs' tests of the copy-paste score
    (pipeline.analysis.model_duel) join the family."""
    kw: _CompareSettings = {"ratio": ratio, "n_resamples": options.n_resamples, "seed": options.seed}
    out: list[Comparison] = []
    for a, b in combinations(sorted({r.model for r in metrics.rows}), 2):
        out += compare(metrics, a, b, by="model", **kw)
    out += copy_paste
    for a, b in combinations(sorted({r.condition for r in metrics.rows}, key=condition_order), 2):
        out += compare(metrics, a, b, by="condition", **kw)
    for a, b in combinations(sorted({r.mode for r in metrics.rows}), 2):
        out += compare(metrics, a, b, by="mode", **kw)
    adjusted = holm([c.test.p_value for c in out])
    return [replace(c, p_holm=p) for c, p in zip(out, adjusted)]


def condition_order(condition: str) -> tuple[int, str]:
    return (CONDITION_ORDER.index(condition) if condition in CONDITION_ORDER
            else len(CONDITION_ORDER), condition)


def pct(x: float, digits: int = 1) -> str:
    """A share in percent ('-' for none): the warnings say a figure as the report's tables print it."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f}"


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


def ranking_changes(metrics: Metrics) -> list[str]:
    """(domain, condition) cells whose ordering of models by Core differs between ratios."""
    out = []
    cells: dict[tuple[str, str], dict[float, list[tuple[float, str]]]] = {}
    for g in metrics.groups:
        if g.ratio is None or math.isnan(g.core.value):
            continue
        cells.setdefault((g.domain, g.condition),
                         {}).setdefault(g.ratio, []).append((g.core.value, f"{g.model}/{g.mode}"))
    for (domain, condition), by_ratio in sorted(cells.items()):
        orders = {tuple(name for _, name in sorted(v, reverse=True)) for v in by_ratio.values() if len(v) > 1}
        if len(orders) > 1:
            out.append(f"{domain}/{condition}")
    return out


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
                                  + (f" (here: {', '.join(map(str, known))})" if known
                                     else " (it has none yet)"))
    lists = (("--models", model_has_responses, filters.models),
             ("--judges", judge_has_verdicts, filters.judges))
    for flag, known_name, values in lists:
        unknown = [v for v in values or () if not known_name(store, v)]
        if unknown:
            raise UnspecificError(f"{flag}: {', '.join(unknown)} matches nothing in {store.path}")
