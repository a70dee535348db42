"""Responses written by another harness, one a line: ``instruction`` (an id of the import named
by ``--run``, or a store instruction id), ``model``, ``mode`` (direct | edit, default direct),
``text``. They are generations like the project's own: summarised and judged the same way."""

from __future__ import annotations

from typing import Any

from pipeline.importing.common import RESPONSE_MODES, ImportFailed, ImportOptions, guard, import_run_id
from pipeline.importing.reading import read_jsonl
from pipeline.importing.writer import ImportWriter
from pipeline.store import imports
from pipeline.store.instructions import instruction_exists
from pipeline.store.runs import exists_run


def _resolve_instruction(writer: ImportWriter, run: str | None, value: Any) -> int:
    if run is not None:
        run_id = run if exists_run(writer.store, run) else import_run_id(run)
        stored = imports.imported_instruction(writer.store, run_id, str(value).strip())
        if stored is not None:
            return stored.id
        # A line may name the instruction by its store id within that run.
        if not isinstance(value, bool) and str(value).strip().isdigit():
            iid = int(str(value).strip())
            if imports.instruction_in_run(writer.store, run_id, iid):
                return iid
        raise ValueError(f"no instruction {value!r} in run {run_id}")
    if isinstance(value, bool) or not str(value).strip().isdigit():
        raise ValueError(f"{value!r} is not a store instruction id; pass --run NAME to use "
                         "the ids of an import")
    iid = int(str(value).strip())
    if not instruction_exists(writer.store, iid):
        raise ValueError(f"no instruction {value} in {writer.store.path}")
    return iid


def import_responses(writer: ImportWriter, options: ImportOptions, name: str) -> None:
    rows = read_jsonl(options.path)
    writer.summary.rows = len(rows)
    if options.run is not None and not any(exists_run(writer.store, run_id)
                                           for run_id in (options.run, import_run_id(options.run))):
        raise ImportFailed(f"--run {options.run}: no such run or import in {writer.store.path}")
    for row in rows:
        v = row.values
        key = "instruction" if "instruction" in v else "instruction_id"
        if v.get(key) in (None, ""):
            writer.problems.add(row, "each line names its instruction", "instruction")
            continue
        try:
            iid = _resolve_instruction(writer, options.run, v[key])
        except ValueError as exc:
            writer.problems.add(row, str(exc), key)
            continue
        model, mode, text = v.get("model"), v.get("mode") or "direct", v.get("text")
        if not isinstance(model, str) or not model.strip():
            writer.problems.add(row, "a non-empty model name is expected", "model")
            continue
        if mode not in RESPONSE_MODES:
            writer.problems.add(row, f"one of {', '.join(RESPONSE_MODES)} is expected, got {mode!r}", "mode")
            continue
        if not isinstance(text, str) or not text.strip():
            writer.problems.add(row, "a non-empty response text is expected", "text")
            continue
        guard(writer.problems, row, "text", lambda: writer.generation(
            "response", iid, text.replace("\r\n", "\n"), model=model.strip(), mode=mode))
