"""The suspicion ranking as outputs: plain rows (the HTML report's section, `export --suspicious`),
the report's "Most suspicious" lines, and the export file (JSONL, or CSV for a ``.csv`` name).

The ranking itself is pipeline.analysis.suspicion.suspicion_queue; this module only shapes it.
"""

from __future__ import annotations

import csv
import json
import re
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from pipeline.analysis.suspicion import (
    EVIDENCE_COMMAND,
    REASON_TEXT,
    REASONS,
    Evidence,
    Queue,
    reason_sentences,
    same_phrase_sentence,
    suspicion_queue,
)
from pipeline.analysis.trust import Trust
from pipeline.store.database import Store

REPORT_TOP = 10
# The columns of a row, in order (the CSV header).
COLUMNS = ("rank", "score", "reasons", "reason_codes", "instruction_id", "constraint_id", "position", "model",
           "mode", "ratio",
           "constraint", *(f"reason_{r}" for r in REASONS), "similarity", "similarity_method", "similarity_a",
           "similarity_b", "copied_words", "copy_source", "copied", "copied_from", "specificity",
           "echo", "summary_echo",
           "same_phrase", "grouped_under", "outcome", "response_passed", "summary_passed", "response_yes",
           "response_no", "response_missing", "response_unquoted", "summary_yes", "summary_no",
           "summary_missing",
           "summary_unquoted", "flags", "response_id", "summary_id", "mark")


def _trust_fields(prefix: str, trust: Trust | None) -> dict[str, int | None]:
    return {f"{prefix}_{k}": getattr(trust, k) if trust is not None else None
            for k in ("yes", "no", "missing", "unquoted")}


def copied_words(e: Evidence) -> list[dict[str, Any]]:
    """Every phrase of the constraint found in the response, by source: each copied phrase with its
    reference(s), specificity and why; then the phrases the response repeats from the constraint alone."""
    out: list[dict[str, Any]] = [{"phrase": f.text, "source": f.source, "specificity": f.specificity,
                                  "why": f.sentence()} for f in e.facts]
    if not e.facts:  # no facts stored for the phrases: the phrases alone
        out = [{"phrase": p, "source": "".join(e.copied_from)} for p in e.copied]
    out += [{"phrase": p, "source": "constraint"} for p in e.echoed if p not in e.copied]
    return out


def evidence_row(rank: int, e: Evidence, enabled: Sequence[str] = REASONS, mark: str | None = None,
                 grouped_under: int | None = None) -> dict[str, Any]:
    """One ranked item as a flat dict: ``reasons`` in words (reason_sentences), ``reason_codes`` their
    names, every reason as a column (True when it fires and is enabled), the copied words and their
    source (pipeline.analysis.copy_count; ``copied``: every phrase found, by source, echo included),
    the item's specificity and echo, the items filed under it (``same_phrase``) or the rank of the one
    it is filed under (``grouped_under``), and the auditor's mark (confirmed / dismissed) if any."""
    reasons = [r for r in e.reasons() if r in enabled]
    sim = e.similarity
    count = e.copy_count
    return {
        "rank": rank, "score": e.score(enabled), "reasons": reason_sentences(e, enabled),
        "reason_codes": reasons,
        "instruction_id": e.instruction_id,
        "constraint_id": e.constraint_id, "position": e.position, "model": e.writer.model,
        "mode": e.writer.mode,
        "ratio": e.ratio, "constraint": e.text, **{f"reason_{r}": r in reasons for r in REASONS},
        "similarity": round(sim.highest, 4) if sim else None, "similarity_method": sim.method
        if sim else None,
        "similarity_a": sim.to_a if sim else None, "similarity_b": sim.to_b if sim else None,
        "copied_words": count.words, "copy_source": count.source,
        "copied": copied_words(e), "copied_from": "".join(e.copied_from), "specificity": e.specificity,
        "echo": e.echo, "summary_echo": e.summary_echo, "same_phrase": len(e.same_phrase),
        "grouped_under": grouped_under, "outcome": e.outcome.value, "response_passed": e.response_passed,
        "summary_passed": e.summary_passed, **_trust_fields("response", e.response_trust),
        **_trust_fields("summary", e.summary_trust), "flags": list(e.flags), "response_id": e.response_id,
        "summary_id": e.summary_id, "mark": mark,
    }


def suspicion_rows(store: Store, *, ratio: float | None = None, enabled: Sequence[str] = REASONS,
                   run_id: str | None = None, limit: int | None = None) -> tuple[list[dict[str, Any]], bool]:
    """The ranked queue as plain rows, and whether copy evidence is missing (then say: run
    `unspecific evaluate` or `unspecific build` again to compute it)."""
    from pipeline.store.marks import marks

    queue = suspicion_queue(store, ratio=ratio, enabled=enabled, run_id=run_id, limit=limit)
    marked = marks(store)
    rows: list[dict[str, Any]] = []
    for i, e in enumerate(queue, 1):
        rows.append(evidence_row(i, e, enabled, mark_of(marked, e)))
        rows += [evidence_row(i, f, enabled, mark_of(marked, f), grouped_under=i) for f in e.same_phrase]
    return rows, queue.copy_evidence_missing


def mark_of(marked: dict[tuple[int, int], Any], e: Evidence) -> str | None:
    """The auditor's mark on the item (confirmed / dismissed), or None."""
    found = marked.get((e.response_id or 0, e.constraint_id))
    return found.mark if found is not None else None


def _reasons(e: Evidence, enabled: Sequence[str]) -> list[str]:
    """The item's reasons in words, and the constraints filed under it on the same phrase."""
    parts = reason_sentences(e, enabled)
    if e.same_phrase:
        parts.append(same_phrase_sentence(e))
    return parts


MISSING_COPY = f"copy evidence not computed for every response: `{EVIDENCE_COMMAND}` computes what is missing"


def report_heading(queue: Queue) -> str:
    """The "Most suspicious" section's title line."""
    return (f"Most suspicious (constraint, response) items: {max(queue.total, len(queue)):,} with a reason"
            " (one phrase across many constraints of an instruction leads once)")


def reasons_legend(enabled: Sequence[str] = REASONS) -> str:
    """What each reason's name means."""
    return "reasons: " + "; ".join(f"{r} = {REASON_TEXT[r]}" for r in REASONS if r in enabled)


def report_items(queue: Queue, *, enabled: Sequence[str] = REASONS,
                 top: int = REPORT_TOP) -> list[dict[str, Any]]:
    """The "Most suspicious" items as data, the same in every format of the report: rank, score (as
    shown), the instruction, the constraint (id, position, text), the model and mode, and the reasons
    in words (the constraints filed under it on the same phrase last)."""
    return [{"rank": i, "score": round(e.score(enabled), 2), "instruction_id": e.instruction_id,
             "position": e.position, "constraint_id": e.constraint_id, "model": e.writer.model,
             "mode": e.writer.mode, "constraint": e.text, "reasons": _reasons(e, enabled)}
            for i, e in enumerate(queue[:top], 1)]


def report_lines(queue: Queue, *, enabled: Sequence[str] = REASONS, top: int = REPORT_TOP) -> list[str]:
    """The report's "Most suspicious" section: plain text lines, the top items and why."""
    lines = [report_heading(queue)]
    if queue.copy_evidence_missing:
        lines.append(f"  ({MISSING_COPY})")
    for item in report_items(queue, enabled=enabled, top=top):
        text = item["constraint"]
        text = text if len(text) <= 80 else text[:77] + "..."
        writer = f"{item['model']} [{item['mode']}]" if item["mode"] else item["model"]
        lines.append(f"{item['rank']:>3}. {item['score']:5.2f}  instruction {item['instruction_id']}"
                     f" #{item['position']} {writer}: {text}")
        lines.append(f"       {'; '.join(item['reasons'])}")
    if not queue:
        lines.append("  none")
    lines.append(f"  {reasons_legend(enabled)}")
    return lines


def wrap_report_lines(lines: Sequence[str], width: int) -> list[str]:
    """``report_lines`` for a terminal ``width`` cells wide: each line wrapped between words, an
    item's continuing under its "instruction", its reasons' under their first word (a terminal's own
    wrap cut words in two and ran back to the first column, where the next item's number is looked
    for)."""
    wrapped: list[str] = []
    for line in lines:
        head = re.match(r"\s*\d+\.\s+\S+\s+", line)  # "  1.  6.72  "
        lead = len(line) - len(line.lstrip(" "))
        indent = len(head.group()) if head else lead if lead > 2 else lead + 2
        wrapped.extend(textwrap.wrap(line, max(width, indent + 20), subsequent_indent=" " * indent,
                                     break_on_hyphens=False) or [""])
    return wrapped


def write_suspicious(store: Store, out: str | Path | IO[str], *, ratio: float | None = None,
                     enabled: Sequence[str] = REASONS, run_id: str | None = None, limit: int | None = None
                     ) -> tuple[int, bool]:
    """Write the ranked queue to ``out`` ('-' or a stream: JSONL to it; a path ending in .csv: CSV;
    any other path: JSONL). Returns (rows written, copy evidence missing)."""
    rows, missing = suspicion_rows(store, ratio=ratio, enabled=enabled, run_id=run_id, limit=limit)
    if out == "-":
        _jsonl(rows, sys.stdout)
    elif isinstance(out, (str, Path)):
        path = Path(out)
        with path.open("w", encoding="utf-8", newline="") as f:
            (_csv if path.suffix.lower() == ".csv" else _jsonl)(rows, f)
    else:
        _jsonl(rows, out)
    return len(rows), missing


def _jsonl(rows: list[dict[str, Any]], f: IO[str]) -> None:
    for row in rows:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")


def _csv(rows: list[dict[str, Any]], f: IO[str]) -> None:
    writer = csv.DictWriter(f, fieldnames=COLUMNS)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.items()})


def _cell(value: Any) -> Any:
    """A CSV cell: lists joined by '; ', a copied phrase with its source ("the phrase [A]")."""
    if isinstance(value, list):
        return "; ".join(f"{v['phrase']} [{v['source']}]" if isinstance(v, dict) else str(v) for v in value)
    return value
