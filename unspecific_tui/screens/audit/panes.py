"""The Audit screen's detail panes: the four texts (reference A, reference B, the response, its
summary) with their copied spans and the judges' quotes highlighted, the source view (`o`), and
the judges' verdict lines under them.
"""

from __future__ import annotations

from functools import lru_cache

from rich.text import Text

from pipeline.analysis.copy_count import CONSTRAINT, CopyCount, copy_count, source_name
from pipeline.analysis.copy_count import NONE as NO_COPY
from pipeline.analysis.similarity import LEXICAL
from pipeline.analysis.specificity import template_words
from pipeline.analysis.support import LOCATED
from pipeline.core.definitions import COPY_EVIDENCE_NGRAM, DEFAULT_YES_THRESHOLD, uncertain
from pipeline.core.text import count_words
from pipeline.store.verdicts import Verdict
from pipeline.store.view import Constraint, InstructionData
from unspecific_tui.screens.audit.state import PANE_TITLES, PANES, SOURCE_PANE, AuditBase, Shown
from unspecific_tui.widgets.constraint_list import ListRow
from unspecific_tui.widgets.highlight import (
    QUOTE_FUZZY_STYLE,
    QUOTE_STYLE,
    SOURCE_STYLES,
    Span,
    copied_spans,
    intersect,
    merge,
    quote_span,
    render,
    render_sources,
)
from unspecific_tui.widgets.text_pane import TextLines, TextPane

CONSTRAINT_N = COPY_EVIDENCE_NGRAM  # a constraint is short: a few shared words in a row already say "copied"
REFERENCE_N = 5  # between long texts, the paper's 5-gram


class PanesPart(AuditBase):
    """The text panes, the source view and the verdict lines."""

    def action_toggle_copy(self) -> None:
        self.copy_mode = "references" if self.copy_mode == "constraint" else "constraint"
        what = "response vs references" if self.copy_mode == "references" else "constraint vs each text"
        self.refresh_constraint()
        self._say(f"copied n-grams: {what}")

    def action_next_pane(self) -> None:
        """Narrow: show the next pane. Wider: mark it current; PageUp/PageDown scroll it. From the
        source view (o), back to the four texts."""
        self._to_text()
        if self.source_view:
            self.action_toggle_source()
            self._say("back to the four texts (o: the source view again)")
            return
        self._set_pane((self.pane + 1) % len(PANES))
        if self._narrow():
            self._render_head_only()  # the pane now shown was not drawn while hidden
        self._render_titles()

    def _set_pane(self, index: int) -> None:
        self.pane = index
        for i, pane in enumerate(PANES):
            self.query_one(f"#{pane}", TextPane).set_class(i == self.pane, "-current")

    def _open_on_copy(self, arrived: bool, row: ListRow | None) -> None:
        """Narrow, following (the suspicion queue, a flag): an item arrived at whose response holds
        copied words opens on the response pane, on its first copied span, as the wide layout shows
        it; `t` still moves on, and stays put until the next item."""
        if arrived and self._narrow() and self.app.following is not None and row is not None and row.copy.words:
            self._set_pane(PANES.index("response"))

    def action_scroll_pane(self, step: int) -> None:
        self._to_text()
        pane = self.query_one(f"#{PANES[self.pane]}", TextPane)
        before = pane.scroll_y
        if step > 0:
            pane.scroll_page_down(animate=False)
        else:
            pane.scroll_page_up(animate=False)
        if pane.scroll_y == before and pane.max_scroll_y == 0:
            self._say(f"{PANE_TITLES[PANES[self.pane]]}: the whole text is in view (t: the next pane)")
        elif pane.scroll_y == before:
            self._say(f"{PANE_TITLES[PANES[self.pane]]}: at its {'end' if step > 0 else 'start'}")

    def action_next_copy(self) -> None:
        """g: the response pane on its next copied span (the words the list counts), round to the first."""
        spans = self.shown.copied_in_response
        if not spans:
            self._say("nothing copied into the response for this constraint")
            return
        self.shown.copy_step = (self.shown.copy_step + 1) % len(spans)
        self.query_one("#response", TextPane).reveal(spans[self.shown.copy_step][0])
        self._say(f"copied span {self.shown.copy_step + 1} of {len(spans)} in the response")

    def action_toggle_source(self) -> None:
        """o: the response's copied span beside the same span in its source, and back."""
        self._to_text()
        self.source_view = not self.source_view
        self.set_class(self.source_view, "-source")
        self.refresh_constraint()

    def _drawn_panes(self) -> tuple[str, ...]:
        """The panes a refresh draws: at 80 columns the one shown (the others when `t` brings them: a
        third of a move's cost), the response left to the source view when it is on."""
        panes = (PANES[self.pane],) if self._narrow() else PANES
        return tuple(p for p in panes if not (self.source_view and p == "response"))

    def _render_pane(self, pane: str, texts: dict[str, str], con: Constraint, data: InstructionData,
                     verdicts: list[Verdict], row: ListRow | None, ratio: float) -> None:
        body, subtitle, first = self._pane_content(pane, texts, con, data, verdicts, row, self.shown)
        widget = self.query_one(f"#{pane}", TextPane)
        widget.show(body, key=(data.id, pane, self.writer, ratio), subtitle=subtitle)
        if first is not None:
            widget.reveal(first)

    def _pane_content(self, pane: str, texts: dict[str, str], con: Constraint, data: InstructionData,
                      verdicts: list[Verdict], row: ListRow | None, shown: Shown) -> tuple[Text, str, int | None]:
        """One pane's text with its copied spans and the judges' quotes highlighted, its subtitle, and
        the offset to scroll to (the first highlight); what it found recorded in ``shown``. Reading
        ahead passes a Shown of its own: the spans and counts land in their caches, nothing is drawn."""
        text = texts[pane]
        sources: dict[str, tuple[tuple[int, int], ...]] = {}
        if self.copy_mode == "constraint":
            copies = copied_spans(con.text, text, CONSTRAINT_N) if text else ()
        elif pane in ("response", "summary"):
            sources = {"A": copied_spans(data.article_a, text, REFERENCE_N) if text and data.article_a else (),
                       "B": copied_spans(data.article_b, text, REFERENCE_N) if text and data.article_b else ()}
            copies = tuple(merge([*sources["A"], *sources["B"]]))
            shown.sources[pane] = sources
        else:
            copies = copied_spans(texts["response"], text, REFERENCE_N) if text and texts["response"] else ()
        quotes: list[tuple[tuple[int, int], str]] = []
        found: list[tuple[str, tuple[int, int] | None]] = []
        if pane in ("response", "summary"):
            for v in verdicts:
                if v.kind == pane and v.verdict and v.quote:
                    how, span = quote_span(v.quote, text)
                    found.append((v.judge, span))
                    if span:
                        quotes.append((span, QUOTE_STYLE if how == "exact" else QUOTE_FUZZY_STYLE))
        shown.copies[pane] = tuple(copies)
        shown.quotes[pane] = found
        if text:
            body = render_sources(text, sources, quotes) if sources else render(text, copies, quotes)
        elif pane == "ref-b" and data.condition == "single":
            body = Text("(single condition: one reference only)", style="dim")
        else:
            body = Text("(not generated yet)", style="dim")
        subtitle = f"{_words(text)} words"
        if pane in ("ref-a", "ref-b"):
            sim = row.similarity if row else None
            value = None if sim is None else sim.to_a if pane == "ref-a" else sim.to_b
            method = sim.method if sim else LEXICAL
            shown.similarities[pane] = (method, value)
            if value is not None:
                subtitle += f" · sim {value:.2f} ({method}{'' if row and row.similarity_stored else ', not stored'})"
        if sources:
            both = intersect(list(sources["A"]), list(sources["B"]))
            subtitle += (f" · from A {len(sources['A'])} · from B {len(sources['B'])}"
                         + (f" · both {len(both)}" if both else ""))
        elif pane in ("response", "summary"):
            # The one count of copied words, named by its source (pipeline.analysis.copy_count):
            # the response's is the list's; the summary's is counted the same way here.
            count = (row.copy if row else NO_COPY) if pane == "response" else \
                _copy_count(con.text, text, data.article_a, data.article_b or None,
                            template_words(tuple(c.text for c in data.constraints.values() if c.active)),
                            row.summary_echo if row else None)
            shown.counts[pane] = count
            subtitle += f" · {count.sentence(pane) or 'nothing copied'}"
            if pane == "response":
                # Opened on the first copied span the list counts, not the first highlight.
                shown.copied_in_response = _phrase_spans(count.phrases, text)
                shown.copy_step = 0
                if shown.copied_in_response:
                    subtitle += " · g: next copied span"
                    return body, subtitle, shown.copied_in_response[0][0]
        else:
            subtitle += f" · {len(copies)} span{'' if len(copies) == 1 else 's'} of the constraint"
        return body, subtitle, min([s[0] for s, _ in quotes] + [s[0] for s in copies], default=None)

    def _render_source(self, texts: dict[str, str], con: Constraint, data: InstructionData, row: ListRow | None,
                       ratio: float) -> None:
        """The source view: the response's copied words (the list's count) beside the same words in
        their source (reference A, else B, or the constraint itself), highlighted in both and each
        scrolled to the first."""
        count = row.copy if row else NO_COPY
        source = "A" if "A" in count.source else "B" if "B" in count.source else CONSTRAINT
        body = {"A": data.article_a, "B": data.article_b, CONSTRAINT: con.text}[source]
        response = texts["response"]
        style = SOURCE_STYLES["A" if source == CONSTRAINT else source]
        in_response = _phrase_spans(count.phrases, response)
        in_source = _phrase_spans(count.phrases, body)
        self.shown.source = (source, in_response, in_source)
        title = source_name(source) if count.words else "source (nothing copied)"
        pane = self.query_one(f"#{SOURCE_PANE}", TextPane)
        pane.border_title = f"{title[0].upper()}{title[1:]} (o: back)"
        pane.show(render_sources(body, {source if source != CONSTRAINT else "A": in_source}) if body
                  else Text("(no text)", style="dim"), key=(data.id, SOURCE_PANE, con.id, source),
                  subtitle=f"{len(in_source)} copied span{'' if len(in_source) == 1 else 's'}")
        left = self.query_one("#response", TextPane)
        left.show(_styled(response, in_response, style), key=(data.id, "response-source", self.writer, con.id),
                  subtitle=count.sentence() or "nothing copied")
        for widget, spans in ((left, in_response), (pane, in_source)):
            if spans:
                widget.reveal(spans[0][0])

    def _thresholds(self) -> dict[tuple[str, str], float]:
        """Each yes_no judge's calibrated threshold, read once a screen (a calibration is rare)."""
        if self._judge_thresholds is None:
            self._judge_thresholds = self.app.view.judge_thresholds()
        return self._judge_thresholds

    def _render_verdicts(self, verdicts: list[Verdict]) -> None:
        """Plain aligned lines, not a Rich Table: a table re-measures itself on every move. A yes_no
        judge's verdict shows its P(Yes) against its threshold, 'yes?' / 'no?' when near it; its Yes
        rests on a located sentence, not a quote."""
        lines = [Text("judge        text          verdict quote found? quote / reason", style="bold",
                      no_wrap=True, overflow="ellipsis")]
        thresholds = self._thresholds()
        for v in verdicts:
            found, style = {"exact": ("found", "green"), "fuzzy": ("fuzzy", "magenta"), LOCATED: ("located", "cyan"),
                            "missing": ("MISSING", "bold red")}.get(v.quote_found or "", ("-", "dim"))
            if not v.verdict:
                found, style = "-", "dim"  # a No has no quote to find
            where = "full" if v.kind == "response" else f"summary {v.ratio:g}"
            said = ("missing", "yellow") if v.verdict is None else ("yes    ", "green") if v.verdict else ("no     ", "red")
            detail = (v.quote if v.verdict else v.reason).replace("\n", " ")
            if v.p_yes is not None and v.verdict is not None:
                threshold = thresholds.get((v.judge, v.judging_mode), DEFAULT_YES_THRESHOLD)
                doubt = uncertain(v.p_yes, threshold)
                said = (f"{'yes' if v.verdict else 'no'}{'?' if doubt else ''}".ljust(7), "bold yellow" if doubt else said[1])
                detail = f"P(Yes) {v.p_yes:.2f} vs {threshold:.2f}{', uncertain' if doubt else ''}" + (
                    f" · {detail}" if v.verdict and detail else "")
            lines.append(Text.assemble(
                f"{v.judge[:12]:<12} {where:<13} ", said,
                " ", (f"{found:<12}", style), " ", detail,
                no_wrap=True, overflow="ellipsis"))
        # Padded to the most lines shown so far: a move that shows fewer verdicts keeps the height,
        # so it does not lay out (and re-wrap) the panes again, and the panes do not jump.
        self._verdict_lines = max(self._verdict_lines, len(lines))
        self.query_one("#audit-verdicts", TextLines).show(lines + [Text()] * (self._verdict_lines - len(lines)))


@lru_cache(maxsize=1024)
def _copy_count(constraint: str, text: str, reference_a: str, reference_b: str | None, template: frozenset[str],
                echo: float | None) -> CopyCount:
    """pipeline.analysis.copy_count, cached: moving back to a constraint costs nothing."""
    return copy_count(constraint, text, reference_a, reference_b, template, echo)


def _phrase_spans(phrases: tuple[str, ...], text: str) -> tuple[Span, ...]:
    """Where the copied phrases' words (runs of CONSTRAINT_N or more) sit in ``text``."""
    if not text:
        return ()
    return tuple(merge([span for phrase in phrases for span in copied_spans(phrase, text, CONSTRAINT_N)]))


def _styled(text: str, spans: tuple[Span, ...], style: str) -> Text:
    out = Text(text)
    for start, end in spans:
        out.stylize(style, start, end)
    return out


@lru_cache(maxsize=64)
def _words(text: str) -> int:
    """The pane subtitles' word count: the same four texts on every move within an instruction."""
    return count_words(text)
