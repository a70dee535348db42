"""Tables that fit: what `report` and `validate` print, read in 80-column terminals and pasted into papers.

A ``Sheet`` is one table as data: its key columns (kept in every part, such as condition and model),
its value columns grouped by concern (``Block``: rates, corrected rates, judges and coverage,
copying), its rows, and a cell may be a value with its interval. ``render_sheet`` prints it whole
when it fits the terminal, else with each interval under its value, else split by concern (each part
keeping the key columns), else (key columns holding one value on every row moved into the title)
its columns packed into as few tables as fit, else each row stacked
(its values under its keys); headers wrap between words where that keeps a table whole. Never a
column narrower than its header's longest word, never a header cut, never a value dropped. Piped
(no terminal), the same at the console's width (the CLI's: COLUMNS, else 100).
``markdown`` (as lm-evaluation-harness prints its tables) splits a sheet the same way to keep each
table within 100 characters; ``records`` gives its rows as data for CSV and JSON: numbers as numbers
(a ``Value`` cell's data, or a cell that reads as one), an interval as its two bounds, missing as
None, each column under a machine name (``column_names``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipeline.core.intervals import ci_parts

if TYPE_CHECKING:
    from rich.console import Console, Group
    from rich.table import Table


@dataclass(frozen=True)
class Value:
    """A cell as people read it and as a script reads it: ``shown`` ("76.9", "3.1 / 2.0",
    "local/direct"), its interval as shown ("[71.8, 82.1]", or ""), ``data`` what it shows (numbers in
    the unit shown, None for none, or names; one per machine name of its column: (3.1, 2.0),
    ("local", "direct")) and the interval's bounds."""

    shown: str
    data: tuple[Any, ...]
    interval: str = ""
    bounds: tuple[float, float] | None = None


Cell = str | tuple[str, str] | Value  # a value, (value, interval), or a value with its data
# More tables than this for one sheet read worse than its rows stacked (a value a line).
MAX_PARTS = 4
# Markdown tables are kept this narrow (a paper's source, a review diff, a terminal's pager).
MARKDOWN_WIDTH = 100
# A value column is right-aligned when every cell reads as a number ("83 [78, 88]", "1,204", "$0.12",
# "-"); names and times stay left.
_NUMBER = re.compile(r"^[-+−$]?[\d.,]*%?( ?[\[(][-+\d., −%]+[\])])?\*{0,3}$|^-$|^n/a$")


def figure(iv: Any, **how: Any) -> Cell:
    """An interval as a cell: what ``ci_parts`` writes (``how``: its scale, digits...), and the
    numbers it shows; '-' when undefined."""
    parts = ci_parts(iv, **how)
    if parts == "-":
        return "-"
    value, low, high = iv if isinstance(iv, tuple) else (iv.value, iv.low, iv.high)
    scale = how.get("scale", 100.0)
    digits = how.get("digits", 1)
    shown = round(scale * value, digits)
    if not isinstance(parts, tuple):
        return Value(parts, (shown,))
    bounds = digits if how.get("interval_digits") is None else how["interval_digits"]
    return Value(parts[0], (shown,), parts[1], (round(scale * low, bounds), round(scale * high, bounds)))


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
    ends: set[int] = field(default_factory=set)  # rows a rule follows (the last of a section, before a total)
    name: str = ""  # the table's machine name (a CSV file's, the ``table`` column's)
    # Machine names of columns whose header does not make a good one (column_names), by header: a cell
    # of two numbers ("3.1 / 2.0") has two.
    names: dict[str, str | tuple[str, ...]] = field(default_factory=dict)

    @property
    def headers(self) -> list[str]:
        return [*self.keys, *(h for b in self.blocks for h in b.headers)]

    def add(self, *cells: Cell, end_section: bool = False) -> None:
        if len(cells) != len(self.headers):
            raise ValueError(f"{self.title}: {len(cells)} cells for {len(self.headers)} columns")
        if end_section:
            self.ends.add(len(self.rows))
        self.rows.append(list(cells))

    def rule(self) -> None:
        """A rule under the rows so far (before a total)."""
        if self.rows:
            self.ends.add(len(self.rows) - 1)

    def part(self, columns: Sequence[int], title: str) -> Sheet:
        """The key columns and these value columns (indexes into ``headers``), as a sheet of its own."""
        keep = [*range(len(self.keys)), *columns]
        headers = self.headers
        return Sheet(title, self.keys, (Block("", tuple(headers[i] for i in columns)),),
                     [[row[i] for i in keep] for row in self.rows], self.caption, set(self.ends), self.name,
                     self.names)

    def by_concern(self) -> list[Sheet]:
        """Each block as a table of its own beside the key columns, titled by its concern; the caption
        follows the last."""
        start = len(self.keys)
        parts = []
        for block in self.blocks:
            columns = list(range(start, start + len(block.headers)))
            start += len(block.headers)
            parts.append(self.part(columns, f"{self.title} ({block.name})" if block.name else self.title))
        return _captioned_last(parts)


def text(cell: Cell, sep: str = " ") -> str:
    """A cell as one string: the value and its interval joined by ``sep``."""
    if isinstance(cell, Value):
        return f"{cell.shown}{sep}{cell.interval}" if cell.interval else cell.shown
    if isinstance(cell, tuple):
        value, interval = cell
        return f"{value}{sep}{interval}" if interval else value
    return cell


def _table(sheet: Sheet, sep: str, *, compact: bool = False) -> Table:
    """The sheet as a Rich table (its title and caption printed apart: they wrap at the terminal's
    width, not the table's). Compact: each column as wide as its values or its header's longest word,
    whichever is wider (the header wraps between its words); else headers on one line."""
    from rich.cells import cell_len
    from rich.table import Table
    from rich.text import Text

    table = Table()
    for k, header in enumerate(sheet.headers):
        cells = [text(row[k], sep) for row in sheet.rows]
        numbers = k >= len(sheet.keys) and all(_NUMBER.match(text(row[k])) for row in sheet.rows)
        word = max((cell_len(w) for w in header.split()), default=1)
        widest = max((cell_len(line) for c in cells for line in c.split("\n")), default=1)
        # Values never wrap nor get cut: no column narrower than its widest value, and none narrower
        # than its header's longest word (headers wrap between words, never inside one).
        table.add_column(Text(header, no_wrap=False, overflow="fold"), justify="right" if numbers else "left",
                         no_wrap=True, width=max(word, widest) if compact else None, min_width=word)
    for i, row in enumerate(sheet.rows):
        # Text, not strings: Rich reads "[direct]" in a model's label as markup and drops it.
        table.add_row(*(Text(text(c, sep)) for c in row), end_section=i in sheet.ends)
    return table


def natural_width(console: Console, table: Table) -> int:
    """The width the table takes with no column squashed."""
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update(width=10_000), table).maximum


def _layouts(sheet: Sheet) -> Iterator[list[tuple[Sheet, str]]]:
    """Candidate layouts, most compact reading first: whole; intervals under values; split by concern
    (each beside, then under). A split sheet's caption follows its last part."""
    yield [(sheet, " ")]
    yield [(sheet, "\n")]
    if len(sheet.blocks) > 1:
        yield [(p, " ") for p in sheet.by_concern()]
        yield [(p, "\n") for p in sheet.by_concern()]


def _packed(sheet: Sheet, fits: Callable[[list[int]], bool]) -> list[Sheet]:
    """The value columns packed left to right into as few tables as ``fits`` (given the value columns
    of a table, indexes into ``headers``), a concern kept in one table where it fits in one."""
    groups: list[list[int]] = []
    current: list[int] = []
    start = len(sheet.keys)
    for block in sheet.blocks:
        columns = list(range(start, start + len(block.headers)))
        start += len(columns)
        if current and fits(current + columns):
            current += columns
            continue
        if fits(columns):
            if current:
                groups.append(current)
            current = columns
            continue
        for column in columns:  # the concern is wider than the terminal: its columns as they fit
            if current and not fits([*current, column]):
                groups.append(current)
                current = []
            current.append(column)
    if current:
        groups.append(current)
    return _captioned_last([sheet.part(g, f"{sheet.title} ({k} of {len(groups)})" if len(groups) > 1
                                       else sheet.title)
                            for k, g in enumerate(groups, 1)])


def _captioned_last(parts: list[Sheet]) -> list[Sheet]:
    for part in parts[:-1]:
        part.caption = ""
    return parts


def _print(console: Console, sheet: Sheet, body: Table | Group) -> None:
    from rich.text import Text

    if sheet.title:
        console.print(Text(sheet.title, style="italic"))
    console.print(body, crop=False)
    if sheet.caption:
        console.print(Text(sheet.caption, style="dim"))


def render_sheet(console: Console, sheet: Sheet) -> None:
    """Print ``sheet`` in the first layout whose every table fits the console (module docstring),
    headers on one line if they can, else wrapped between words; where none fits (its key columns
    alone are wider), each row stacked: its keys, then a line a value. Piped as in a terminal: the
    console's width is the CLI's for pipes (pipeline.cli.common.console)."""
    if not sheet.rows:
        return
    for layout in _layouts(sheet):
        for compact in (False, True):
            chosen = [(part, _table(part, sep, compact=compact)) for part, sep in layout]
            if all(natural_width(console, t) <= console.width for _, t in chosen):
                for part, table in chosen:
                    _print(console, part, table)
                return
    hoisted = _hoisted(sheet)
    if hoisted is not None:
        render_sheet(console, hoisted)
        return
    def fits(columns: list[int]) -> bool:
        return natural_width(console, _table(sheet.part(columns, ""), "\n", compact=True)) <= console.width

    packed = [(part, _table(part, "\n", compact=True)) for part in _packed(sheet, fits)]
    if len(packed) <= MAX_PARTS and all(natural_width(console, t) <= console.width for _, t in packed):
        for part, table in packed:
            _print(console, part, table)
        return
    _print(console, sheet, _stacked(sheet))


def _hoisted(sheet: Sheet) -> Sheet | None:
    """The sheet with its key columns that hold one value on every row moved into its title ("model:
    local/direct"), their width given to the values; None when there are none to move (one key column
    always stays)."""
    if len(sheet.rows) < 2:
        return None
    same = [k for k in range(len(sheet.keys)) if len({text(row[k]) for row in sheet.rows}) == 1]
    same = same[:len(sheet.keys) - 1] if len(same) == len(sheet.keys) else same
    if not same:
        return None
    said = ", ".join(f"{sheet.keys[k]}: {text(sheet.rows[0][k])}" for k in same)
    keep = [i for i in range(len(sheet.headers)) if i not in same]
    return Sheet(f"{sheet.title} ({said})" if sheet.title else said, tuple(h for k, h in enumerate(sheet.keys)
                 if k not in same), sheet.blocks,
                 [[row[i] for i in keep] for row in sheet.rows], sheet.caption,
                 set(sheet.ends), sheet.name, sheet.names)


def _stacked(sheet: Sheet) -> Group:
    """The rows one under another: the keys in bold on a line, then each header and its value on a
    line of their own (a long value wraps; nothing is cut)."""
    from rich.console import Group
    from rich.text import Text

    keys, headers = len(sheet.keys), sheet.headers
    lines: list[Text] = []
    for row in sheet.rows:
        lines.append(Text(" · ".join(text(c) for c in row[:keys]), style="bold"))
        lines += [Text.assemble(f"  {header}: ", text(cell))
                  for header, cell in zip(headers[keys:], row[keys:], strict=True)]
    return Group(*lines)


# -- for people who pipe ---------------------------------------------------------------------------


def markdown(sheet: Sheet, width: int = MARKDOWN_WIDTH) -> str:
    """The sheet as markdown tables no wider than ``width``, split as a terminal splits it (whole; else
    by concern; else the key columns holding one value moved into the title; else its columns packed
    into as few tables as fit); a table whose key columns alone are wider is left wider."""
    for parts in ([sheet], sheet.by_concern()):
        tables = [_markdown_table(part) for part in parts]
        if all(_table_width(t) <= width for t in tables):
            return "\n\n".join(tables)
    hoisted = _hoisted(sheet)
    if hoisted is not None:
        return markdown(hoisted, width)
    parts = _packed(sheet, lambda columns: _table_width(_markdown_table(sheet.part(columns, ""))) <= width)
    return "\n\n".join(_markdown_table(part) for part in parts)


def _table_width(block: str) -> int:
    return max((len(line) for line in block.splitlines() if line.startswith("|")), default=0)


def _markdown_table(sheet: Sheet) -> str:
    """One markdown table (values right-aligned), its title above in bold, its caption under it."""
    headers = sheet.headers
    rows = [[text(c).replace("|", "\\|") for c in row] for row in sheet.rows]
    widths = [max([len(h), 3, *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    keys = len(sheet.keys)

    def line(cells: Sequence[str]) -> str:
        return "|" + "|".join(c.ljust(w) if i < keys else c.rjust(w) for i, (c, w) in
                              enumerate(zip(cells, widths, strict=True))) + "|"

    rule = "|" + "|".join("-" * w if i < keys else "-" * (w - 1) + ":" for i, w in enumerate(widths)) + "|"
    out = ([f"**{sheet.title}**", ""] if sheet.title else []) + [line(headers), rule,
                                                                 *(line(r) for r in rows)]
    if sheet.caption:
        out += ["", sheet.caption]
    return "\n".join(out)


def slug(header: str) -> str:
    """A header as a machine name: 'Core@0.25 corr.' -> 'core_at_0.25_corr', 'coverage %' ->
    'coverage_pct', 'judge κ' -> 'judge_kappa'; an interval's mark ('[95% CI]') dropped."""
    name = re.sub(r"\[[^]]*\]", "", header.lower())
    name = name.replace("κ", " kappa ").replace("%", " pct ").replace("@", " at ")
    return re.sub(r"[^a-z0-9.]+", "_", name).strip("_.") or "value"


def column_names(sheet: Sheet) -> list[str | tuple[str, ...]]:
    """Each column's machine name (a cell of several numbers: one a number): the sheet's own
    (``Sheet.names``), else its header's ``slug``; a name held by several columns lettered
    ('judge_a', 'judge_b')."""
    names = [sheet.names.get(h) or slug(h) for h in sheet.headers]
    counts = Counter(names)
    seen: Counter[str | tuple[str, ...]] = Counter()
    out: list[str | tuple[str, ...]] = []
    for name in names:
        if isinstance(name, str) and counts[name] > 1:
            letter = chr(ord("a") + seen[name])
            seen[name] += 1
            name = f"{name}_{letter}"
        out.append(name)
    return out


# A cell's text that is a number ("1,204", "-0.35"): never "nan" or "inf", which JSON has no word for.
_PLAIN_NUMBER = re.compile(r"[-+]?\d[\d,]*(\.\d+)?")


def _parse(value: str) -> Any:
    """A cell's text as data: a number when it reads as one ('1,204' -> 1204), None for '-', else the
    text."""
    if value.strip() in ("", "-", "n/a"):
        return None
    if not _PLAIN_NUMBER.fullmatch(value):
        return value
    plain = value.replace(",", "")
    return float(plain) if "." in plain else int(plain)


def _data(cell: Cell) -> tuple[tuple[Any, ...], tuple[float, float] | None]:
    """A cell's numbers (or text) and its interval's bounds."""
    if isinstance(cell, Value):
        return cell.data, cell.bounds
    if isinstance(cell, tuple):
        bounds = re.fullmatch(r"\[(\S+), (\S+)\]", cell[1])
        low, high = (_parse(bounds.group(1)), _parse(bounds.group(2))) if bounds else (None, None)
        if isinstance(low, float | int) and isinstance(high, float | int):
            return (_parse(cell[0]),), (low, high)
        return (_parse(cell[0]),), None
    return (_parse(cell),), None


def records(sheet: Sheet, *, flat: bool = False) -> list[dict[str, Any]]:
    """The rows as data, a dict a row under the machine names (``column_names``): numbers as numbers,
    missing as None; a column with intervals has ``<name>_ci`` = [low, high] (None where a row has
    none), or with ``flat`` (CSV) ``<name>_low`` and ``<name>_high``."""
    names = column_names(sheet)
    with_ci = [any(_data(row[k])[1] is not None for row in sheet.rows) for k in range(len(names))]
    out = []
    for row in sheet.rows:
        record: dict[str, Any] = {}
        for name, cell, has_ci in zip(names, row, with_ci, strict=True):
            values, bounds = _data(cell)
            if isinstance(name, tuple):
                record.update({n: values[i] if i < len(values) else None for i, n in enumerate(name)})
                continue
            record[name] = values[0] if len(values) == 1 else list(values)
            if has_ci and flat:
                record[f"{name}_low"], record[f"{name}_high"] = bounds or (None, None)
            elif has_ci:
                record[f"{name}_ci"] = list(bounds) if bounds else None
        out.append(record)
    return out
