"""What every import format shares: its options, its summary, the rows it read, and the problems
it found (each named by file, line and column, all reported at once, nothing written)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pipeline.core.definitions import DEFAULT_RATIO
from pipeline.core.errors import UnspecificError

FORMATS = ("cs4", "research", "jsonl", "responses", "inspect", "lm-eval")
# Formats whose file is a harness log of an exported benchmark (pipeline.importing.harness_logs).
LOG_FORMATS = ("inspect", "lm-eval")
# Public condition names (export.PUBLIC_CONDITIONS) and the store's own names both work.
CONDITION_NAMES = {"single": "single", "common+none": "none", "common+direct": "direct",
                   "common+eval": "eval",
                   "none": "none", "direct": "direct", "eval": "eval"}
RESPONSE_MODES = ("direct", "edit")
MAX_ERRORS_SHOWN = 30

T = TypeVar("T")


class ImportFailed(UnspecificError):
    title = "Import failed"


@dataclass
class ResearchColumns:
    """Column names of the research code's CSVs, by role, as its writers name them
    (pipeline.importing.research_layouts quotes each writer); an option renames one."""

    id: str = "instruction_number"
    instruction: str = "main_task"  # the main task
    constraints: str = "constraints"
    original: str = "original_constraints"  # a revision's input list
    revised: str = "revised_constraints"
    article: str = "instruction"  # the single source article of a constraints file
    reference: str = "blog1"
    reference_b: str = "blog2"
    base: str = "base_content"
    content: str = "fitted_content"  # a response: the base article edited to fit (mode edit)
    direct: str = "direct_content"  # a response written from the instruction (mode direct)
    model: str = "model_used"
    summary: str = "summarized_content"
    summary_ratio: str = "summary_ratio"  # the research code writes none: --ratio says it
    error: str = "error"  # the summariser's failure note
    results: str = "satisfaction_results"
    num_satisfied: str = "num_satisfied"  # the research count of Yes lines, checked against ours
    eval_model: str = "eval_model"


@dataclass
class ImportOptions:
    format: str
    path: Path
    name: str | None = None  # the import's name (default: the file's stem); its run id is import-<name>
    domain: str | None = None
    condition: str | None = None  # default per format: single (cs4, jsonl), none (research)
    run: str | None = None  # responses: the run (import name or run id) whose instruction ids the file uses
    ratio: float = DEFAULT_RATIO  # research summaries without a ratio column
    evaluated: str = "response"  # checked by import_file; research reads ``judged``
    # research: the text an evaluation judged (default: the row's most derived text)
    judged: str | None = None
    columns: ResearchColumns = field(default_factory=ResearchColumns)
    dry_run: bool = False
    model: str | None = None  # inspect, lm-eval: the model whose responses these are (default: the log's)


@dataclass
class ImportSummary:
    run_id: str
    path: Path
    domain: str | None
    condition: str | None
    rows: int = 0
    added: Counter[str] = field(default_factory=Counter)  # instructions, constraints, responses ...
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> rows
    dry_run: bool = False
    files: list[str] = field(default_factory=list)  # research: each file with its layout and rows
    warnings: list[str] = field(default_factory=list)  # imported anyway, but a person should know


@dataclass(frozen=True)
class Row:
    line: int  # where the row starts in the file (1-based)
    values: dict[str, Any]
    columns: dict[str, int]  # column name -> 1-based column number (CSV); empty for JSONL


class Problems:
    """Every bad row of a file, each named by file, line and column."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[str] = []

    def add(self, row: Row | int, message: str, column: str | None = None) -> None:
        line = row.line if isinstance(row, Row) else row
        where = f"{self.path}:{line}"
        if column is not None:
            number = row.columns.get(column) if isinstance(row, Row) else None
            where += f", column {number} ({column!r})" if number else f", field {column!r}"
        self.items.append(f"{where}: {message}")

    def raise_if_any(self, rows: int) -> None:
        if not self.items:
            return
        shown = self.items[:MAX_ERRORS_SHOWN]
        more = len(self.items) - len(shown)
        raise ImportFailed(
            f"{self.path}: {len(self.items)} problem(s) in {rows} row(s); nothing was imported "
            "(the whole import is rolled back). Fix them and run the same command again:\n" + "\n".join(shown)
            + (f"\n... and {more} more" if more > 0 else ""))


def guard(problems: Problems, row: Row, column: str | None, action: Callable[[], T]) -> T | None:
    """Run one store action for a row; a ValueError becomes that row's problem."""
    try:
        return action()
    except ValueError as exc:
        problems.add(row, str(exc), column)
        return None


def import_run_id(name: str) -> str:
    return f"import-{name}"


def condition_name(value: str | None, default: str) -> str:
    """The store's name of a condition given by its public or store name."""
    name = (value or default).strip().lower()
    if name not in CONDITION_NAMES:
        raise ValueError(f"unknown condition {value!r}: one of single, common+none, "
                         "common+direct, common+eval")
    return CONDITION_NAMES[name]
