"""Compare: two responses to one instruction, side by side, aligned on constraints.

A side is a writer, (model, mode): two models, or one model's direct and edit responses. Each
side shows its response, its summary at the ratio under it, and its Org and Core totals
(pipeline.analysis.metrics, the report's numbers). The table lists every active constraint with
both sides' Org verdict (the judges' mean on the full response) and Core call
(pipeline.analysis.metrics.Item: the raters who judged both texts, FLIP when the constraint
flipped, as Audit, Annotate and the report count it); ``d`` keeps only the rows where the two
sides differ. Moving the cursor highlights that constraint's evidence quotes in all four texts.

The screen opens on the app's context (the instruction, response and ratio last shown
elsewhere) and offers its own back as ``context()``.
"""

from __future__ import annotations

import bisect
import math

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Header, Static

from pipeline.analysis.similarity import constraint_similarities
from pipeline.analysis.trust import Trust
from pipeline.core.definitions import next_ratio, passes, same_ratio
from pipeline.store.view import Generation, InstructionData, Writer
from unspecific_tui.context import Context
from unspecific_tui.screens.compare_texts import (
    SIDES,
    CompareTexts,
    markup_escape,
    second_writer,
    writer_label,
)
from unspecific_tui.widgets.bar import bar
from unspecific_tui.widgets.fit import clip, natural_width, table_width, widths
from unspecific_tui.widgets.footer import KeyFooter
from unspecific_tui.widgets.refusal import refusal_mark
from unspecific_tui.widgets.text_pane import TextPane

# The table's columns: both sides' verdicts, the constraint's similarity to the closer reference
# (pipeline.analysis.similarity), the constraint (the flexible column: clipped to what is left).
COLUMNS = (("#", "pos"), ("A Org", "a_org"), ("A Core", "a_core"), ("B Org", "b_org"), ("B Core", "b_core"),
           ("sim.", "sim"), ("constraint", "text"))
SIM_BAR = 4  # cells of the similarity's bar


def _mark(score: float | None) -> Text:
    if score is None:
        return Text("·", style="dim")
    if passes(score):
        return Text("yes", style="green")
    return Text("no" if score == 0 else "½", style="red" if score == 0 else "yellow")


def _core_mark(item) -> Text:  # noqa: ANN001 - pipeline.analysis.metrics.Item or None
    if item is None:
        return Text("·", style="dim")
    if item.flipped:
        return Text("FLIP", style="bold red")
    return _mark(item.summary_score)


def _pct(value: float | None) -> str:
    """A share as a whole percentage; "-" where there is none (None or NaN: not judged)."""
    return "-" if value is None or math.isnan(value) else f"{100 * value:.0f}%"


class CompareScreen(CompareTexts):
    DEFAULT_CSS = """
    CompareScreen .cmp-side { width: 1fr; height: 1fr; }
    CompareScreen .cmp-totals { height: 1; padding: 0 1; }
    CompareScreen .cmp-response { height: 2fr; min-height: 4; }
    CompareScreen .cmp-summary { height: 1fr; min-height: 3; }
    """
    BINDINGS = [
        Binding("right_square_bracket", "instruction(1)", "Next instr.", key_display="]"),
        Binding("left_square_bracket", "instruction(-1)", "Prev instr.", key_display="[", show=False),
        Binding("m", "cycle(0)", "Side A"),
        Binding("M", "cycle(1)", "Side B"),
        Binding("d", "toggle_differ", "Rows that differ"),
        Binding("r", "cycle_ratio", "Ratio", show=False),
        Binding("a", "audit", "Audit row"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.instruction_ids: list[int] = []
        self.pos = 0
        self.writers: list[Writer | None] = [None, None]
        self.ratio: float | None = None  # the choice here (`r`, the context's); None: none made
        self.only_differ = False
        self.data: InstructionData | None = None
        self.row_cids: list[int] = []  # the constraints of the rows shown, in order
        # (constraint, generation) -> each rater's latest (judge, verdict, quote)
        self.verdicts: dict[tuple[int, int], list[tuple[str, int | None, str]]] = {}
        # What the table shows per row: [(A Org, A Core, B Org, B Core)] as plain strings, for tests.
        self.cells: list[tuple[str, ...]] = []
        # Each side's Org and Core totals as shown (for tests): {"a": ("67%", "33%"), ...}
        self.totals: dict[str, tuple[str, str]] = {}
        self.highlighted: dict[str, list[tuple[int, int]]] = {}
        self._texts: list[tuple[Generation | None, Generation | None]] = [(None, None), (None, None)]
        self._rows_of: tuple[object, dict[int, list]] | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="compare-head")
        with Horizontal(id="compare-panes"):
            for side in SIDES:
                with Vertical(classes="cmp-side", id=f"cmp-side-{side}"):
                    yield Static(id=f"cmp-{side}-totals", classes="cmp-totals")
                    yield TextPane(f"Model {side.upper()}", id=f"cmp-{side}", classes="cmp-response")
                    yield TextPane("Summary", id=f"cmp-{side}-summary", classes="cmp-summary")
        yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#compare-table", DataTable)
        self.watch(self.app, "analysis", self._on_analysis, init=False)
        self._take_target()
        table.focus()

    def on_screen_resume(self) -> None:
        self._take_target()

    def _on_analysis(self) -> None:
        """The metrics arrived (or were recomputed): the totals follow."""
        if self.data is not None:
            self._render_totals(self._ratio())

    def _take_target(self) -> None:
        """Open on the target another screen set (its instruction, response and ratio)."""
        self.instruction_ids = self.app.view.instruction_ids()
        target = self.app.target
        keep: int | None = None
        if target is not None:
            self.app.target = None
            iid, writer, keep = target
            self.pos = max(0, bisect.bisect_left(self.instruction_ids, iid))
            if writer is not None:
                self.writers[0] = writer
            if self.app.context.ratio is not None:
                self.ratio = self.app.context.ratio
        self.load(keep)

    def context(self) -> Context | None:
        """What this screen shows: the instruction, side A's response, the ratio, the row's constraint."""
        if self.data is None:
            return None
        return Context(self.data.id, self.writers[0], self._ratio(), self._cursor_cid())

    def _cursor_cid(self) -> int | None:
        row = self.query_one("#compare-table", DataTable).cursor_row
        return self.row_cids[row] if 0 <= row < len(self.row_cids) else None

    # -- actions -------------------------------------------------------------------------
    def action_instruction(self, step: int) -> None:
        if self.instruction_ids:
            self.pos = (self.pos + step) % len(self.instruction_ids)
            self.load()

    def action_cycle(self, which: int) -> None:
        if not self.data or not self.data.writers:
            self.notify("no response to this instruction yet: nothing to switch to")
            return
        other = self.writers[1 - which]
        # Never the other side's response: the two sides are two different texts.
        writers = [w for w in self.data.writers if w != other] or self.data.writers
        cur = self.writers[which]
        if len(self.data.writers) < 2:
            only = self.data.writers[0]
            self.notify(f"one response to this instruction ({writer_label(only)}): nothing to switch to; "
                        f"{second_writer(only)}")
            return
        if writers == [cur]:
            there, key = SIDES[1 - which].upper(), "M" if which == 0 else "m"
            self.notify(f"side {SIDES[which].upper()} has no other response to show: the instruction's other "
                        f"one is on side {there} ({key} changes that side)")
            return
        later = [w for w in writers if cur is not None and w > cur]
        self.writers[which] = later[0] if later else writers[0]
        self.load(self._cursor_cid())  # the same constraint, now on the other response

    def action_cycle_ratio(self) -> None:
        if not self.data or not self.data.ratios:
            self.notify("no summary of this instruction yet: no ratio to switch to")
            return
        if len(self.data.ratios) < 2:
            self.notify(f"summaries at one ratio only ({self.data.ratios[0]:g}): nothing to switch to; "
                        "`unspecific evaluate --ratios 0.5,0.25` adds more")
            return
        self.ratio = next_ratio(self.data.ratios, self._ratio())
        self.load(self._cursor_cid())

    def action_toggle_differ(self) -> None:
        if self.data is not None and self.writers[1] is None:
            self.notify(f"one response to this instruction: no second side to differ from; "
                        f"{second_writer(self.writers[0])}")
            return
        self.only_differ = not self.only_differ
        self.load(self._cursor_cid())

    def action_audit(self) -> None:
        cid = self._cursor_cid()
        if self.data and cid is not None:
            self.app.open_audit(self.data.id, self.writers[0], cid)

    # -- loading -------------------------------------------------------------------------
    def _ratio(self) -> float:
        """The ratio shown: app.view_ratio (the rule every view follows) of the choice made here (`r`,
        or the context's), the same on every instruction; one without summaries at it shows none."""
        return self.app.view_ratio(self.ratio)

    def _pick_writers(self, writers: list[Writer]) -> None:
        if self.writers[0] not in writers:
            self.writers[0] = writers[0] if writers else None
        if self.writers[1] not in writers or self.writers[1] == self.writers[0]:
            # Two models in the same mode first (the screen's main use); else the other mode.
            mode_a = self.writers[0].mode if self.writers[0] else None  # None only when there are no writers
            others = sorted((w for w in writers if w != self.writers[0]), key=lambda w: (w.mode != mode_a, w))
            # One response only: side B stays empty and says what would fill it, never A's text again.
            self.writers[1] = others[0] if others else None

    def load(self, keep_cid: int | None = None) -> None:
        """Show the current instruction; the cursor stays on ``keep_cid`` when it is still listed."""
        if not self.instruction_ids:
            self.query_one("#compare-head", Static).update("No instructions in this store yet.")
            return
        self.pos = min(self.pos, len(self.instruction_ids) - 1)
        data = self.app.view.instruction(self.instruction_ids[self.pos])
        self.data = data
        self._pick_writers(data.writers)
        ratio = self._ratio()
        self._texts = [(data.responses.get(w), data.summary(w, ratio)) if w else (None, None)
                       for w in self.writers]
        outcomes = [self.app.view.outcomes(data.id, w, ratio) if w and w in data.responses else {}
                    for w in self.writers]
        shown_ids = tuple(g.id for pair in self._texts for g in pair if g is not None)
        self.verdicts = {}
        for v in self.app.view.latest_verdicts(shown_ids):
            self.verdicts.setdefault((v.constraint_id, v.generation_id),
                                     []).append((v.judge, v.verdict, v.quote))
        active = sorted((c for c in data.constraints.values() if c.active), key=lambda c: c.position or 0)
        similar = constraint_similarities(self.app.view, instruction_id=data.id)
        table = self.query_one("#compare-table", DataTable)
        text_width = self._lay_out(table, [c.text for c in active])
        rows: list[list[Text | str]] = []
        shown: list[tuple[str, ...]] = []
        cids: list[int] = []
        for c in active:
            cells: list[Text] = []
            for slot, (response, _) in enumerate(self._texts):
                # The judges' mean (pipeline.analysis.trust): missing verdicts are left out, as the metrics
                # do.
                vs = [v[1] for v in self.verdicts.get((c.id, response.id), [])
                      if v[1] is not None] if response else []
                cells.append(_mark(Trust(yes=sum(vs), no=len(vs) - sum(vs)).mean))
                cells.append(_core_mark(outcomes[slot].get(c.id)))
            plain = tuple(cell.plain for cell in cells)
            if self.only_differ and plain[:2] == plain[2:]:
                continue
            sim = similar.get(c.id)
            rows.append([Text(str(c.position)), *cells, bar(sim.highest if sim else None, SIM_BAR),
                         clip(c.text, text_width)])
            shown.append(plain)
            cids.append(c.id)
        self.cells, self.row_cids = shown, cids
        table.add_rows(rows)
        row = self._row_near(keep_cid, [c.id for c in active])
        self._render_head(data, ratio, len(active))
        self._render_totals(ratio)
        if row:
            table.move_cursor(row=row, animate=False)  # highlights through RowHighlighted
        self.highlight(row)

    def _lay_out(self, table: DataTable, texts: list[str]) -> int:
        """Empty the table and size its columns to its width: the constraint column takes what the
        verdicts and the similarity leave, its texts clipped (the whole text is in Audit). Returns
        the constraint column's width."""
        natural = [natural_width(label, ()) for label, _ in COLUMNS]
        natural[0] = natural_width("#", [str(len(texts))])
        natural[-2] = max(natural[-2], bar(0.5, SIM_BAR).cell_len)
        natural[-1] = natural_width("constraint", texts)
        fitted = widths(natural, len(COLUMNS) - 1, table_width(table), least=1) or natural
        table.clear(columns=True)
        for (label, key), width in zip(COLUMNS, fitted, strict=True):
            table.add_column(label, key=key, width=width)
        return fitted[-1]

    def on_resize(self) -> None:
        if self.data is not None:
            self.load(self._cursor_cid())

    def _row_near(self, cid: int | None, order: list[int]) -> int:
        """The row of ``cid``; when the filter hides it, the next row shown after it; else the first."""
        if cid is None or cid not in order:
            return 0
        if cid in self.row_cids:
            return self.row_cids.index(cid)
        rank = {c: i for i, c in enumerate(order)}
        later = [i for i, c in enumerate(self.row_cids) if rank[c] > rank[cid]]
        return later[0] if later else max(0, len(self.row_cids) - 1)

    def _render_head(self, data: InstructionData, ratio: float, n_active: int) -> None:
        listing = (f" · [b]rows that differ[/]: {len(self.row_cids)} of {n_active} (d: all)"
                   if self.only_differ
                   else f" · {n_active} constraints (d: rows that differ)")
        # One response: B says so (its pane says what would fill it).
        b = writer_label(self.writers[1]) if self.writers[1] is not None or self.writers[0] is None else \
            "[b yellow]none: one response to compare[/]"
        self.query_one("#compare-head", Static).update(
            f"[b]#{data.id}[/] {data.domain} · {data.condition} · [b]A[/]={writer_label(self.writers[0])}"
            f"  [b]B[/]={b} · summary {ratio:g}{listing}\n{markup_escape(data.main_task)}")

    def _render_totals(self, ratio: float) -> None:
        """Each side's Org and Core: the report's numbers (pipeline.analysis.metrics rows) once they
        are computed; before that the store-wide pass's, at its own ratio only."""
        self.totals = {}
        for side, writer, (response, _) in zip(SIDES, self.writers, self._texts):
            org, core = self._org_core(response, writer, ratio)
            self.totals[side] = (_pct(org), _pct(core))
            # Short enough for half of 80 columns: the pane titles below name the writer and the ratio.
            line = Text.from_markup(f"[b]{side.upper()}[/] Org [b]{_pct(org)}[/] · Core [b]{_pct(core)}[/]"
                                    f" [dim]at {ratio:g}[/]")
            if response is not None and response.refusal:
                line.append_text(refusal_mark())
            self.query_one(f"#cmp-{side}-totals", Static).update(line)

    def _org_core(self, response: Generation | None, writer: Writer | None,
                  ratio: float) -> tuple[float | None, float | None]:
        analysis = self.app.analysis
        if response is None or writer is None or analysis is None:
            return None, None
        if analysis.metrics is not None:
            rows = self._metric_rows(analysis.metrics).get(response.id, [])
            at_ratio = next((r for r in rows if r.ratio is not None and same_ratio(r.ratio, ratio)), None)
            full = at_ratio or next(iter(rows), None)
            return (full.org if full else None), (at_ratio.core if at_ratio else None)
        if same_ratio(analysis.ratio, ratio):
            row = next((r for r in analysis.rows if r.response_id == response.id), None)
            if row is not None:
                return row.org, row.core
        return None, None

    def _metric_rows(self, metrics) -> dict[int, list]:  # noqa: ANN001 - pipeline.analysis.metrics.Metrics
        """The metrics' rows by response, indexed once per computation (a benchmark has ~40,000)."""
        if self._rows_of is None or self._rows_of[0] is not metrics:
            index: dict[int, list] = {}
            for r in metrics.rows:
                index.setdefault(r.response_id, []).append(r)
            self._rows_of = (metrics, index)
        return self._rows_of[1]
