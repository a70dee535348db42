"""Import work done elsewhere: other benchmarks' constraint lists, the UNSPECIFIC research
code's CSV outputs, a plain JSONL form, and responses from another harness.

Once imported, an instruction is a finished instruction like a built one (status ``done``,
its constraints active and numbered, flags computed), so ``evaluate``, ``report``, ``export``
and every screen work on it; imported responses, summaries and base articles are generations
(``generations.import_run`` names the import), and imported verdicts are a judge's verdicts,
so the Audit screen opens on someone else's results without a single LLM call.

Formats (``FORMATS``), each read by its own module: ``cs4`` (CS4's released CSVs), ``research``
(the research code's CSV outputs, one stage file at a time), ``jsonl`` (one instruction a line),
``responses`` (one response a line, written by another harness), ``inspect`` and ``lm-eval`` (the
logs of an exported benchmark run by inspect_ai or lm-evaluation-harness: harness_logs).
``common`` holds what they share, ``reading`` the file readers, ``writer`` the rows they store; the SQL is in
``pipeline.store.imports`` and the modules of the shared tables. This module is the entry point
the CLI and the tests call.

Every import is one transaction: rows are checked first and all problems are collected with
file, line and column; if any row is bad nothing is written (the whole import is rolled back).
Importing the same file again adds nothing: each row is found by its id within its import run
(``instructions.source_id``) and reported as skipped, with why. A row whose id was imported
before with different content is an error, never a silent overwrite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pipeline.importing.common import (
    FORMATS,
    LOG_FORMATS,
    ImportFailed,
    ImportOptions,
    ImportSummary,
    Problems,
    condition_name,
    import_run_id,
)
from pipeline.importing.cs4 import import_cs4
from pipeline.importing.harness_logs import import_inspect, import_lm_eval
from pipeline.importing.jsonl import import_jsonl
from pipeline.importing.research import import_research
from pipeline.importing.responses import import_responses
from pipeline.importing.writer import ImportWriter, write_import
from pipeline.store.database import Store

_IMPORTERS: dict[str, Callable[[ImportWriter, ImportOptions, str], None]] = {
    "cs4": import_cs4, "research": import_research, "jsonl": import_jsonl, "responses": import_responses,
    "inspect": import_inspect, "lm-eval": import_lm_eval}


def import_file(store: Store, options: ImportOptions) -> ImportSummary:
    """Import one file in one transaction: everything or (on any bad row) nothing. With
    ``dry_run`` everything is checked and counted, then rolled back."""
    if options.format not in FORMATS:
        raise ImportFailed(f"unknown format {options.format!r}: one of {', '.join(FORMATS)}")
    if not options.path.is_file():
        raise ImportFailed(f"{options.path}: no such file")
    try:
        condition_name(options.condition, "single")
    except ValueError as exc:
        raise ImportFailed(f"--condition: {exc}") from None
    if options.evaluated not in ("response", "summary", "base"):
        raise ImportFailed(f"--evaluated: one of response, summary, base, got {options.evaluated!r}")
    name = options.name or options.path.stem
    if options.format in ("responses", *LOG_FORMATS):
        name = options.name or f"{options.format}-{options.path.stem}"
    summary = ImportSummary(import_run_id(name), options.path, options.domain, None, dry_run=options.dry_run)
    problems = Problems(options.path)
    return write_import(store, summary, problems, options, name,
                        {"domain": options.domain, "condition": options.condition, "run": options.run},
                        lambda writer: _IMPORTERS[options.format](writer, options, name))


def describe(summary: ImportSummary) -> Iterator[str]:
    """The lines a person reads after an import."""
    verb = "would add" if summary.dry_run else "added"
    added = ", ".join(f"{n} {what}" for what, n in summary.added.items() if n) or "nothing"
    where = (f" (domain {summary.domain}, condition {summary.condition})" if summary.domain
             and summary.condition else "")
    yield f"{summary.path}: {summary.rows} row(s) read into run {summary.run_id}{where}; {verb} {added}"
    for reason, n in summary.skipped.items():
        yield f"  skipped {n}: {reason}"
    if summary.dry_run:
        yield "  dry run: nothing was written"
