"""The report page's copying section: the method's copy numbers (pipeline.analysis.copy_numbers, as
the report model holds them) as a table per domain with an inline SVG chart, and the paired tests of
single against the common conditions in words (pipeline.outputs.copy_report's lines). Plain HTML,
painted before any data block; nothing is recomputed."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pipeline.analysis.report_model import condition_order
from pipeline.outputs.copy_report import TITLE, num, test_line, verdict_line
from pipeline.outputs.html_tables import esc

if TYPE_CHECKING:
    from pipeline.analysis.copy_numbers import CopyGroup
    from pipeline.outputs.report import Report

BAR, GAP, HEIGHT = 14, 10, 120  # the chart's bar width, gap between conditions and plot height (px)
COLOURS = ("#c678dd", "#56b6c2")  # copy-paste, reference similarity


def copying_html(report: Report) -> str:
    numbers = report.copying
    if numbers is None or numbers.empty:
        return ""
    parts = [f"<section id=\"copying\"><h2>Copying</h2><p class=\"meta\">{esc(TITLE)}.</p>"]
    for domain in sorted({g.domain for g in numbers.groups}):
        mine = sorted((g for g in numbers.groups if g.domain == domain),
                      key=lambda g: (condition_order(g.condition), g.model, g.mode))
        rows = "".join(
            f"<tr><td>{esc(g.condition)}</td><td>{esc(g.model + (f' [{g.mode}]' if g.mode else ''))}</td>"
            f"<td>{esc(num(g.copy_paste))}</td><td>{esc(num(g.reference))}</td><td>{g.instructions}</td></tr>"
            for g in mine)
        tests = "".join(f"<li>{esc(test_line(t))}</li>" for t in numbers.tests if t.domain == domain)
        parts.append(f"<section class=\"domain\"><h3>{esc(domain)}</h3><table class=\"groups\"><thead><tr>"
                     "<th>condition</th><th>model</th><th>copy-paste</th><th>c-ref "
                     "sim</th><th>n</th></tr></thead>"
                     f"<tbody>{rows}</tbody></table>{_chart(mine)}"
                     + (f"<ul class=\"tests\">{tests}</ul>" if tests else "") + "</section>")
    if numbers.missing_echo:
        parts.append(f"<p class=\"muted\">{numbers.missing_echo:,} (constraint, response) "
                     "pairs have no copy-paste"
                     " score yet: <code>unspecific evidence</code> computes them.</p>")
    parts.append(f"<p>{esc(verdict_line(numbers))}</p></section>")
    return "".join(parts)


def _chart(groups: list[CopyGroup]) -> str:
    """Per row of the table, two bars (copy-paste, reference similarity) on a 0-1 scale, with their
    intervals as whiskers."""
    width = len(groups) * (2 * BAR + GAP) + GAP
    shapes = []
    for k, g in enumerate(groups):
        x0 = GAP + k * (2 * BAR + GAP)
        for j, iv in enumerate((g.copy_paste, g.reference)):
            if math.isnan(iv.value):
                continue
            x, h = x0 + j * BAR, HEIGHT * max(0.0, min(1.0, iv.value))
            shapes.append(f'<rect x="{x}" y="{HEIGHT - h:.1f}" width="{BAR - 2}" height="{h:.1f}" '
                          f'fill="{COLOURS[j]}">'
                          f"<title>{esc(g.condition)} {esc(g.model)}: {iv.value:.2f}</title></rect>")
            if not math.isnan(iv.low):
                cx = x + (BAR - 2) / 2
                shapes.append(f'<line x1="{cx}" x2="{cx}" y1="{HEIGHT * (1 - iv.high):.1f}"'
                              f' y2="{HEIGHT * (1 - iv.low):.1f}" stroke="#333"/>')
        shapes.append(f'<text x="{x0}" y="{HEIGHT + 12}" font-size="9">{esc(g.condition[:6])}</text>')
    legend = ("<p class=\"legend\"><span style=\"color:#c678dd\">■</span> copy-paste score "
              "<span style=\"color:#56b6c2\">■</span> constraint-reference similarity (0 to 1)</p>")
    return (f'<svg class="copying-chart" width="{width}" height="{HEIGHT + 16}" role="img"'
            f' aria-label="copying by condition">{"".join(shapes)}</svg>{legend}')
