"""The screens read and write the store only through typed functions (pipeline.queries,
unspecific_tui.data): a schema change never reaches a screen, and no screen re-implements a
rule the pipeline owns (the latest verdict, flipped). The pipeline never imports the app: only
the commands that open it do, inside the function that opens it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pipeline import queries

ROOT = Path(__file__).parent.parent
SCREENS = sorted((ROOT / "unspecific_tui" / "screens").glob("*.py"))
# CLI modules only parse and print.
CLI = sorted((ROOT / "pipeline" / "cli").glob("*.py"))
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE)\b[^\n]*\b(FROM|INTO|SET)\b|\.execute\(|LATEST_VERDICT"
                 r"|\bstore\.(one|query|scalar)\(")


@pytest.mark.parametrize("path", SCREENS + CLI, ids=[f"{p.parent.name}/{p.name}" for p in SCREENS + CLI])
def test_no_screen_or_cli_module_runs_sql(path: Path) -> None:
    hits = [line.strip() for line in path.read_text().splitlines() if SQL.search(line)]
    assert hits == [], f"{path.name} runs SQL of its own: {hits}"


def test_step_queries_take_only_known_tables(tmp_path) -> None:
    import sqlite3

    conn = sqlite3.connect(tmp_path / "x.sqlite")
    with pytest.raises(ValueError):
        queries.newest_rows(conn, "llm_calls; DROP TABLE runs", 0)
    conn.close()


PIPELINE = sorted((ROOT / "pipeline").rglob("*.py"))
# The commands that open the app (`unspecific tui`, `unspecific demo` without --no-app) import it
# when they run, never when the CLI loads; `serve` starts it as a process.
OPENS_THE_APP = {"pipeline/cli/tui_cmd.py", "pipeline/cli/demo_cmd.py"}


def _app_imports(path: Path) -> list[tuple[int, bool]]:
    """(line, at module level) of each import of unspecific_tui in ``path``, static or by name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    nested = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f) if n is not f}
    hits = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        if any(n == "unspecific_tui" or n.startswith("unspecific_tui.") for n in names):
            hits.append((node.lineno, id(node) not in nested))
    return sorted(hits)


@pytest.mark.parametrize("path", PIPELINE, ids=[str(p.relative_to(ROOT)) for p in PIPELINE])
def test_pipeline_never_imports_the_app(path: Path) -> None:
    name = path.relative_to(ROOT).as_posix()
    hits = _app_imports(path)
    if name in OPENS_THE_APP:
        assert hits, f"{name} no longer opens the app: take it off OPENS_THE_APP"
        assert not [line for line, top in hits if top], f"{name} imports the app when the CLI loads"
    else:
        assert hits == [], f"{name} imports unspecific_tui (lines {[line for line, _ in hits]})"


def test_the_app_import_check_sees_every_form(tmp_path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import unspecific_tui\nfrom unspecific_tui.app import X\nimport importlib\n"
                     "importlib.import_module('unspecific_tui.data')\nimport unspecific_tuition\n"
                     "def f():\n    from unspecific_tui import app\n")
    assert _app_imports(probe) == [(1, True), (2, True), (4, True), (7, False)]
