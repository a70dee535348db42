"""The report page's first screen, plain HTML the browser paints before it reads any data block:
the condition x model tables (raw rates, each beside its corrected one when a judge's error is
measured, a "?" on an unvalidated judge's), the Org vs Core charts as inline SVG, the depth
profile across summary ratios and each judge's measured error. Drawn from the report's groups
(pipeline.outputs.report), never recomputed.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

from pipeline.analysis.correction import VALIDATE_COMMAND
from pipeline.core.intervals import ci_parts
from pipeline.outputs.report import (
    any_corrected,
    condition_order,
    corrected_group,
    main_groups,
    validation_caption,
    writer_label,
)

if TYPE_CHECKING:
    from pipeline.outputs.report import Report


def esc(value: Any) -> str:
    """Text made safe anywhere in the page, attribute values included."""
    return html.escape(str(value), quote=True)


def pct(x: float | None, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.{digits}f}"


def _ci_html(iv: Any) -> str:
    parts = ci_parts(iv)
    return f"{parts[0]} <small>{parts[1]}</small>" if isinstance(parts, tuple) else parts


# Beside a raw rate whose judge has no validation (pipeline.analysis.correction): the mark, and the command.
UNVALIDATED = (f' <sup class="unvalidated" title="unvalidated judge: raw rate; '
               f'`{esc(VALIDATE_COMMAND)}` validates'
               ' it">?</sup>')


def _rates_html(report: Report, g: Any, corrected: bool) -> list[str]:
    """Org, Core and superficial: raw (marked when a judge is unvalidated), each followed by its
    corrected figure when the table shows them (pipeline.outputs.report's, as `report` prints)."""
    fixed = corrected_group(report, g.key)
    mark = UNVALIDATED if fixed.reason.startswith("unvalidated") else ""
    raw = [_ci_html(g.org), _ci_html(g.core), _ci_html(g.superficial)]
    raw = [cell + mark if cell != "-" else cell for cell in raw]
    if not corrected:
        return raw
    r = fixed.rates
    fixed_cells = [_ci_html(r.org), _ci_html(r.core), _ci_html(r.superficial)] if r else ["-", "-", "-"]
    return [cell for pair in zip(raw, fixed_cells) for cell in pair]


def judges_html(report: Report) -> str:
    """Each judge's validation beside the numbers: its measured error (the real-text check's, or a
    constructed check's, said so), at chance, or unvalidated with the command; and where the real-text
    and the constructed checks disagree beyond their intervals, the sentence that says so."""
    c = report.correction
    if c is None or not c.judges:
        return ""
    items = "".join(f'<li class="{"ok" if s.informative else "warn"}">{esc(s.line())}</li>' for s in c.judges)
    items += "".join(f'<li class="warn">{esc(line)}</li>' for line in [*c.disagreements(), *c.standing])
    return (f'<section id="judges"><h3>Judges\' measured error (the corrected rates use '
            f'it)</h3><ul>{items}</ul></section>')


def gate_html(report: Report) -> str:
    """The constraint gate per condition and stage (pipeline.outputs.report_text.gate_document's table)."""
    from pipeline.outputs.report_text import gate_document
    from pipeline.outputs.tables import Sheet

    items = gate_document(report.gate)
    if not items or not isinstance(items[0], Sheet):
        return ""
    sheet = items[0]
    head = "".join(f"<th>{esc(h)}</th>" for h in sheet.headers)
    body = "".join("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in row) + "</tr>"
                   for row in sheet.rows)
    notes = "".join(f"<p class=\"meta\">{esc(getattr(n, 'text', ''))}</p>" for n in items[1:])
    return (f"<section id=\"gate\"><h2>Constraint gate</h2><p class=\"meta\">{esc(sheet.title)}.</p>"
            f"<table class=\"groups\"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{notes}"
            "</section>")


def tables_html(report: Report) -> str:
    groups = main_groups(report)
    ratio = report.ratio
    core = f"Core@{ratio:g}" if ratio is not None else "Core"
    has_copy = any("copy_a_ngrams" in g.extra for g in groups)
    has_sim = any("sim_ref_a" in g.extra for g in groups)
    corrected = any_corrected(report)
    caption, raw = validation_caption(report)
    parts = []
    for domain in sorted({g.domain for g in groups}):
        mine = sorted((g for g in groups if g.domain == domain),
                      key=lambda g: (condition_order(g.condition), g.model, g.mode))
        rate_heads = ["Org", core, "superficial"]
        if corrected:  # raw and corrected side by side
            rate_heads = [h for name in rate_heads for h in (name, f"{name} corr.")]
        head = ["condition", "model", *rate_heads, "judge κ", "n", "coverage %", "verdicts given"]
        if has_copy:
            head += ["copied 5-grams A / B", "copied words A / B %"]
        if has_sim:
            head += ["c-ref cos A / B", "c-resp cos"]
        rows = []
        for g in mine:
            warned = report.warned(g)
            cells = [esc(g.condition), esc(writer_label(g.model, g.mode, set())),
                     *_rates_html(report, g, corrected),
                     "-" if math.isnan(g.kappa) else f"{g.kappa:.2f}", str(g.n),
                     pct(g.coverage) + (' <b class="warn" title="see the warnings">!</b>' if warned else ""),
                     f"{g.judged_items} / {g.expected_items}"]
            e = g.extra
            if has_copy:
                cells.append(f"{_fmt(e.get('copy_a_ngrams'), 1)} / {_fmt(e.get('copy_b_ngrams'), 1)}")
                cells.append(f"{pct(e.get('copy_a_share', math.nan))} / "
                             f"{pct(e.get('copy_b_share', math.nan))}")
            if has_sim:
                cells.append(f"{_fmt(e.get('sim_ref_a'), 2)} / {_fmt(e.get('sim_ref_b'), 2)}")
                cells.append(_fmt(e.get("sim_response"), 2))
            key = "|".join(str(x) for x in (g.domain, g.condition, g.model, g.mode))
            rows.append(f'<tr data-group="{esc(key)}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        parts.append(f'<section class="domain"><h3>{esc(domain)}: Org and Core (% of '
                     'constraints, bootstrap 95% CI'
                     f' over instructions)</h3><table class="groups"><thead><tr>'
                     + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr></thead><tbody>" + "".join(rows)
                     + "</tbody></table>"
                     + (f'<p class="caption{" warn" if raw else ""}">{esc(caption)}</p>' if caption else "")
                     + _chart(report, domain, mine) + "</section>")
    return "".join(parts)


def _fmt(x: float | None, digits: int) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


PALETTE = ["#3465a4", "#c4a000", "#4e9a06", "#ce5c00", "#75507b", "#cc0000", "#06989a", "#555753"]


def _chart(report: Report, domain: str, groups: list[Any]) -> str:
    """Org and Core bars with 95% whiskers per condition x model, as inline SVG."""
    conditions = sorted({g.condition for g in groups}, key=condition_order)
    systems = sorted({(g.model, g.mode) for g in groups})
    if not conditions or not systems:
        return ""
    bar, gap, top, height, left = 14, 18, 20, 180, 40
    per = 2 * len(systems) * bar
    width = left + len(conditions) * (per + gap) + 10
    y = lambda v: top + height * (1 - v)  # noqa: E731 - a tiny scale
    total = top + height + 30 + 16 * len(systems)  # the legend: one line per model
    width = max(width, 320)
    out = [f'<svg class="chart" role="img" aria-label="{esc(domain)}: Org vs Core" '
           f'viewBox="0 0 {width} {total}"'
           f' width="{width}" height="{total}">']
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<line x1="{left}" x2="{width - 5}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" class="grid"/>'
                   f'<text x="{left - 4}" y="{y(tick) + 4:.1f}" class="tick" '
                   f'text-anchor="end">{int(tick * 100)}</text>')
    for c, condition in enumerate(conditions):
        x0 = left + c * (per + gap) + gap / 2
        out.append(f'<text x="{x0 + per / 2:.1f}" y="{top + height + 16}" text-anchor="middle" class="tick">'
                   f'{esc(condition)}</text>')
        for s, system in enumerate(systems):
            g = next((g for g in groups if g.condition == condition and (g.model, g.mode) == system), None)
            if g is None:
                continue
            for k, (metric, iv) in enumerate((("Org", g.org), ("Core", g.core))):
                if math.isnan(iv.value):
                    continue
                x = x0 + (2 * s + k) * bar
                color = PALETTE[s % len(PALETTE)]
                parts = ci_parts(iv)
                value, interval = parts if isinstance(parts, tuple) else (parts, "")
                title = f"{writer_label(*system, set())} {metric}: {value}% {interval}".rstrip()
                out.append(f'<rect x="{x:.1f}" y="{y(iv.value):.1f}" width="{bar - 2}" '
                           f'height="{height * iv.value:.1f}"'
                           f' fill="{color}" '
                           f'fill-opacity="{1.0 if k == 0 else 0.45}"><title>{esc(title)}</title></rect>')
                if not math.isnan(iv.low):
                    cx = x + (bar - 2) / 2
                    out.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(iv.high):.1f}" '
                               f'y2="{y(iv.low):.1f}" class="whisker"/>')
    for s, system in enumerate(systems):
        ly = top + height + 26 + 16 * s
        out.append(f'<rect x="{left}" y="{ly}" width="10" height="10" fill="{PALETTE[s % len(PALETTE)]}"/>'
                   f'<text x="{left + 14}" y="{ly + 9}" class="tick">{esc(writer_label(*system, set()))}'
                   " (solid: Org, pale: Core)</text>")
    out.append("</svg>")
    return "".join(out)


def depth_html(report: Report) -> str:
    m = report.metrics
    if len(m.ratios) < 2:
        return ""
    ratios = sorted(m.ratios, reverse=True)
    keys = sorted({g.key[:4] for g in m.groups if g.ratio is not None},
                  key=lambda k: (k[0], condition_order(k[1]), k[2], k[3]))
    rows = []
    for domain, condition, model, mode in keys:
        org = m.group(domain, condition, model, mode, None)
        cells = [esc(domain), esc(condition), esc(writer_label(model, mode, set())), pct(org.org.value)
                 if org else "-"]
        for r in ratios:
            g = m.group(domain, condition, model, mode, r)
            cells.append(pct(g.core.value) if g else "-")
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = ["domain", "condition", "model", "Org"] + [f"Core@{r:g}" for r in ratios]
    return ("<h3>Depth profile: Core across summary ratios (%)</h3><table><thead><tr>"
            + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr></thead><tbody>" + "".join(rows)
            + "</tbody></table>")
