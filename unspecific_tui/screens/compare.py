"""Compare: two responses to one instruction, side by side, aligned on constraints.

A side is a writer, (model, mode): two models, or one model's direct and edit responses. Each
side shows its response, its summary at the ratio under it, and its Org and Core totals
(pipeline.analysis.metrics, the report's numbers). The table lists every active constraint with
both sides' Org verdict (the judges' mean on the full response) and Core call
(pipeline.analysis.metrics.Item: the raters who judged both texts, FLIP when the constraint
flipped, as Audit, Annotate and the report count it); ``d`` keeps only the rows where the two
sides differ. Moving the cursor highlights that constraint's evidence quotes in all four texts.

The sides (the texts, their highlights and the totals) are a part that owns its state,
unspecific_tui.widgets.compare.CompareSides: the screen keeps the keys, the head and the table, and
hands the sides what they show.

The screen opens on the app's context (the instruction, response and ratio last shown
elsewhere) and offers its own back as ``context()``.
"""

from __future__ import annotations

import bisect

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, Static

from pipeline.analysis.similarity import constraint_similarities
from pipeline.analysis.trust import Trust
from pipeline.core.definitions import next_ratio, passes
from pipeline.store.view import Generation, InstructionData, Writer
from unspecific_tui.context import Context
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.widgets.bar import bar
from unspecific_tui.widgets.compare import (
    SIDES,
    CompareSides,
    Sides,
    Verdicts,
    markup_escape,
    second_writer,
    writer_label,
)
from unspecific_tui.widgets.fit import clip, natural_width, table_width, widths
from unspecific_tui.widgets.footer import KeyFooter

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


class CompareScreen(AppScreen):
    BINDINGS = [
        Binding("right_square_bracket", "instruction(1)", "Next instr.", key_display="]"),
        Binding("left_square_bracket", "instruction(-1)", "Prev instr.", key_display="[", show=False),
        Binding("m", "cycle(0)", "Side A"),
        Binding("M", "cycle(1)", "Side B"),
        Binding("d", "toggle_differ", "Rows that differ"),
        Binding("r", "cycle_ratio", "Ratio", show=False),
        Binding("a", "audit", "Audit row"),
        # The panes are a few lines high at 80x24: these scroll both sides together (before the
        # table's own paging: its rows are few, and up/down move through them).
        Binding("pagedown", "scroll(1)", "Scroll responses", key_display="PgDn", priority=True),
        Binding("pageup", "scroll(-1)", "Scroll responses up", key_display="PgUp", show=False, priority=True),
        Binding("ctrl+pagedown", "scroll(1, True)", "Scroll summaries", key_display="ctrl+PgDn", show=False,
                priority=True),
        Binding("ctrl+pageup", "scroll(-1, True)", "Scroll summaries up", key_display="ctrl+PgUp", show=False,
                priority=True),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.instruction_ids: list[int] = []
        self.pos = 0
        self.writers: list[Writer | None] = [None, None]
        self.ratio: float | None = None  # the choice here (`r`, the context's); None: none made
        self.only_differ = False
        self.chosen = False  # the sides set by m / M; until then A and B go by name
        # The response the auditor came with or last set (a side's): what Audit opens on from here.
        self.came_with: Writer | None = None
        self.data: InstructionData | None = None
        self.row_cids: list[int] = []  # the constraints of the rows shown, in order
        # (constraint, generation) -> each rater's latest (judge, verdict, quote)
        self.verdicts: Verdicts = {}
        # What the table shows per row: [(A Org, A Core, B Org, B Core)] as plain strings, for tests.
        self.cells: list[tuple[str, ...]] = []
        # Each side's response and summary, as loaded (the sides show them).
        self._texts: list[tuple[Generation | None, Generation | None]] = [(None, None), (None, None)]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="compare-head")
        yield CompareSides(id="compare-panes")
        yield DataTable(id="compare-table", cursor_type="row", zebra_stripes=True)
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#compare-table", DataTable)
        self._take_target()
        table.focus()

    def on_screen_resume(self) -> None:
        self._take_target()

    @property
    def highlighted(self) -> dict[str, list[tuple[int, int]]]:
        """Each text's quoted spans (the sides' own, for tests)."""
        return self.query_one(CompareSides).highlighted

    @property
    def totals(self) -> dict[str, tuple[str, str]]:
        """Each side's Org and Core as shown (the sides' own, for tests)."""
        return self.query_one(CompareSides).totals

    def _take_target(self) -> None:
        """Open on the target another screen set (its instruction, response and ratio)."""
        self.instruction_ids = self.app.view.instruction_ids()
        target = self.app.nav.take_target()
        keep: int | None = None
        if target is not None:
            iid, writer, keep = target
            self.pos = max(0, bisect.bisect_left(self.instruction_ids, iid))
            if writer is not None:
                self.came_with = writer
                if writer not in self.writers:
                    self.writers[0] = writer  # on a side; the sides' order stays by name (or as chosen)
            if self.app.nav.context.ratio is not None:
                self.ratio = self.app.nav.context.ratio
        self.load(keep)

    def context(self) -> Context | None:
        """What this screen shows: the instruction, the response the auditor came with (else side A's),
        the ratio, the row's constraint."""
        if self.data is None:
            return None
        return Context(self.data.id, self._focused(), self._ratio(), self._cursor_cid())

    def _focused(self) -> Writer | None:
        return self.came_with if self.came_with in self.writers else self.writers[0]

    def _cursor_cid(self) -> int | None:
        return self._cid_at(self.query_one("#compare-table", DataTable).cursor_row)

    def _cid_at(self, row: int) -> int | None:
        return self.row_cids[row] if 0 <= row < len(self.row_cids) else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # The cursor now, not the event's: a reload's clear() reports row 0 after the cursor was put back.
        self.query_one(CompareSides).highlight(self._cid_at(event.data_table.cursor_row))

    # -- actions -------------------------------------------------------------------------
    def action_instruction(self, step: int) -> None:
        """The next (previous) instruction with a response, round the end (a common condition's list
        shares its synthesis and may have none: nothing to compare there)."""
        ids = self.instruction_ids
        if not ids:
            return
        analysis = self.app.analysis
        answered = {r.instruction_id for r in analysis.rows} if analysis is not None else set(ids)
        for k in range(1, len(ids) + 1):
            pos = (self.pos + step * k) % len(ids)
            if ids[pos] in answered:
                self.pos = pos
                self.load()
                return
        self.notify("no instruction in this store has a response yet: nothing to compare")

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
        self.chosen = True  # the sides as the auditor set them, no longer by name
        self.came_with = self.writers[which]
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

    def action_scroll(self, step: int, summaries: bool = False) -> None:
        say = self.query_one(CompareSides).scroll(step, summaries)
        if say:
            self.notify(say, timeout=3)

    def action_audit(self) -> None:
        cid = self._cursor_cid()
        if self.data and cid is not None:
            self.app.open_audit(self.data.id, self._focused(), cid)

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
        a, b = self.writers
        if not self.chosen and a is not None and b is not None and b < a:
            self.writers = [b, a]  # by name (model, then mode), whichever screen opened Compare

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
        verdicts: Verdicts = {}
        self.verdicts = verdicts
        for v in self.app.view.latest_verdicts(shown_ids):
            verdicts.setdefault((v.constraint_id, v.generation_id), []).append((v.judge, v.verdict, v.quote))
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
                # The judges' mean (pipeline.analysis.trust): missing verdicts are left out, as the
                # metrics do.
                said = verdicts.get((c.id, response.id), []) if response else []
                vs = [v[1] for v in said if v[1] is not None]
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
        if row:
            table.move_cursor(row=row, animate=False)  # highlights through RowHighlighted
        sides = Sides(data.id, (self.writers[0], self.writers[1]), tuple(self._texts), verdicts, self.ratio)
        self.query_one(CompareSides).show(sides, self._cid_at(row))

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
                   if self.only_differ else f" · {n_active} constraints (d: rows that differ)")
        # One response: B says so (its pane says what would fill it).
        b = writer_label(self.writers[1]) if self.writers[1] is not None or self.writers[0] is None else \
            "[b yellow]none: one response to compare[/]"
        self.query_one("#compare-head", Static).update(
            f"[b]#{data.id}[/] {data.domain} · {data.condition} · [b]A[/]={writer_label(self.writers[0])}"
            f"  [b]B[/]={b} · summary {ratio:g}{listing}\n{markup_escape(data.main_task)}")
