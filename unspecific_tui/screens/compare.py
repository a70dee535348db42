"""Compare: two responses to one instruction, side by side, aligned on constraints.

A side is a writer, (model, mode): two models, or one model's direct and edit responses. The
table lists every active constraint with both sides' Org verdict (the judges' mean on the full
response) and Core call (pipeline.analysis.metrics.Item: the raters who judged both texts, FLIP when
the constraint flipped, as Audit, Annotate and the report count it); moving the cursor
highlights that constraint's evidence quotes in both responses.
"""

from __future__ import annotations

import bisect

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, Footer, Header, Static

from pipeline.core.definitions import DEFAULT_RATIO, passes
from pipeline.core.text import count_words
from pipeline.store.view import InstructionData, Writer
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.widgets.highlight import QUOTE_FUZZY_STYLE, QUOTE_STYLE, quote_span, render
from unspecific_tui.widgets.text_pane import TextPane


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


class CompareScreen(AppScreen):
    BINDINGS = [
        Binding("right_square_bracket", "instruction(1)", "Next instr.", key_display="]"),
        Binding("left_square_bracket", "instruction(-1)", "Prev instr.", key_display="["),
        Binding("m", "cycle(0)", "Side A"),
        Binding("M", "cycle(1)", "Side B"),
        Binding("a", "audit", "Audit row"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.instruction_ids: list[int] = []
        self.pos = 0
        self.writers: list[Writer | None] = [None, None]
        self.data: InstructionData | None = None
        self.row_cids: list[int] = []
        # (constraint, generation) -> each rater's latest (judge, verdict, quote)
        self.verdicts: dict[tuple[int, int], list[tuple[str, int | None, str]]] = {}
        # What the table shows per row: [(A Org, A Core, B Org, B Core)] as plain strings, for tests.
        self.cells: list[tuple[str, ...]] = []
        self.highlighted: dict[str, list[tuple[int, int]]] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="compare-head")
        with Horizontal(id="compare-panes"):
            yield TextPane("Model A", id="cmp-a")
            yield TextPane("Model B", id="cmp-b")
        yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#compare-table", DataTable)
        for label, key in (("#", "pos"), ("A Org", "a_org"), ("A Core", "a_core"), ("B Org", "b_org"),
                           ("B Core", "b_core"), ("constraint", "text")):
            table.add_column(label, key=key)
        self._take_target()
        table.focus()

    def on_screen_resume(self) -> None:
        self._take_target()

    def _take_target(self) -> None:
        self.instruction_ids = self.app.view.instruction_ids()
        target = self.app.target
        if target is not None:
            self.app.target = None
            self.pos = max(0, bisect.bisect_left(self.instruction_ids, target[0]))
        self.load()

    def action_instruction(self, step: int) -> None:
        if self.instruction_ids:
            self.pos = (self.pos + step) % len(self.instruction_ids)
            self.load()

    def action_cycle(self, which: int) -> None:
        if not self.data or not self.data.writers:
            return
        other = self.writers[1 - which]
        # Never the other side's response: the two sides are two different texts.
        writers = [w for w in self.data.writers if w != other] or self.data.writers
        cur = self.writers[which]
        later = [w for w in writers if cur is not None and w > cur]
        self.writers[which] = later[0] if later else writers[0]
        self.load()

    def action_audit(self) -> None:
        table = self.query_one("#compare-table", DataTable)
        if self.data and self.row_cids:
            self.app.open_audit(self.data.id, self.writers[0], self.row_cids[table.cursor_row])

    def load(self) -> None:
        if not self.instruction_ids:
            self.query_one("#compare-head", Static).update("No instructions in this store yet.")
            return
        self.pos = min(self.pos, len(self.instruction_ids) - 1)
        data = self.app.view.instruction(self.instruction_ids[self.pos])
        self.data = data
        writers = data.writers
        if self.writers[0] not in writers:
            self.writers[0] = writers[0] if writers else None
        if self.writers[1] not in writers or self.writers[1] == self.writers[0]:
            # Two models in the same mode first (the screen's main use); else the other mode.
            mode_a = self.writers[0].mode if self.writers[0] else None  # None only when there are no writers
            others = sorted((w for w in writers if w != self.writers[0]), key=lambda w: (w.mode != mode_a, w))
            self.writers[1] = others[0] if others else self.writers[0]
        ratio = self.app.analysis.ratio if self.app.analysis else (
            DEFAULT_RATIO if DEFAULT_RATIO in data.ratios else (data.ratios or [DEFAULT_RATIO])[0])
        gens: dict[int, tuple[int, str]] = {}  # generation -> (model slot, kind)
        outcomes = [self.app.view.outcomes(data.id, w, ratio) if w and w in data.responses else {}
                    for w in self.writers]
        for slot, writer in enumerate(self.writers):
            if writer and writer in data.responses:
                gens[data.responses[writer].id] = (slot, "full")
        self.verdicts = {}
        for v in self.app.view.latest_verdicts(tuple(gens)):
            self.verdicts.setdefault((v.constraint_id, v.generation_id), []).append((v.judge, v.verdict, v.quote))
        active = sorted((c for c in data.constraints.values() if c.active), key=lambda c: c.position or 0)
        self.row_cids = [c.id for c in active]
        table = self.query_one("#compare-table", DataTable)
        table.clear()
        rows: list[list[Text | str]] = []
        shown: list[tuple[str, ...]] = []
        for c in active:
            cells: list[Text] = []
            for slot in (0, 1):
                gid = next((g for g, (s, _) in gens.items() if s == slot), None)
                # Missing verdicts (None) are left out, as the metrics leave them out.
                vs = [v[1] for v in self.verdicts.get((c.id, gid), []) if v[1] is not None] if gid else []
                cells.append(_mark(sum(vs) / len(vs) if vs else None))
                cells.append(_core_mark(outcomes[slot].get(c.id)))
            rows.append([Text(str(c.position)), *cells, c.text])
            shown.append(tuple(cell.plain for cell in cells))
        self.cells = shown
        table.add_rows(rows)
        self._gens = gens
        self.query_one("#compare-head", Static).update(
            f"[b]#{data.id}[/] {data.domain} · {data.condition} · [b]A[/]={_label(self.writers[0])}"
            f"  [b]B[/]={_label(self.writers[1])}"
            f" · summary {ratio:g}\n{data.main_task}")
        self.highlight(0)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.highlight(event.cursor_row)

    def highlight(self, row: int) -> None:
        data = self.data
        if data is None:
            return
        cid = self.row_cids[row] if 0 <= row < len(self.row_cids) else None
        for slot, pane_id in ((0, "cmp-a"), (1, "cmp-b")):
            writer = self.writers[slot]
            resp = data.responses.get(writer) if writer else None
            pane = self.query_one(f"#{pane_id}", TextPane)
            pane.border_title = f"{'AB'[slot]}: {_label(writer)}"
            if resp is None:
                pane.show(Text("(no response)", style="dim"), key=(data.id, slot))
                continue
            quotes = []
            for judge, verdict, quote in self.verdicts.get((cid, resp.id), []) if cid else []:
                if verdict and quote:
                    how, span = quote_span(quote, resp.text)
                    if span:
                        quotes.append((span, QUOTE_STYLE if how == "exact" else QUOTE_FUZZY_STYLE))
            self.highlighted[pane_id] = sorted({s for s, _ in quotes})
            pane.show(render(resp.text, (), quotes), key=(data.id, writer),
                      subtitle=f"{resp.words or count_words(resp.text)} words · {len(quotes)} quote(s)")
            if quotes:
                pane.reveal(min(s[0] for s, _ in quotes))


def _label(writer: Writer | None) -> str:
    """The writer's name and mode, escaped for Rich markup ("m1 [edit]" is not a tag)."""
    return writer.label.replace("[", r"\[") if writer else "-"
