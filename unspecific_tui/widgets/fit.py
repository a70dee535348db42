"""Tables that fit their width: columns sized to their values, one flexible column takes the rest.

A DataTable sizes each column to its widest value and scrolls sideways when they add up to more
than it has: at 80 columns a long model name or constraint pushed the numbers out of sight.
Screens pick the columns that fit (``widths``) and clip the flexible one's values (``clip``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.cells import cell_len, set_cell_size
from textual.widgets import DataTable

CELL_PADDING = 2  # DataTable's cell_padding (1) on each side of every column
ELLIPSIS = "…"


def clip(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, ending in an ellipsis when cut."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    return set_cell_size(text, width - 1).rstrip() + ELLIPSIS


def distinct_clip(text: str, others: Iterable[str], width: int) -> str:
    """``text`` in at most ``width`` cells, keeping where it differs from ``others`` (model names
    shown side by side: "model-a" and "model-b" clipped from the end both read "model…"): its head
    when that holds the difference, else its tail, else the difference between two ellipses."""
    if cell_len(text) <= width:
        return text
    rivals = [o for o in others if o != text]
    if not rivals or width <= 2:
        return clip(text, width)
    start = max(_common_prefix(text, o) for o in rivals)  # every rival differs from text by here
    same_tail = max(_common_prefix(text[::-1], o[::-1]) for o in rivals)
    if start < width - 1:
        return clip(text, width)
    if same_tail < width - 1:
        return ELLIPSIS + text[len(text) - (width - 1):]
    return ELLIPSIS + text[start:start + width - 2] + ELLIPSIS


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def natural_width(label: str, values: Iterable[str]) -> int:
    """The cells a column needs for its label and its widest value."""
    return max([cell_len(label), *(cell_len(v) for v in values)])


def widths(natural: Sequence[int], flexible: int, available: int, *, least: int = 12) -> list[int] | None:
    """Content widths for the columns in ``available`` cells: each column its natural width, the
    ``flexible`` one (an index) what is left, at most its own natural width; None when it would
    get fewer than ``least`` cells (pick fewer columns)."""
    fixed = sum(w + CELL_PADDING for i, w in enumerate(natural) if i != flexible)
    room = available - fixed - CELL_PADDING
    if room < min(least, natural[flexible]):
        return None
    return [min(room, w) if i == flexible else w for i, w in enumerate(natural)]


def table_width(table: DataTable) -> int:
    """The cells ``table`` can show without scrolling sideways: its width less a vertical
    scrollbar (kept free whether or not one shows, so rows arriving later change nothing)."""
    width = table.region.width or table.app.size.width
    return width - table.styles.gutter.width - table.styles.scrollbar_size_vertical
