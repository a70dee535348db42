"""Reading the files an import brings: UTF-8 text (with or without a byte-order mark), CSV rows
with the line each starts on, JSON lines, and numbered constraint lists ("1. ...")."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from pipeline.importing.common import ImportFailed, Problems, Row


def _decode(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ImportFailed(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    try:
        # utf-8-sig: CS4's files (and Excel's CSVs) start with a byte-order mark, which would
        # otherwise stick to the first column's name.
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ImportFailed(f"{path}:{line}: not UTF-8 text (byte {exc.start}: {exc.reason}); "
                           "save the file as UTF-8") from exc


def _key(name: str) -> str:
    """Column names compare without case, surrounding spaces (CS4's ``Instruction `` has one) or
    inner runs of spaces and underscores."""
    return re.sub(r"[\s_]+", " ", name.strip().casefold())


def read_csv(path: Path) -> tuple[list[str], list[Row]]:
    """The header (names stripped) and the rows with the line each starts on. Quoted cells may
    span lines; Windows line endings are read as plain newlines inside cells."""
    text = _decode(path)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    problems = Problems(path)
    try:
        header = next(reader)
    except StopIteration:
        raise ImportFailed(f"{path}: the file is empty (a CSV needs a header line)") from None
    except csv.Error as exc:
        raise ImportFailed(f"{path}:1: the header line is not valid CSV ({exc})") from exc
    names = [h.strip() for h in header]
    seen: dict[str, int] = {}
    for number, name in enumerate(names, 1):
        if _key(name) in seen and name:
            problems.add(1, f"column {number} repeats the name {name!r} (column {seen[_key(name)]})")
        seen.setdefault(_key(name), number)
    columns = {name: number for number, name in enumerate(names, 1) if name}
    rows: list[Row] = []
    start = reader.line_num + 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.add(start, f"not valid CSV ({exc}); a quote opened here may never close")
            break
        if not any(c.strip() for c in cells):
            start = reader.line_num + 1
            continue  # a blank line (many editors end a file with one)
        if len(cells) > len(names) and any(c.strip() for c in cells[len(names):]):
            problems.add(start, f"{len(cells)} cells, but the header names {len(names)} columns")
        values = {name: cells[i].replace("\r\n", "\n").replace("\r", "\n") if i < len(cells) else ""
                  for i, name in enumerate(names) if name}
        rows.append(Row(start, values, columns))
        start = reader.line_num + 1
    problems.raise_if_any(len(rows))
    return names, rows


def read_jsonl(path: Path) -> list[Row]:
    """One JSON object a line; blank lines are skipped."""
    problems = Problems(path)
    rows = []
    # Split on newlines only: str.splitlines would also split on U+2028 and friends, which a JSON
    # string may hold raw.
    for number, line in enumerate(_decode(path).split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            problems.add(number, f"not JSON ({reason} at column {getattr(exc, 'colno', '?')})")
            continue
        if not isinstance(value, dict):
            problems.add(number, f"a JSON object is expected, got {type(value).__name__}")
            continue
        rows.append(Row(number, value, {}))
    problems.raise_if_any(len(rows))
    if not rows:
        raise ImportFailed(f"{path}: no lines to import (the file is empty)")
    return rows


def find_column(names: Sequence[str], wanted: str) -> str | None:
    for name in names:
        if _key(name) == _key(wanted):
            return name
    return None


_NUMBERED = re.compile(r"^\s*(\d{1,3})\s*[.)]\s*(.*)$")


class _Numbered(NamedTuple):
    items: list[str]  # each numbered line with the unnumbered lines after it
    numbers: list[str]  # the number each item was given, as written
    preamble: list[str]  # the lines before the first numbered one


def _numbered_lines(text: str) -> _Numbered:
    """The numbered lines ("1. ...", "2) ...") of ``text``, read in order whatever their numbers;
    a line without a number continues the item before it (a wrapped constraint)."""
    found = _Numbered([], [], [])
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _NUMBERED.match(line)
        if m:
            found.numbers.append(m.group(1))
            found.items.append(m.group(2).strip())
        elif found.items:
            found.items[-1] = f"{found.items[-1]} {line}"
        else:
            found.preamble.append(line)
    return found


def _misnumbered(numbers: list[str]) -> tuple[int, str] | None:
    """The first item (its place from 1, and its number as written) whose number is not its place."""
    return next(((k, n) for k, n in enumerate(numbers, 1) if int(n) != k), None)


def parse_numbered(text: str) -> list[str]:
    """Constraints from numbered lines ("1. ...", "2) ..."); a line without a number continues
    the one before (a wrapped constraint). Raises ValueError when the numbers do not run 1, 2, 3..."""
    found = _numbered_lines(text)
    if found.preamble:
        raise ValueError(f"text before constraint 1: {found.preamble[0][:60]!r}")
    off = _misnumbered(found.numbers)
    if off is not None:
        raise ValueError(f"constraint number {int(off[1])} where {off[0]} was expected")
    return [" ".join(i.split()) for i in found.items]


@dataclass(frozen=True)
class NumberedList:
    """A released list read as its publisher wrote it: the items, and what was off about it
    (each note a person should read; the list is usable anyway)."""

    items: list[str]
    notes: list[str]


def read_released_list(text: str, expected: int) -> NumberedList:
    """A numbered list from a file one cannot fix (CS4's releases), read leniently: numbered lines
    first, as parse_numbered; a numbering that skips or repeats, or text before item 1, is noted,
    not fatal; when the lines do not give ``expected`` items, the items numbered 1 to ``expected``
    inline ("1. a 2. b") are tried. An empty list is a ValueError."""
    items, numbers, preamble = _numbered_lines(text)
    notes: list[str] = []
    if len(items) != expected:
        inline = _inline_numbered(text, expected)
        if inline is not None:
            return NumberedList(inline, [])
    if not items:
        raise ValueError("no numbered constraints")
    if preamble:
        notes.append(f"text before constraint 1 left out: {' '.join(preamble)[:60]!r}")
    off = _misnumbered(numbers)
    if off is not None:
        notes.append(f"the numbering is off (item {off[0]} is numbered {off[1]}); read in list order")
    return NumberedList([" ".join(i.split()) for i in items], notes)


def _inline_numbered(text: str, expected: int) -> list[str] | None:
    """Items 1 to ``expected`` numbered inside running text, in order, or None when one is not found."""
    if expected < 1:
        return None
    starts: list[tuple[int, int]] = []  # (where the number starts, where its item starts)
    position = 0
    for k in range(1, expected + 1):
        m = re.compile(rf"(?:^|(?<=\s)){k}\s*[.)]\s+").search(text, position)
        if m is None:
            return None
        starts.append((m.start(), m.end()))
        position = m.end()
    if text[: starts[0][0]].strip():
        return None
    ends = [s for s, _ in starts[1:]] + [len(text)]
    items = [" ".join(text[begin:end].split()) for (_, begin), end in zip(starts, ends)]
    return items if all(items) else None
