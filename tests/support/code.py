"""Reading the project's code: the lines that are code, not docstrings or comments."""

from __future__ import annotations

import ast
from pathlib import Path


def code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the lines of ``path`` that are code, not docstrings or comments."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value,
                                                          ast.Constant) and isinstance(first.value.value,
                                                                                       str):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return [(i, line.split("#")[0]) for i, line in enumerate(path.read_text().splitlines(), 1)
            if i not in docstrings]


def offenders(found: dict[str, object]) -> str:
    """One line per offending file (its name and what it does): a static rule's one assertion message."""
    return "\n".join(f"  {name}: {what}" for name, what in found.items())
