"""Report: condition x model tables with 95% bootstrap intervals, and a chart of Org vs Core.

Intervals resample instructions (the unit of independence): Org and Core are means of
per-instruction shares; the superficial rate is pooled (flipped over satisfied), as in the
paper, via ``pipeline.stats``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from ..data import Analysis, InstructionRow

CONDITION_ORDER = ("single", "none", "direct", "eval")


@dataclass
class Cell:
    condition: str
    model: str
    n: int
    org: tuple[float, float, float]  # value, low, high
    core: tuple[float, float, float]
    superficial: tuple[float, float, float]


def _interval(values: list[float], seed: int) -> tuple[float, float, float]:
    from pipeline.stats import bootstrap_mean

    iv = bootstrap_mean(values, seed=seed)
    return iv.value, iv.low, iv.high


def _ratio(num: list[float], den: list[float], seed: int) -> tuple[float, float, float]:
    from pipeline.stats import bootstrap_ratio

    iv = bootstrap_ratio(num, den, seed=seed)
    return iv.value, iv.low, iv.high


def report_cells(analysis: Analysis, seed: int = 0) -> list[Cell]:
    groups: dict[tuple[str, str], list[InstructionRow]] = {}
    for row in analysis.rows:
        groups.setdefault((row.condition, row.model), []).append(row)
    order = {c: i for i, c in enumerate(CONDITION_ORDER)}
    cells = []
    for (condition, model), rows in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0])):
        cells.append(Cell(
            condition, model, len(rows),
            _interval([r.org for r in rows if r.org is not None], seed),
            _interval([r.core for r in rows if r.core is not None], seed),
            _ratio([float(r.flipped) for r in rows], [float(r.passed) for r in rows], seed)))
    return cells


def _fmt(iv: tuple[float, float, float]) -> str:
    v, lo, hi = iv
    if math.isnan(v):
        return "-"
    if math.isnan(lo):
        return f"{100 * v:.1f}"
    return f"{100 * v:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


class ReportScreen(Screen):
    BINDINGS = [Binding("g", "toggle_chart", "Chart: Org/Core or superficial")]

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[Cell] = []
        self.chart = "org_core"

    def compose(self) -> ComposeResult:
        from textual_plotext import PlotextPlot

        yield Header()
        yield Static(id="report-head")
        with Horizontal(id="report-body"):
            yield DataTable(id="report-table", cursor_type="row", zebra_stripes=True)
            yield PlotextPlot(id="report-chart")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#report-table", DataTable)
        for label, key in (("condition", "condition"), ("model", "model"), ("n", "n"), ("Org %", "org"),
                           ("Core %", "core"), ("superficial %", "sup")):
            table.add_column(label, key=key)
        self.watch(self.app, "analysis", self._on_analysis)

    def _on_analysis(self, analysis: Analysis | None) -> None:
        if analysis is None:
            self.query_one("#report-head", Static).update("computing…")
            return
        self._compute(analysis)

    @work(thread=True, exclusive=True, group="report", exit_on_error=False)
    def _compute(self, analysis: Analysis) -> None:
        cells = report_cells(analysis, seed=self.app.sample_seed)
        self.app.call_from_thread(self._show, analysis, cells)

    def _show(self, analysis: Analysis, cells: list[Cell]) -> None:
        self.cells = cells
        table = self.query_one("#report-table", DataTable)
        table.clear()
        table.add_rows([(c.condition, c.model, str(c.n), _fmt(c.org), _fmt(c.core), _fmt(c.superficial))
                        for c in cells])
        self.query_one("#report-head", Static).update(
            f"{len(analysis.rows):,} instruction x model rows · summary ratio {analysis.ratio:g} · "
            "95% bootstrap intervals over instructions (1,000 resamples, seeded)")
        self._plot()

    def action_toggle_chart(self) -> None:
        self.chart = "superficial" if self.chart == "org_core" else "org_core"
        self._plot()

    def _plot(self) -> None:
        from textual_plotext import PlotextPlot

        widget = self.query_one("#report-chart", PlotextPlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        if not self.cells:
            widget.refresh()
            return
        labels = [f"{c.condition[:4]}/{c.model[-6:]}" for c in self.cells]
        if self.chart == "org_core":
            plt.multiple_bar(labels, [[100 * c.org[0] for c in self.cells], [100 * c.core[0] for c in self.cells]],
                             labels=["Org", "Core"])
            plt.title("Org vs Core (%)")
        else:
            plt.bar(labels, [100 * (0 if math.isnan(c.superficial[0]) else c.superficial[0]) for c in self.cells])
            plt.title("superficial (% of satisfied)")
        plt.ylim(0, 100)
        widget.refresh()
