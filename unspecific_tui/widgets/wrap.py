"""Where a line of text breaks at a width: Rich's own rule, vendored so the app does not import
Rich's private ``rich._wrap`` (whose name and signature may change in any release).

``divide_line`` and ``_words`` are copied from Rich 15.0.0, ``rich/_wrap.py`` (``words`` there),
and ``_loop_last`` from ``rich/_loop.py`` (``loop_last``), changed only in names, typing and the
nesting of one if/else. They measure with ``rich.cells``, which is public. Rich's licence, which covers these
lines:

    Copyright (c) 2020 Will McGugan

    Permission is hereby granted, free of charge, to any person obtaining a copy
    of this software and associated documentation files (the "Software"), to deal
    in the Software without restriction, including without limitation the rights
    to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
    copies of the Software, and to permit persons to whom the Software is
    furnished to do so, subject to the following conditions:

    The above copyright notice and this permission notice shall be included in all
    copies or substantial portions of the Software.

    THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
    IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
    FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
    AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
    LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
    OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
    SOFTWARE.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import TypeVar

from rich.cells import cell_len, chop_cells

_T = TypeVar("_T")

_WORD = re.compile(r"\s*\S+\s*")


def _words(text: str) -> Iterator[tuple[int, int, str]]:
    """Each word as (start, end, word); a word keeps the whitespace to its right."""
    position = 0
    word_match = _WORD.match(text, position)
    while word_match is not None:
        start, end = word_match.span()
        yield start, end, word_match.group(0)
        word_match = _WORD.match(text, end)


def _loop_last(values: Iterable[_T]) -> Iterator[tuple[bool, _T]]:
    """Each value with a flag that is True for the last one."""
    iter_values = iter(values)
    try:
        previous_value = next(iter_values)
    except StopIteration:
        return
    for value in iter_values:
        yield False, previous_value
        previous_value = value
    yield True, previous_value


def divide_line(text: str, width: int, fold: bool = True) -> list[int]:
    """The character offsets at which ``text`` breaks to fit ``width`` cells (what Rich's
    ``Text.wrap`` does): words kept whole, a word wider than a line folded when ``fold``."""
    break_positions: list[int] = []
    append = break_positions.append
    cell_offset = 0

    for start, _end, word in _words(text):
        word_length = cell_len(word.rstrip())
        remaining_space = width - cell_offset
        if remaining_space >= word_length:
            cell_offset += cell_len(word)
        elif word_length > width:
            # The word fits on no line: fold it across lines, or crop it.
            if fold:
                for last, line in _loop_last(chop_cells(word, width)):
                    if start:
                        append(start)
                    if last:
                        cell_offset = cell_len(line)
                    else:
                        start += len(line)
            else:
                if start:
                    append(start)
                cell_offset = cell_len(word)
        elif cell_offset and start:
            # It fits on the next (empty) line.
            append(start)
            cell_offset = cell_len(word)

    return break_positions
