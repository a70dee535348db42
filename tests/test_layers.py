"""The screens read and write the store only through typed functions (pipeline.store.queries,
unspecific_tui.data): a schema change never reaches a screen, and no screen re-implements a
rule the pipeline owns (the latest verdict, flipped). The pipeline never imports the app: only
the commands that open it do, inside the function that opens it. The scripted fakes
(tests.fakes) never leak into a real run: only the dry-run estimator uses them, when it prices."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pipeline.store import queries

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


def _package_of(path: Path) -> str:
    """The package a relative import in ``path`` starts from ("" outside the repo)."""
    try:
        parts = path.relative_to(ROOT).with_suffix("").parts
    except ValueError:
        return ""
    return ".".join(parts[:-1])


def _imports(path: Path, package: str | None = None) -> list[tuple[int, bool, list[str]]]:
    """(line, at module level, absolute names) of each import in ``path``, static or by name.
    ``from a import b`` names both ``a`` and ``a.b`` (b may be a module); relative imports are
    resolved against ``package``, by default the file's."""
    tree = ast.parse(path.read_text(), filename=str(path))
    nested = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f) if n is not f}
    package = _package_of(path) if package is None else package
    hits = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)] if package else []
                base = ".".join([*up, base] if base else up)
            names = [base] + [f"{base}.{a.name}" if base else a.name for a in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        if names:
            hits.append((node.lineno, id(node) not in nested, names))
    return sorted(hits, key=lambda h: h[0])


def _under(name: str, top: str) -> bool:
    return name == top or name.startswith(top + ".")


def _app_imports(path: Path) -> list[tuple[int, bool]]:
    """(line, at module level) of each import of unspecific_tui in ``path``, static or by name."""
    return [(line, top) for line, top, names in _imports(path)
            if any(_under(n, "unspecific_tui") for n in names)]


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


# The scripted fakes: tests, benches and the dry-run estimator (its placeholder replies) use them;
# a real run never loads them, and nothing uses their old homes.
TESTING = "tests.fakes"
USES_THE_FAKES = {"pipeline/stages/estimate.py"}
OLD_FAKES = ("pipeline.fake_server", "pipeline.fake_responders", "build_fakes")
PRODUCTION = [p for p in PIPELINE if p.relative_to(ROOT).parts[:2] != ("pipeline", "testing")]
EVERYWHERE = sorted(p for d in ("pipeline", "unspecific_tui", "tests", "bench") for p in (ROOT / d).rglob("*.py"))


@pytest.mark.parametrize("path", PRODUCTION, ids=[str(p.relative_to(ROOT)) for p in PRODUCTION])
def test_real_runs_never_import_the_fakes(path: Path) -> None:
    name = path.relative_to(ROOT).as_posix()
    hits = [(line, top) for line, top, names in _imports(path) if any(_under(n, TESTING) for n in names)]
    if name in USES_THE_FAKES:
        assert hits, f"{name} no longer uses the fakes: take it off USES_THE_FAKES"
        assert not [line for line, top in hits if top], f"{name} imports {TESTING} when it loads"
    else:
        assert hits == [], f"{name} imports {TESTING} (lines {[line for line, _ in hits]})"


def test_loading_every_pipeline_module_leaves_the_fakes_unloaded() -> None:
    import subprocess
    import sys

    modules = []
    for p in PRODUCTION:
        parts = p.relative_to(ROOT).with_suffix("").parts
        if parts[-1] != "__main__":
            modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            f"print(sorted(m for m in sys.modules if m == {TESTING!r} or m.startswith({TESTING + '.'!r})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"loading the pipeline loaded the fakes: {out.stdout.strip()}"


def test_nothing_imports_the_fakes_old_homes() -> None:
    hits = [f"{path.relative_to(ROOT)}:{line} {n}" for path in EVERYWHERE for line, _, names in _imports(path)
            for n in names if any(_under(n, old) for old in OLD_FAKES)]
    assert hits == [], f"imports of the fakes from where they no longer live: {hits}"


def test_the_fakes_old_homes_are_gone() -> None:
    left = [p for p in ("pipeline/fake_server.py", "pipeline/fake_responders.py", "tests/build_fakes.py")
            if (ROOT / p).exists()]
    assert left == [], f"no shims: {left}"


def test_the_fakes_import_check_sees_relative_forms(tmp_path) -> None:
    assert _package_of(ROOT / "pipeline" / "cli" / "x.py") == "pipeline.cli"
    probe = tmp_path / "probe.py"
    probe.write_text("from ..testing import responders\nfrom .. import testing\nfrom ..llm import X\n"
                     "import tests.fakes.fake_server\nfrom . import testing\n"
                     "def f():\n    from .testing.responders import ScriptedModel\n")
    as_cli = [(line, top) for line, top, names in _imports(probe, "pipeline.cli")
              if any(_under(n, TESTING) for n in names)]
    assert as_cli == [(1, True), (2, True), (4, True)]
    as_pipeline = [(line, top) for line, top, names in _imports(probe, "pipeline")
                   if any(_under(n, TESTING) for n in names)]
    assert as_pipeline == [(4, True), (5, True), (7, False)]


# One unit runner (pipeline.stages.units) for build, evaluate and naturalness: no module grows a second
# one, with its own failure policy, summary or budget.
RUNNER = "pipeline/stages/units.py"
RUNNER_NAMES = re.compile(r"^_*run_?units?$|^_*unit_?runner$", re.IGNORECASE)
RUNNER_TYPES = {"StageSummary", "Budget", "FailurePolicy", "RunUsage"}


def _runner_definitions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and RUNNER_NAMES.match(node.name):
            found.append(f"def {node.name} (line {node.lineno})")
        elif isinstance(node, ast.ClassDef) and node.name in RUNNER_TYPES:
            found.append(f"class {node.name} (line {node.lineno})")
    return found


@pytest.mark.parametrize("path", PIPELINE, ids=[str(p.relative_to(ROOT)) for p in PIPELINE])
def test_only_pipeline_units_defines_a_unit_runner(path: Path) -> None:
    name = path.relative_to(ROOT).as_posix()
    found = _runner_definitions(path)
    if name == RUNNER:
        assert "def run_units" in " ".join(found) and "class StageSummary" in " ".join(found)
    else:
        assert found == [], f"{name} defines a unit runner of its own ({found}): use pipeline.stages.units"
