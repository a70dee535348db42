"""The report's copying section: the method's copy numbers (pipeline.analysis.copy_numbers) as a
terminal table per domain with the paired tests of single against the common conditions, as CSV
rows, and as a chart. `report` shows it by default; the HTML report draws the same numbers.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pipeline.analysis.copy_numbers import SINGLE, CopyNumbers, CopyTest
from pipeline.analysis.report_model import condition_order
from pipeline.core.definitions import SIGNIFICANCE
from pipeline.core.intervals import ci
from pipeline.outputs.charts import save_chart

TITLE = ("copying: copy-paste score (each constraint's highest cosine with a response sentence, the research"
         " code's) and constraint-reference similarity, means with bootstrap 95% CI over instructions")


def num(iv: Any, sep: str = " ") -> str:
    """'0.62 [0.58, 0.66]' (cosines: two decimals, the interval after ``sep``); '-' when undefined."""
    return ci(iv, sep, scale=1.0, digits=2)


def test_line(t: CopyTest) -> str:
    """'eval vs single on 12 shared articles A: copy-paste 0.55 vs 0.62 (-0.07 [-0.11, -0.03], p Holm 0.004
    *)'."""
    x = t.test
    who = f" ({t.model}{f' [{t.mode}]' if t.mode else ''})" if t.model else ""
    if math.isnan(x.diff):
        return f"{t.condition} vs {SINGLE}{who}: {t.measure}: no reference article A under both"
    holm_p = "-" if math.isnan(t.p_holm) else f"{t.p_holm:.3f}" + (" *" if t.p_holm < SIGNIFICANCE else "")
    diff = ci((x.diff, x.low, x.high), scale=1.0, digits=2, signed=True)
    return (f"{t.condition} vs {SINGLE}{who} on {x.n} shared article{'' if x.n == 1 else 's'} A: {t.measure}"
            f" {x.mean_a:.2f} vs {x.mean_b:.2f} ({diff}, p Holm {holm_p})")


def verdict_line(numbers: CopyNumbers) -> str:
    """Whether the paper's claim (common constraints lower both measures) holds on these data."""
    tested = [t for t in numbers.tests if not math.isnan(t.test.p_value)]
    if not tested:
        return ("the paper's claim (common constraints lower both) cannot be tested here: "
                "it needs single and a common condition built from the same articles A")
    lower = [t for t in tested if t.lower(SIGNIFICANCE)]
    return (f"the paper's claim (common constraints lower both): {len(lower)} of "
            f"{len(tested)} tests significantly lower than single (p Holm < {SIGNIFICANCE:g})")


def copying_document(numbers: CopyNumbers | None, writer: Any) -> list[Any]:
    """The copying table per domain (a Sheet), the tests and the verdict (Notes), as the report prints
    them (pipeline.outputs.report_text). ``writer(model, mode)``: the row's writer cell."""
    from pipeline.outputs.report_text import Note
    from pipeline.outputs.tables import Block, Sheet, slug

    if numbers is None or numbers.empty:
        return []
    out: list[Any] = []
    for domain in sorted({g.domain for g in numbers.groups}):
        sheet = Sheet(f"{domain}: {TITLE}", ("condition", "model"),
                      (Block("", ("copy-paste", "c-ref sim", "n")),), name=f"copying_{slug(domain)}",
                      names={"model": ("model", "mode")})
        for g in sorted((g for g in numbers.groups if g.domain == domain),
                        key=lambda g: (condition_order(g.condition), g.model, g.mode)):
            sheet.add(g.condition, writer(g.model, g.mode), cell(g.copy_paste), cell(g.reference),
                      str(g.instructions))
        out.append(sheet)
        out += [Note(f"  {test_line(t)}") for t in numbers.tests if t.domain == domain]
    if numbers.missing_echo:
        out.append(Note(f"  {numbers.missing_echo:,} (constraint, response) pairs have no "
                        "copy-paste score yet: `unspecific evidence` computes them"))
    out.append(Note(f"  {verdict_line(numbers)}"))
    return out


def cell(iv: Any) -> Any:
    """A cosine and its interval as a table cell: ('0.62', '[0.58, 0.66]'); '-' when undefined."""
    from pipeline.outputs.tables import figure

    return figure(iv, scale=1.0, digits=2)


def copying_rows(numbers: CopyNumbers | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """copying.csv's rows (one per condition x model x mode) and copy_tests.csv's."""
    if numbers is None:
        return [], []
    return [g.as_dict() for g in numbers.groups], [t.as_dict() for t in numbers.tests]


def copying_chart(numbers: CopyNumbers | None, out: Path) -> list[Path]:
    """copying_<domain>.png: per condition, each writer's copy-paste score and the constraints'
    reference similarity, with their intervals."""
    if numbers is None or numbers.empty:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for domain in sorted({g.domain for g in numbers.groups}):
        mine = [g for g in numbers.groups if g.domain == domain]
        conditions = sorted({g.condition for g in mine}, key=condition_order)
        writers = sorted({(g.model, g.mode) for g in mine})
        fig, axes = plt.subplots(1, 2, figsize=(max(7, 2.2 * len(conditions) + 3), 3.8), squeeze=False)
        for ax, (attr, label) in zip(axes[0], (("copy_paste", "copy-paste score"),
                                                ("reference",
                                                 "constraint-reference similarity")), strict=True):
            width = 0.8 / max(1, len(writers))
            for k, (model, mode) in enumerate(writers):
                xs, ys, lo, hi = [], [], [], []
                for c, condition in enumerate(conditions):
                    g = next((g for g in mine
                              if (g.condition, g.model, g.mode) == (condition, model, mode)), None)
                    iv = getattr(g, attr) if g is not None else None
                    if iv is None or math.isnan(iv.value):
                        continue
                    xs.append(c - 0.4 + width * (k + 0.5))
                    ys.append(iv.value)
                    lo.append(0 if math.isnan(iv.low) else iv.value - iv.low)
                    hi.append(0 if math.isnan(iv.high) else iv.high - iv.value)
                ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3,
                       label=f"{model}{f' [{mode}]' if mode else ''}")
            ax.set_xticks(range(len(conditions)), conditions)
            ax.set_ylim(0, 1)
            ax.set_title(label)
        axes[0][0].set_ylabel("mean cosine (95% CI)")
        axes[0][0].legend(fontsize=8)
        fig.suptitle(f"{domain}: copying by condition (lower is less copy-paste)")
        name = "".join(ch if ch.isalnum() else "_" for ch in domain) or "all"
        written.append(save_chart(fig, out / f"copying_{name}.png"))
    return written
