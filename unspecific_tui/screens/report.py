"""Report: condition x model tables with 95% bootstrap intervals, and a chart of Org vs Core.

The numbers are pipeline.analysis.metrics' groups (the same the `unspecific report` command prints):
Org and Core are means of per-response shares, the superficial share is pooled per rater,
intervals resample instructions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, Footer, Header, Static

from pipeline.analysis.coverage import MIN_COVERAGE
from unspecific_tui.data import Analysis
from unspecific_tui.screens.base import AppScreen

CONDITION_ORDER = ("single", "none", "direct", "eval", "human")


@dataclass
class Cell:
    domain: str
    condition: str
    model: str
    mode: str  # direct | edit: one model's two response modes are two rows
    n: int
    org: tuple[float, float, float]  # value, low, high
    core: tuple[float, float, float]
    superficial: tuple[float, float, float]
    kappa: float
    coverage: float = math.nan  # verdicts given / expected (pipeline.analysis.coverage)
    low: bool = False  # under the minimum coverage: its rates leave too much out


def report_cells(analysis: Analysis) -> list[Cell]:
    """pipeline.analysis.metrics groups at the analysis' summary ratio, in the paper's condition order."""
    metrics = analysis.metrics
    if metrics is None:
        return []
    order = {c: i for i, c in enumerate(CONDITION_ORDER)}
    groups = [g for g in metrics.groups if g.ratio is not None and abs(g.ratio - analysis.ratio) < 1e-9]
    groups.sort(key=lambda g: (g.domain, order.get(g.condition, 99), g.condition, g.model, g.mode))
    return [Cell(g.domain, g.condition, g.model, g.mode, g.n,
                 (g.org.value, g.org.low, g.org.high), (g.core.value, g.core.low, g.core.high),
                 (g.superficial.value, g.superficial.low, g.superficial.high), g.kappa, g.coverage,
                 g.expected_items > 0 and g.judged_items < MIN_COVERAGE * g.expected_items) for g in groups]


def warning_lines(analysis: Analysis) -> list[str]:
    """The report's warnings (pipeline.outputs.report: low coverage, Core above Org, one instruction, a
    constant judge), as the `unspecific report` command prints them."""
    from pipeline.outputs.report import ReportOptions, report_warnings

    if analysis.metrics is None:
        return []
    return [w.message for w in report_warnings(analysis.metrics, ReportOptions())]


def _coverage(cell: Cell) -> Text:
    text = "-" if math.isnan(cell.coverage) else f"{100 * cell.coverage:.1f}"
    return Text(f"{text} !", style="bold red") if cell.low else Text(text)


def _fmt(iv: tuple[float, float, float]) -> str:
    v, lo, hi = iv
    if math.isnan(v):
        return "-"
    if math.isnan(lo):
        return f"{100 * v:.1f}"
    return f"{100 * v:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"


class ReportScreen(AppScreen):
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
        # CS4's own analysis, when the store holds instruction families: satisfaction against the
        # number of constraints (hidden otherwise).
        yield DataTable(id="family-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#report-table", DataTable)
        for label, key in (("domain", "domain"), ("condition", "condition"), ("model", "model"), ("mode", "mode"),
                           ("n", "n"),
                           ("Org %", "org"), ("Core %", "core"), ("superficial %", "sup"), ("κ judges", "kappa"),
                           ("coverage %", "coverage")):
            table.add_column(label, key=key)
        families = self.query_one("#family-table", DataTable)
        for label, key in (("constraints", "level"), ("model", "model"), ("mode", "mode"), ("n", "n"),
                           ("Org %", "org"), ("Core %", "core")):
            families.add_column(label, key=key)
        families.border_title = "satisfaction by number of constraints (instruction families)"
        families.display = False
        self.watch(self.app, "analysis", self._on_analysis)

    def _on_analysis(self, analysis: Analysis | None) -> None:
        if analysis is not None and not analysis.rows:
            self.query_one("#report-head", Static).update("No judged responses yet: run the evaluation stages (1).")
            return
        if analysis is None or analysis.metrics is None:
            self.query_one("#report-head", Static).update("computing the metrics…")
            return
        self._show(analysis, report_cells(analysis))

    def _show(self, analysis: Analysis, cells: list[Cell]) -> None:
        self.cells = cells
        table = self.query_one("#report-table", DataTable)
        table.clear()
        # Text cells: a model name with "[" in it is not Rich markup.
        table.add_rows([(Text(c.domain), Text(c.condition), Text(c.model), Text(c.mode), str(c.n), _fmt(c.org),
                         _fmt(c.core), _fmt(c.superficial), "-" if math.isnan(c.kappa) else f"{c.kappa:.2f}",
                         _coverage(c)) for c in cells])
        head = Text.from_markup(
            f"{len(cells)} groups · summary ratio {analysis.ratio:g} · judges {', '.join(analysis.metrics.raters)} · "
            "95% bootstrap intervals over instructions")
        for line in warning_lines(analysis):
            head.append("\n! " + line, style="bold red")
        from pipeline.analysis.judge_validation import describe as describe_judge

        for rater in analysis.metrics.raters:  # every number in the table rests on these judges
            head.append("\n" + describe_judge(rater, analysis.judges_validated), style="dim")
        self.query_one("#report-head", Static).update(head)
        self._show_families(analysis.families)
        self._plot()

    def _show_families(self, levels: list) -> None:  # pipeline.outputs.report.FamilyLevel
        table = self.query_one("#family-table", DataTable)
        table.clear()
        table.display = bool(levels)
        table.add_rows([(str(f.level), Text(f.model), Text(f.mode), str(f.n),
                         _fmt((f.org.value, f.org.low, f.org.high)), _fmt((f.core.value, f.core.low, f.core.high)))
                        for f in levels])

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.cells:
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
        # One domain at a time (the highlighted row's): 4 conditions x models stay readable.
        table = self.query_one("#report-table", DataTable)
        row = min(max(table.cursor_row, 0), len(self.cells) - 1)
        domain = self.cells[row].domain
        cells = [c for c in self.cells if c.domain == domain]
        labels = [f"{c.condition[:4]}/{c.model[-7:]}" + (f"/{c.mode[:4]}" if c.mode else "") for c in cells]
        if self.chart == "org_core":
            plt.multiple_bar(labels, [[100 * c.org[0] for c in cells], [100 * c.core[0] for c in cells]],
                             labels=["Org", "Core"])
            plt.title(f"{domain}: Org vs Core (%)")
        else:
            plt.bar(labels, [100 * (0 if math.isnan(c.superficial[0]) else c.superficial[0]) for c in cells])
            plt.title(f"{domain}: superficial (% of satisfied)")
        plt.ylim(0, 100)
        widget.refresh()
