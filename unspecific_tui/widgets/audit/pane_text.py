"""What one of Audit's text panes shows: its text with the copied spans and the judges' quotes
highlighted, its subtitle and the offset it opens on (``pane_content``), and the spans the source
view marks (``phrase_spans``). Plain functions of the texts: the detail (detail.py) draws them.
"""

from __future__ import annotations

from functools import lru_cache

from rich.text import Text

from pipeline.analysis.copy_count import NONE as NO_COPY
from pipeline.analysis.copy_count import CopyCount, copy_count
from pipeline.analysis.similarity import LEXICAL
from pipeline.analysis.specificity import template_words
from pipeline.core.definitions import COPY_EVIDENCE_NGRAM
from pipeline.core.text import count_words
from pipeline.store.verdicts import Verdict
from pipeline.store.view import Constraint, InstructionData, Writer
from unspecific_tui.widgets.audit.state import Shown
from unspecific_tui.widgets.constraint_list import ListRow
from unspecific_tui.widgets.highlight import (
    QUOTE_FUZZY_STYLE,
    QUOTE_STYLE,
    Span,
    copied_spans,
    intersect,
    merge,
    quote_span,
    render,
    render_sources,
)

CONSTRAINT_N = COPY_EVIDENCE_NGRAM  # a constraint is short: a few shared words in a row already say "copied"
REFERENCE_N = 5  # between long texts, the paper's 5-gram


def pane_content(pane: str, texts: dict[str, str], con: Constraint, data: InstructionData,
                 verdicts: list[Verdict], row: ListRow | None, shown: Shown,
                 copy_mode: str) -> tuple[Text, str, int | None]:
    """One pane's text with its copied spans and the judges' quotes highlighted, its subtitle, and
    the offset to scroll to (the first highlight); what it found recorded in ``shown``. Reading
    ahead passes a Shown of its own: the spans and counts land in their caches, nothing is drawn."""
    text = texts[pane]
    sources: dict[str, tuple[tuple[int, int], ...]] = {}
    if copy_mode == "constraint":
        copies = copied_spans(con.text, text, CONSTRAINT_N) if text else ()
    elif pane in ("response", "summary"):
        sources = {"A": copied_spans(data.article_a, text, REFERENCE_N) if text and data.article_a else (),
                   "B": copied_spans(data.article_b, text, REFERENCE_N) if text and data.article_b else ()}
        copies = tuple(merge([*sources["A"], *sources["B"]]))
        shown.sources[pane] = sources
    else:
        copies = copied_spans(texts["response"], text, REFERENCE_N) if text and texts["response"] else ()
    quotes: list[tuple[tuple[int, int], str]] = []
    found: list[tuple[str, tuple[int, int] | None]] = []
    if pane in ("response", "summary"):
        for v in verdicts:
            if v.kind == pane and v.verdict and v.quote:
                how, span = quote_span(v.quote, text)
                found.append((v.judge, span))
                if span:
                    quotes.append((span, QUOTE_STYLE if how == "exact" else QUOTE_FUZZY_STYLE))
    shown.copies[pane] = tuple(copies)
    shown.quotes[pane] = found
    if text:
        body = render_sources(text, sources, quotes) if sources else render(text, copies, quotes)
    elif pane == "ref-b" and data.condition == "single":
        body = Text("(single condition: one reference only)", style="dim")
    else:
        body = Text("(not generated yet)", style="dim")
    subtitle = f"{_words(text)} words"
    if pane in ("ref-a", "ref-b"):
        sim = row.similarity if row else None
        value = None if sim is None else sim.to_a if pane == "ref-a" else sim.to_b
        method = sim.method if sim else LEXICAL
        shown.similarities[pane] = (method, value)
        if value is not None:
            subtitle += (f" · sim {value:.2f} "
                         f"({method}{'' if row and row.similarity_stored else ', not stored'})")
    if sources:
        both = intersect(list(sources["A"]), list(sources["B"]))
        subtitle += (f" · from A {len(sources['A'])} · from B {len(sources['B'])}"
                     + (f" · both {len(both)}" if both else ""))
    elif pane in ("response", "summary"):
        # The one count of copied words, named by its source (pipeline.analysis.copy_count):
        # the response's is the list's; the summary's is counted the same way here.
        count = (row.copy if row else NO_COPY) if pane == "response" else \
            _copy_count(con.text, text, data.article_a, data.article_b or None,
                        template_words(tuple(c.text for c in data.constraints.values() if c.active)),
                        row.summary_echo if row else None)
        shown.counts[pane] = count
        subtitle += f" · {count.sentence(pane) or 'nothing copied'}"
        if pane == "response":
            # Opened on the first copied span the list counts, not the first highlight.
            shown.copied_in_response = phrase_spans(count.phrases, text)
            shown.copy_step = 0
            if shown.copied_in_response:
                subtitle += " · g: next copied span"
                return body, subtitle, shown.copied_in_response[0][0]
    else:
        subtitle += f" · {len(copies)} span{'' if len(copies) == 1 else 's'} of the constraint"
    return body, subtitle, min([s[0] for s, _ in quotes] + [s[0] for s in copies], default=None)


@lru_cache(maxsize=1024)
def _copy_count(constraint: str, text: str, reference_a: str, reference_b: str | None,
                template: frozenset[str],
                echo: float | None) -> CopyCount:
    """pipeline.analysis.copy_count, cached: moving back to a constraint costs nothing."""
    return copy_count(constraint, text, reference_a, reference_b, template, echo)


def phrase_spans(phrases: tuple[str, ...], text: str) -> tuple[Span, ...]:
    """Where the copied phrases' words (runs of CONSTRAINT_N or more) sit in ``text``."""
    if not text:
        return ()
    return tuple(merge([span for phrase in phrases for span in copied_spans(phrase, text, CONSTRAINT_N)]))


def styled(text: str, spans: tuple[Span, ...], style: str) -> Text:
    out = Text(text)
    for start, end in spans:
        out.stylize(style, start, end)
    return out


@lru_cache(maxsize=64)
def _words(text: str) -> int:
    """The pane subtitles' word count: the same four texts on every move within an instruction."""
    return count_words(text)


def pane_texts(data: InstructionData, writer: Writer | None, ratio: float) -> dict[str, str]:
    """Each pane's text: the two references, ``writer``'s response and its summary at ``ratio``."""
    response = data.responses.get(writer) if writer else None
    summary = data.summary(writer, ratio) if writer else None
    return {"ref-a": data.article_a, "ref-b": data.article_b,
            "response": response.text if response else "", "summary": summary.text if summary else ""}
