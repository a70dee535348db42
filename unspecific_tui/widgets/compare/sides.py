"""Compare's two sides: each side's Org and Core totals, its response and its summary at the ratio
under it, the judges' quotes of the table's constraint highlighted in all four texts, and what a side
with no response says (an instruction with one response leaves side B empty and names what fills it).

It owns what it shows: the screen hands it the texts (``show``, with a ``Sides``) and the constraint
whose quotes to highlight (``highlight``, as the table's cursor moves); the totals follow the app's
analysis by themselves. Nothing here needs the screen's answer, so it posts no message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from pipeline.core.definitions import same_ratio
from pipeline.core.text import count_words
from pipeline.store.view import Generation, Writer
from unspecific_tui.widgets.compare.names import SIDES, second_writer, writer_label
from unspecific_tui.widgets.highlight import QUOTE_FUZZY_STYLE, QUOTE_STYLE, quote_span, render
from unspecific_tui.widgets.refusal import WORD as REFUSAL
from unspecific_tui.widgets.refusal import refusal_mark
from unspecific_tui.widgets.text_pane import TextPane

if TYPE_CHECKING:
    from unspecific_tui.app import UnspecificApp

# (constraint, generation) -> each rater's latest (judge, verdict, quote)
Verdicts = dict[tuple[int, int], list[tuple[str, int | None, str]]]


@dataclass(frozen=True)
class Sides:
    """What the sides show: the instruction, its two writers (B None: the instruction has one
    response), each side's response and summary, the judges' latest verdicts on those texts, and the
    ratio the screen was asked for (shown: ``app.view_ratio`` of it, the rule every view follows)."""

    instruction_id: int
    writers: tuple[Writer | None, Writer | None]
    texts: tuple[tuple[Generation | None, Generation | None], ...]  # each side's (response, summary)
    verdicts: Verdicts
    asked: float | None


def _pct(value: float | None) -> str:
    """A share as a whole percentage; "-" where there is none (None or NaN: not judged)."""
    return "-" if value is None or math.isnan(value) else f"{100 * value:.0f}%"


class CompareSides(Horizontal):
    """Side A and side B, each its totals line over its response over its summary."""

    DEFAULT_CSS = """
    CompareSides .cmp-side { width: 1fr; height: 1fr; }
    CompareSides .cmp-totals { height: 1; padding: 0 1; }
    CompareSides .cmp-response { height: 2fr; min-height: 4; }
    CompareSides .cmp-summary { height: 1fr; min-height: 3; }
    """

    if TYPE_CHECKING:  # at run time Textual's own ``app``: the one running, an UnspecificApp
        app: UnspecificApp

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.sides: Sides | None = None  # what the screen handed last; None: nothing shown yet
        self.highlighted: dict[str, list[tuple[int, int]]] = {}  # each pane's quoted spans (for tests)
        # Each side's Org and Core totals as shown (for tests): {"a": ("67%", "33%"), ...}
        self.totals: dict[str, tuple[str, str]] = {}
        self._rows_of: tuple[object, dict[int, list]] | None = None

    def compose(self) -> ComposeResult:
        for side in SIDES:
            with Vertical(classes="cmp-side", id=f"cmp-side-{side}"):
                yield Static(id=f"cmp-{side}-totals", classes="cmp-totals")
                yield TextPane(f"Model {side.upper()}", id=f"cmp-{side}", classes="cmp-response")
                yield TextPane("Summary", id=f"cmp-{side}-summary", classes="cmp-summary")

    def on_mount(self) -> None:
        self.watch(self.app, "analysis", self._on_analysis, init=False)

    def show(self, sides: Sides, cid: int | None) -> None:
        """Show ``sides``, the quotes of constraint ``cid`` (None: none) highlighted."""
        self.sides = sides
        self._render_totals()
        self.highlight(cid)

    def _ratio(self, sides: Sides) -> float:
        return self.app.view_ratio(sides.asked)

    # -- the texts -----------------------------------------------------------------------
    def highlight(self, cid: int | None) -> None:
        """Highlight the judges' quotes of constraint ``cid`` (None: none) in the four texts."""
        sides = self.sides
        if sides is None:
            return
        ratio = self._ratio(sides)
        first = sides.writers[0]
        for slot, side in enumerate(SIDES):
            writer = sides.writers[slot]
            response, summary = sides.texts[slot]
            pane = self.query_one(f"#cmp-{side}", TextPane)
            alone = writer is None and first is not None  # B of an instruction with one response
            name = "no second response" if alone else writer_label(writer)
            refused = f" · {REFUSAL}" if response and response.refusal else ""
            pane.border_title = f"{side.upper()}: {name}{refused}"
            empty = f"No second response to this instruction: {second_writer(first)}." if alone \
                else "(no response)"
            self._show_text(pane, f"cmp-{side}", response, cid, (sides.instruction_id, writer), empty)
            spane = self.query_one(f"#cmp-{side}-summary", TextPane)
            spane.border_title = f"{side.upper()} summary {ratio:g}"
            self._show_text(spane, f"cmp-{side}-summary", summary, cid, (sides.instruction_id, writer, ratio),
                            "(no second response)" if alone else "(no summary at this ratio)")

    def _show_text(self, pane: TextPane, name: str, text: Generation | None, cid: int | None, key: object,
                   empty: str) -> None:
        if text is None:
            self.highlighted[name] = []
            pane.show(Text(empty, style="dim" if empty.startswith("(") else "yellow"), key=key)
            return
        quotes = []
        verdicts = self.sides.verdicts if self.sides is not None else {}
        for _judge, verdict, quote in verdicts.get((cid, text.id), []) if cid else []:
            if verdict and quote:
                how, span = quote_span(quote, text.text)
                if span:
                    quotes.append((span, QUOTE_STYLE if how == "exact" else QUOTE_FUZZY_STYLE))
        self.highlighted[name] = sorted({s for s, _ in quotes})
        pane.show(render(text.text, (), quotes), key=key,
                  subtitle=f"{text.words or count_words(text.text)} words · {len(quotes)} quote(s)")
        if quotes:
            pane.reveal(min(s[0] for s, _ in quotes))

    def scroll(self, step: int, summaries: bool = False) -> str | None:
        """PageUp/PageDown: both responses (``summaries``: both summaries) a page on, side by side;
        what to say when neither moved."""
        names = [f"cmp-{side}-summary" if summaries else f"cmp-{side}" for side in SIDES]
        moved = False
        for name in names:
            pane = self.query_one(f"#{name}", TextPane)
            before = pane.scroll_y
            if step > 0:
                pane.scroll_page_down(animate=False)
            else:
                pane.scroll_page_up(animate=False)
            moved = moved or pane.scroll_y != before
        if moved:
            return None
        what = "summaries" if summaries else "responses"
        return f"both {what}: at their {'end' if step > 0 else 'start'}"

    # -- the totals ----------------------------------------------------------------------
    def _on_analysis(self) -> None:
        """The metrics arrived (or were recomputed): the totals follow."""
        if self.sides is not None:
            self._render_totals()

    def _render_totals(self) -> None:
        """Each side's Org and Core: the report's numbers (pipeline.analysis.metrics rows) once they
        are computed; before that the store-wide pass's, at its own ratio only."""
        sides = self.sides
        if sides is None:
            return
        ratio = self._ratio(sides)
        self.totals = {}
        for side, writer, (response, _) in zip(SIDES, sides.writers, sides.texts):
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
