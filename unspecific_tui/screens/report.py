"""Report: condition x model tables with 95% bootstrap intervals, and a chart of Org vs Core.

The numbers are pipeline.analysis.metrics' groups (the same the `unspecific report` command prints):
Org and Core are means of per-response shares, the superficial share is pooled per rater,
intervals resample instructions. Beside them, the same rates corrected for each judge's measured
sensitivity and specificity (pipeline.analysis.correction, the rows `report` prints as "corr."),
or, for a judge with no validation, a mark and the one command that validates it.

The table fits the terminal: it takes the widest layout whose columns all show (full intervals,
then short ones, then values with raw and corrected in one cell); the highlighted row's full
figures stand under the table, and `i` forces the intervals (the table then scrolls sideways,
and says so). The warnings are one line that `w` (or a click) opens as a list.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Header, Static

from pipeline.analysis.coverage import MIN_COVERAGE
from pipeline.core.definitions import same_ratio
from pipeline.core.intervals import ci
from unspecific_tui.data import Analysis
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.widgets.chart import Bar, bar_chart
from unspecific_tui.widgets.fit import distinct_clip
from unspecific_tui.widgets.footer import KeyFooter

CONDITION_ORDER = ("single", "none", "direct", "eval", "human")
Triple = tuple[float, float, float]  # value, low, high (NaN where undefined)
NAN3: Triple = (math.nan, math.nan, math.nan)
UNVALIDATED_MARK = "?"  # beside a raw rate whose judge has no validation
# The chart's fewest lines (its title, bars and axis): narrower than -wide it stands under the table
# when the table and its row's line leave this many free, else the table takes them.
CHART_MIN_LINES = 8


@dataclass
class Cell:
    domain: str
    condition: str
    model: str
    mode: str  # direct | edit: one model's two response modes are two rows
    n: int
    org: Triple
    core: Triple
    superficial: Triple
    kappa: float
    coverage: float = math.nan  # verdicts given / expected (pipeline.analysis.coverage)
    low: bool = False  # under the minimum coverage: its rates leave too much out
    # Org, Core and superficial corrected for the judges' error (pipeline.analysis.correction); None
    # where the group has no corrected figure (a judge unvalidated or no better than chance).
    corrected: tuple[Triple, Triple, Triple] | None = None


def _triple(iv: Any) -> Triple:
    return (iv.value, iv.low, iv.high)


def report_cells(analysis: Analysis) -> list[Cell]:
    """pipeline.analysis.metrics groups at the analysis' summary ratio, in the paper's condition order,
    each with its corrected rates where its judges have an informative validation."""
    metrics = analysis.metrics
    if metrics is None:
        return []
    correction = analysis.correction
    order = {c: i for i, c in enumerate(CONDITION_ORDER)}
    groups = [g for g in metrics.groups if g.ratio is not None and same_ratio(g.ratio, analysis.ratio)]
    groups.sort(key=lambda g: (g.domain, order.get(g.condition, 99), g.condition, g.model, g.mode))
    cells = []
    for g in groups:
        fixed = correction.group(g.key) if correction is not None else None
        rates = fixed.rates if fixed is not None else None
        cells.append(Cell(g.domain, g.condition, g.model, g.mode, g.n, _triple(g.org), _triple(g.core),
                          _triple(g.superficial), g.kappa, g.coverage,
                          g.expected_items > 0 and g.judged_items < MIN_COVERAGE * g.expected_items,
                          (_triple(rates.org), _triple(rates.core), _triple(rates.superficial))
                          if rates else None))
    return cells


def warning_lines(analysis: Analysis) -> list[str]:
    """The report's warnings (pipeline.outputs.report: low coverage, Core above Org, one instruction, a
    constant judge; and a judge no better than chance), as the `unspecific report` command prints them."""
    from pipeline.outputs.report import ReportOptions, report_warnings

    if analysis.metrics is None:
        return []
    lines = [w.message for w in report_warnings(analysis.metrics, ReportOptions())]
    correction = analysis.correction
    return lines + (correction.warnings() if correction is not None else [])


def conclusion(duel: Any) -> Text:
    """What `report` concludes, in its words: each model pair's one sentence with its paired tests
    (pipeline.outputs.models_report.verdict_sentence); while the tests run, that they do."""
    from pipeline.outputs.models_report import HEADING, verdict_sentence

    head = (f"{HEADING}: ", "bold")
    if duel is None:
        return Text.assemble(head, ("running the report's paired tests…", "dim"))
    if not duel.pairs:
        models = ", ".join(r.model for r in duel.refusals) or "none"
        return Text.assemble(head, f"one model under test ({models}): nothing to compare; a second "
                             "(`unspecific evaluate --models NAME`) adds the paired tests")
    return Text.assemble(head, " ".join(verdict_sentence(pair) for pair in duel.pairs))


def judge_lines(analysis: Analysis) -> list[str]:
    """Each judge's validation as `report` prints it (pipeline.analysis.correction.JudgeStatus.line)."""
    correction = analysis.correction
    if correction is None:
        return []
    return [s.line() for s in correction.judges] + correction.disagreements() + correction.standing


def judges_summary(analysis: Analysis) -> Text:
    """One line: each judge's validation in a few words, and for unvalidated ones the mark on their
    raw rates and the one command that validates them."""
    from pipeline.analysis.correction import CONSTRUCTED, VALIDATE_COMMAND

    correction = analysis.correction
    if correction is None:
        return Text("judges' validation: computing…", style="dim")
    out = Text("judges: ")
    for k, s in enumerate(correction.judges):
        c = s.check
        if k:
            out.append(" · ")
        out.append(s.judge)
        if not s.validated:
            out.append(" unvalidated", style="bold yellow")
        elif not s.informative:
            out.append(" at chance: no corrected figure", style="bold red")
        else:
            where = {"people": "real text", "builtin": "built-in"}.get(c.source, "own set")
            out.append(f" sens {c.sensitivity:.2f} spec {c.specificity:.2f} ({where})")
    if correction.constructed_only:
        out.append(f" · corrected by a check {CONSTRUCTED}", style="yellow")
    for line in correction.disagreements():
        out.append(f" · {line}", style="bold yellow")
    if correction.unvalidated:
        out.append(f" · {UNVALIDATED_MARK} = raw, unvalidated: `{VALIDATE_COMMAND}`", style="bold yellow")
    return out


def _coverage(cell: Cell) -> Text:
    text = "-" if math.isnan(cell.coverage) else f"{100 * cell.coverage:.1f}"
    return Text(f"{text} !", style="bold red") if cell.low else Text(text)


def _fmt(iv: Triple, style: str = "interval") -> str:
    """A rate in percent, as every output writes one (pipeline.core.intervals.ci): 'interval'
    81.4 [78.2, 84.6]; 'short' 81.4 [78, 85]; 'value' 81.4."""
    v, lo, hi = iv
    if style == "value":
        lo = hi = math.nan
    return ci((v, lo, hi), interval_digits=0 if style == "short" else None)


@dataclass(frozen=True)
class Layout:
    """How the table shows its rows: the rates' format, and whether a column holding one value for
    every row (one domain, one mode) goes. Raw and corrected rates always sit in columns of their
    own, side by side (never one cell: "76.9>93.5" read as a comparison)."""

    style: str  # interval | short | value
    drop_constant: bool = False
    drop: tuple[str, ...] = ()  # columns that go too (the highlighted row's line under the table has them)
    model_width: int | None = None  # the model's name after its last "/", cut to this width (None: whole)


LAYOUTS = (Layout("interval"), Layout("short"), Layout("value"), Layout("value", drop_constant=True),
           Layout("value", drop_constant=True, model_width=24),
           Layout("value", drop_constant=True, drop=("n",), model_width=24),
           Layout("value", drop_constant=True, drop=("n", "kappa"), model_width=24),
           Layout("value", drop_constant=True, drop=("n", "kappa"), model_width=16),
           Layout("value", drop_constant=True, drop=("n", "kappa"), model_width=12))


def short_model(name: str, width: int | None, others: Iterable[str] = ()) -> str:
    """'meta-llama/Llama-3.1-70B-Instruct' at 16: 'Llama-3.1-70B-I…' (the row's line has it whole),
    cut where it does not tell it from the ``others`` shown ('…3.1-8B-Instruct' beside 70B)."""
    if width is None:
        return name
    return distinct_clip(name.rsplit("/", 1)[-1], {o.rsplit("/", 1)[-1] for o in others}, width)


@dataclass(frozen=True)
class Column:
    label: str
    key: str
    cell: Callable[[Cell], str | Text]


RATES = (("Org", "org", 0), ("Core", "core", 1), ("sup.", "sup", 2))


def table_columns(cells: list[Cell], layout: Layout, *, marked: bool) -> list[Column]:
    """The columns of ``layout``; ``marked``: the raw rates come from an unvalidated judge."""
    corrected = any(c.corrected for c in cells)
    models = {c.model for c in cells}
    mark = f" {UNVALIDATED_MARK}" if marked else ""
    short = layout.style == "value"  # the labels shrink with the figures
    cols = [Column("domain", "domain", lambda c: Text(c.domain)),
            Column("condition", "condition", lambda c: Text(c.condition)),
            Column("model", "model", lambda c: Text(short_model(c.model, layout.model_width, models))),
            Column("mode", "mode", lambda c: Text(c.mode)),
            Column("n", "n", lambda c: str(c.n))]
    if layout.drop_constant:
        cols = [col for col in cols if col.key not in ("domain", "mode")
                or len({str(col.cell(c)) for c in cells}) > 1]

    def raw(k: int) -> Callable[[Cell], str]:
        return lambda c: _fmt((c.org, c.core, c.superficial)[k], layout.style)

    def fixed(k: int) -> Callable[[Cell], str]:
        return lambda c: _fmt(c.corrected[k], layout.style) if c.corrected else "-"

    for label, key, k in RATES:
        cols.append(Column(f"{label}{'' if short else ' %'}{mark}", key, raw(k)))
        if corrected:  # the corrected rate right of its raw one ("corr." alone where the figures are short)
            cols.append(Column("corr." if short else f"{label} corr.", f"{key}_corr", fixed(k)))
    cols.append(Column("κ" if short else "κ judges", "kappa", lambda c: "-" if math.isnan(c.kappa)
                       else f"{c.kappa:.2f}"))
    cols.append(Column("cov%" if short else "coverage %", "coverage", _coverage))
    return [col for col in cols if col.key not in layout.drop]


def column_width(col: Column, cells: list[Cell]) -> int:
    """A column's widest cell or label."""
    return max([len(col.label), *(len(str(col.cell(c))) for c in cells)])


def columns_width(cols: list[Column], cells: list[Cell]) -> int:
    """The table's width with these columns: each column's width plus its padding (1 each side)."""
    return sum(column_width(col, cells) + 2 for col in cols)


def choose_layout(cells: list[Cell], width: int, *, marked: bool,
                  intervals: bool = False) -> tuple[Layout, bool]:
    """The first layout whose columns fit ``width`` (the last one when none does); and whether it fits.
    ``intervals`` keeps the full intervals whatever the width (the table then scrolls)."""
    candidates = LAYOUTS[:1] if intervals else LAYOUTS
    for layout in candidates:
        if columns_width(table_columns(cells, layout, marked=marked), cells) <= width:
            return layout, True
    return candidates[-1], False


def row_detail(cell: Cell, *, marked: bool) -> str:
    """A row's every figure in full, for under the table: what a narrow layout shortens."""
    parts = [f"{cell.domain}/{cell.condition}/{cell.model}" + (f"/{cell.mode}" if cell.mode else "")]
    for label, _, k in RATES:
        raw = _fmt((cell.org, cell.core, cell.superficial)[k])
        text = f"{label} {raw}{UNVALIDATED_MARK if marked and raw != '-' else ''}"
        if cell.corrected:
            text += f" corr. {_fmt(cell.corrected[k])}"
        parts.append(text)
    parts.append(f"n {cell.n} · κ {'-' if math.isnan(cell.kappa) else f'{cell.kappa:.2f}'}")
    parts.append(f"coverage {_coverage(cell).plain}%")
    return " · ".join(parts)


class WarningsScreen(ModalScreen[None]):
    """The report's warnings and each judge's validation, in full."""

    DEFAULT_CSS = """
    WarningsScreen { align: center middle; background: $background 60%; }
    #warnings-box { width: 90%; max-width: 120; height: auto; max-height: 85%; border: thick $warning;
                    background: $surface; padding: 0 1; }
    #warnings-list { height: auto; max-height: 100%; }
    #warnings-close { height: 1; }
    """
    BINDINGS = [Binding("escape,w,q", "dismiss", "Close")]

    def __init__(self, warnings: list[str], judges: list[str]) -> None:
        super().__init__()
        self.warnings = warnings
        self.judges = judges

    def compose(self) -> ComposeResult:
        with Vertical(id="warnings-box") as box:
            box.border_title = f"{len(self.warnings)} warning(s): figures not to trust as they stand"
            with VerticalScroll(id="warnings-list"):
                for line in self.warnings:
                    yield Static(Text("! " + line, style="bold red"), classes="warning")
                if self.judges:
                    yield Static(Text("Judges' measured error (the corrected rates use it):", style="bold"))
                    for line in self.judges:
                        yield Static(Text("  " + line), classes="judge")
            yield Static("[dim]esc or w to close[/]", id="warnings-close")


class ReportScreen(AppScreen):
    CSS_PATH = "report.tcss"
    BINDINGS = [Binding("g", "toggle_chart", "Chart: Org/Core or superficial"),
                Binding("w", "warnings", "Warnings"),
                Binding("i", "toggle_intervals", "Intervals")]

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[Cell] = []
        self.chart = "org_core"
        self.intervals = False  # full intervals at any width (the table then scrolls sideways)
        self.warnings: list[str] = []
        self.table_layout = LAYOUTS[0]
        self.fits = True
        self._analysis: Analysis | None = None
        self._row_text = Text()  # the highlighted row's line under the table
        self._chart_needed = CHART_MIN_LINES  # the lines the chart needs at this width (_lay_out_body)

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="report-head")
        yield Static(id="report-conclusion")
        yield Static(id="report-judges")
        yield Static(id="report-warnings")
        with Horizontal(id="report-body"):
            with Vertical(id="report-left"):
                yield DataTable(id="report-table", cursor_type="row", zebra_stripes=True)
                yield Static(id="report-row")
            yield Static(id="report-chart")
        # CS4's own analysis, when the store holds instruction families: satisfaction against the
        # number of constraints (hidden otherwise).
        yield DataTable(id="family-table", cursor_type="row", zebra_stripes=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        families = self.query_one("#family-table", DataTable)
        for label, key in (("constraints", "level"), ("model", "model"), ("mode", "mode"), ("n", "n"),
                           ("Org %", "org"), ("Core %", "core")):
            families.add_column(label, key=key)
        families.border_title = "satisfaction by number of constraints (instruction families)"
        families.display = False
        self.query_one("#report-warnings", Static).display = False
        self.watch(self.app, "analysis", self._on_analysis)
        self.watch(self.app, "models_compared", self._on_models)

    def _on_analysis(self, analysis: Analysis | None) -> None:
        if analysis is not None and not analysis.rows:
            self.query_one("#report-head",
                           Static).update("No judged responses yet: run the evaluation stages (1).")
            return
        if analysis is None or analysis.metrics is None:
            self.query_one("#report-head", Static).update("computing the metrics…")
            return
        self._show(analysis, report_cells(analysis))
        self.app.compare_models()  # the conclusion: the paired tests run once per metrics

    def _on_models(self, duel: Any) -> None:
        analysis = self.app.analysis
        ready = analysis is not None and analysis.metrics is not None and bool(analysis.rows)
        self.query_one("#report-conclusion", Static).update(conclusion(duel) if ready else "")
        if ready:
            self.call_after_refresh(self._lay_out_body)  # the conclusion's lines are the table's no more

    @property
    def marked(self) -> bool:
        """The raw rates rest on a judge with no validation."""
        correction = self._analysis.correction if self._analysis is not None else None
        return bool(correction is not None and correction.unvalidated)

    def _show(self, analysis: Analysis, cells: list[Cell]) -> None:
        self._analysis = analysis
        self.cells = cells
        self.warnings = warning_lines(analysis)
        self.query_one("#report-head", Static).update(Text(
            f"{len(cells)} groups · summary ratio {analysis.ratio:g} · 95% bootstrap "
            "intervals over instructions"))
        self.query_one("#report-judges", Static).update(judges_summary(analysis))
        self._show_warnings()
        self._fill_table()
        self._show_families(analysis.families)
        self._plot()
        self.call_after_refresh(self._lay_out_body)  # once the head, warnings and families have their heights

    def _show_warnings(self) -> None:
        """One line: how many, the first one's words, and the key that lists them all."""
        line = self.query_one("#report-warnings", Static)
        line.display = bool(self.warnings)
        if self.warnings:
            line.update(Text.assemble((f"! {len(self.warnings)} warning(s)", "bold red"), " (w: list) ",
                                      (self.warnings[0], "red")))

    def _table_width(self) -> int:
        # The table spans the screen unless the chart stands beside it (-wide); 2 for its scrollbar.
        width = self.size.width or self.app.size.width
        return (width * 3 // 5 if self.has_class("-wide") else width) - 2

    def _fill_table(self) -> None:
        table = self.query_one("#report-table", DataTable)
        cursor = table.cursor_row
        marked = self.marked
        self.table_layout, self.fits = choose_layout(self.cells, self._table_width(), marked=marked,
                                               intervals=self.intervals)
        cols = table_columns(self.cells, self.table_layout, marked=marked)
        table.clear(columns=True)
        for col in cols:  # widths set here: a cleared table keeps its old columns' auto widths
            table.add_column(col.label, key=col.key, width=column_width(col, self.cells))
        # Text cells: a model name with "[" in it is not Rich markup.
        table.add_rows([tuple(col.cell(c) for col in cols) for c in self.cells])
        if self.cells:
            table.move_cursor(row=min(max(cursor, 0), len(self.cells) - 1))
        self._show_row()

    def _show_row(self) -> None:
        """The highlighted row in full under the table; a hint when the table scrolls sideways."""
        out = Text()
        if self.cells:
            row = min(max(self.query_one("#report-table", DataTable).cursor_row, 0), len(self.cells) - 1)
            out.append(row_detail(self.cells[row], marked=self.marked))
        if not self.fits:
            out.append("\n→ more columns: scroll the table right · i: intervals on/off", style="bold yellow")
        self._row_text = out
        self.query_one("#report-row", Static).update(out)

    def on_resize(self, event: events.Resize) -> None:
        if self.cells:
            self._fill_table()
        self.call_after_refresh(self._lay_out_body)  # once the screen's parts have their new sizes

    def _lay_out_body(self) -> None:
        """Wide: the chart beside the table. Otherwise the table as tall as its rows and the chart under
        it in the lines left, when there are CHART_MIN_LINES of them; else the table takes them all."""
        chart, table = self.query_one("#report-chart"), self.query_one("#report-table", DataTable)
        left = self.query_one("#report-left")
        if self.has_class("-wide") or not self.cells:
            table.styles.height = left.styles.height = "1fr"
            chart.display = self.has_class("-wide")
            self._plot()
            return
        body = self.query_one("#report-body").size.height
        # The row's line as it wraps at this width (its padding aside).
        width = max(1, (self.size.width or self.app.size.width) - 2)
        detail = len(self._row_text.wrap(self.app.console, width)) if self._row_text.plain else 0
        rows = table.row_count + 1 + (1 if not self.fits else 0)  # the header; a horizontal scrollbar
        # The chart only whole: each of its bars, its axis and ticks (never a bar cut off).
        needed = max(CHART_MIN_LINES, len(self._chart(self._chart_width()).wrap(self.app.console, width)))
        self._chart_needed = needed
        room = body - rows - detail >= needed
        table.styles.height = rows if room else "1fr"
        left.styles.height = "auto" if room else "1fr"
        chart.display = room
        self._plot()

    def _show_families(self, levels: list) -> None:  # pipeline.analysis.families.FamilyLevel
        table = self.query_one("#family-table", DataTable)
        table.clear()
        table.display = bool(levels)
        table.add_rows([(str(f.level), Text(f.model), Text(f.mode), str(f.n),
                         _fmt((f.org.value, f.org.low, f.org.high)),
                         _fmt((f.core.value, f.core.low, f.core.high)))
                        for f in levels])

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.cells and event.data_table.id == "report-table":
            self._show_row()
            self._lay_out_body()  # the row's domain is charted: its bars may need other lines

    def on_click(self, event: events.Click) -> None:
        if event.widget is not None and event.widget.id == "report-warnings":
            self.action_warnings()

    def action_warnings(self) -> None:
        if self.warnings or self._analysis is not None:
            lines = judge_lines(self._analysis) if self._analysis is not None else []
            self.app.push_screen(WarningsScreen(self.warnings, lines))

    def action_toggle_intervals(self) -> None:
        self.intervals = not self.intervals
        if not self.cells:
            self.notify("no figures yet: nothing to show intervals for")
            return
        before = self.table_layout
        self._fill_table()
        if self.table_layout == before:  # the width already fits them (or fits nothing narrower)
            self.notify("the table shows full intervals at this width already" if before == LAYOUTS[0]
                        else "intervals: the table keeps its columns")
        self.call_after_refresh(self._lay_out_body)

    def action_toggle_chart(self) -> None:
        self.chart = "superficial" if self.chart == "org_core" else "org_core"
        self._plot()
        what = "Org vs Core" if self.chart == "org_core" else "the superficial rate"
        if not self.query_one("#report-chart").display:
            self.notify(f"the chart ({what}) needs {self._chart_needed} free lines under the table (a line"
                        " a bar, its title, legend and axis): a taller terminal shows it")
        elif not self.cells:
            self.notify("no figures yet: nothing to chart")

    def _plot(self) -> None:
        """The highlighted row's domain (one at a time: conditions x models stay readable), as a bar
        chart of text (widgets/chart.py): every label whole, each bar true to its value."""
        widget = self.query_one("#report-chart", Static)
        if not self.cells:
            widget.update("")
            return
        widget.update(self._chart(self._chart_width()))

    def _chart_width(self) -> int:
        width = self.size.width or self.app.size.width
        return max(30, (width * 2 // 5 if self.has_class("-wide") else width) - 2)

    def _chart_bars(self) -> tuple[str, list[Bar], tuple[str, ...]]:
        table = self.query_one("#report-table", DataTable)
        row = min(max(table.cursor_row, 0), len(self.cells) - 1)
        domain = self.cells[row].domain
        cells = [c for c in self.cells if c.domain == domain]
        labels = [f"{c.condition} · {c.model}" + (f" [{c.mode}]" if c.mode else "") for c in cells]
        if self.chart == "org_core":
            bars = [Bar(label, (100 * c.org[0], 100 * c.core[0])) for label, c in zip(labels, cells)]
            return f"{domain}: Org vs Core (%)", bars, ("Org", "Core")
        bars = [Bar(label, (100 * c.superficial[0],)) for label, c in zip(labels, cells)]
        return f"{domain}: superficial (% of satisfied)", bars, ("superficial",)

    def _chart(self, width: int) -> Text:
        title, bars, series = self._chart_bars()
        return bar_chart(title, bars, series, width)
