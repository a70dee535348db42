"""The UNSPECIFIC research code's CSV outputs. Each of its stage files (constraints, hardened
constraints, base, fitted content, summary, evaluation) carries the row id and the columns of its
stage; every column present is imported, each under a configurable name (``ResearchColumns``, as
the research code lets its column names be set). Rows are joined on the id within one import
(``--name``), so the stage files go into the same name one by one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from functools import partial

from pipeline.importing.common import RESPONSE_MODES, ImportFailed, ImportOptions, Row, condition_name, guard
from pipeline.importing.reading import find_column, parse_numbered, read_csv
from pipeline.importing.writer import ImportWriter
from pipeline.store import imports
from pipeline.store.generations import find_response

# The writer of an imported base article or summary: the research code's files do not say which
# model wrote those (a response names its model: that is what is compared).
IMPORTED_WRITER = "imported"


def import_research(writer: ImportWriter, options: ImportOptions, name: str) -> None:
    names, rows = read_csv(options.path)
    cols = options.columns
    found = {f.name: find_column(names, getattr(cols, f.name)) for f in fields(cols)}
    if found["id"] is None:
        raise ImportFailed(f"{options.path}:1: no id column {cols.id!r} (its columns: {', '.join(map(repr, names))}); "
                           "name it with --id-column")
    useful = [k for k in ("constraints", "base", "content", "summary", "results") if found[k]]
    if not useful:
        raise ImportFailed(
            f"{options.path}:1: none of the research code's columns is here ({cols.constraints!r}, {cols.base!r}, "
            f"{cols.content!r}, {cols.summary!r}, {cols.results!r}; its columns: {', '.join(map(repr, names))}); "
            "name them with --constraints-column, --base-column, --content-column, --summary-column, --results-column")
    domain = options.domain or "news"
    condition = condition_name(options.condition, "none")
    writer.summary.domain, writer.summary.condition = domain, condition
    writer.summary.rows = len(rows)
    run_id = writer.summary.run_id
    seen: dict[str, int] = {}

    def cell(row: Row, key: str) -> str:
        column = found[key]
        return row.values.get(column, "").strip() if column else ""

    for row in rows:
        source_id = cell(row, "id")
        if not source_id:
            writer.problems.add(row, "empty", found["id"])
            continue
        if source_id in seen:
            writer.problems.add(row, f"id {source_id} repeats line {seen[source_id]}", found["id"])
            continue
        seen[source_id] = row.line
        iid: int | None = None
        if found["constraints"]:
            task = cell(row, "instruction")
            if not task:
                writer.problems.add(row, "empty (an instruction needs its main task)", found["instruction"] or cols.instruction)
                continue
            try:
                constraints = parse_numbered(cell(row, "constraints"))
            except ValueError as exc:
                writer.problems.add(row, str(exc), found["constraints"])
                continue
            if not constraints:
                writer.problems.add(row, "no numbered constraints", found["constraints"])
                continue
            refs: list[int | None] = []
            for key, suffix in (("reference", "a"), ("reference_b", "b")):
                text = cell(row, key)
                refs.append(guard(writer.problems, row, found[key], partial(
                    writer.article, name, f"{source_id}/{suffix}", domain, text)) if text else None)
            iid = guard(writer.problems, row, found["id"], lambda: writer.instruction(
                source_id, domain=domain, condition=condition, task=" ".join(task.split()), constraints=constraints,
                article_a=refs[0], article_b=refs[1]))
            if iid is None:
                continue
        else:
            stored = imports.imported_instruction(writer.store, run_id, source_id)
            if stored is None:
                writer.problems.add(row, f"no instruction {source_id} in import {name!r}: import the constraints file "
                                    f"under the same --name first", found["id"])
                continue
            iid = stored.id
        _research_texts(writer, options, row, iid, found, cell)


def _research_texts(writer: ImportWriter, options: ImportOptions, row: Row, iid: int, found: dict[str, str | None],
                    cell: Callable[[Row, str], str]) -> None:
    """The base article, the response (fitted content), its summary and the judge's results of one row."""
    cols = options.columns
    generated: dict[str, int | None] = {"base": None, "response": None, "summary": None}
    if cell(row, "base"):
        generated["base"] = guard(writer.problems, row, found["base"], lambda: writer.generation(
            "base", iid, cell(row, "base"), model=IMPORTED_WRITER))
    model = cell(row, "model")
    mode = (cell(row, "mode") or "direct").lower()
    needs_response = bool(cell(row, "content") or cell(row, "summary")
                          or (cell(row, "results") and (cell(row, "evaluated") or options.evaluated).lower() != "base"))
    if needs_response:
        if not model:
            writer.problems.add(row, "empty (responses are named by the model that wrote them)", found["model"] or cols.model)
            return
        if mode not in RESPONSE_MODES:
            writer.problems.add(row, f"one of {', '.join(RESPONSE_MODES)} is expected, got {mode!r}", found["mode"])
            return
    if cell(row, "content"):
        generated["response"] = guard(writer.problems, row, found["content"], lambda: writer.generation(
            "response", iid, cell(row, "content"), model=model, mode=mode))
    elif needs_response:
        generated["response"] = find_response(writer.store, iid, model, mode)
        if generated["response"] is None:
            writer.problems.add(row, f"no response by {model!r} ({mode}) for this instruction: import the fitted "
                                "content file first", found["id"])
            return
    ratio = options.ratio
    if cell(row, "summary_ratio"):
        try:
            ratio = float(cell(row, "summary_ratio"))
        except ValueError:
            ratio = -1.0
        if not 0 < ratio < 1:
            writer.problems.add(row, f"a number between 0 and 1 is expected, got {cell(row, 'summary_ratio')!r}",
                                found["summary_ratio"])
            return
    if cell(row, "summary"):
        generated["summary"] = guard(writer.problems, row, found["summary"], lambda: writer.generation(
            "summary", iid, cell(row, "summary"), model=IMPORTED_WRITER, ratio=ratio, parent_id=generated["response"]))
    elif cell(row, "results") and (cell(row, "evaluated") or options.evaluated).lower() == "summary":
        generated["summary"] = imports.first_summary_id(writer.store, generated["response"], ratio)
    if cell(row, "results"):
        judge = cell(row, "eval_model")
        target = (cell(row, "evaluated") or options.evaluated).lower()
        if not judge:
            writer.problems.add(row, "empty (verdicts are named by the judge model that gave them)",
                                found["eval_model"] or cols.eval_model)
            return
        if target not in generated:
            writer.problems.add(row, f"one of response, summary, base is expected, got {target!r}", found["evaluated"])
            return
        gid = generated[target]
        if gid is None:
            writer.problems.add(row, f"the results judge the {target}, and there is none for this row", found["results"])
            return
        guard(writer.problems, row, found["results"], lambda: writer.verdicts(gid, iid, judge, cell(row, "results")))
