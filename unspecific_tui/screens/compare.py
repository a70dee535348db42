"""Compare: two models' responses to one instruction, side by side, aligned on constraints.

The table lists every active constraint with both models' Org (full response) and Core
(summary) verdicts, judges averaged; moving the cursor highlights that constraint's evidence
quotes in both responses.
"""

from __future__ import annotations

import bisect

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from ..data import LATEST_VERDICT, InstructionData, passes
from ..widgets.highlight import QUOTE_FUZZY_STYLE, QUOTE_STYLE, quote_span, render
from ..widgets.text_pane import TextPane


def _mark(score: float | None) -> Text:
    if score is None:
        return Text("·", style="dim")
    if passes(score):
        return Text("yes", style="green")
    return Text("no" if score == 0 else "½", style="red" if score == 0 else "yellow")


class CompareScreen(Screen):
    BINDINGS = [
        Binding("right_square_bracket", "instruction(1)", "Next instr.", key_display="]"),
        Binding("left_square_bracket", "instruction(-1)", "Prev instr.", key_display="["),
        Binding("m", "cycle(0)", "Model A"),
        Binding("M", "cycle(1)", "Model B"),
        Binding("a", "audit", "Audit row"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.instruction_ids: list[int] = []
        self.pos = 0
        self.models: list[str | None] = [None, None]
        self.data: InstructionData | None = None
        self.row_cids: list[int] = []
        # (constraint, generation) -> judges' (verdict, quote)
        self.verdicts: dict[tuple[int, int], list[tuple[str, int, str]]] = {}
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
        self.instruction_ids = [r[0] for r in self.app.conn.execute("SELECT id FROM instructions ORDER BY id")]
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
        if not self.data or not self.data.models:
            return
        models = self.data.models
        cur = self.models[which]
        self.models[which] = models[(models.index(cur) + 1) % len(models)] if cur in models else models[0]
        self.load()

    def action_audit(self) -> None:
        table = self.query_one("#compare-table", DataTable)
        if self.data and self.row_cids:
            self.app.open_audit(self.data.id, self.models[0], self.row_cids[table.cursor_row])

    def load(self) -> None:
        if not self.instruction_ids:
            self.query_one("#compare-head", Static).update("No instructions in this store yet.")
            return
        self.pos = min(self.pos, len(self.instruction_ids) - 1)
        data = self.app.view.instruction(self.instruction_ids[self.pos])
        self.data = data
        models = data.models
        if self.models[0] not in models:
            self.models[0] = models[0] if models else None
        if self.models[1] not in models or self.models[1] == self.models[0]:
            others = [m for m in models if m != self.models[0]]
            self.models[1] = others[0] if others else self.models[0]
        ratio = self.app.analysis.ratio if self.app.analysis else (0.25 if 0.25 in data.ratios else
                                                                   (data.ratios or [0.25])[0])
        gens: dict[int, tuple[int, str]] = {}  # generation -> (model slot, kind)
        for slot, model in enumerate(self.models):
            if model and model in data.responses:
                gens[data.responses[model].id] = (slot, "full")
                summ = data.summary(model, ratio)
                if summ:
                    gens[summ.id] = (slot, "core")
        self.verdicts = {}
        if gens:
            marks = ",".join("?" * len(gens))
            for gid, cid, judge, verdict, quote in self.app.conn.execute(
                    f"SELECT v.generation_id, v.constraint_id, v.judge, v.verdict, v.quote FROM verdicts v"
                    f" WHERE v.generation_id IN ({marks}) AND {LATEST_VERDICT}", tuple(gens)):
                self.verdicts.setdefault((cid, gid), []).append((judge, verdict, quote or ""))
        active = sorted((c for c in data.constraints.values() if c.active), key=lambda c: c.position or 0)
        self.row_cids = [c.id for c in active]
        table = self.query_one("#compare-table", DataTable)
        table.clear()
        rows = []
        for c in active:
            cells: list[object] = [str(c.position)]
            for slot in (0, 1):
                for kind in ("full", "core"):
                    gid = next((g for g, (s, k) in gens.items() if s == slot and k == kind), None)
                    # Missing verdicts (None) are left out, as the metrics leave them out.
                    vs = [v for v in self.verdicts.get((c.id, gid), []) if v[1] is not None] if gid else []
                    cells.append(_mark(sum(v[1] for v in vs) / len(vs) if vs else None))
            rows.append([*cells, c.text])
        table.add_rows(rows)
        self._gens = gens
        self.query_one("#compare-head", Static).update(
            f"[b]#{data.id}[/] {data.domain} · {data.condition} · [b]A[/]={self.models[0]}  [b]B[/]={self.models[1]}"
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
            model = self.models[slot]
            resp = data.responses.get(model) if model else None
            pane = self.query_one(f"#{pane_id}", TextPane)
            pane.border_title = f"{'AB'[slot]}: {model or '-'}"
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
            pane.show(render(resp.text, (), quotes), key=(data.id, model),
                      subtitle=f"{resp.words or len(resp.text.split())} words · {len(quotes)} quote(s)")
            if quotes:
                pane.reveal(min(s[0] for s, _ in quotes))
