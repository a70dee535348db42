"""Instructions: one row per instruction, model and response mode, filterable, sortable by any column.

Rows come from the store-wide Analysis (computed in a worker), one per response: (instruction,
model, mode). Enter opens the Audit screen on the row's instruction and response; ``c`` opens Compare.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, Header, Select, Static

from pipeline.core.definitions import FLAG_KINDS, FlagKind
from pipeline.store.view import Writer
from unspecific_tui.context import Context
from unspecific_tui.data import Analysis, InstructionRow
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.widgets.fit import clip, distinct_clip, natural_width, table_width, widths
from unspecific_tui.widgets.footer import KeyFooter
from unspecific_tui.widgets.refusal import WORD as REFUSAL
from unspecific_tui.widgets.refusal import refusal_mark

ANY = "__any__"
PAGE = 300
# The quality flags with a column here, in the registry's order (pipeline.core.definitions.FLAG_KINDS).
COUNTED_FLAGS = tuple(kind for kind in FLAG_KINDS.values() if kind.head)


def _flag_count(kind: FlagKind) -> Callable[[InstructionRow], int]:
    return lambda r: r.flags.get(kind.name, 0)


def _flagged(kind: FlagKind) -> Callable[[InstructionRow], bool]:
    return lambda r: r.flags.get(kind.name, 0) > 0


# flag filter -> test on a row
FLAGS: dict[str, tuple[str, Callable[[InstructionRow], bool]]] = {
    **{kind.name: (kind.label, _flagged(kind)) for kind in COUNTED_FLAGS},
    "flipped": ("flipped Org->Core", lambda r: r.flipped > 0),
    "disagree": ("judges disagree", lambda r: r.disagree > 0),
    "quote_missing": ("quote not found", lambda r: r.quote_missing > 0),
    "refusal": ("refusals", lambda r: r.refusal),
}


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    value: Callable[[InstructionRow], object]
    fmt: Callable[[object], str] = str


def _pct(x: object) -> str:
    """A share as a whole percentage; "-" where there is none (None)."""
    return f"{100 * x:.0f}" if isinstance(x, (int, float)) else "-"


COLUMNS = (
    Column("id", "#", lambda r: r.instruction_id),
    Column("domain", "domain", lambda r: r.domain),
    Column("condition", "cond.", lambda r: r.condition),
    Column("model", "model", lambda r: r.model),
    Column("mode", "mode", lambda r: r.mode),  # a model's direct and edit responses are two rows
    Column("org", "Org%", lambda r: r.org, _pct),
    Column("core", "Core%", lambda r: r.core, _pct),
    Column("superficial", "sup.%", lambda r: r.superficial, _pct),
    Column("flipped", "flip", lambda r: r.flipped),
    *(Column(kind.name, kind.head or kind.tag, _flag_count(kind)) for kind in COUNTED_FLAGS),
    Column("disagree", "disag.", lambda r: r.disagree),
    Column("quote_missing", "q.miss", lambda r: r.quote_missing),
)
# Narrow screens: one column for the response (model and mode) and one for all the flags.
NARROW = (
    COLUMNS[0], COLUMNS[1], COLUMNS[2],
    Column("writer", "model/mode", lambda r: f"{r.model.rsplit('/', 1)[-1]} {r.mode}"),
    COLUMNS[5], COLUMNS[6], COLUMNS[8],
    Column("flags", "flags", lambda r: sum(r.flags.values())),
)
BY_KEY = {c.key: c for c in COLUMNS + NARROW}
FLEXIBLE = ("model", "writer")  # the column that gives up width (its values clipped)


def _sort_key(value: object) -> tuple:
    return (value is None, value if value is not None else 0)


class InstructionsScreen(AppScreen):
    BINDINGS = [
        Binding("enter", "audit", "Audit", show=True),
        Binding("c", "compare", "Compare"),
        Binding("exclamation_mark", "suspects", "Suspects", key_display="!"),  # `s` sorts
        Binding("s", "sort", "Sort: next column"),
        Binding("S", "reverse", "Sort: reverse"),
        Binding("slash", "focus_filters", "Filters", key_display="/"),
        Binding("escape", "clear_filters", "Clear filters"),
        Binding("plus", "more", "More rows", key_display="+"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.filters: dict[str, str] = {"domain": ANY, "condition": ANY, "model": ANY,
                                        "mode": ANY, "flag": ANY}
        self.sort_key: str = "id"
        self.sort_reverse = False
        self.rows: list[InstructionRow] = []  # what the table shows now, in order
        self.shown = 0  # rows added to the table (a page at a time)
        self.columns: tuple[Column, ...] = ()  # the columns shown, for the table's width
        self._followed: Context | None = None  # the app's context last opened on (once each)
        self.widths: list[int] = []
        self._flexible: list[str] = []  # the flexible column's values, clipped apart (distinct_clip)

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="filters"):
            yield Select([], prompt="domain", id="f-domain", allow_blank=True, compact=True)
            yield Select([], prompt="condition", id="f-condition", allow_blank=True, compact=True)
            yield Select([], prompt="model", id="f-model", allow_blank=True, compact=True)
            yield Select([], prompt="mode", id="f-mode", allow_blank=True, compact=True)
            yield Select([(label, key) for key, (label, _) in FLAGS.items()], prompt="flag",
                         id="f-flag", compact=True,
                         allow_blank=True)
        yield Static(id="instr-status")
        yield DataTable(id="instr-table", cursor_type="row", zebra_stripes=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#instr-table", DataTable)
        self.watch(self.app, "analysis", self._on_analysis)
        if self.app.analysis is None:
            table.loading = True
        table.focus()

    def _on_analysis(self, analysis: Analysis | None) -> None:
        table = self.query_one("#instr-table", DataTable)
        if analysis is None:
            return
        table.loading = False
        rows = analysis.rows
        for name, values in (("domain", sorted({r.domain for r in rows})),
                             ("condition", sorted({r.condition for r in rows})), ("model", analysis.models),
                             ("mode", analysis.modes)):
            select = self.query_one(f"#f-{name}", Select)
            with self.prevent(Select.Changed):
                select.set_options([(v, v) for v in values])
                if self.filters[name] in values:
                    select.value = self.filters[name]
        self.apply()
        self._follow()

    def on_select_changed(self, event: Select.Changed) -> None:
        name = (event.select.id or "").removeprefix("f-")
        if name in self.filters:
            self.filters[name] = ANY if event.select.is_blank() else str(event.value)
            self.apply()

    def set_filter(self, name: str, value: str | None) -> None:
        """Programmatic filtering (tests, the command palette)."""
        select = self.query_one(f"#f-{name}", Select)
        with self.prevent(Select.Changed):
            if value is None:
                select.clear()
            else:
                select.value = value
        self.filters[name] = value or ANY
        self.apply()

    def apply(self) -> None:
        analysis = self.app.analysis
        if analysis is None:
            return
        f = self.filters
        flag_test = FLAGS[f["flag"]][1] if f["flag"] in FLAGS else None
        rows = [r for r in analysis.rows
                if (f["domain"] == ANY or r.domain == f["domain"])
                and (f["condition"] == ANY or r.condition == f["condition"])
                and (f["model"] == ANY or r.model == f["model"])
                and (f["mode"] == ANY or r.mode == f["mode"])
                and (flag_test is None or flag_test(r))]
        col = BY_KEY[self.sort_key]
        rows.sort(key=lambda r: _sort_key(col.value(r)), reverse=self.sort_reverse)
        self.rows = rows
        table = self.query_one("#instr-table", DataTable)
        self._lay_out(table)
        # A page of rows (DataTable's cost grows with rows): sorting and filtering run over all of
        # them, so the rows worth reading come up; `+` shows the next page.
        self.shown = 0
        self._add_page()

    def _add_page(self) -> None:
        table = self.query_one("#instr-table", DataTable)
        page = self.rows[self.shown:self.shown + PAGE]
        table.add_rows([tuple(self._cell(c, r, w) for c, w in zip(self.columns, self.widths, strict=True))
                        for r in page])
        self.shown += len(page)
        self._status()

    def _cell(self, column: Column, row: InstructionRow, width: int) -> Text:
        """One cell; the flexible column (model and mode) cut where it does not tell its value from the
        others'; Org of a response that refuses the task marked so ("0 refusal")."""
        value = column.fmt(column.value(row))
        if column.key in FLEXIBLE:
            return Text(distinct_clip(value, self._flexible, width))
        if column.key == "org" and row.refusal:
            return Text.assemble(clip(value, width), refusal_mark(" "))
        return Text(clip(value, width))

    def action_more(self) -> None:
        if self.shown < len(self.rows):
            self._add_page()
        else:
            self.notify("every row is shown")

    def _status(self) -> None:
        analysis = self.app.analysis
        col = BY_KEY[self.sort_key]
        arrow = "↓" if self.sort_reverse else "↑"
        active = ", ".join(f"{k}={v}" for k, v in self.filters.items() if v != ANY) or "none"
        more = f" (showing {self.shown:,}: + for more)" if self.shown < len(self.rows) else ""
        self.query_one("#instr-status", Static).update(
            f"{len(self.rows):,} of {len(analysis.rows) if analysis else 0:,} rows{more} · filters: {active}"
            f" · sorted by {col.label} {arrow} · summary ratio {analysis.ratio if analysis else 0:g}")

    def sort_by(self, key: str, reverse: bool | None = None) -> None:
        if reverse is None:
            reverse = not self.sort_reverse if key == self.sort_key else key not in ("id",
                                                                                     "domain", "condition",
                                                                                     "model",
                                                                                     "mode", "writer")
        self.sort_key, self.sort_reverse = key, reverse
        self.apply()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.sort_by(str(event.column_key.value))

    def action_sort(self) -> None:
        keys = [c.key for c in self.columns or COLUMNS]
        self.sort_by(keys[(keys.index(self.sort_key) + 1) % len(keys)])

    def action_reverse(self) -> None:
        self.sort_by(self.sort_key, not self.sort_reverse)

    def action_focus_filters(self) -> None:
        self.query_one("#f-domain", Select).focus()

    def action_clear_filters(self) -> None:
        if all(v == ANY for v in self.filters.values()):
            self.notify("no filter set: every row is listed (/ picks one)")
            self.query_one("#instr-table", DataTable).focus()
            return
        for name in self.filters:
            self.set_filter(name, None)
        self.query_one("#instr-table", DataTable).focus()

    def _lay_out(self, table: DataTable) -> None:
        """Empty the table and pick its columns: every column when they fit the table's width
        (the model's name clipped if need be), else the narrow set; each as wide as its values."""
        available = table_width(table)
        for columns in (COLUMNS, NARROW):
            natural = [natural_width(c.label, {self._plain(c, r) for r in self.rows}) for c in columns]
            flexible = next(i for i, c in enumerate(columns) if c.key in FLEXIBLE)
            fitted = widths(natural, flexible, available, least=16)
            if fitted is not None:
                break
        else:  # narrower than the narrow set: keep it, the table scrolls sideways
            fitted = natural
        table.clear(columns=True)
        self.columns, self.widths = columns, fitted
        self._flexible = sorted({c.fmt(c.value(r)) for c in columns if c.key in FLEXIBLE for r in self.rows})
        for col, width in zip(columns, fitted, strict=True):
            table.add_column(col.label, key=col.key, width=width)

    @staticmethod
    def _plain(column: Column, row: InstructionRow) -> str:
        """What ``_cell`` shows, unclipped (the column's natural width)."""
        value = column.fmt(column.value(row))
        return f"{value} {REFUSAL}" if column.key == "org" and row.refusal else value

    def on_resize(self) -> None:
        if self.rows and self.widths:
            table = self.query_one("#instr-table", DataTable)
            cursor = table.cursor_row
            self.apply()
            table.move_cursor(row=cursor)

    def _current(self) -> InstructionRow | None:
        table = self.query_one("#instr-table", DataTable)
        if not self.rows or table.cursor_row < 0:
            return None
        return self.rows[min(table.cursor_row, len(self.rows) - 1)]

    def context(self) -> Context | None:
        """The row under the cursor: its instruction and response. The ratio comes through as it
        came (this table is at the analysis' ratio), and so does the constraint while the
        instruction is the same."""
        row = self._current()
        if row is None:
            return None
        came = self.app.nav.context
        constraint = came.constraint_id if came.instruction_id == row.instruction_id else None
        return Context(row.instruction_id, row.writer, came.ratio, constraint)

    def on_screen_resume(self) -> None:
        self._follow()

    def _follow(self) -> None:
        """Put the cursor on the context's row (its instruction; its response when listed), once
        per context: moving the cursor here is not undone when a modal closes."""
        context = self.app.nav.context
        if context.instruction_id is None or context == self._followed or not self.rows:
            return
        self._followed = context
        ids: list[tuple[int, Writer | None]] = [(r.instruction_id, r.writer) for r in self.rows]
        if (context.instruction_id, context.writer) in ids:
            index = ids.index((context.instruction_id, context.writer))
        elif context.instruction_id in (iid for iid, _ in ids):
            index = next(i for i, (iid, _) in enumerate(ids) if iid == context.instruction_id)
        else:
            self.notify(f"instruction #{context.instruction_id} is not among the rows the filters keep")
            return
        while self.shown <= index:  # on a later page: show the pages up to it
            self._add_page()
        self.query_one("#instr-table", DataTable).move_cursor(row=index, animate=False)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_audit()

    def action_audit(self) -> None:
        row = self._current()
        if row is not None:
            self.app.open_audit(row.instruction_id, row.writer)

    def action_compare(self) -> None:
        row = self._current()
        if row is not None:
            self.app.open_compare(row.instruction_id)

    def action_suspects(self) -> None:
        """The suspicion queue (screens/queue.py), over this screen: escape comes back."""
        from unspecific_tui.screens.queue import QueueScreen

        self.app.push_screen(QueueScreen())
