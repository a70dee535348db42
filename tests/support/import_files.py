"""Files to import, written as their sources write them: CS4's CSVs, JSONL."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from pipeline.importing.common import ImportFailed, ImportOptions
from pipeline.importing.importer import import_file
from pipeline.store.database import Store

LONG = ("The old keeper climbed the stairs each night and lit the lamp while the harbour slept below him. "
        "Ships passed in the dark and the storm came in from the west, bending the grass on the cliffs.")


def write_csv(path: Path, header: list[str], rows: list[list[str]], *, bom: bool = True,
              crlf: bool = True) -> Path:
    buf = io.StringIO(newline="")
    csv.writer(buf, lineterminator="\r\n" if crlf else "\n").writerows([header, *rows])
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + buf.getvalue().encode("utf-8"))
    return path


def numbered(items: list[str], sep: str = "\r\n") -> str:
    return sep.join(f"{i}. {t}" for i, t in enumerate(items, 1))


def cs4_rows(n: int = 3, first: int = 7) -> list[list[str]]:
    rows = []
    for i in range(1, n + 1):
        k = first + i - 1
        items = [f"The story should describe lighthouse detail number {j} in several sentences."
                 for j in range(1, k + 1)]
        rows.append([str(i), f"Write a story about keeper {i} and the storm.", str(k), numbered(items)])
    return rows

def row_lines(rows: list[list[str]]) -> list[int]:
    """The line of write_csv's file each of ``rows`` starts on: the header is line 1, and a row's
    constraints cell (column 4) spans a line per item."""
    starts = [2]
    for r in rows[:-1]:
        starts.append(starts[-1] + r[3].count("\n") + 1)
    return starts


def refused(store: Store, options: ImportOptions) -> str:
    """The message of an import that must fail as a whole."""
    with pytest.raises(ImportFailed) as err:
        import_file(store, options)
    return str(err.value)


# The header exactly as CS4 ships it: a byte-order mark, and "Instruction " with a trailing space.
CS4_HEADER = ["Instruction Number", "Instruction ", "Number of Constraints", "Constraints"]


def write_jsonl(path: Path, lines: list[object], *, crlf: bool = False) -> Path:
    text = ("\r\n" if crlf else "\n").join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n"
    path.write_bytes(text.encode("utf-8"))
    return path
