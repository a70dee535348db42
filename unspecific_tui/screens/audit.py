"""Audit: one constraint beside reference A, reference B, the response and its summary.

Moving between constraints costs a few indexed lookups (the constraint's verdicts and flags)
plus cached texts and spans: the widgets are built once and updated in place.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.widgets import Footer, Header, Static

from pipeline.core.definitions import DEFAULT_RATIO, passes
from pipeline.core.text import count_words
from pipeline.store.verdicts import Verdict
from pipeline.store.view import Constraint, InstructionData, Writer
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.widgets.highlight import (
    QUOTE_FUZZY_STYLE,
    QUOTE_STYLE,
    copied_spans,
    lexical_overlap,
    quote_span,
    render,
)
from unspecific_tui.widgets.text_pane import TextPane

PANES = ("ref-a", "ref-b", "response", "summary")
PANE_TITLES = {"ref-a": "Reference A", "ref-b": "Reference B", "response": "Response", "summary": "Summary"}
CONSTRAINT_N = 3  # a constraint is short: three shared words in a row already say "copied"
REFERENCE_N = 5  # between long texts, the paper's 5-gram


@dataclass
class Shown:
    """What the screen shows now: tests read it instead of parsing the SVG."""

    constraint_id: int | None = None
    instruction_id: int | None = None
    writer: Writer | None = None
    response_id: int | None = None  # the texts in the panes, by id
    summary_id: int | None = None
    state: str = ""  # FLIPPED | pass both | fails full | not judged (pipeline.analysis.metrics.Item)
    copies: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    quotes: dict[str, list[tuple[str, tuple[int, int] | None]]] = field(default_factory=dict)
    similarities: dict[str, tuple[str, float]] = field(default_factory=dict)


class AuditScreen(AppScreen):
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-medium"), (200, "-wide")]
    BINDINGS = [
        Binding("j,n", "move(1)", "Next"),
        Binding("k,p", "move(-1)", "Prev"),
        Binding("right_square_bracket", "instruction(1)", "Next instr.", key_display="]"),
        Binding("left_square_bracket", "instruction(-1)", "Prev instr.", key_display="[", show=False),
        Binding("f", "next_flagged", "Flagged"),
        Binding("x", "next_flipped", "Flipped"),
        Binding("m", "cycle_model", "Model/mode"),
        Binding("c", "toggle_copy", "Copy mode"),
        Binding("t", "next_pane", "Pane"),
        Binding("r", "cycle_ratio", "Ratio", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.order: list[tuple[int, int]] = []
        self.index = 0
        self.copy_mode = "constraint"  # constraint | references
        self.pane = 0
        self.ratio: float | None = None
        self.writer: Writer | None = None
        self.shown = Shown()
        self._flagged: dict[int, set[str]] | None = None
        self._verdict_lines = 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="audit-head")
        yield Static(id="audit-tabs")
        with Container(id="panes"):
            for i, pane in enumerate(PANES):
                yield TextPane(PANE_TITLES[pane], id=pane, classes="-current" if i == 0 else "")
        yield Static(id="audit-verdicts")
        yield Footer()

    def on_mount(self) -> None:
        self.ratio = self.app.ratio

    def on_screen_resume(self) -> None:
        self._show_target()

    def _show_target(self) -> None:
        """Show the constraint another screen asked for, or stay where we were."""
        order = self.app.view.constraint_order()  # cached; re-read after a stage wrote
        target = self.app.target
        if target is None and order is self.order and self.shown.constraint_id is not None:
            return  # nothing changed while we were away
        current = self.order[self.index][0] if self.order else None
        if order is not self.order:
            self.order = order
            if current is not None:
                self.index = next((i for i, o in enumerate(order) if o[0] == current), 0)
        if target is not None:
            self.app.target = None
            iid, writer, cid = target
            if writer:
                self.writer = writer
            if cid is None:
                pos = bisect.bisect_left(order, iid, key=_instruction)
                self.index = pos if pos < len(order) else 0
            else:
                self.index = next((i for i, o in enumerate(order) if o[0] == cid), 0)
        self.refresh_constraint()

    # -- actions -------------------------------------------------------------------------
    def action_move(self, step: int) -> None:
        if self.order:
            self.index = max(0, min(len(self.order) - 1, self.index + step))
            self.refresh_constraint()

    def action_instruction(self, step: int) -> None:
        """First constraint of the next (or previous) instruction."""
        if not self.order:
            return
        order = self.order
        current = order[self.index][1]
        if step > 0:
            i = bisect.bisect_right(order, current, key=_instruction)
            self.index = i if i < len(order) else self.index
        else:
            start = bisect.bisect_left(order, current, key=_instruction)
            prev = order[start - 1][1] if start > 0 else current
            self.index = bisect.bisect_left(order, prev, key=_instruction)
        self.refresh_constraint()

    def _seek(self, test: Callable[[int, int], bool], what: str) -> None:
        n = len(self.order)
        for k in range(1, n):
            i = (self.index + k) % n
            if test(*self.order[i]):
                self.index = i
                self.refresh_constraint()
                return
        self.notify(f"no {what} constraint", severity="warning")

    def action_next_flagged(self) -> None:
        if self._flagged is None:
            self._flagged = self.app.view.flagged_ids()
        flagged = self._flagged
        self._seek(lambda cid, _: cid in flagged, "flagged")

    def action_next_flipped(self) -> None:
        """Asks the store per constraint (indexed); once the analysis is ready, only about the
        instructions it counted a flip in."""
        analysis = self.app.analysis
        if analysis is not None and analysis.ratio == self._ratio(None):
            candidates = analysis.flipped_instructions(self.writer)
            self._seek(lambda cid, iid: iid in candidates and self._flipped_now(cid, iid), "flipped")
            return
        self._seek(self._flipped_now, "flipped")

    def _flipped_now(self, cid: int, iid: int) -> bool:
        """pipeline.analysis.metrics' call on this constraint of the current writer's response."""
        if self.writer is None:
            return False
        item = self.app.view.outcomes(iid, self.writer, self._ratio(None)).get(cid)
        return item is not None and item.flipped

    def action_cycle_model(self) -> None:
        """The next response of this instruction: every (model, mode) in turn."""
        if not self.order:
            return
        writers = self.app.view.instruction(self.order[self.index][1]).writers
        if writers:
            i = writers.index(self.writer) if self.writer in writers else -1
            self.writer = writers[(i + 1) % len(writers)]
            self.refresh_constraint()

    def action_cycle_ratio(self) -> None:
        if not self.order:
            return
        ratios = self.app.view.instruction(self.order[self.index][1]).ratios
        if ratios:
            cur = self._ratio(None)
            self.ratio = ratios[(ratios.index(cur) + 1) % len(ratios)] if cur in ratios else ratios[0]
            self.refresh_constraint()

    def action_toggle_copy(self) -> None:
        self.copy_mode = "references" if self.copy_mode == "constraint" else "constraint"
        what = "response vs references" if self.copy_mode == "references" else "constraint vs each text"
        self.notify(f"copied n-grams: {what}")
        self.refresh_constraint()

    def action_next_pane(self) -> None:
        self.pane = (self.pane + 1) % len(PANES)
        for i, pane in enumerate(PANES):
            self.query_one(f"#{pane}", TextPane).set_class(i == self.pane, "-current")
        self._render_tabs()

    # -- rendering -----------------------------------------------------------------------
    def _ratio(self, data: InstructionData | None) -> float:
        if self.ratio is not None:
            return self.ratio
        analysis = self.app.analysis
        if analysis is not None:
            return analysis.ratio
        if data is not None and data.ratios:
            return DEFAULT_RATIO if DEFAULT_RATIO in data.ratios else data.ratios[0]
        return DEFAULT_RATIO

    def _state(self, iid: int, cid: int, verdicts: list[Verdict], ratio: float) -> str:
        """The constraint's outcome on the shown response, as pipeline.analysis.metrics counts it."""
        item = self.app.view.outcomes(iid, self.writer, ratio).get(cid) if self.writer else None
        if item is not None:
            return "FLIPPED" if item.flipped else "pass both" if item.passed_both else "fails full"
        # Not judged on both texts: only the response's own verdicts, for orientation.
        # A missing verdict (None) is no verdict: left out, as the metrics leave it out.
        full = [v.verdict for v in verdicts if v.generation_id == self.shown.response_id and v.verdict is not None]
        if not full:
            return "not judged"
        return "passes full" if passes(sum(full) / len(full)) else "fails full"

    def _render_tabs(self) -> None:
        parts = [f"[reverse] {PANE_TITLES[p]} [/]" if i == self.pane else f" {PANE_TITLES[p]} "
                 for i, p in enumerate(PANES)]
        self.query_one("#audit-tabs", Static).update("  ".join(parts) + "   [dim](t: next pane)[/]", layout=False)

    def refresh_constraint(self) -> None:
        view = self.app.view
        if not self.order:
            self.query_one("#audit-head", Static).update(
                "No constraints in this store yet. Build a run (1), then come back.")
            return
        cid, iid = self.order[self.index]
        data = view.instruction(iid)
        con = data.constraints[cid]
        if self.writer not in data.responses:
            self.writer = self.app.writer if self.app.writer in data.responses else (
                data.writers[0] if data.writers else None)
        ratio = self._ratio(data)
        response = data.responses.get(self.writer) if self.writer else None
        summary = data.summary(self.writer, ratio) if self.writer else None
        # Only the verdicts on the two texts shown: never another mode's response or summary.
        shown_ids = {g.id for g in (response, summary) if g is not None}
        verdicts = [v for v in view.verdicts(cid) if v.generation_id in shown_ids]
        flags = view.flags(cid)
        texts = {"ref-a": data.article_a, "ref-b": data.article_b,
                 "response": response.text if response else "", "summary": summary.text if summary else ""}
        shown = Shown(cid, iid, self.writer, response.id if response else None, summary.id if summary else None)
        self.shown = shown

        for pane in PANES:
            text = texts[pane]
            if self.copy_mode == "constraint":
                copies = copied_spans(con.text, text, CONSTRAINT_N) if text else ()
            elif pane in ("response", "summary"):
                copies = tuple(sorted(set(copied_spans(data.article_a, text, REFERENCE_N))
                                      | set(copied_spans(data.article_b, text, REFERENCE_N)))) if text else ()
            else:
                copies = copied_spans(texts["response"], text, REFERENCE_N) if text and texts["response"] else ()
            kind = {"response": "response", "summary": "summary"}.get(pane)
            quotes: list[tuple[tuple[int, int], str]] = []
            found: list[tuple[str, tuple[int, int] | None]] = []
            if kind:
                for v in verdicts:
                    if v.kind == kind and v.verdict and v.quote:
                        how, span = quote_span(v.quote, text)
                        found.append((v.judge, span))
                        if span:
                            quotes.append((span, QUOTE_STYLE if how == "exact" else QUOTE_FUZZY_STYLE))
            shown.copies[pane] = tuple(copies)
            shown.quotes[pane] = found
            words = count_words(text)
            if text:
                body = render(text, copies, quotes)
            elif pane == "ref-b" and data.condition == "single":
                body = Text("(single condition: one reference only)", style="dim")
            else:
                body = Text("(not generated yet)", style="dim")
            sim = self._similarity(con, text, pane, data, response, summary)
            shown.similarities[pane] = sim
            widget = self.query_one(f"#{pane}", TextPane)
            widget.show(body, key=(iid, pane, self.writer, ratio),
                        subtitle=f"{words} words · {sim[0]} {sim[1]:.2f} · {len(copies)} copied")
            first = min([s[0] for s, _ in quotes] + [s[0] for s in copies], default=None)
            if first is not None:
                widget.reveal(first)
        shown.state = self._state(iid, cid, verdicts, ratio)
        self._render_head(data, con, flags, shown.state, ratio)
        self._render_verdicts(verdicts, ratio)
        self._render_tabs()

    def _similarity(self, con: Constraint, text: str, pane: str, data: InstructionData, response, summary
                    ) -> tuple[str, float]:
        """Embedding cosine when both vectors are stored, else lexical overlap."""
        if not text:
            return ("lex", 0.0)
        import numpy as np

        from pipeline.analysis.embeddings import cosine
        from pipeline.store.database import text_hash

        view = self.app.view
        c_vec = view.embedding(text_hash(con.text))
        if c_vec is not None:
            h = {"response": response.text_hash if response else None,
                 "summary": summary.text_hash if summary else None}.get(pane) or text_hash(text)
            t_vec = view.embedding(h, c_vec[0])
            if t_vec is not None:
                return ("cos", float(cosine(np.asarray(c_vec[1]), np.asarray(t_vec[1]))))  # two vectors: a float
        return ("lex", lexical_overlap(con.text, text))

    def _render_head(self, data: InstructionData, con: Constraint, flags: dict[str, str], outcome: str,
                     ratio: float) -> None:
        state = {"FLIPPED": "[b red]FLIPPED[/]", "pass both": "[green]pass both[/]",
                 "fails full": "[yellow]fails full[/]", "passes full": "[green]passes full[/] [dim](summary not judged)[/]"
                 }.get(outcome, "[dim]not judged[/]")
        flag_txt = " ".join(f"[black on yellow] {f} [/]" for f in sorted(flags)) or "[dim]no flags[/]"
        lineage = ""
        if con.replaces_id and con.replaces_id in data.constraints:
            old = data.constraints[con.replaces_id]
            # pipeline.stages.revision keeps the reason on the new row (older stores: on the old one).
            reason = con.replaced_reason or old.replaced_reason or "?"
            lineage = f"\n[dim]replaced #{old.id}:[/] {_esc(old.text)}  [dim]because[/] {_esc(reason)}"
        elif con.origin:
            lineage = f"\n[dim]{con.origin}; base article verdict: " \
                       f"{'-' if con.base_verdict is None else 'yes' if con.base_verdict else 'no'}[/]"
        self.query_one("#audit-head", Static).update(
            f"[b]#{data.id}[/] {data.domain} · {data.condition} · constraint {con.position}/"
            f"{sum(1 for c in data.constraints.values() if c.active)} · [b]{_esc(self.writer.label) if self.writer else '-'}[/]"
            f" · summary {ratio:g}"
            f" · {state} · {flag_txt} · copy: {self.copy_mode} ({self.index + 1}/{len(self.order)})\n"
            f"[b]{_esc(con.text)}[/]{lineage}", layout=False)  # fixed height in app.tcss

    def _render_verdicts(self, verdicts: list[Verdict], ratio: float) -> None:
        """Plain aligned lines, not a Rich Table: a table re-measures itself on every move."""
        lines = [Text("judge        text          verdict quote    evidence", style="bold")]
        for v in verdicts:
            found, style = {"exact": ("found", "green"), "fuzzy": ("fuzzy", "magenta"),
                            "missing": ("MISSING", "bold red")}.get(v.quote_found or "", ("-", "dim"))
            where = "full" if v.kind == "response" else f"summary {v.ratio:g}"
            said = ("missing", "yellow") if v.verdict is None else ("yes    ", "green") if v.verdict else ("no     ", "red")
            lines.append(Text.assemble(
                f"{v.judge[:12]:<12} {where:<13} ", said,
                " ", (f"{found:<8}", style), " ", (v.quote if v.verdict else v.reason).replace("\n", " "),
                no_wrap=True, overflow="ellipsis"))
        # Padded to the most lines shown so far: a move that shows fewer verdicts keeps the height,
        # so it does not lay out (and re-wrap) the panes again, and the panes do not jump.
        grew = len(lines) > self._verdict_lines
        self._verdict_lines = max(self._verdict_lines, len(lines))
        body = Text("\n").join(lines + [Text()] * (self._verdict_lines - len(lines)))
        body.no_wrap, body.overflow = True, "ellipsis"
        self.query_one("#audit-verdicts", Static).update(body, layout=grew)


def _instruction(entry: tuple[int, int]) -> int:
    return entry[1]


def _esc(text: str) -> str:
    return text.replace("[", r"\[")
