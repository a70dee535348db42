"""A titled, scrollable pane of highlighted text, updated in place (never rebuilt).

A Line API widget: the text is wrapped once per (text, width) into character ranges, and only
the lines in view are styled and rendered. New highlights on the same text (the Audit screen's
every move) then cost the ~40 visible lines, not a re-wrap and re-render of the whole article.

The pane draws its own scrollbar in its last two columns, with Textual's glyphs and colours,
instead of Textual's ScrollBar widget: a move in Audit scrolls two panes to their new quotes, and a
ScrollBar widget renders itself again through Rich on every scroll (about half of a scroll's cost),
while the drawn bar is two cells added to lines the scroll repaints anyway. The wheel, the keys and
a click on the bar (which jumps there) scroll it; the thumb cannot be dragged.
"""

from __future__ import annotations

import bisect
from functools import lru_cache
from math import ceil

from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text
from textual import events
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBarRender
from textual.strip import Strip
from textual.widget import Widget

from unspecific_tui.textual_check import private_api_ok
from unspecific_tui.widgets.wrap import divide_line

Line = tuple[int, int]  # [start, end) character offsets of one wrapped line
# What identifies shown content: the plain text and its (start, end, style) spans.
Signature = tuple[str, tuple[tuple[int, int, str], ...]]


@lru_cache(maxsize=64)
def wrap_lines(plain: str, width: int) -> tuple[Line, ...]:
    """Character ranges of ``plain`` wrapped at ``width`` cells (words kept whole, long words folded).

    Cached by content, so going back to an instruction does not wrap its articles again.
    """
    lines: list[Line] = []
    start = 0
    for paragraph in plain.split("\n"):
        breaks = divide_line(paragraph, width) if paragraph else []  # what Rich's Text.wrap does
        edges = [0, *breaks, len(paragraph)]
        lines.extend((start + a, start + b) for a, b in zip(edges, edges[1:]))
        start += len(paragraph) + 1
    return tuple(lines)


BAR = 2  # columns of the drawn scrollbar: Textual's default scrollbar-size-vertical


class TextPane(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    TextPane {
        border: round $panel-lighten-2; padding: 0 1;
        /* Scrollable, with no ScrollBar widget: the pane draws its bar (BAR columns), always, so the
           wrap width never changes with the text's length. */
        overflow-x: hidden; overflow-y: scroll; scrollbar-size-vertical: 0;
    }
    TextPane:focus { border: round $accent; }
    """

    def __init__(self, title: str, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = title
        self._key: object = None
        self._signature: Signature | None = None
        self._text = Text()
        self._lines: tuple[Line, ...] = ()
        self._starts: list[int] = []
        self._width = 0
        self._strips: dict[int, Strip] = {}  # rendered lines of the current text and highlights
        self._pending_reveal: int | None = None
        self._revealed: int | None = None  # the last offset revealed: kept in view when the width changes
        self._rich_style: Style | None = None
        self._bar: list[Segment] | None = None  # the drawn scrollbar, a cell pair per row; None: draw again
        self.spans: list[tuple[int, int]] = []  # what is highlighted now (for tests and the footer)

    @property
    def lines(self) -> tuple[Line, ...]:
        """The wrapped lines as character ranges of the text (empty until the pane has a size)."""
        return self._lines

    @property
    def text_region(self) -> Region:
        """Where the text is drawn on screen: the content region less the drawn scrollbar."""
        region = self.scrollable_content_region
        return Region(region.x, region.y, max(0, region.width - BAR), region.height)

    def line_of(self, offset: int) -> int:
        """Index of the wrapped line holding character ``offset``."""
        return max(0, bisect.bisect_right(self._starts, offset) - 1)

    def show(self, text: Text, *, key: object = None, subtitle: str = "") -> None:
        """Replace the content; scroll to the top only when a different text arrives.

        Identical content (same text, same highlights) is not re-rendered. Same words with new
        highlights keep the wrap (and the height): only the lines in view whose highlights changed
        are drawn again.
        """
        spans = tuple((s.start, s.end, str(s.style)) for s in text.spans)
        signature: Signature = (text.plain, spans)
        if signature != self._signature:
            old = self._signature
            self._signature = signature
            if "\t" in text.plain:  # one cell per tab keeps character offsets (spans, reveal) valid
                text = text.copy()
                text.plain = text.plain.replace("\t", " ")
            self._text = text
            if old is not None and old[0] == text.plain and self._width:
                self._restyle(set(old[1]).symmetric_difference(spans))
            else:
                self._wrap()
            self.spans = [(s.start, s.end) for s in text.spans]
        if subtitle != self.border_subtitle:
            self._set_subtitle(subtitle)
        if key != self._key:
            self._key = key
            self._pending_reveal = self._revealed = None
            self.scroll_to(y=0, animate=False, immediate=True)

    def wrap_ahead(self, plain: str) -> None:
        """Wrap ``plain`` at this pane's width into the cache ``show`` reads: Audit does so for the
        next item it will show, while the auditor reads the current one."""
        width = self.text_region.width
        if plain and width > 0:
            wrap_lines(plain.replace("\t", " "), width)

    def _set_subtitle(self, subtitle: str) -> None:
        """Repaint only the bottom border row: setting ``border_subtitle`` repaints the whole pane."""
        if not self._width or not private_api_ok():  # the public setter repaints the whole pane
            self.border_subtitle = subtitle
            return
        # as the descriptor stores it
        self._border_subtitle = self.render_str(subtitle).expand_tabs(4).split()[0]
        offset, outer = self.content_offset, self.outer_size
        self.refresh(Region(-offset.x, outer.height - 1 - offset.y, outer.width, 1))

    def _restyle(self, changed: set[tuple[int, int, str]]) -> None:
        """Forget the rendered lines that changed spans touch; repaint those in view."""
        top, height = round(self.scroll_y), self.scrollable_content_region.height
        dirty = {y for start, end, _ in changed
                 for y in range(self.line_of(start), self.line_of(max(start, end - 1)) + 1)}
        for y in dirty:
            self._strips.pop(y, None)
            if top <= y < top + height:
                self.refresh(Region(0, y - top, self._width, 1))

    def reveal(self, offset: int | None) -> None:
        """Scroll so that the line holding character ``offset`` is in view (a third from the top)."""
        if offset is None:
            return
        self._revealed = offset
        if not self._width:  # not laid out yet: reveal once the text is wrapped
            self._pending_reveal = offset
            return
        line, view = self.line_of(offset), self.scrollable_content_region.height
        if not self.scroll_y + 1 <= line < self.scroll_y + view - 2:  # already in view: stay
            self.scroll_to(y=max(0, line - view // 3), animate=False, immediate=True)

    def _wrap(self) -> None:
        """Wrap the text at the current width and repaint; the virtual height follows."""
        self._strips.clear()
        self._bar = None
        self.refresh()
        width = self.text_region.width
        self._width = width
        if width <= 0:
            return
        self._lines = wrap_lines(self._text.plain, width)
        self._starts = [start for start, _ in self._lines]
        size = Size(width, len(self._lines))
        if size != self.virtual_size:
            # The pane's box does not depend on its text, so no layout pass (what assigning
            # virtual_size asks for): the scrollbar (always shown) only resizes its thumb.
            if private_api_ok():
                self.set_reactive(TextPane.virtual_size, size)
                self._scroll_update(size)
            else:  # a Textual the shortcut was not written for: the stock update (with a layout pass)
                self.virtual_size = size

    def on_resize(self, event: events.Resize) -> None:
        self._bar = None
        if self.text_region.width != self._width:
            self._wrap()
            # Revealed at another width (or not yet laid out): its line moved with the new wrap.
            offset = self._pending_reveal if self._pending_reveal is not None else self._revealed
            if offset is not None and self._width:
                self._pending_reveal = None
                self.reveal(offset)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()
        self._rich_style = None
        self._bar = None

    def _style(self) -> Style:
        """The pane's own colours (``rich_style`` walks the ancestors on every call)."""
        if self._rich_style is None:
            self._rich_style = self.rich_style
        return self._rich_style

    def render_line(self, y: int) -> Strip:
        index = round(self.scroll_y) + y
        style, width = self._style(), self._width
        if index >= len(self._lines):
            strip = Strip.blank(width, style)
        elif index in self._strips:
            strip = self._strips[index]
        else:
            piece = self._line_text(*self._lines[index])
            strip = Strip(Segment.apply_style(piece.render(self.app.console), style))
            if strip.cell_length != width:
                strip = strip.crop_extend(0, width, style)
            self._strips[index] = strip
        bar = self._bar_cells()
        # One Strip for text and bar (each Strip carries its own caches: building them is the cost).
        return Strip([*strip, bar[y]], width + BAR) if y < len(bar) else strip

    def _bar_cells(self) -> list[Segment]:
        """The scrollbar, a cell pair per row in view, drawn as Textual's ScrollBar draws it (its
        colours from this pane's scrollbar styles, its thumb by ScrollBarRender); kept until the
        pane scrolls, resizes, gets another text or other colours."""
        if self._bar is not None:
            return self._bar
        height = self.scrollable_content_region.height
        virtual = self.virtual_size.height
        styles = self.styles
        background, color = styles.scrollbar_background, styles.scrollbar_color
        if background.a < 1:
            background = self.background_colors[0] + background
        color = background + color
        window = height if height < virtual else 0
        if self.screen.styles.scrollbar_color.a == 0:  # a theme without thumbs: the bare track
            window = 0
        bar = ScrollBarRender.render_bar(size=height, virtual_size=ceil(virtual), window_size=ceil(window),
                                         position=int(self.scroll_y * 8) / 8,  # ScrollBar's eighths of a cell
                                         thickness=BAR, vertical=True,
                                         back_color=background.rich_color, bar_color=color.rich_color)
        # The bar's own colours over the pane's (the thumb is drawn reversed, with no background of
        # its own): what Textual's line renderer gives a ScrollBar widget's cells. Without the meta
        # (ScrollBar's mouse actions): a click is on_mouse_down's.
        pane = self._style()
        self._bar = [Segment(s.text, pane
                             + Style(color=s.style.color, bgcolor=s.style.bgcolor, reverse=s.style.reverse))
                     if s.style else Segment(s.text, pane) for s in bar.segments]
        return self._bar

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """ScrollView's, without the ScrollBar widget it would move: the drawn bar follows instead."""
        if round(old_value) != round(new_value):
            self._bar = None
            self.refresh(self.size.region)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        """A click on the bar scrolls to that point of the text."""
        view = self.scrollable_content_region
        x, y = event.screen_x - view.x, event.screen_y - view.y
        if not (self._width <= x < self._width + BAR and 0 <= y < view.height) or self.max_scroll_y <= 0:
            return
        event.stop()
        self.scroll_to(y=round(self.max_scroll_y * y / max(1, view.height - 1)),
                       animate=False, immediate=True)

    def _line_text(self, start: int, end: int) -> Text:
        """One wrapped line with the spans that touch it, clipped (in order: later ones draw over).

        A third of the cost of slicing the Text (``Text.divide`` walks every span)."""
        text = self._text
        line = Text(text.plain[start:end].rstrip(), style=text.style)
        stop = start + len(line.plain)
        line.spans[:] = [Span(max(s.start, start) - start, min(s.end, stop) - start, s.style)
                         for s in text.spans if s.start < stop and s.end > start]
        return line


class TextLines(Widget):
    """A few lines of Rich text, each on one row and cut at the width (an ellipsis unless the line
    says otherwise), never wrapped: the caller wraps what should wrap.

    Audit's head and verdicts change on every move: a Static renders all its lines again through
    Textual's visuals; this renders each line once with Rich and repaints only the lines that changed.
    ``content`` is the lines joined, as a Static's would be.
    """

    DEFAULT_CSS = "TextLines { height: auto; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._lines: list[Text] = []
        self._strips: dict[int, Strip] = {}
        self._rich_style: Style | None = None

    @property
    def content(self) -> Text:
        return Text("\n").join(self._lines)

    def show(self, lines: list[Text]) -> None:
        """Show ``lines``; the height follows their number (a layout only when it changes)."""
        old, self._lines = self._lines, list(lines)
        if len(old) != len(lines):
            self._strips.clear()
            self.refresh(layout=True)
            return
        width = self.size.width
        if not width:  # not laid out yet: a region refresh would mark nothing
            self._strips.clear()
            self.refresh()
            return
        for y, (before, after) in enumerate(zip(old, lines)):
            if before.plain != after.plain or before.spans != after.spans or before.style != after.style:
                self._strips.pop(y, None)
                self.refresh(Region(0, y, width, 1))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()
        self._rich_style = None

    def on_resize(self, event: events.Resize) -> None:
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        if self._rich_style is None:
            self._rich_style = self.rich_style
        style, width = self._rich_style, self.size.width
        strip = self._strips.get(y)
        if strip is None:
            line = Text(end="")
            if y < len(self._lines):
                source = self._lines[y]
                line.append_text(source)  # its own style becomes a span (as in Text.join): render skips it
                line.truncate(width, overflow=source.overflow or "ellipsis")
            # Not padded: what is left of the line is the widget's background, as under a Static.
            segments = [s for s in line.render(self.app.console, end="") if s.text]
            strip = (Strip(segments).apply_style(style) if segments
                     else Strip.blank(width, self.visual_style.rich_style))
            self._strips[y] = strip
        return strip
