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
  model_comparisons.csv        "Models compared": per model pair, domain, condition and metric (org,
                               core, superficial, gap, copy-paste) each model's value with its interval
                               over the instructions both answered, the difference, p_value, p_holm
                               (the family of comparisons.csv) and the pair's verdict (deeper, mixed,
                               too_small); report.json's ``models`` adds each pair's sentence and each
                               model's refusals
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
from typing import Any

from pipeline.analysis.judge_validation import validated_score
from pipeline.analysis.metrics import Group, runs_covered
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
    condition_order,
    corrected_group,
    main_groups,
    ranking_changes,
    report_warnings,
    validation_mark,
)
from pipeline.outputs.charts import save_chart
from pipeline.outputs.copy_report import copying_chart, copying_rows
from pipeline.outputs.models_report import models_json, models_rows
from pipeline.outputs.report_text import empty_message, render, validation_caption, writer_label

# The report's model (pipeline.analysis.report_model), importable from here as before, and the drawing.
__all__ = [
    "CONSTANT_JUDGE_MIN", "SHARE_SLACK", "Report", "ReportOptions", "ReportWarning", "all_comparisons",
    "any_corrected", "build_report", "charts", "check_filters", "condition_order", "corrected_group",
    "empty_message", "main_groups", "ranking_changes", "render", "report_warnings", "validation_caption",
    "validation_mark", "write_outputs", "write_tables", "writer_label",
]


# The text of the report (tables fitted to the terminal, --format) is pipeline.outputs.report_text's.


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
    rows = _clean([{**r.as_dict(),
                    "judges_validation": validation_mark(report, (r.domain, r.condition, r.model, r.mode,
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
    if model_rows := models_rows(report.models):
        emit("model_comparisons", model_rows)
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
        validation = {"metric": report.validation.as_dict(),
                      "annotators": [a.as_dict() for a in report.annotators]}
        _write_json(out / "validation.json", validation)
        written.append(out / "validation.json")
    _write_json(out / "report.json", {
        "filters": vars(report.options.filters), "ratio": report.ratio, "raters": m.raters,
        "ratios": m.ratios,
        "runs": runs_covered(m),
        "summary": summary, "agreement": [a.as_dict() for a in m.agreement],
        "comparisons": [c.as_dict() for c in report.comparisons], "models": models_json(report.models),
        "requested_comparison": [c.as_dict() for c in report.requested],
        "naturalness": [w.as_dict() for w in report.naturalness], "validation": validation,
        "families": [f.as_dict() for f in report.families], "copying": copying, "copy_tests": copy_tests,
        "judge_validation": {r: (score.as_dict()
                                 if (score := validated_score(r, report.judges_validated)) else None)
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
                    g = next((g for g in mine if g.condition == condition
                              and (g.model, g.mode) == (model, mode)), None)
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
        written.append(save_chart(fig, out / f"org_core_{_slug(domain)}.png"))

        if m.ratios:
            conds = sorted({g.condition for g in m.groups if g.domain == domain and g.ratio is not None},
                           key=condition_order)
            fig, axes = plt.subplots(1, max(1, len(conds)),
                                     figsize=(3.6 * max(1, len(conds)), 3.6), squeeze=False,
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
                    ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3,
                                label=writer_label(model, mode, modes))
                ax.set_title(condition)
                ax.set_xlabel("summary ratio (1.0 = full response)")
                ax.set_xlim(1.05, 0)
                ax.set_ylim(0, 105)
            axes[0][0].set_ylabel("constraints satisfied (%)")
            axes[0][-1].legend(fontsize=8)
            fig.suptitle(f"{domain}: depth profile (Core across summary ratios)")
            written.append(save_chart(fig, out / f"depth_{_slug(domain)}.png"))
    return written


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name) or "all"
