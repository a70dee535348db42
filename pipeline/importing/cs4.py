"""CS4's released constraint lists (``Instruction-based Constraints.csv``, ``Story-based
Constraints.csv``): ``Instruction Number``, ``Instruction``, ``Number of Constraints`` and
``Constraints`` (numbered lines "1. ..."; the count must match). Condition ``single`` (CS4
back-translates one story), domain ``story`` unless told."""

from __future__ import annotations

from pipeline.importing.common import ImportFailed, ImportOptions, condition_name, guard
from pipeline.importing.reading import find_column, parse_numbered, read_csv
from pipeline.importing.writer import ImportWriter

CS4_COLUMNS = ("Instruction Number", "Instruction", "Number of Constraints", "Constraints")


def import_cs4(writer: ImportWriter, options: ImportOptions, name: str) -> None:
    names, rows = read_csv(options.path)
    located = {c: find_column(names, c) for c in CS4_COLUMNS}
    missing = [c for c, found in located.items() if found is None]
    if missing:
        raise ImportFailed(f"{options.path}:1: not a CS4 constraints file: no column {', '.join(map(repr, missing))} "
                           f"(its columns: {', '.join(map(repr, names))})")
    columns = {c: found for c, found in located.items() if found is not None}
    domain = options.domain or "story"
    condition = condition_name(options.condition, "single")
    writer.summary.domain, writer.summary.condition = domain, condition
    writer.summary.rows = len(rows)
    seen: dict[str, int] = {}
    for row in rows:
        number, task = row.values[columns["Instruction Number"]].strip(), row.values[columns["Instruction"]].strip()
        count, text = row.values[columns["Number of Constraints"]].strip(), row.values[columns["Constraints"]]
        ok = True
        if not number:
            writer.problems.add(row, "empty", columns["Instruction Number"])
            ok = False
        elif number in seen:
            writer.problems.add(row, f"instruction number {number} repeats line {seen[number]}", columns["Instruction Number"])
            ok = False
        seen.setdefault(number, row.line)
        if not task:
            writer.problems.add(row, "empty", columns["Instruction"])
            ok = False
        try:
            constraints = parse_numbered(text)
        except ValueError as exc:
            writer.problems.add(row, str(exc), columns["Constraints"])
            continue
        if not constraints:
            writer.problems.add(row, "no numbered constraints", columns["Constraints"])
            continue
        try:
            expected = int(count)
        except ValueError:
            writer.problems.add(row, f"a whole number is expected, got {count!r}", columns["Number of Constraints"])
            continue
        if expected != len(constraints):
            writer.problems.add(row, f"{len(constraints)} numbered constraints, but 'Number of Constraints' says "
                                f"{expected}", columns["Constraints"])
            continue
        if ok:
            guard(writer.problems, row, None, lambda: writer.instruction(
                number, domain=domain, condition=condition, task=task, constraints=constraints, article_a=None,
                article_b=None))

