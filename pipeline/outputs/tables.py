"""Tables that fit: what `report` and `validate` print, read in 80-column terminals and pasted into papers.

A ``Sheet`` is one table as data: its key columns (kept in every part, such as condition and model),
its value columns grouped by concern (``Block``: rates, corrected rates, judges and coverage,
copying), its rows, and a cell may be a value with its interval. ``render_sheet`` prints it whole
when it fits the terminal, else with each interval under its value, else split by concern (each part
keeping the key columns), else one value column a part: never a column narrower than its header,
never a header cut, never a value dropped. Without a terminal it prints the whole table unwrapped.
``markdown`` (as lm-evaluation-harness prints its tables), ``csv_text`` and ``json_data`` give the
same tables for people who pipe.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

Cell = str | tuple[str, str]  # a value, or (value, interval)


@dataclass(frozen=True)
class Block:
    """Value columns of one concern."""

    name: str
    headers: tuple[str, ...]


@dataclass
class Sheet:
    title: str
    keys: tuple[str, ...]  # left columns kept in every part
    blocks: tuple[Block, ...]
    rows: list[list[Cell]] = field(default_factory=list)  # keys, then each block's columns in order
    caption: str = ""

    @property
    def headers(self) -> list[str]:
        return [*self.keys, *(h for b in self.blocks for h in b.headers)]

    def add(self, *cells: Cell) -> None:
        if len(cells) != len(self.headers):
            raise ValueError(f"{self.title}: {len(cells)} cells for {len(self.headers)} columns")
        self.rows.append(list(cells))

    def part(self, columns: Sequence[int], title: str) -> Sheet:
        """The key columns and these value columns (indexes into ``headers``), as a sheet of its own."""
        keep = [*range(len(self.keys)), *columns]
        headers = self.headers
        return Sheet(title, self.keys, (Block("", tuple(headers[i] for i in columns)),),
                     [[row[i] for i in keep] for row in self.rows], self.caption)


def text(cell: Cell, sep: str = " ") -> str:
    """A cell as one string: the value and its interval joined by ``sep``."""
    if isinstance(cell, tuple):
        value, interval = cell
        return f"{value}{sep}{interval}" if interval else value
    return cell


def _table(sheet: Sheet, sep: str) -> Table:
    from rich.table import Table

    table = Table(title=sheet.title or None, title_justify="left", caption=sheet.caption or None,
                  caption_justify="left")
    for k, header in enumerate(sheet.headers):
        # No column narrower than its header's longest word: headers wrap between words, never cut.
        table.add_column(header, justify="left" if k < len(sheet.keys) else "right", no_wrap=True,
                         min_width=max(len(w) for w in header.split()) if header.strip() else 1)
    for row in sheet.rows:
        table.add_row(*(text(c, sep) for c in row))
    return table


def natural_width(console: Console, table: Table) -> int:
    """The width the table takes with no column squashed."""
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update(width=10_000), table).maximum


def _layouts(sheet: Sheet) -> Iterator[list[tuple[Sheet, str]]]:
    """Candidate layouts, most compact reading first: whole; intervals under values; split by concern
    (each beside, then under); one value column a part."""
    yield [(sheet, " ")]
    yield [(sheet, "\n")]
    start = len(sheet.keys)
    parts = []
    for block in sheet.blocks:
        columns = list(range(start, start + len(block.headers)))
        start += len(block.headers)
        parts.append(sheet.part(columns, f"{sheet.title} ({block.name})" if block.name else sheet.title))
    if len(parts) > 1:
        yield [(p, " ") for p in parts]
        yield [(p, "\n") for p in parts]
    singles = [sheet.part([i], f"{sheet.title} ({h})") for i, h in enumerate(sheet.headers) if i >= len(sheet.keys)]
    yield [(p, "\n") for p in singles]


def render_sheet(console: Console, sheet: Sheet) -> None:
    """Print ``sheet`` in the first layout whose every table fits the console (module docstring)."""
    if not sheet.rows:
        return
    if not console.is_terminal:  # piped: one table, unwrapped (print caps a width at the console's)
        table = _table(sheet, " ")
        width = console.width
        console.width = max(width, natural_width(console, table))
        try:
            console.print(table, crop=False)
        finally:
            console.width = width
        return
    chosen: list[Table] = []
    for layout in _layouts(sheet):
        chosen = [_table(part, sep) for part, sep in layout]
        if all(natural_width(console, t) <= console.width for t in chosen):
            break
    for table in chosen:
        console.print(table)


# -- for people who pipe ---------------------------------------------------------------------------


def markdown(sheet: Sheet) -> str:
    """The sheet as a markdown table (values right-aligned), its title above in bold."""
    headers = sheet.headers
    rows = [[text(c).replace("|", "\\|") for c in row] for row in sheet.rows]
    widths = [max([len(h), 3, *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    keys = len(sheet.keys)

    def line(cells: Sequence[str]) -> str:
        return "|" + "|".join(c.ljust(w) if i < keys else c.rjust(w) for i, (c, w) in
                              enumerate(zip(cells, widths, strict=True))) + "|"

    rule = "|" + "|".join("-" * w if i < keys else "-" * (w - 1) + ":" for i, w in enumerate(widths)) + "|"
    out = ([f"**{sheet.title}**", ""] if sheet.title else []) + [line(headers), rule, *(line(r) for r in rows)]
    if sheet.caption:
        out += ["", sheet.caption]
    return "\n".join(out)


def csv_text(sheet: Sheet) -> str:
    """The sheet as CSV, its title as a comment line above."""
    buffer = io.StringIO()
    if sheet.title:
        buffer.write(f"# {sheet.title}\n")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(sheet.headers)
    writer.writerows([text(c) for c in row] for row in sheet.rows)
    return buffer.getvalue()


def json_data(sheet: Sheet) -> dict[str, Any]:
    """The sheet as a JSON object: title, columns, rows (a value and its interval apart)."""
    return {"title": sheet.title, "columns": sheet.headers,
            "rows": [[list(c) if isinstance(c, tuple) else c for c in row] for row in sheet.rows],
            "caption": sheet.caption}
