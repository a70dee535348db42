"""Compare's four texts: each side's response with its summary under it, the judges' quotes of the
table's constraint highlighted in all four, and what a side with no response says (an instruction
with one response leaves side B empty and names what fills it)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from pipeline.core.text import count_words
from pipeline.store.view import Generation, InstructionData, Writer
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.widgets.highlight import QUOTE_FUZZY_STYLE, QUOTE_STYLE, quote_span, render
from unspecific_tui.widgets.refusal import WORD as REFUSAL
from unspecific_tui.widgets.text_pane import TextPane

SIDES = ("a", "b")


class CompareTexts(AppScreen):
    """The panes of CompareScreen (compare.py), which sets what they read in its __init__."""

    data: InstructionData | None
    writers: list[Writer | None]
    row_cids: list[int]  # the constraints of the table's rows, in order
    # (constraint, generation) -> each rater's latest (judge, verdict, quote)
    verdicts: dict[tuple[int, int], list[tuple[str, int | None, str]]]
    highlighted: dict[str, list[tuple[int, int]]]
    _texts: list[tuple[Generation | None, Generation | None]]  # each side's response and summary

    def _ratio(self) -> float:
        raise NotImplementedError("_ratio: CompareScreen's")

    # -- highlighting --------------------------------------------------------------------
    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # The cursor now, not the event's: a reload's clear() reports row 0 after the cursor was put back.
        self.highlight(event.data_table.cursor_row)

    def highlight(self, row: int) -> None:
        data = self.data
        if data is None:
            return
        cid = self.row_cids[row] if 0 <= row < len(self.row_cids) else None
        ratio = self._ratio()
        for slot, side in enumerate(SIDES):
            writer = self.writers[slot]
            response, summary = self._texts[slot]
            pane = self.query_one(f"#cmp-{side}", TextPane)
            alone = writer is None and self.writers[0] is not None  # B of an instruction with one response
            name = "no second response" if alone else writer_label(writer)
            refused = f" · {REFUSAL}" if response and response.refusal else ""
            pane.border_title = f"{side.upper()}: {name}{refused}"
            empty = f"No second response to this instruction: {second_writer(self.writers[0])}." if alone \
                else "(no response)"
            self._show_text(pane, f"cmp-{side}", response, cid, (data.id, writer), empty)
            spane = self.query_one(f"#cmp-{side}-summary", TextPane)
            spane.border_title = f"{side.upper()} summary {ratio:g}"
            self._show_text(spane, f"cmp-{side}-summary", summary, cid, (data.id, writer, ratio),
                            "(no second response)" if alone else "(no summary at this ratio)")

    def _show_text(self, pane: TextPane, name: str, text: Generation | None, cid: int | None, key: object,
                   empty: str) -> None:
        if text is None:
            self.highlighted[name] = []
            pane.show(Text(empty, style="dim" if empty.startswith("(") else "yellow"), key=key)
            return
        quotes = []
        for _judge, verdict, quote in self.verdicts.get((cid, text.id), []) if cid else []:
            if verdict and quote:
                how, span = quote_span(quote, text.text)
                if span:
                    quotes.append((span, QUOTE_STYLE if how == "exact" else QUOTE_FUZZY_STYLE))
        self.highlighted[name] = sorted({s for s, _ in quotes})
        pane.show(render(text.text, (), quotes), key=key,
                  subtitle=f"{text.words or count_words(text.text)} words · {len(quotes)} quote(s)")
        if quotes:
            pane.reveal(min(s[0] for s, _ in quotes))


def second_writer(writer: Writer | None) -> str:
    """What fills side B when an instruction has one response (``writer``'s): said by B's pane, m and M."""
    other = "direct" if writer is not None and writer.mode == "edit" else "edit"
    return (f"a second model (`unspecific evaluate --models NAME`) or the {other} response mode "
            f"(`unspecific evaluate --mode {other}`) fills side B")


def markup_escape(text: str) -> str:
    return text.replace("[", r"\[")


def writer_label(writer: Writer | None) -> str:
    """The writer's name and mode, escaped for Rich markup ("m1 [edit]" is not a tag)."""
    return markup_escape(writer.label) if writer else "-"
