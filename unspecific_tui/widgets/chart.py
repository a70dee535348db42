"""A bar chart as lines of text, true to its values at any size: one line per bar, drawn across
in eighths of a cell (a 100% bar fills the bar column; 17.4% and 44.4% never look alike), the label
whole (wrapped under itself, never cut), the value written beside the bar, and an axis whose ticks
are 0, 25, 50, 75 and 100. A bar of two values draws the smaller inside the larger from 0, each in
its own colour (Core within Org), the legend says which is which. Drawn the same on every run, so
a snapshot of it holds still.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

EIGHTHS = " ▏▎▍▌▋▊▉█"
TICKS = (0, 25, 50, 75, 100)
STYLES = ("#4f8fd6", "#e5c07b")  # the first series (the outer bar), the second (drawn inside it)


@dataclass(frozen=True)
class Bar:
    label: str
    values: tuple[float, ...]  # percent, one per series; NaN: none


def chart_lines(bars: Sequence[Bar], series: Sequence[str]) -> int:
    """How many lines ``bar_chart`` draws for ``bars`` at the narrowest (labels on one line each)."""
    return 2 + len(bars) + 2


def bar_chart(title: str, bars: Sequence[Bar], series: Sequence[str], width: int) -> Text:
    """The chart in ``width`` cells: the title, the legend, a line per bar (more where a label wraps),
    the axis and its ticks."""
    value_width = max((len(_values(b)) for b in bars), default=0)
    label_width = min(max((len(b.label) for b in bars), default=0), max(8, width // 3))
    room = max(10, width - label_width - value_width - 3)  # the bar column, from 0 to 100%
    out = Text(title, style="bold", no_wrap=True, overflow="ellipsis")
    out.append("\n")
    for k, name in enumerate(series):
        out.append("█", style=STYLES[k % len(STYLES)])
        out.append(f" {name}   ")
    note = "(both from 0: the smaller inside the larger)"
    if len(series) > 1 and sum(len(n) + 5 for n in series) + len(note) <= width:
        out.append(note, style="dim")
    for bar in bars:
        lines = Text(bar.label).wrap(_console(), label_width) if bar.label else [Text("")]
        out.append("\n")
        out.append(lines[0].plain.ljust(label_width))
        out.append("│")
        out.append_text(_bar(bar.values, room))
        out.append(" " + _values(bar))
        for more in lines[1:]:
            out.append("\n" + more.plain.ljust(label_width) + "│")
    out.append("\n" + " " * label_width + _axis(room))
    out.append("\n" + " " * label_width + _tick_labels(room))
    return out


def _values(bar: Bar) -> str:
    return " / ".join("-" if math.isnan(v) else f"{v:.1f}" for v in bar.values)


def _eighths(value: float, room: int) -> int:
    if math.isnan(value):
        return 0
    return round(max(0.0, min(100.0, value)) / 100 * room * 8)


def _bar(values: Sequence[float], room: int) -> Text:
    """One line of bar: the first value outer, the second drawn inside it from 0 (or past it, when
    larger: then the first is inside)."""
    outer = _eighths(values[0], room) if values else 0
    inner = _eighths(values[1], room) if len(values) > 1 else 0
    out_style, in_style = STYLES
    if inner > outer:  # the larger is drawn behind
        outer, inner, out_style, in_style = inner, outer, in_style, out_style
    line = Text()
    for cell in range(room):
        a = max(0, min(8, inner - 8 * cell))
        b = max(0, min(8, outer - 8 * cell))
        if a == 8:
            line.append("█", style=in_style)
        elif a:
            line.append(EIGHTHS[a], style=f"{in_style} on {out_style}" if b == 8 else in_style)
        elif b:
            line.append(EIGHTHS[b], style=out_style)
        else:
            line.append(" ")
    return line


def _tick_at(tick: int, room: int) -> int:
    return round(tick / 100 * room)


def _axis(room: int) -> str:
    cells = ["─"] * (room + 1)
    for tick in TICKS:
        cells[_tick_at(tick, room)] = "┴"
    cells[0] = "└"
    return "".join(cells)


def _tick_labels(room: int) -> str:
    line = [" "] * (room + 4)
    for tick in TICKS:
        label = str(tick)
        at = min(len(line) - len(label), max(0, _tick_at(tick, room) - len(label) // 2))
        line[at:at + len(label)] = label
    return "".join(line).rstrip()


_CONSOLES: list[Console] = []


def _console() -> Console:
    """A console to wrap labels with (Text.wrap needs one; none is printed to)."""
    if not _CONSOLES:
        _CONSOLES.append(Console(width=200))
    return _CONSOLES[0]
