"""Audit's list of an instruction's constraints: outcome, judges' agreement, copy evidence, flags.

``ListRow`` is one row's facts (built by the Audit screen from pipeline.analysis.suspicion's
Evidence and the outcome pipeline.analysis.metrics counts); the pure
``sort_rows`` / ``filter_rows`` order and pick rows; ``ConstraintList`` draws them in a DataTable
whose rows are replaced only when the instruction, response, sort or filter changes: a move
within an instruction only moves the cursor. The list draws its rows itself, with DataTable's
segments (tested equal), from cell texts kept apart from the row style, and keeps each line by
what it shows (the row's facts, its place, the cursor on it or not), so the lines of the next
instruction can be drawn ahead (``draw_ahead``) while the auditor reads the current one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain

from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from pipeline.analysis.copy_count import NONE, CopyCount
from pipeline.analysis.similarity import LEXICAL, Similarity
from pipeline.analysis.trust import Trust
from pipeline.core.definitions import ECHO_HIGH, FLAG_KINDS, Outcome
from unspecific_tui.textual_check import private_api_ok
from unspecific_tui.widgets.bar import bar
from unspecific_tui.widgets.outcome import outcome_text

SORTS = ("position", "suspicion", "similarity", "outcome")
FILTERS = ("all", "flipped", "split", "unquoted", "flagged")
# Outcomes in the order the "outcome" sort shows them, Outcome's: what most needs a look first.
OUTCOME_ORDER = tuple(Outcome)


@dataclass(frozen=True)
class ListRow:
    """One active constraint on the shown response (model and mode) and its summary at the ratio."""

    constraint_id: int
    position: int
    text: str
    outcome: Outcome  # pipeline.core.definitions.item_outcome
    response_trust: Trust | None  # None: not judged on that text
    summary_trust: Trust | None
    similarity: Similarity | None  # None: nothing to compare with
    similarity_stored: bool  # False: the lexical stand-in computed on the fly
    copied: tuple[str, ...]  # constraint phrases found in a reference and in the response
    copied_from: tuple[str, ...]  # "A", "B"
    flags: tuple[str, ...]
    score: float  # pipeline.analysis.suspicion's Evidence.score
    copy: CopyCount = NONE  # the one count of copied words and its source (pipeline.analysis.copy_count)
    # The constraint as the list shows it: after the words most of the instruction's constraints open
    # with (pipeline.analysis.specificity.after_prefix); "" shows ``text``.
    shown_text: str = ""
    echo: float | None = None  # the constraint's echo on the response (None: not computed)
    summary_echo: float | None = None  # ... on the summary

    @property
    def split(self) -> bool:
        return any(t is not None and t.split for t in (self.response_trust, self.summary_trust))

    @property
    def unquoted(self) -> bool:
        return any(t is not None and t.unquoted > 0 for t in (self.response_trust, self.summary_trust))

    @property
    def doubtful(self) -> bool:
        """The outcome rests on split judges or a Yes whose quote is missing."""
        return self.split or self.unquoted


def sort_rows(rows: Sequence[ListRow], how: str) -> list[ListRow]:
    if how == "suspicion":
        return sorted(rows, key=lambda r: (-r.score, r.position))
    if how == "similarity":
        return sorted(rows, key=lambda r: (-(r.similarity.highest if r.similarity else -1.0), r.position))
    if how == "outcome":
        return sorted(rows,
                      key=lambda r: (OUTCOME_ORDER.index(r.outcome), not r.doubtful, r.position))
    return sorted(rows, key=lambda r: r.position)


def filter_rows(rows: Sequence[ListRow], how: str) -> list[ListRow]:
    test = {"flipped": lambda r: r.outcome is Outcome.FLIPPED, "split": lambda r: r.split,
            "unquoted": lambda r: r.unquoted, "flagged": lambda r: bool(r.flags)}.get(how)
    return [r for r in rows if test(r)] if test else list(rows)


def trust_cell(trust: Trust | None) -> Text:
    """``2-0`` Yes-No of the judges on one text; red when split, ``*`` for each Yes without its quote."""
    if trust is None or not (trust.judged or trust.missing):
        return Text("-  ", style="dim")
    style = "bold red" if trust.split else "green" if trust.yes else "yellow"
    return Text.assemble((f"{trust.yes}-{trust.no}", style), ("*" * trust.unquoted, "bold red"))


def outcome_cell(row: ListRow) -> Text:
    """The outcome; a doubtful one (split judges, an unquoted Yes) ends in '?' and is never plain green."""
    return outcome_text(row.outcome, row.doubtful)


def similarity_cells(sim: Similarity | None, stored: bool, bars: bool = True) -> tuple[Text, Text]:
    """The two similarities, each with a bar of 3 cells, or the number alone (``bars`` off)."""
    style = "cyan" if stored else "dim cyan"
    if not bars:
        a, b = (sim.to_a, sim.to_b) if sim else (None, None)
        return (Text("-", style="dim") if a is None else Text(f"{a:.2f}", style=style),
                Text("-", style="dim") if b is None else Text(f"{b:.2f}", style=style))
    if sim is None:
        return bar(None, 3), bar(None, 3)
    return bar(sim.to_a, 3, style=style), bar(sim.to_b, 3, style=style)


def similarity_label(rows: Sequence[ListRow]) -> str:
    """What the similarity columns hold: the stored method, or the lexical stand-in."""
    methods = sorted({r.similarity.method for r in rows if r.similarity and r.similarity_stored})
    if methods:
        return "/".join(methods)
    return f"{LEXICAL} (none stored)" if rows else ""


# The columns before the constraint's text: (key, heading, width of what they show). The echo's only
# while the rows shown have one (a store without echoes keeps the constraint's width). Each is followed
# by one blank cell (GAP), not DataTable's padding of one cell each side: the constraint gets the rest.
COLUMNS = (("pos", " #", 3), ("outcome", "outcome", 10), ("judges", "resp summ", 10), ("sim-a", "sim A", 8),
           ("sim-b", "sim B", 8), ("copied", "copied", 7), ("echo", "echo", 4), ("flags", "flags", 5))
GAP = 1
SCROLLBAR = 1  # the list's vertical scrollbar (audit.tcss)
NO_ECHO = tuple(c for c in COLUMNS if c[0] != "echo")
SIM_COMPACT = 5  # a similarity column without its bar: the header's width ("sim A"), "0.12" under it
TEXT_MIN = 12
# Under this many cells for the constraint, the similarity bars give their cells to it (the numbers
# stay): at 160 columns the list's side is 88 cells and the constraint had 20 of them.
TEXT_COMFORT = 32


class ConstraintList(DataTable, inherit_bindings=False):
    """The rows of one instruction; Audit follows the cursor (``RowHighlighted``).

    No keys of its own but enter: up/down are Audit's (past the last row they go on to the next
    instruction) and PageUp/PageDown scroll Audit's current text pane."""

    BINDINGS = [Binding("enter", "select_cursor", "Select", show=False)]

    def __init__(self, *, id: str | None = None) -> None:
        # No padding: each fixed column carries its own one-cell gap (GAP), the constraint none.
        super().__init__(id=id, cursor_type="row", zebra_stripes=False, cell_padding=0)
        self.key: object = None  # what the rows show: (instruction, writer, ratio, sort, filter, stamp)
        self.rows_shown: list[ListRow] = []
        self._ids: dict[int, int] = {}  # constraint id -> row
        self._text_width = 0
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(256)  # render_line's
        self._plain_cells: LRUCache[tuple[object, ...], list[Segment]] = LRUCache(4096)  # _plain_text's
        self._row_cells: LRUCache[tuple[ListRow, bool, bool], tuple[Text, ...]] = LRUCache(256)  # row_cells'
        self.show_echo = False  # the echo column is there (some row shown has an echo)
        self.bars = True  # the similarity columns draw bars (while the constraint keeps TEXT_COMFORT cells)
        self._rich_styles: dict[object, Style] = {}  # the widget's rich_style by pseudo-class state
        self._metas: dict[tuple[int, int], Style] = {}  # _cell_meta's

    def on_mount(self) -> None:
        self._add_columns(TEXT_MIN)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """No row to pick (the list out of sight at 80 columns, filled when shown): enter goes on to
        the screen, which says where it works."""
        if action == "select_cursor" and not self.row_count:
            return False
        return super().check_action(action, parameters)

    def _columns(self, bars: bool | None = None) -> tuple[tuple[str, str, int], ...]:
        bars = self.bars if bars is None else bars
        return tuple((key, label, width if bars or not key.startswith("sim-") else SIM_COMPACT)
                     for key, label, width in (COLUMNS if self.show_echo else NO_ECHO))

    def _add_columns(self, text_width: int) -> None:
        for key, label, width in self._columns():
            self.add_column(label, key=key, width=width + GAP)
        self.add_column("constraint", key="text", width=text_width)
        self._text_width = text_width

    def on_resize(self) -> None:
        """The constraint column takes the width the others leave (DataTable has no 1fr column); the
        similarity bars go where it would be left fewer than TEXT_COMFORT cells."""
        bars, width = self._fit()
        if width != self._text_width or bars != self.bars:
            self.bars = bars
            rows, key, cid = self.rows_shown, self.key, self.constraint_at(self.cursor_row)
            self.clear(columns=True)
            self._add_columns(width)
            self.key = None
            self.show_rows(rows, key)
            self.select(cid)

    def _fit(self) -> tuple[bool, int]:
        """Whether the similarity columns keep their bars, and the constraint column's width."""
        bars = self._fitted_text_width(bars=True) >= TEXT_COMFORT
        return bars, self._fitted_text_width(bars=bars)

    def _fitted_text_width(self, bars: bool | None = None) -> int:
        columns = self._columns(bars)
        fixed = sum(w + GAP for _, _, w in columns) + 2 * self.cell_padding * (len(columns) + 1) + SCROLLBAR
        return max(TEXT_MIN, self.size.width - fixed)

    def show_rows(self, rows: Sequence[ListRow], key: object) -> bool:
        """Replace the rows when ``key`` changed; True when they were replaced."""
        if key == self.key:
            return False
        self.key = key
        echo = any(r.echo is not None for r in rows)
        if echo != self.show_echo:  # the echo column comes or goes: the columns anew
            self.show_echo = echo
            self.clear(columns=True)
            self.bars, width = self._fit()
            self._add_columns(width)
        self.rows_shown = list(rows)
        self.clear()
        self.add_rows([self.row_cells(r) for r in rows])
        self._ids = {r.constraint_id: i for i, r in enumerate(rows)}
        return True

    def select(self, constraint_id: int | None) -> None:
        """Put the cursor on a constraint's row (no message when it is already there)."""
        row = self._ids.get(constraint_id) if constraint_id is not None else None
        if row is not None and row != self.cursor_row:
            # scroll=False: the cursor's watcher scrolls the new row into view; move_cursor's own
            # scroll, made before the cursor moves, would only scroll to the row it leaves.
            self.move_cursor(row=row, animate=False, scroll=False)

    def render_line(self, y: int) -> Strip:
        """DataTable keys its line cache by the cursor's coordinate and its row keys, new with every
        instruction, so after a move the row the cursor left is rendered again although it looks as
        before, and an instruction's rows are rendered again each time it is shown. Here a row's line
        is kept by what it shows: the row's facts, its place in the list, and whether the cursor (or
        the mouse) is on it; so the lines drawn ahead (``draw_ahead``) or shown before are found."""
        if not private_api_ok():  # a Textual the overrides were not written for: DataTable's own
            return super().render_line(y)
        scroll_x, scroll_y = self.scroll_offset
        line = y if self.show_header and y < self.header_height else y + scroll_y
        try:
            row_key, offset = self._get_offsets(line)
        except LookupError:
            return super().render_line(y)
        found = None if row_key is self._header_row_key else self._row_locations.get(row_key)
        row = -1 if found is None else found
        cursor = row >= 0 and row == self.cursor_row
        if 0 <= row < len(self.rows_shown) and offset == 0 and self._own_rows():
            strip = self._row_line(self.rows_shown[row], row, cursor, row == self.hover_row, scroll_x)
            if strip is not None:
                return strip
        # The header (its look follows the columns, not the rows) and rows the list does not draw itself.
        key = (row_key, offset, scroll_x, self.size.width, cursor, self._show_hover_cursor
               and row == self.hover_row,
               self.cursor_type, self.show_cursor,
               None if self.cursor_type == "row" else (self.cursor_coordinate, self.hover_coordinate),
               self._text_width if row < 0 else self._update_count, self._pseudo_class_state)
        strip = self._strips.get(key)
        if strip is None:
            if self.fixed_rows:
                strip = super().render_line(y)
            # DataTable.render_line's call, with the widget's style kept: rich_style walks the ancestors
            else:
                strip = self._render_line(line, scroll_x, scroll_x + self.size.width, self._base_style())
            self._strips[key] = strip
        return strip

    def draw_ahead(self, rows: Sequence[ListRow], cursor: int | None) -> None:
        """Draw the lines ``rows`` will show (the cursor on the row of constraint ``cursor``) into the
        kept lines: the next item of what Audit follows, drawn while the auditor reads this one, is
        then shown without rendering a row. Only the rows that can be in view once the cursor is."""
        if not private_api_ok() or not self._own_rows() or not self.size.height:
            return
        at = next((i for i, r in enumerate(rows) if r.constraint_id == cursor), 0)
        height = self.size.height
        scroll_x = self.scroll_offset[0]
        for i in range(max(0, at - height), min(len(rows), max(at, height) + 1)):
            self._row_line(rows[i], i, i == at, self._show_hover_cursor and i == self.hover_row, scroll_x)

    def _own_rows(self) -> bool:
        """Whether rows are drawn here (``_row_segments``): a row cursor, no labels, no fixed rows or
        columns, no zebra stripes, as Audit's list is (each row one line: ``show_rows`` adds them so);
        otherwise DataTable draws them."""
        return (self.cursor_type == "row" and not self.fixed_columns and not self.fixed_rows
                and not self.zebra_stripes
                and not (self._labelled_row_exists and self.show_row_labels))

    def _row_line(self, content: ListRow, row: int, cursor: bool, hover: bool, scroll_x: int) -> Strip | None:
        """The kept line of ``content`` shown at ``row`` (drawn now when missing); None when a cell
        is not one plain line (DataTable draws that row)."""
        width = self.size.width
        key = (content, self.show_echo, self.bars, row, scroll_x, width, self._text_width,
               self.cell_padding, cursor,
               hover and self._show_hover_cursor, self.show_cursor, self._pseudo_class_state)
        strip = self._strips.get(key)
        if strip is None:
            base = self._base_style()
            segments = self._row_segments(self.row_cells(content), row, cursor, hover, base)
            if segments is None:
                return None
            # As DataTable._render_line finishes a line: cropped to the view, padded, simplified.
            strip = Strip(list(chain.from_iterable(segments))).crop(scroll_x, scroll_x + width)
            strip = self._strips[key] = strip.adjust_cell_length(width, base).simplify()
        return strip

    def _row_segments(self, cells: Sequence[object], row_index: int, cursor: bool, hover: bool,
                      base_style: Style) -> list[list[Segment]] | None:
        """DataTable's ``_render_line_in_row`` for a one-line row of this list: the same segments
        without the styles DataTable works out for every row and uses only for the header, labels
        and fixed columns. None when a cell is not one plain line of text."""
        widths = [column.get_render_width(self) for column in self.ordered_columns]
        if len(cells) < len(widths):
            return None
        plains: list[list[Segment]] = []
        for cell, width in zip(cells, widths):
            plain = self._plain_text(cell, width)
            if plain is None:
                return None
            plains.append(plain)
        show_cursor, show_hover = self.show_cursor, self._show_hover_cursor
        component, post = self._get_styles_to_render_cell(
            False, False, False, hover, cursor, show_cursor, show_hover,
            self.cursor_foreground_priority == "css", self.cursor_background_priority == "css")
        row = [list(Segment.apply_style(plain, base_style + self._cell_meta(row_index, i) + component, post))
               for i, plain in enumerate(plains)]
        # The row's style carried to the widget's right edge, as DataTable extends it.
        extend, _ = self._get_styles_to_render_cell(False, False, False, hover, cursor,
                                                    show_cursor, show_hover,
                                                    False, False)
        extend = base_style + extend + self._cell_meta(row_index, -1)
        remaining = max(0, self.size.width - sum(widths) - self._row_label_column_width)
        row.append([Segment(" " * remaining, extend)])
        return row

    def _base_style(self) -> Style:
        """The widget's rich_style (what DataTable.render_line passes on), kept per pseudo-class state."""
        state = self._pseudo_class_state
        style = self._rich_styles.get(state)
        if style is None:
            style = self._rich_styles[state] = self.rich_style
        return style

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """DataTable's, without measuring every new cell: it does so for columns that take their
        content's width, and every column here has a set width (the text's follows the widget). The
        virtual size as DataTable sets it. A new instruction's rows come in on every jump."""
        keys = list(new_rows)
        if (not private_api_ok() or any(column.auto_width for column in self.columns.values())
                or any(self.rows[key].label is not None or self.rows[key].auto_height for key in keys
                       if key in self.rows)):
            super()._update_dimensions(keys)
            return
        width = sum(column.get_render_width(self)
                    for column in self.columns.values()) + self._row_label_column_width
        self.virtual_size = Size(width, self._total_row_height
                                 + (self.header_height if self.show_header else 0))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()  # new colours: every line looks different
        self._plain_cells.clear()
        self._rich_styles.clear()

    def _plain_text(self, cell: object, width: int) -> list[Segment] | None:
        """``_plain_cell`` of a one-line Text cell (None for anything else), kept by what the cell
        shows and its width, not by its row: most cells of a new instruction ("pass both",
        "2-0  2-0", "-", a similarity bar) were drawn before."""
        if not isinstance(cell, Text) or cell.no_wrap is False:
            return None
        plain = cell.plain
        if "\n" in plain or "\t" in plain:
            return None
        key = (width, self.cell_padding, plain, cell.style, tuple(cell.spans), cell.overflow)
        segments = self._plain_cells.get(key)
        if segments is None:
            segments = self._plain_cells[key] = self._plain_cell(cell, width)
        return segments

    def _cell_meta(self, row_index: int, column_index: int) -> Style:
        """The cell's mouse meta as DataTable sets it (Style.from_meta pickles the dict: kept); column
        -1: the row's space right of its cells."""
        meta = self._metas.get((row_index, column_index))
        if meta is None:
            where = {"row": row_index, "column": 0, "out_of_bounds": True} if column_index < 0 else \
                {"row": row_index, "column": column_index}
            meta = self._metas[row_index, column_index] = Style.from_meta(where)
        return meta

    def _plain_cell(self, cell: Text, width: int) -> list[Segment]:
        """A one-line Text cell's segments at ``width``, padded, with no row style."""
        pad = self.cell_padding
        console, options = self.app.console, self.app.console_options
        inner = width - 2 * pad
        # What Text.__rich_console__'s wrap and join come to for one no_wrap line: the line cut at
        # the width (a third of the time), then Padding's fill and sides.
        text = cell.copy()
        text.truncate(inner, overflow=cell.overflow or options.overflow or "fold")
        # as join makes it: the line's style a span under the others (render skips a bare style)
        if text.style:
            text.spans.insert(0, Span(0, len(text), text.style))
            text.style = ""
        segments = [Segment(" " * pad)] if pad else []
        segments.extend(text.render(console, end=""))
        if text.cell_len < inner:
            segments.append(Segment(" " * (inner - text.cell_len)))
        if pad:
            segments.append(Segment(" " * pad))
        return segments

    def constraint_at(self, row: int) -> int | None:
        return self.rows_shown[row].constraint_id if 0 <= row < len(self.rows_shown) else None

    def row_cells(self, r: ListRow) -> tuple[Text, ...]:
        """The row's cells, kept by its facts: an instruction shown again, or drawn ahead, reuses them."""
        cells = self._row_cells.get((r, self.show_echo, self.bars))
        if cells is None:
            cells = _cells(r, self.show_echo, self.bars)
            # Each fixed cell within its column's width, so its gap stays blank ("name copy": "name…").
            for cell, (_, _, width) in zip(cells, self._columns()):
                if cell.cell_len > width:
                    cell.truncate(width, overflow="ellipsis")
            self._row_cells[(r, self.show_echo, self.bars)] = cells
        return cells


def _cells(r: ListRow, echo: bool, bars: bool = True) -> tuple[Text, ...]:
    """A row's cells, each one line of text (the position too: DataTable would parse a str as markup)."""
    sim_a, sim_b = similarity_cells(r.similarity, r.similarity_stored, bars)
    # pipeline.analysis.copy_count's count, as the queue, the panes and the reports give it.
    count = r.copy
    copied = Text(count.short() if count.words else "-",
                  style="bold #e5c07b" if count.from_reference else "#e5c07b" if count.words else "dim")
    flags = Text(" ".join(FLAG_KINDS[f].tag if f in FLAG_KINDS else f[:4] for f in r.flags) or "-",
                 style="black on yellow" if r.flags else "dim")
    text = Text((r.shown_text or r.text).replace("\n", " "), no_wrap=True, overflow="ellipsis")
    judges = trust_cell(r.response_trust)
    judges.pad_right(max(1, 5 - len(judges)))  # the summary's under "summ", never run together ("2-0** 2-0*")
    judges.append_text(trust_cell(r.summary_trust))
    position = Text(f" {r.position}", no_wrap=True, end="")  # a cell from the edge: no padding (GAP)
    if echo:
        return (position, outcome_cell(r), judges, sim_a, sim_b, copied, echo_cell(r.echo), flags, text)
    return (position, outcome_cell(r), judges, sim_a, sim_b, copied, flags, text)


def echo_cell(echo: float | None) -> Text:
    """The constraint's echo as '.82' (bold at ECHO_HIGH, where repeated words count as copying); '-'."""
    if echo is None:
        return Text("-", style="dim")
    return Text(f"{echo:.2f}".lstrip("0") if echo >= 0 else f"{echo:.1f}",
                style="bold #e5c07b" if echo >= ECHO_HIGH else "")
