"""TextPane (Line API): what the screen draws is the wrapped text with the current highlights,
re-drawn when highlights change, re-wrapped when the width changes, scrolled to what is revealed."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region

from unspecific_tui.widgets.text_pane import TextPane, wrap_lines

HIGHLIGHT = "bold white on #3465a4"
# 120 numbered sentences: long enough to scroll, each line findable by its number.
TEXT = " ".join(f"Sentence {i:03d} says the plan for the river is late." for i in range(120))


class PaneApp(App):
    CSS = "TextPane { height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield TextPane("T", id="pane")


def styled(text: str, *spans: tuple[int, int]) -> Text:
    out = Text(text)
    for start, end in spans:
        out.stylize(HIGHLIGHT, start, end)
    return out


def span_of(part: str) -> tuple[int, int]:
    start = TEXT.index(part)
    return start, start + len(part)


def screen_rows(pane: TextPane) -> list[list[tuple[str, Style | None]]]:
    """The pane's text rows as the compositor gets them (through Textual's line cache), without the bar."""
    region = pane.text_region.translate(-pane.region.offset)
    rows = pane.render_lines(Region(0, 0, pane.outer_size.width,
                                    pane.outer_size.height))[region.y:region.bottom]
    return [[(seg.text, seg.style) for seg in row.crop(region.x, region.right)] for row in rows]


def highlighted(rows: list[list[tuple[str, Style | None]]]) -> list[str]:
    """The words drawn in the highlight colour, in reading order."""
    blue = Style.parse(HIGHLIGHT).bgcolor
    return " ".join(t for row in rows for t, style in row if style is not None
                    and style.bgcolor == blue).split()


def plain(rows: list[list[tuple[str, Style | None]]]) -> list[str]:
    return ["".join(t for t, _ in row).rstrip() for row in rows]


async def test_rows_are_the_wrapped_text_and_highlights_follow_changes():
    app = PaneApp()
    async with app.run_test(size=(60, 20)) as pilot:
        pane = app.query_one(TextPane)
        first, second = span_of("Sentence 001 says"), span_of("Sentence 003 says")
        pane.show(styled(TEXT, first), key=1)
        await pilot.pause()
        rows = screen_rows(pane)
        width = pane.text_region.width
        assert plain(rows) == [TEXT[a:b].rstrip() for a, b in pane.lines[: len(rows)]]
        assert all(len(row) <= width for row in plain(rows))
        assert highlighted(rows) == ["Sentence", "001", "says"]
        # Same words, another highlight: only that changes on screen (no stale cached line).
        pane.show(styled(TEXT, second), key=1)
        await pilot.pause()
        rows = screen_rows(pane)
        assert highlighted(rows) == ["Sentence", "003", "says"]
        assert plain(rows) == [TEXT[a:b].rstrip() for a, b in pane.lines[: len(rows)]]
        assert pane.spans == [second]


async def test_reveal_scrolls_the_offsets_line_into_view():
    app = PaneApp()
    async with app.run_test(size=(60, 20)) as pilot:
        pane = app.query_one(TextPane)
        target = span_of("Sentence 090 says")
        pane.show(styled(TEXT, target), key=1)
        pane.reveal(target[0])
        await pilot.pause()
        line, top, height = pane.line_of(target[0]), round(pane.scroll_y), pane.text_region.height
        assert line > height  # it was out of view at the top
        assert top <= line < top + height
        assert "Sentence 090" in "\n".join(plain(screen_rows(pane)))
        assert highlighted(screen_rows(pane)) == ["Sentence", "090", "says"]
        # A new text (new key) starts at the top again.
        pane.show(Text("short"), key=2)
        await pilot.pause()
        assert pane.scroll_y == 0 and plain(screen_rows(pane))[0] == "short"


async def test_reveal_before_the_first_layout_is_kept_until_the_pane_has_a_width():
    class Early(PaneApp):
        def on_mount(self) -> None:
            pane = self.query_one(TextPane)
            pane.show(Text(TEXT), key=1)
            pane.reveal(span_of("Sentence 100")[0])

    app = Early()
    async with app.run_test(size=(60, 20)) as pilot:
        await pilot.pause()
        pane = app.query_one(TextPane)
        assert "Sentence 100" in "\n".join(plain(screen_rows(pane)))


async def test_a_width_change_rewraps():
    app = PaneApp()
    async with app.run_test(size=(80, 20)) as pilot:
        pane = app.query_one(TextPane)
        pane.show(Text(TEXT), key=1)
        await pilot.pause()
        wide, wide_lines = pane.text_region.width, len(pane.lines)
        await pilot.resize_terminal(40, 20)
        await pilot.pause()
        narrow = pane.text_region.width
        assert narrow < wide and len(pane.lines) > wide_lines
        assert pane.lines == wrap_lines(TEXT, narrow)
        rows = plain(screen_rows(pane))
        assert rows == [TEXT[a:b].rstrip() for a, b in pane.lines[: len(rows)]]
        assert all(len(row) <= narrow for row in rows)


def test_wrap_lines_cover_the_text_and_keep_words_whole():
    text = "alpha beta gamma\n\ndelta " + "x" * 25
    lines = wrap_lines(text, 10)
    assert "".join(text[a:b] for a, b in lines).replace("\n", "") == text.replace("\n", "")
    assert [text[a:b].rstrip() for a, b in lines] == ["alpha beta", "gamma", "", "delta", "x" * 10,
                                                      "x" * 10, "x" * 5]


def test_the_vendored_line_breaks_are_rich_text_wraps():
    """unspecific_tui.widgets.wrap copies Rich's private divide_line: its lines stay the ones Rich's
    public Text.wrap gives (wide characters, folded long words, runs of spaces)."""
    from rich.console import Console

    console = Console(width=200)
    samples = [TEXT[:700], "alpha  beta   gamma " + "x" * 37 + " delta",
               "TextualはPythonの高速アプリケーション開発フレームワークです",
               "  leading spaces and a trailing one ", "a"]
    for sample in samples:
        for width in (2, 3, 7, 10, 16, 33, 80):  # 1: Rich crops a wide character it cannot fit
            ours = [sample[a:b].rstrip() for a, b in wrap_lines(sample, width)]
            rich_lines = [line.plain.rstrip() for line in Text(sample).wrap(console, width)]
            assert ours == rich_lines, (sample, width)


class BarsApp(App):
    """A TextPane beside a stock scrolling container with Textual's ScrollBar widget and the pane's
    box: same height, same number of lines, same scroll offset."""

    CSS = """
    Horizontal { height: 12; }
    TextPane, VerticalScroll { width: 30; height: 12; }
    VerticalScroll { border: round $panel-lighten-2; padding: 0 1; overflow-y: scroll; }
    """

    def compose(self) -> ComposeResult:
        from textual.containers import Horizontal, VerticalScroll
        from textual.widgets import Static

        with Horizontal():
            yield TextPane("T", id="pane")
            with VerticalScroll(id="stock"):
                yield Static("\n".join(f"line {i}" for i in range(LINES)))


LINES = 47


def bar_cells(app: App, widget, bar: Region) -> list[list[tuple[str, object, object]]]:  # noqa: ANN001
    """The screen's cells where a scrollbar is drawn: text, foreground and background colour."""
    strips = app.screen._compositor.render_strips()
    return [[(seg.text, seg.style.color if seg.style else None, seg.style.bgcolor if seg.style else None)
             for seg in strips[y].crop(bar.x, bar.right)] for y in range(bar.y, bar.bottom)]


async def test_the_drawn_scrollbar_is_textuals_scrollbar():
    """The pane draws its scrollbar itself (a ScrollBar widget costs half of every scroll): it must
    look exactly like Textual's, thumb glyphs and colours, wherever the text is scrolled."""
    from textual.containers import VerticalScroll

    app = BarsApp()
    async with app.run_test(size=(70, 14)) as pilot:
        pane, stock = app.query_one(TextPane), app.query_one(VerticalScroll)
        pane.show(Text("\n".join(f"line {i}" for i in range(LINES))), key=1)
        await pilot.pause()
        assert pane.virtual_size.height == stock.virtual_size.height == LINES
        stock_bar = stock.vertical_scrollbar.region
        view = pane.scrollable_content_region
        pane_bar = Region(view.right - 2, view.y, 2, view.height)
        assert stock_bar.size == pane_bar.size and stock_bar.width == 2
        seen = set()
        for y in (0, 1, 5, 13, 20, 36, LINES - view.height):
            pane.scroll_to(y=y, animate=False, immediate=True)
            stock.scroll_to(y=y, animate=False, immediate=True)
            await pilot.pause()
            assert round(pane.scroll_y) == round(stock.scroll_y) == y
            ours, theirs = bar_cells(app, pane, pane_bar), bar_cells(app, stock, stock_bar)
            assert ours == theirs, y
            seen.add(tuple(map(tuple, ours)))
        assert len(seen) > 3  # the thumb moved
        # A click on the bar jumps there: the bottom row shows the end of the text.
        await pilot.click(TextPane, offset=(pane_bar.x - pane.region.x, pane_bar.bottom - 1 - pane.region.y))
        await pilot.pause()
        assert round(pane.scroll_y) == pane.max_scroll_y
