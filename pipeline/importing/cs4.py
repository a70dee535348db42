"""CS4's released constraint lists (``Instruction-based Constraints.csv``, ``Story-based
Constraints.csv``): ``Instruction Number``, ``Instruction`` (``Instruction `` in the release),
``Number of Constraints`` and ``Constraints`` (numbered lines "1. ...").

Each release holds 50 tasks at 5 levels of specificity: the same number and task 5 times, with 7,
15, 23, 31 and 39 constraints. A row's key is (number, count): it becomes an instruction whose
``source_id`` is ``number/count`` (``1/7``), and the rows of one number are one instruction family
(pipeline.store.families) with the count as each member's level. Condition ``single`` (CS4
back-translates one story), domain ``story`` unless told.

The release cannot be fixed by the person importing it, so what is off but usable (a list whose
numbering skips, or whose length differs from its stated count; a task left empty on one level) is
imported with a warning naming file and line; only what leaves nothing to store is a problem."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.importing.common import ImportFailed, ImportOptions, Row, condition_name, guard
from pipeline.importing.reading import find_column, read_csv, read_released_list
from pipeline.importing.writer import ImportWriter
from pipeline.store.families import set_family

CS4_COLUMNS = ("Instruction Number", "Instruction", "Number of Constraints", "Constraints")


@dataclass
class _Level:
    """One row: a task at one level of specificity."""

    row: Row
    number: str
    level: int
    task: str
    constraints: list[str]


def cs4_source_id(number: str, level: int) -> str:
    """The id a CS4 row keeps in its import: its number and level (``1/7``)."""
    return f"{number}/{level}"


def _count(value: str) -> int | None:
    """A stated count: "39", or "39.0" as a spreadsheet may save it."""
    try:
        number = float(value)
    except ValueError:
        return None
    return int(number) if number.is_integer() and number > 0 else None


def _read_levels(writer: ImportWriter, rows: list[Row], columns: dict[str, str]) -> list[_Level]:
    """Every usable row; the rest are the import's problems, the oddities its warnings."""
    problems, warnings, where = writer.problems, writer.summary.warnings, writer.problems.path
    levels: list[_Level] = []
    seen: dict[tuple[str, int], int] = {}
    for row in rows:
        number = row.values[columns["Instruction Number"]].strip()
        task = " ".join(row.values[columns["Instruction"]].split())
        stated = row.values[columns["Number of Constraints"]].strip()
        if not number:
            problems.add(row, "empty", columns["Instruction Number"])
            continue
        level = _count(stated) if stated else None
        if stated and level is None:
            problems.add(row, f"a whole number is expected, got {stated!r}", columns["Number of Constraints"])
            continue
        try:
            read = read_released_list(row.values[columns["Constraints"]], level or 0)
        except ValueError as exc:
            problems.add(row, str(exc), columns["Constraints"])
            continue
        if level is None:
            level = len(read.items)
            warnings.append(f"{where}:{row.line}: 'Number of Constraints' is empty; the list's "
                            f"{level} constraints "
                            "are its level")
        if (number, level) in seen:
            problems.add(row, f"instruction number {number} with {level} constraints repeats line "
                         f"{seen[number, level]}", columns["Instruction Number"])
            continue
        seen[number, level] = row.line
        warnings.extend(f"{where}:{row.line}: {note}" for note in read.notes)
        if len(read.items) != level:
            warnings.append(f"{where}:{row.line}: 'Number of Constraints' says {level}, the list holds "
                            f"{len(read.items)}; imported as listed, at level {level}")
        levels.append(_Level(row, number, level, task, read.items))
    return levels


def _fill_tasks(writer: ImportWriter, levels: list[_Level], task_column: str) -> None:
    """A family has one task: a level whose task is empty takes its family's; a family whose levels
    word it differently keeps each level's own, with a warning."""
    tasks: dict[str, list[_Level]] = {}
    for level in levels:
        tasks.setdefault(level.number, []).append(level)
    where = writer.problems.path
    for number, members in tasks.items():
        worded = {m.task for m in members if m.task}
        for member in members:
            if member.task:
                continue
            if len(worded) == 1:
                member.task = next(iter(worded))
                writer.summary.warnings.append(f"{where}:{member.row.line}: the task is empty; the one of "
                                               f"instruction number {number}'s other levels is used")
            else:
                writer.problems.add(member.row, "empty", task_column)
        if len(worded) > 1:
            lines = ", ".join(str(m.row.line) for m in members)
            writer.summary.warnings.append(f"{where}: instruction number {number} words its "
                                           "task differently on "
                                           f"lines {lines}; each level keeps its own")


def import_cs4(writer: ImportWriter, options: ImportOptions, name: str) -> None:
    names, rows = read_csv(options.path)
    located = {c: find_column(names, c) for c in CS4_COLUMNS}
    missing = [c for c, found in located.items() if found is None]
    if missing:
        raise ImportFailed(f"{options.path}:1: not a CS4 constraints file: no column "
                           f"{', '.join(map(repr, missing))} "
                           f"(its columns: {', '.join(map(repr, names))})")
    columns = {c: found for c, found in located.items() if found is not None}
    domain = options.domain or "story"
    condition = condition_name(options.condition, "single")
    writer.summary.domain, writer.summary.condition = domain, condition
    writer.summary.rows = len(rows)
    levels = _read_levels(writer, rows, columns)
    _fill_tasks(writer, levels, columns["Instruction"])
    new_families: set[str] = set()
    for level in levels:
        if not level.task:
            continue  # a problem already
        iid = guard(writer.problems, level.row, None, lambda: writer.instruction(
            cs4_source_id(level.number, level.level), domain=domain, condition=condition, task=level.task,
            constraints=level.constraints, article_a=None, article_b=None))
        if iid is None:
            continue
        added = guard(writer.problems, level.row, columns["Instruction Number"],
                      lambda: set_family(writer.store, iid, level.number, level.level))
        if added:
            new_families.add(level.number)
    if new_families:
        writer.summary.added["families"] += len(new_families)
