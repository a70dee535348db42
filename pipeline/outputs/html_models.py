"""The report page's "Models compared" section: per model pair the table of
pipeline.outputs.models_report (each model's value with its interval, the difference, p, p Holm), its
sentence, the Holm family and each model's refusals, in the same words as the text report. Plain
HTML, painted before any data block; nothing is recomputed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.outputs.html_tables import esc
from pipeline.outputs.models_report import (
    DIFFERENCE,
    HEADING,
    caption,
    diff_cell,
    family_note,
    metric_label,
    p_cell,
    refusal_line,
    value_cell,
    verdict_sentence,
)
from pipeline.outputs.tables import Cell, Value

if TYPE_CHECKING:
    from pipeline.analysis.model_duel import ModelPair
    from pipeline.outputs.report import Report


def _cell(cell: Cell) -> str:
    """A value, and its interval in small type."""
    if isinstance(cell, Value):
        return esc(cell.shown) + (f" <small>{esc(cell.interval)}</small>" if cell.interval else "")
    return f"{esc(cell[0])} <small>{esc(cell[1])}</small>" if isinstance(cell, tuple) else esc(cell)


def _pair_table(pair: ModelPair, ratio: float | None) -> str:
    headers = ("domain", "condition", "metric", pair.a, pair.b, DIFFERENCE, "p", "p Holm", "n")
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    rows = []
    for row in pair.rows:
        c = row.comparison
        cells = [esc(c.domain), esc(c.within), esc(metric_label(c.metric, ratio)),
                 _cell(value_cell(c.metric, row.a)), _cell(value_cell(c.metric, row.b)),
                 _cell(diff_cell(row)), _cell(p_cell(c.test.p_value)), _cell(p_cell(c.p_holm)), str(c.test.n)]
        rows.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
    return (f'<table class="groups models"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
            "</table>"
            f'<p class="meta">{esc(caption(pair))}.</p>')


def models_html(report: Report) -> str:
    duel = report.models
    if duel is None or not duel.refusals:
        return ""
    parts = [f'<section id="models"><h2>{HEADING if duel.pairs else "Models"}</h2>']
    for pair in duel.pairs:
        parts.append(f"<section class=\"pair\"><h3>{esc(pair.a)} vs {esc(pair.b)} (paired on the same"
                     " instructions)</h3>" + (_pair_table(pair, report.ratio) if pair.rows else "")
                     + f'<p class="verdict"><b>{esc(verdict_sentence(pair))}</b></p></section>')
    if any(p.rows for p in duel.pairs):
        parts.append(f'<p class="meta">{esc(family_note(duel))}.</p>')
    if duel.pairs and duel.copy_paste_missing:
        parts.append('<p class="muted">copy-paste: not compared, no copy-paste score is stored yet'
                     " (<code>unspecific evidence</code> computes it).</p>")
    parts.append(f'<p class="refusals">{esc(refusal_line(duel))}</p></section>')
    return "".join(parts)
