"""A number with a small bar: similarities and rates read at a glance in tables and heads."""

from __future__ import annotations

from rich.text import Text

BLOCKS = " ▏▎▍▌▋▊▉█"


def bar(value: float | None, width: int = 6, *, style: str = "cyan", fmt: str = "{:.2f}") -> Text:
    """``0.73 ████▍ `` : the value, then a bar of ``width`` cells filled in eighths; '-' when None.
    Values are clipped to [0, 1] for the bar, never for the number."""
    if value is None:
        return Text("-".ljust(len(fmt.format(0.0))) + " " + " " * width, style="dim")
    eighths = round(max(0.0, min(1.0, value)) * width * 8)
    full, part = divmod(eighths, 8)
    cells = "█" * full + (BLOCKS[part] if part else "")
    return Text.assemble(fmt.format(value), " ", (cells.ljust(width), style))
