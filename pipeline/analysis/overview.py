"""The store-wide overview the app's Instructions, Annotate and Report screens share: one row per
(instruction, model, mode) from the per-text totals the store keeps (pipeline.store.scores), with Org,
Core and the superficial share first as the judges' mean per text (at once, cheap) and then as
pipeline.analysis.metrics gives them (``merge_metrics``, the report's numbers). The app reads it; it
computes none of these numbers itself.

May import: pipeline.core, pipeline.store, pipeline.analysis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pipeline.core.definitions import LEXICAL_FLAGS, same_ratio, view_ratio
from pipeline.store.view import StoreView, TextTotals, Writer


@dataclass
class InstructionRow:
    """Org / Core / superficial start as the judges' mean per constraint and are replaced by
    pipeline.analysis.metrics' per-rater values when those are computed (``merge_metrics``)."""

    instruction_id: int
    run_id: str
    domain: str
    condition: str
    model: str
    mode: str  # direct | edit: the model's two responses are two rows
    response_id: int
    n: int
    org: float | None
    core: float | None
    passed: int  # constraints satisfied on the full response
    flipped: int
    superficial: float | None  # flipped / passed
    flags: dict[str, int]
    disagree: int
    quote_missing: int
    refusal: bool = False  # the response refuses the task: scored as the model's answer, marked where shown

    @property
    def writer(self) -> Writer:
        return Writer(self.model, self.mode)


@dataclass
class Analysis:
    ratio: float
    models: list[str]
    ratios: list[float]
    rows: list[InstructionRow]
    metrics: Any = None  # pipeline.analysis.metrics.Metrics, once computed
    # Each judge's score against people (pipeline.analysis.judge_validation), with the metrics; a judge not
    # in it is unvalidated.
    judges_validated: dict[str, Any] = field(default_factory=dict)
    # Satisfaction against the number of constraints, per instruction family (CS4's levels of
    # specificity: pipeline.analysis.families.family_levels, the rows `report` prints); empty without
    # families.
    families: list[Any] = field(default_factory=list)
    # Org, Core and superficial corrected for each judge's measured error (pipeline.analysis.correction
    # .Correction, the rows `report` prints), with the metrics; None until then.
    correction: Any = None

    @property
    def writers(self) -> list[Writer]:
        return sorted({r.writer for r in self.rows})

    @property
    def modes(self) -> list[str]:
        return sorted({r.mode for r in self.rows})

    def flipped_instructions(self, writer: Writer | None) -> set[int]:
        """Instructions with a constraint that flipped on ``writer``'s response at the ratio."""
        return {r.instruction_id for r in self.rows if r.writer == writer and r.flipped}

    @property
    def n_flipped(self) -> int:
        return sum(r.flipped for r in self.rows)


def _mean_score(totals: TextTotals) -> float | None:
    """A text's mean constraint score; None when nothing was judged (its score_sum is None then too)."""
    if not totals.judged or totals.score_sum is None:
        return None
    return totals.score_sum / totals.judged


def compute_analysis(view: StoreView, *, run_id: str | None = None, ratio: float | None = None) -> Analysis:
    """One row per (instruction, model, mode) from the store's per-text totals (pipeline.store.scores):
    some 40,000 rows for a benchmark of 10,000 instructions, never its millions of verdicts.
    Per-constraint outcomes are read when a screen shows a constraint."""
    gens = view.text_totals(run_id)
    ratios = sorted({g.ratio for g in gens if g.kind == "summary" and g.ratio is not None}, reverse=True)
    # The rule `report`, the HTML report and export share; DEFAULT_RATIO while nothing is summarised.
    ratio = view_ratio(ratios, ratio)
    summary_of: dict[int | None, TextTotals] = {}
    for g in sorted(gens, key=lambda g: g.id):  # the first summary at the ratio (by id), as Audit shows
        if g.kind == "summary" and g.ratio is not None and same_ratio(g.ratio, ratio):
            summary_of.setdefault(g.parent_id, g)
    n_active = view.active_counts(run_id)
    flag_counts = view.flag_counts(run_id)
    meta = view.instruction_meta(run_id)
    rows: list[InstructionRow] = []
    for g in sorted((g for g in gens if g.kind == "response"),
                    key=lambda g: (g.instruction_id, g.model or "", g.mode)):
        summary = summary_of.get(g.id)
        flipped = (summary.flipped or 0) if summary is not None else 0
        core = _mean_score(summary) if summary is not None else None
        run, domain, condition = meta.get(g.instruction_id, ("", "", ""))
        flags = flag_counts.get(g.instruction_id, {})
        passed = g.passed
        rows.append(InstructionRow(
            g.instruction_id, run or "", domain or "", condition or "", g.model or "", g.mode, g.id,
            n_active.get(g.instruction_id, 0), _mean_score(g), core, passed or 0,
            flipped, flipped / passed if passed else None, {f: flags.get(f, 0) for f in LEXICAL_FLAGS},
            g.disagree or 0, g.missing or 0, g.refusal))
    models = sorted({r.model for r in rows})
    return Analysis(ratio, models, ratios, rows)


def merge_metrics(analysis: Analysis, metrics: Any) -> Analysis:
    """Take Org, Core and the superficial share from pipeline.analysis.metrics (the report's numbers)."""
    by_response = {r.response_id: r for r in metrics.rows if r.ratio is not None
                   and same_ratio(r.ratio, analysis.ratio)}
    full_only = {r.response_id: r for r in metrics.rows if r.ratio is None}
    for row in analysis.rows:
        m = by_response.get(row.response_id)
        if m is not None:
            row.org, row.core = m.org, m.core
            sup = m.superficial
            row.superficial = None if math.isnan(sup) else sup
        elif row.response_id in full_only:
            row.org = full_only[row.response_id].org
    analysis.metrics = metrics
    return analysis
