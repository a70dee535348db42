"""Calibrating a yes_no judge: the threshold on P(Yes) at which its verdicts are read, chosen on its check.

A yes_no judge (pipeline.stages.judging) gives P(Yes) for each item. Which threshold turns that into
Yes/No is not 0.5 by habit: a small model leans to Yes, and where it leans is measured on the check
(the built-in constructed set, a user's own set, or people's answers), whose truth is known.

The rule (``RULE``): the threshold that maximises Youden's J, sensitivity + specificity - 1, placed
half-way between the two P(Yes) values it falls between. J is what the corrected rates
(pipeline.analysis.correction, Rogan-Gladen) divide by: the larger it is, the less a rate's
correction amplifies the judge's noise. It also does not depend on the check's share of true Yes.

A threshold chosen on a set and scored on the same set flatters it. So the check's own verdicts are
held out: each text's items are read at the threshold chosen on the other texts (leave one text out),
and the sensitivity and specificity the corrected rates use come from those; the one threshold chosen
on every item is what the judge's benchmark verdicts are read at.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.store.judge_checks import Calibration

RULE = "youden"  # max sensitivity + specificity - 1, midway between neighbouring P(Yes)


@dataclass(frozen=True)
class Scored:
    """One checked item of a yes_no judge: P(Yes), the truth, and the text it belongs to."""

    p_yes: float
    truth: bool
    group: str


@dataclass(frozen=True)
class Fit:
    threshold: float
    n: int
    auc: float | None  # P(Yes) of a true Yes above a true No's, over all pairs (None: one class only)
    held_out_accuracy: float | None  # leave-one-text-out (None: fewer than two texts)
    sensitivity: float
    specificity: float

    @property
    def youden(self) -> float:
        return self.sensitivity + self.specificity - 1


def auc(items: Sequence[Scored]) -> float | None:
    """Mann-Whitney: the share of (true Yes, true No) pairs whose P(Yes) are in the right order (ties
    half)."""
    pos = sorted(i.p_yes for i in items if i.truth)
    neg = sorted(i.p_yes for i in items if not i.truth)
    if not pos or not neg:
        return None
    # Rank-sum form: O(n log n), exact with ties given average ranks.
    values = sorted([(p, 1) for p in pos] + [(p, 0) for p in neg])
    rank_sum = 0.0
    k = 0
    while k < len(values):
        j = k
        while j < len(values) and values[j][0] == values[k][0]:
            j += 1
        mean_rank = (k + 1 + j) / 2
        rank_sum += mean_rank * sum(1 for _, is_pos in values[k:j] if is_pos)
        k = j
    return (rank_sum - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))


def _rates(items: Sequence[Scored], threshold: float) -> tuple[float, float]:
    pos = [i for i in items if i.truth]
    neg = [i for i in items if not i.truth]
    sens = sum(i.p_yes >= threshold for i in pos) / len(pos) if pos else math.nan
    spec = sum(i.p_yes < threshold for i in neg) / len(neg) if neg else math.nan
    return sens, spec


def best_threshold(items: Sequence[Scored]) -> float:
    """The threshold maximising Youden's J on ``items`` (midway between neighbouring P(Yes); the one
    nearest 0.5 on a tie). 0.5 when the items hold only one class."""
    if not any(i.truth for i in items) or all(i.truth for i in items):
        return 0.5
    values = sorted({i.p_yes for i in items})
    cuts = [(a + b) / 2 for a, b in zip(values, values[1:], strict=False)] or [0.5]
    best, best_j = 0.5, -math.inf
    for cut in cuts:
        sens, spec = _rates(items, cut)
        j = sens + spec - 1
        if j > best_j + 1e-12 or (abs(j - best_j) <= 1e-12 and abs(cut - 0.5) < abs(best - 0.5)):
            best, best_j = cut, j
    return round(best, 6)


def held_out_verdicts(items: Sequence[Scored]) -> list[bool] | None:
    """Each item's verdict at the threshold chosen on every other text's items (None: fewer than two
    texts)."""
    groups = sorted({i.group for i in items})
    if len(groups) < 2:
        return None
    thresholds = {g: best_threshold([i for i in items if i.group != g]) for g in groups}
    return [i.p_yes >= thresholds[i.group] for i in items]


def held_out_accuracy(items: Sequence[Scored]) -> float | None:
    """Accuracy with each text's items read at the threshold chosen on every other text."""
    verdicts = held_out_verdicts(items)
    if verdicts is None:
        return None
    return sum(v == i.truth for v, i in zip(verdicts, items, strict=True)) / len(items)


def fit(items: Sequence[Scored]) -> Fit:
    """The calibration of a judge on its checked items (each with a P(Yes))."""
    if not items:
        raise ValueError("calibration needs checked items with a P(Yes)")
    threshold = best_threshold(items)
    sens, spec = _rates(items, threshold)
    return Fit(threshold, len(items), auc(items), held_out_accuracy(items), sens, spec)


# -- what a report says of each judge's mode ---------------------------------------------------------


@dataclass(frozen=True)
class JudgingNote:
    """How one rater of a report judged: its mode, and for a yes_no judge its threshold and where from."""

    rater: str  # the rater's name in the report (pipeline.analysis.metrics.rater_names)
    judge: str
    mode: str
    threshold: float | None  # yes_no: the threshold its verdicts are read at
    # yes_no: the check the threshold was chosen on; None: the default, uncalibrated
    calibrated_on: str | None
    auc: float | None = None

    def line(self) -> str:
        if self.mode != "yes_no":
            return f"{self.rater}: {self.mode} (a verdict and a quote written by the judge)"
        if self.calibrated_on is None:
            return (f"{self.rater}: yes_no (one token, verdict from P(Yes)), "
                    "uncalibrated: Yes when P(Yes) >= "
                    f"{self.threshold:.2f}; calibrate with `unspecific validate judges --builtin`")
        auc = f", AUC {self.auc:.2f}" if self.auc is not None else ""
        return (f"{self.rater}: yes_no (one token, verdict from P(Yes)), Yes when P(Yes) >= "
                f"{self.threshold:.3f}, chosen on its {self.calibrated_on} check{auc}")


def judging_notes(raters: Sequence[tuple[str, str]], names: Sequence[str],
                  calibrated: Mapping[tuple[str, str], Calibration]) -> list[JudgingNote]:
    """One note per rater (judge, mode) named ``names``, with its calibration from ``calibrated``
    (pipeline.store.judge_checks.calibrations)."""
    from pipeline.core.definitions import DEFAULT_YES_THRESHOLD

    notes = []
    for (judge, mode), name in zip(raters, names, strict=True):
        cal = calibrated.get((judge, mode))
        if mode != "yes_no":
            notes.append(JudgingNote(name, judge, mode, None, None))
        elif cal is None:
            notes.append(JudgingNote(name, judge, mode, DEFAULT_YES_THRESHOLD, None))
        else:
            notes.append(JudgingNote(name, judge, mode, cal.threshold, cal.source, cal.auc))
    return notes
