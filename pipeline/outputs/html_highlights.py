"""Where the report page highlights a text, as character spans: a judge's quote found in it (by
pipeline.core.text.find_quote's rules) and the passages copied word for word from another text
(pipeline.analysis.copying), and the one count of copied words (pipeline.analysis.copy_count).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from pipeline.analysis import copying
from pipeline.analysis.copy_count import copy_count

_SPACES = re.compile(r"\s+")


@lru_cache(maxsize=64)
def _normalised(text: str) -> tuple[str, tuple[int, ...]]:
    """pipeline.core.text.normalise_for_quote (lower-case, curly quotes and dashes unified, whitespace runs
    collapsed, offsets kept). ASCII text takes a fast path with the same result: NFC and the
    quote table change no ASCII character, and a whitespace run becomes one space at the run's
    first offset, as there. normalise_for_quote walks a 3,000-character text character by character."""
    from pipeline.core.text import normalise_for_quote

    if not text.isascii():
        return normalise_for_quote(text)
    low = text.lower()
    out: list[str] = []
    index: list[int] = []
    pos = 0
    for m in _SPACES.finditer(low):
        out.append(low[pos : m.start()])
        index.extend(range(pos, m.start()))
        out.append(" ")
        index.append(m.start())
        pos = m.end()
    out.append(low[pos:])
    index.extend(range(pos, len(low)))
    return "".join(out), tuple(index)  # as normalise_for_quote: cached, kept from the collector


def quote_span(quote: str, text: str, found: str | None = None) -> tuple[str | None, tuple[int, int] | None]:
    """Where a judge's quote sits in ``text`` (exact | fuzzy | missing, span), by
    pipeline.core.text.find_quote's rules; ``found`` is the verdict's stored quote_found (judging
    decided it when it stored the verdict), so a missing quote is not searched again and only a
    fuzzy one pays for the fuzzy alignment."""
    from pipeline.core.text import find_quote

    q = quote.strip().strip("\"'\u201c\u201d\u2018\u2019").strip()
    if not q or found == "missing":
        return (found if q else None), None
    q = q.rstrip(".").strip() or q
    nq, _ = _normalised(q)
    nt, idx = _normalised(text)
    pos = nt.find(nq) if nq else -1
    if pos != -1:
        return "exact", (idx[pos], idx[pos + len(nq) - 1] + 1)
    if found == "exact":
        return "missing", None  # judged against another version of the text: not here
    match = find_quote(quote, text)
    return match.found, match.span


def merge_spans(spans: list[tuple[int, int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def copy_count_cell(constraint: str, text: str, ref_a: str, ref_b: str, name: str,
                    template: frozenset[str] = frozenset(), echo: float | None = None) -> list[Any]:
    """[words, source, sentence] of pipeline.analysis.copy_count for the page (``template``: the list's
    template words; ``echo``: the constraint's stored echo on the text)."""
    found = copy_count(constraint, text, ref_a, ref_b or None, template, echo)
    return [found.words, found.source, found.sentence(name)]


def copied_spans(source: str, target: str, n: int) -> list[list[int]]:
    """Character spans of ``target`` copied word for word (>= n words) from ``source``."""
    if not source or not target:
        return []
    return merge_spans([(s.a_start, s.a_end) for s in copying.copied_ngrams(target, source, n=n)])
