"""Spans to highlight: copied word n-grams and judges' quotes, as character offsets.

The span logic is ``pipeline.analysis.copying``'s; this module turns it into styled Rich text and
caches results by content, so moving back to a constraint costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from rich.text import Text

Span = tuple[int, int]

COPY_STYLE = "bold black on #e5c07b"  # copied n-grams
QUOTE_STYLE = "bold white on #3465a4"  # a judge's quote where it occurs
QUOTE_FUZZY_STYLE = "bold white on #75507b"
# References mode: which reference a copied passage of the response (or summary) comes from.
SOURCE_STYLES = {"A": "bold black on #e5c07b", "B": "bold black on #56b6c2", "both": "bold black on #98c379"}


@lru_cache(maxsize=1024)
def copied_spans(source: str, target: str, n: int = 3) -> tuple[Span, ...]:
    """Character spans of ``target`` made of runs of >= n words that also occur in ``source``."""
    from pipeline.analysis.copying import copied_ngrams

    return tuple(merge([(s.a_start, s.a_end) for s in copied_ngrams(target, source, n=n)]))


def merge(spans: list[Span]) -> list[Span]:
    out: list[Span] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


@lru_cache(maxsize=256)
def _normalised(text: str) -> tuple[str, tuple[int, ...]]:
    from pipeline.core.text import normalise_for_quote

    return normalise_for_quote(text)


@lru_cache(maxsize=4096)
def quote_span(quote: str, text: str) -> tuple[str | None, Span | None]:
    """Where a judge's quote sits in ``text``: (exact|fuzzy|missing|None, span).

    The exact case searches the text normalised once per text (judging's normalisation);
    anything else goes to ``pipeline.core.text.find_quote`` (fuzzy alignment).
    """
    q = quote.strip().strip("\"'\u201c\u201d\u2018\u2019").strip()
    if not q:
        return None, None
    q = q.rstrip(".").strip() or q
    from pipeline.core.text import find_quote, normalise_for_quote

    nq, _ = normalise_for_quote(q)
    nt, idx = _normalised(text)
    pos = nt.find(nq)
    if pos != -1:
        return "exact", (idx[pos], idx[pos + len(nq) - 1] + 1)
    match = find_quote(quote, text)
    return match.found, match.span


def render(text: str, copies: Sequence[Span] = (), quotes: Sequence[tuple[Span, str]] = ()) -> Text:
    """A Rich Text with copied spans and quote spans styled (quotes drawn over copies)."""
    out = Text(text)
    for start, end in copies:
        out.stylize(COPY_STYLE, start, end)
    for (start, end), style in quotes:
        out.stylize(style, start, end)
    return out


def intersect(a: Sequence[Span], b: Sequence[Span]) -> list[Span]:
    """Where two sorted, merged span lists overlap."""
    out: list[Span] = []
    i = j = 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def render_sources(text: str, sources: Mapping[str, Sequence[Span]],
                   quotes: Sequence[tuple[Span, str]] = ()) -> Text:
    """A Rich Text with the passages copied from reference A, from B, and from both styled apart
    (``SOURCE_STYLES``), quotes drawn over them."""
    out = Text(text)
    a, b = list(sources.get("A", ())), list(sources.get("B", ()))
    for name, spans in (("A", a), ("B", b), ("both", intersect(a, b))):
        for start, end in spans:
            out.stylize(SOURCE_STYLES[name], start, end)
    for (start, end), style in quotes:
        out.stylize(style, start, end)
    return out
