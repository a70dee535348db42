"""Audit's detail: the legend line, the four texts (reference A, reference B, the response, its
summary) with their copied spans and the judges' quotes highlighted, the source view (`o`), and the
judges' verdict lines under them. It owns what it shows: the copy mode, the current pane, the source
view, the copied span `g` stands on. The screen hands it the item to draw (``draw``) and calls its
keys' methods, each returning what the key changed for the screen to say.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Container, Vertical
from textual.widgets import Static

from pipeline.analysis.copy_count import CONSTRAINT, source_name
from pipeline.analysis.copy_count import NONE as NO_COPY
from pipeline.analysis.support import LOCATED
from pipeline.core.definitions import DEFAULT_YES_THRESHOLD, uncertain
from pipeline.store.verdicts import Verdict
from unspecific_tui.widgets.audit.pane_text import pane_content, phrase_spans, styled
from unspecific_tui.widgets.audit.state import NARROW, PANE_TITLES, PANES, SOURCE_PANE, Item, Shown
from unspecific_tui.widgets.constraint_list import ListRow
from unspecific_tui.widgets.highlight import QUOTE_STYLE, SOURCE_STYLES, render_sources
from unspecific_tui.widgets.refusal import WORD as REFUSAL
from unspecific_tui.widgets.text_pane import TextLines, TextPane

if TYPE_CHECKING:
    from unspecific_tui.app import UnspecificApp


class AuditDetail(Vertical):
    """The legend, the text panes (or the source view) and the verdict lines."""

    if TYPE_CHECKING:  # at run time Textual's own ``app``: the one running, an UnspecificApp
        app: UnspecificApp

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.copy_mode = "constraint"  # constraint | references
        self.pane = 0  # the current pane (narrow: the one shown)
        self.source_view = False  # `o`: the response beside the copied words' source
        self._verdict_lines = 0
        self._thresholds: dict[tuple[str, str], float] | None = None
        self._legend: Text | None = None
        self._shown = Shown()  # what the last draw found (`g` steps through its copied spans)

    def compose(self) -> ComposeResult:
        yield Static(id="audit-legend")
        with Container(id="panes"):
            for i, pane in enumerate(PANES):
                yield TextPane(PANE_TITLES[pane], id=pane, classes="-current" if i == 0 else "")
            yield TextPane("Source", id=SOURCE_PANE)
        yield TextLines(id="audit-verdicts")

    def _narrow(self) -> bool:
        return self.app.size.width < NARROW

    def _pane(self, name: str) -> TextPane:
        return self.query_one(f"#{name}", TextPane)

    def toggle_copy(self) -> str:
        self.copy_mode = "references" if self.copy_mode == "constraint" else "constraint"
        what = "response vs references" if self.copy_mode == "references" else "constraint vs each text"
        return f"copied n-grams: {what}"

    def toggle_source(self) -> None:
        """o: the response's copied span beside the same span in its source, and back."""
        self.source_view = not self.source_view
        self.set_class(self.source_view, "-source")

    def next_pane(self) -> None:
        """Narrow: the next pane shown. Wider: the next pane current (PageUp/PageDown scroll it)."""
        self.set_pane((self.pane + 1) % len(PANES))
        self.draw_titles()

    def set_pane(self, index: int) -> None:
        self.pane = index
        for i, pane in enumerate(PANES):
            self._pane(pane).set_class(i == self.pane, "-current")

    def open_on_copy(self, row: ListRow | None) -> None:
        """Narrow, on arriving at an item followed (the suspicion queue, a flag) whose response holds
        copied words: the response pane, on its first copied span, as the wide layout shows it; `t`
        still moves on, and it stays put until the next item."""
        if self._narrow() and row is not None and row.copy.words:
            self.set_pane(PANES.index("response"))

    def scroll(self, step: int) -> str | None:
        """PageUp/PageDown: scroll the current pane; what to say when it cannot."""
        pane = self._pane(PANES[self.pane])
        before = pane.scroll_y
        if step > 0:
            pane.scroll_page_down(animate=False)
        else:
            pane.scroll_page_up(animate=False)
        if pane.scroll_y == before and pane.max_scroll_y == 0:
            return f"{PANE_TITLES[PANES[self.pane]]}: the whole text is in view (t: the next pane)"
        if pane.scroll_y == before:
            return f"{PANE_TITLES[PANES[self.pane]]}: at its {'end' if step > 0 else 'start'}"
        return None

    def next_copy(self) -> str:
        """g: the response pane on its next copied span (the words the list counts), round to the first."""
        shown = self._shown
        spans = shown.copied_in_response
        if not spans:
            return "nothing copied into the response for this constraint"
        shown.copy_step = (shown.copy_step + 1) % len(spans)
        self._pane("response").reveal(spans[shown.copy_step][0])
        return f"copied span {shown.copy_step + 1} of {len(spans)} in the response"

    def drawn_panes(self) -> tuple[str, ...]:
        """The panes a draw fills: at 80 columns the one shown (the others when `t` brings them: a
        third of a move's cost), the response left to the source view when it is on."""
        panes = (PANES[self.pane],) if self._narrow() else PANES
        return tuple(p for p in panes if not (self.source_view and p == "response"))

    def draw(self, item: Item, shown: Shown) -> None:
        """Show ``item``; what the panes found recorded in ``shown``."""
        self._shown = shown
        for pane in self.drawn_panes():
            body, subtitle, first = pane_content(pane, item.texts, item.con, item.data, item.verdicts,
                                                 item.row, shown, self.copy_mode)
            widget = self._pane(pane)
            widget.show(body, key=(item.data.id, pane, item.writer, item.ratio), subtitle=subtitle)
            if first is not None:
                widget.reveal(first)
        if self.source_view:  # it draws the response
            self._draw_source(item, shown)
        self._draw_legend(item.row)
        self._draw_verdicts(item.verdicts)
        self.draw_titles()

    def read_ahead(self, item: Item) -> None:
        """The panes' spans, quotes, counts and wraps for ``item`` computed into their caches, nothing
        drawn (the screen reads the next stop ahead while the auditor reads this one)."""
        scratch = Shown()  # what the panes found: recorded again when the move shows them
        for pane in self.drawn_panes():
            pane_content(pane, item.texts, item.con, item.data, item.verdicts, item.row, scratch,
                         self.copy_mode)
            self._pane(pane).wrap_ahead(item.texts[pane])

    def draw_titles(self) -> None:
        """The panes' titles. Narrow shows one pane at a time: its title says which of the four it is
        and how to get the next, and its bottom border keeps its footer (words, copied), focused or
        not; the source view's right pane says how to go back."""
        narrow = self._narrow()
        for i, pane in enumerate(PANES):
            title = PANE_TITLES[pane]
            if pane == "response" and self._shown.refusal:
                title = f"{title}: {REFUSAL}"
            if narrow and i == self.pane and not self.source_view:
                title = f"{title} ({i + 1}/{len(PANES)}, t: next)"
            self._pane(pane).border_title = title

    def _draw_source(self, item: Item, shown: Shown) -> None:
        """The source view: the response's copied words (the list's count) beside the same words in
        their source (reference A, else B, or the constraint itself), highlighted in both and each
        scrolled to the first."""
        data, con = item.data, item.con
        count = item.row.copy if item.row else NO_COPY
        source = "A" if "A" in count.source else "B" if "B" in count.source else CONSTRAINT
        body = {"A": data.article_a, "B": data.article_b, CONSTRAINT: con.text}[source]
        response = item.texts["response"]
        style = SOURCE_STYLES["A" if source == CONSTRAINT else source]
        in_response = phrase_spans(count.phrases, response)
        in_source = phrase_spans(count.phrases, body)
        shown.source = (source, in_response, in_source)
        title = source_name(source) if count.words else "source (nothing copied)"
        pane = self._pane(SOURCE_PANE)
        pane.border_title = f"{title[0].upper()}{title[1:]} (o: back)"
        pane.show(render_sources(body, {source if source != CONSTRAINT else "A": in_source}) if body
                  else Text("(no text)", style="dim"), key=(data.id, SOURCE_PANE, con.id, source),
                  subtitle=f"{len(in_source)} copied span{'' if len(in_source) == 1 else 's'}")
        left = self._pane("response")
        left.show(styled(response, in_response, style), key=(data.id, "response-source", item.writer, con.id),
                  subtitle=count.sentence() or "nothing copied")
        for widget, spans in ((left, in_response), (pane, in_source)):
            if spans:
                widget.reveal(spans[0][0])

    def _draw_legend(self, row: ListRow | None) -> None:
        legend = Text(no_wrap=True, overflow="ellipsis")
        if self.source_view:
            count = row.copy if row else None
            legend.append(" copied words ", style=SOURCE_STYLES["A"])
            legend.append(f" {count.sentence() if count and count.words else 'nothing copied'}"
                          " · the same words in the source on the right (o: back)")
        elif self.copy_mode == "references":
            # Any 5-gram a text shares with a reference, through the constraint or not (the model
            # never saw the references: reference → response without the constraint is the task's
            # words or chance).
            legend.append("5-grams in response/summary shared with ")
            for name, label in (("A", "A"), ("B", "B"), ("both", "both")):
                legend.append(f" {label} ", style=SOURCE_STYLES[name])
                legend.append(" ")
            legend.append("· through the constraint or not · in references: from the response", style="dim")
        else:
            legend.append(" constraint 3-grams ", style=SOURCE_STYLES["A"])
            where = " and ".join(row.copied_from) if row and row.copied_from else ""
            legend.append(f" in each text · reference {where} → constraint → response" if where
                          else " in each text · none both in a reference and the response")
        legend.append("  ")
        legend.append(" quote ", style=QUOTE_STYLE)
        if legend != self._legend:  # an update repaints: most moves leave the legend as it was
            self._legend = legend
            self.query_one("#audit-legend", Static).update(legend)

    def _judge_thresholds(self) -> dict[tuple[str, str], float]:
        """Each yes_no judge's calibrated threshold, read once a screen (a calibration is rare)."""
        if self._thresholds is None:
            self._thresholds = self.app.view.judge_thresholds()
        return self._thresholds

    def _draw_verdicts(self, verdicts: list[Verdict]) -> None:
        """Plain aligned lines, not a Rich Table: a table re-measures itself on every move. A yes_no
        judge's verdict shows its P(Yes) against its threshold, 'yes?' / 'no?' when near it; its Yes
        rests on a located sentence, not a quote."""
        lines = [Text("judge        text          verdict quote found? quote / reason", style="bold",
                      no_wrap=True, overflow="ellipsis")]
        thresholds = self._judge_thresholds()
        for v in verdicts:
            found, style = {"exact": ("found", "green"), "fuzzy": ("fuzzy", "magenta"),
                            LOCATED: ("located", "cyan"),
                            "missing": ("MISSING", "bold red")}.get(v.quote_found or "", ("-", "dim"))
            if not v.verdict:
                found, style = "-", "dim"  # a No has no quote to find
            where = "full" if v.kind == "response" else f"summary {v.ratio:g}"
            said = ("missing", "yellow") if v.verdict is None else ("yes    ", "green") if v.verdict \
                else ("no     ", "red")
            detail = (v.quote if v.verdict else v.reason).replace("\n", " ")
            if v.p_yes is not None and v.verdict is not None:
                threshold = thresholds.get((v.judge, v.judging_mode), DEFAULT_YES_THRESHOLD)
                doubt = uncertain(v.p_yes, threshold)
                said = (f"{'yes' if v.verdict else 'no'}{'?' if doubt else ''}".ljust(7),
                        "bold yellow" if doubt else said[1])
                detail = f"P(Yes) {v.p_yes:.2f} vs {threshold:.2f}{', uncertain' if doubt else ''}" + (
                    f" · {detail}" if v.verdict and detail else "")
            lines.append(Text.assemble(
                f"{v.judge[:12]:<12} {where:<13} ", said,
                " ", (f"{found:<12}", style), " ", detail,
                no_wrap=True, overflow="ellipsis"))
        # Padded to the most lines shown so far: a move that shows fewer verdicts keeps the height,
        # so it does not lay out (and re-wrap) the panes again, and the panes do not jump.
        self._verdict_lines = max(self._verdict_lines, len(lines))
        padding = [Text()] * (self._verdict_lines - len(lines))
        self.query_one("#audit-verdicts", TextLines).show(lines + padding)
