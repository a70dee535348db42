"""The architecture, kept by tests.

- ``pipeline/`` is laid out in rooms, each importing only the rooms below it (no cycle): core,
  store, llm, analysis, stages, importing, outputs, cli. Each room's docstring says what lives
  there and what it may import.
- SQL runs only in ``pipeline/store/``: no other module of the pipeline or the app executes a
  statement or holds one. The app gets the store's read-only view, never a connection.
- The pipeline never imports the app: only the commands that open it do, inside the function that
  opens it.
- The scripted fakes (tests/fakes) never reach a real run: no production module imports them.
- No module of the pipeline or the app is over 600 lines; the report computes in analysis and draws
  in outputs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.support.code import code_lines, offenders

ROOT = Path(__file__).parent.parent
APP = sorted((ROOT / "unspecific_tui").rglob("*.py"))
ROOMS = ["core", "store", "llm", "analysis", "stages", "importing", "outputs", "cli"]
# A statement, or a call that runs one. Docstrings and comments may name tables; code may not.
SQL = re.compile(r"""(\.execute(many|script)?\(|\bstore\.(one|query|scalar)\(|\bconn\b\.|"""
                 r"""["'](SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|PRAGMA|WITH)\s)""")


OUTSIDE_STORE = [p for p in sorted((ROOT / "pipeline").rglob("*.py"))
                 if p.relative_to(ROOT).parts[1] != "store"] + APP


def _hits(path: Path, pattern: re.Pattern[str]) -> list[str]:
    """'line: code' of each code line of ``path`` (not docstring, not comment) ``pattern`` finds."""
    return [f"{i}: {line.strip()}" for i, line in code_lines(path) if pattern.search(line)]


def _probe(tmp_path: Path, code: str, pattern: re.Pattern[str]) -> list[int]:
    """The lines of ``code`` a check with ``pattern`` flags: each check proves it sees what it forbids."""
    probe = tmp_path / "probe.py"
    probe.write_text(code)
    return [i for i, line in code_lines(probe) if pattern.search(line)]


# A connection leaving the store, in any spelling: ``store.conn`` read or passed (``f(store.conn)``,
# ``conn=view._store.conn``), a ``conn`` taken as an argument or named at all, ``getattr(x, "conn")``.
CONNECTION = re.compile(r"""\bconn\b|["']conn["']""")
# The app reads through StoreView, handing the view itself to pipeline.analysis (a StoreReader), and
# writes through the narrow writer the store offers (pipeline.store.app_writer.AppWriter; the stages
# open their own store): it never opens a Store, names the type, or takes the one behind a view
# (``store_of``, a view's ``_store``, the old ``analysis_store``).
HOLDS_A_STORE = re.compile(r"\bopen_store\b|\bStore\b|pipeline\.store\.database\b|\bstore\.database\b"
                           r"|\banalysis_store\b|\bstore_of\b|\._store\b")


class Rule(NamedTuple):
    """What no code line of ``files`` may hold (``pattern``), and what to do instead. ``probe``:
    code whose lines ``flagged`` break the rule, so the check proves it sees what it forbids."""

    files: list[Path]
    pattern: re.Pattern[str]
    instead: str
    probe: str = ""
    flagged: tuple[int, ...] = ()


RULES = {
    "sql": Rule(OUTSIDE_STORE, SQL, "runs SQL of its own (put it in pipeline/store/)",
                '"""Reads the verdicts table: SELECT nothing here."""\n'
                'x = store.conn.execute("SELECT 1")\n'
                '# SELECT in a comment\n'
                'rows = store.query("SELECT * FROM t")\n'
                'label = "Select a model"\n', (2, 4)),
    "connection": Rule(OUTSIDE_STORE, CONNECTION,
                       "takes the store's connection (call a pipeline.store function)",
                       '"""Never passes store.conn out."""\n'
                       "refresh_text_scores(store.conn)\n"
                       "f(x, conn=view._store.conn)\n"
                       "def g(conn):\n"
                       "    pass\n"
                       "c = getattr(store, 'conn')\n"
                       "connection_count = 1  # conn in a comment\n"
                       "reconnect(store)\n", (2, 3, 4, 6)),
    "store": Rule(APP, HOLDS_A_STORE, "holds a Store (read through StoreView, write through the writer)",
                  '"""Holds no Store: it reads through StoreView."""\n'
                  "store = open_store(path)\n"
                  "queue = suspicion_queue(view.analysis_store)\n"
                  "def f(store: Store) -> None:\n"
                  "    pass\n"
                  "store = store_of(view)\n"
                  "rows = similarity(self.app.view._store)\n"
                  "from pipeline.store.database import now\n"
                  "view = StoreView.open(path)  # a Store in a comment\n"
                  "queue = suspicion_queue(view)\n"
                  "self.show_error(StoreError.title, 'the store is busy')\n", (2, 3, 4, 6, 7, 8)),
    "sqlite": Rule(APP, re.compile(r"\bconn\b|sqlite3|sqlite_utils"), "reaches past the store's view"),
}


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def _ruleoffenders(rule: Rule) -> dict[str, object]:
    """Every file of the rule that breaks it, with its lines that do."""
    return {_name(p): hits for p in rule.files if (hits := _hits(p, rule.pattern))}


@pytest.mark.parametrize("rule", RULES)
def test_code_keeps_to_the_rule(rule: str) -> None:
    found = _ruleoffenders(RULES[rule])
    assert found == {}, f"{len(found)} file(s) {RULES[rule].instead}:\n{offenders(found)}"


def test_a_rule_lists_every_offender_at_once(tmp_path: Path) -> None:
    files = []
    for name, code in (("a.py", 'x = store.conn.execute("SELECT 1")\n'), ("b.py", "y = 1\n"),
                       ("c.py", 'rows = store.query("SELECT * FROM t")\n')):
        (tmp_path / name).write_text(code)
        files.append(tmp_path / name)
    found = _ruleoffenders(RULES["sql"]._replace(files=files))
    assert sorted(found) == [str(tmp_path / "a.py"), str(tmp_path / "c.py")]


@pytest.mark.parametrize("rule", [name for name, rule in RULES.items() if rule.probe])
def test_each_check_sees_what_it_forbids(rule: str, tmp_path: Path) -> None:
    assert _probe(tmp_path, RULES[rule].probe, RULES[rule].pattern) == list(RULES[rule].flagged)


def _room_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "pipeline" and parts[1] in ROOMS else None


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


def _imports_of(path: Path, top: str, package: str | None = None) -> list[tuple[int, bool]]:
    """(line, at module level) of each import of ``top`` in ``path``, static or by name."""
    return [(line, level) for line, level, names in _imports(path, package)
            if any(_under(n, top) for n in names)]


def _imported_only_when_used(paths: list[Path], top: str, users: set[str], listed: str, use: str) -> None:
    """Each of ``paths`` imports ``top`` only when it is one of ``users`` (named in ``listed``, as those
    that ``use`` it), and then inside the function that needs it, never when it loads: every file that
    does otherwise, listed in one assertion."""
    found: dict[str, str] = {}
    for path in paths:
        name = path.relative_to(ROOT).as_posix()
        hits = _imports_of(path, top)
        if name in users and not hits:
            found[name] = f"no longer {use}: take it off {listed}"
        elif name in users and [line for line, level in hits if level]:
            found[name] = f"imports {top} when it loads"
        elif name not in users and hits:
            found[name] = f"imports {top} (lines {[line for line, _ in hits]})"
    assert found == {}, f"{len(found)} file(s):\n{offenders(found)}"


def test_pipeline_never_imports_the_app() -> None:
    _imported_only_when_used(PIPELINE, "unspecific_tui", OPENS_THE_APP, "OPENS_THE_APP", "opens the app")


def test_the_app_import_check_sees_every_form(tmp_path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import unspecific_tui\nfrom unspecific_tui.app import X\nimport importlib\n"
                     "importlib.import_module('unspecific_tui.data')\nimport unspecific_tuition\n"
                     "def f():\n    from unspecific_tui import app\n")
    assert _imports_of(probe, "unspecific_tui") == [(1, True), (2, True), (4, True), (7, False)]


# The scripted fakes: tests and benches use them; a real run never loads them (the dry run's
# placeholder replies are a production module of their own, pipeline.llm.placeholders), and
# nothing uses their old homes.
TESTING = "tests.fakes"
USES_THE_FAKES: set[str] = set()
OLD_FAKES = ("pipeline.fake_server", "pipeline.fake_responders", "build_fakes", "pipeline.testing",
             "pipeline.synthetic")
PRODUCTION = PIPELINE
EVERYWHERE = sorted(p for d in ("pipeline", "unspecific_tui", "tests", "bench")
                    for p in (ROOT / d).rglob("*.py"))


def test_real_runs_never_import_the_fakes() -> None:
    _imported_only_when_used(PRODUCTION, TESTING, USES_THE_FAKES, "USES_THE_FAKES", "uses the fakes")


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
    left = [p for p in ("pipeline/fake_server.py", "pipeline/fake_responders.py", "tests/build_fakes.py",
                        "pipeline/testing", "pipeline/synthetic.py") if (ROOT / p).exists()]
    assert left == [], f"no shims: {left}"


def test_the_fakes_import_check_sees_every_form(tmp_path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from tests.fakes import responders\nfrom tests import fakes\nfrom "
                     "pipeline.llm import X\nimport tests.fakes.fake_server\nimport testsuite\n"
                     "def f():\n    from tests.fakes.responders import ScriptedModel\n")
    assert _imports_of(probe, TESTING, "pipeline.cli") == [(1, True), (2, True), (4, True), (7, False)]


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


def test_only_pipeline_units_defines_a_unit_runner() -> None:
    runner = " ".join(_runner_definitions(ROOT / RUNNER))
    assert "def run_units" in runner and "class StageSummary" in runner
    found = {p.relative_to(ROOT).as_posix(): hits for p in PIPELINE
             if p.relative_to(ROOT).as_posix() != RUNNER and (hits := _runner_definitions(p))}
    assert found == {}, f"{len(found)} file(s) define a unit runner of their own (use {RUNNER}):\n" \
                        f"{offenders(found)}"


ROOMED = [p for p in sorted((ROOT / "pipeline").rglob("*.py"))
          if p.relative_to(ROOT) != Path("pipeline/__init__.py")]


def test_every_module_lives_in_a_room() -> None:
    loose = [p.relative_to(ROOT).as_posix() for p in ROOMED if p.relative_to(ROOT).parts[1] not in ROOMS]
    assert loose == [], f"modules outside the rooms {ROOMS}: {loose}"


def test_each_room_says_what_it_may_import() -> None:
    found = {}
    for room in ROOMS:
        doc = ast.get_docstring(ast.parse((ROOT / "pipeline" / room / "__init__.py").read_text())) or ""
        if len(doc) <= 60:
            found[f"pipeline/{room}/__init__.py"] = "say what lives there and what it may import"
        elif room != "core" and "import" not in doc:
            found[f"pipeline/{room}/__init__.py"] = "say what it may import"
    assert found == {}, offenders(found)


def _upward_imports(path: Path) -> list[str]:
    """The imports of ``path`` (a module in a room) of a room above its own."""
    mine = path.relative_to(ROOT).parts[1]
    if mine not in ROOMS:
        return []  # not in a room: test_every_module_lives_in_a_room says so
    return sorted({f"line {line}: {n}" for line, _, names in _imports(path) for n in names
                   if (room := _room_of(n)) is not None and ROOMS.index(room) > ROOMS.index(mine)})


def test_rooms_import_only_rooms_below() -> None:
    found = {p.relative_to(ROOT).as_posix(): hits for p in ROOMED if (hits := _upward_imports(p))}
    assert found == {}, f"{len(found)} module(s) import a room above their own:\n{offenders(found)}"


def test_the_room_check_sees_upward_imports(tmp_path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from pipeline.stages.judging import x\ndef f():\n    import pipeline.cli.common\n")
    names = [n for _, _, ns in _imports(probe, "pipeline.store") for n in ns]
    assert {_room_of(n) for n in names} == {"stages", "cli"}


# The app's modules import each other without a cycle (the app imports its screens through their
# registry; a screen takes the Context from unspecific_tui.context and imports the app's type for the
# type checker only). Every import counts: at module level or inside a function, absolute or relative,
# ``from package import module``, ``import_module`` with a literal name; an import by a computed name
# (which no check can follow) is allowed only where it names no module of the app.
def _app_module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _typing_only(tree: ast.Module) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:`` (never run)."""
    return {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}


def _runtime_imports(path: Path, package: str | None = None) -> set[str]:
    """The app modules ``path`` imports at run time, anywhere in it (not under ``if TYPE_CHECKING``):
    every form ``_imports`` reads, a relative import resolved against ``package`` (the file's)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    typing_only = _typing_only(tree)
    typing_lines = {n.lineno for n in ast.walk(tree)
                    if id(n) in typing_only and isinstance(n, (ast.Import, ast.ImportFrom))}
    modules = {_app_module(p) for p in APP}
    found = {n for line, _, names in _imports(path, package) if line not in typing_lines for n in names
             if n in modules}
    return found - ({_app_module(path)} if path.is_relative_to(ROOT) else set())


# The computed imports the app keeps, each naming no module of the app: a stage's pipeline module
# (stages.py) and Textual's private modules, behind the guard (textual_check.py).
COMPUTED_IMPORTS = {"unspecific_tui/stages.py", "unspecific_tui/textual_check.py"}


def _computed_imports(path: Path) -> list[int]:
    """The lines of ``path`` importing by a name that is not a literal (``import_module(name)``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            literal = bool(node.args) and isinstance(node.args[0], ast.Constant)
            if called in ("import_module", "__import__") and not literal:
                lines.append(node.lineno)
    return sorted(lines)


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (module -> modules it imports), or []."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_the_app_has_no_import_cycle() -> None:
    graph = {_app_module(p): _runtime_imports(p) for p in APP}
    cycle = _cycle(graph)
    assert cycle == [], f"an import cycle in the app: {' -> '.join(cycle)}"


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []


def test_the_cycle_check_sees_every_import(tmp_path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from typing import TYPE_CHECKING\nimport unspecific_tui.data\n"
                     "from unspecific_tui import messages\nfrom . import following\n"
                     "if TYPE_CHECKING:\n    from unspecific_tui.app import UnspecificApp\n"
                     "def f():\n    from unspecific_tui.context import Context\n"
                     "    import importlib\n    importlib.import_module('unspecific_tui.stages')\n")
    assert _runtime_imports(probe, "unspecific_tui") == {
        "unspecific_tui", "unspecific_tui.data", "unspecific_tui.messages", "unspecific_tui.following",
        "unspecific_tui.context", "unspecific_tui.stages"}


def test_the_app_imports_by_no_computed_name() -> None:
    found: dict[str, str] = {}
    for path in APP:
        name = path.relative_to(ROOT).as_posix()
        lines = _computed_imports(path)
        if name in COMPUTED_IMPORTS and not lines:
            found[name] = "no longer imports by a computed name: take it off COMPUTED_IMPORTS"
        elif name not in COMPUTED_IMPORTS and lines:
            found[name] = (f"imports by a computed name (lines {lines}), which the cycle check cannot "
                           "follow: import it plainly (the screens: screens/registry.py)")
    assert found == {}, offenders(found)


def test_the_computed_import_check_sees_one(tmp_path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import importlib\nimportlib.import_module('a.b')\n"
                     "def f(name):\n    return importlib.import_module(f'unspecific_tui.screens.{name}')\n"
                     "__import__(name)\n")
    assert _computed_imports(probe) == [4, 5]


# Helpers the tests share live in tests/support/ (and tests/fakes/): no test module
# imports another, so running one file never runs or depends on another's module.
TEST_MODULES = sorted((ROOT / "tests").glob("test_*.py"))


def test_no_test_module_imports_another() -> None:
    hits = [f"{p.name}:{line} {n}" for p in TEST_MODULES for line, _, names in _imports(p) for n in names
            if re.fullmatch(r"(tests\.)?test_\w+", n)]
    assert hits == [], f"put shared helpers in tests/support/: {hits}"


# Rooms a reader can hold: no module of the pipeline or the app over 600 lines. A module that grows
# past it is split by concern (Audit: its parts in widgets/audit/; the report's numbers in
# pipeline.analysis.report_model apart from its drawing in pipeline.outputs.report; the local model's
# file, server and health), not trimmed.
MAX_LINES = 600
KEPT_SMALL = PIPELINE + APP


def test_no_module_over_600_lines() -> None:
    found = {str(p.relative_to(ROOT)): f"{n} lines" for p in KEPT_SMALL
             if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert found == {}, f"modules over {MAX_LINES} lines (split them by concern):\n{offenders(found)}"


# Classes a reader can hold: none in the app over 300 lines. A class that grows past it is split by
# concern: a screen into parts that own their state and speak by messages (Audit: the head, the list,
# the detail and the follower in widgets/audit/; Build: the runs, the stage table, the progress line,
# what was written and the runner in widgets/build/; Annotate: the items, the judge check and the side
# panel in widgets/annotate/; Compare: the two sides in widgets/compare/), not into mixins sharing the
# screen's state.
MAX_CLASS_LINES = 300


def test_no_app_class_over_300_lines() -> None:
    over = {}
    for path in APP:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    over[node.name] = (str(path.relative_to(ROOT)), size)
    assert not over, f"classes over {MAX_CLASS_LINES} lines: {over}"


# A screen is read with the project's classes it builds on: no screen over 400 lines with them, and no
# screen built on project classes but AppScreen (mixins sharing the screen's state; parts are composed
# instead). The screens still built so (issue 50) are named here: the lists only shrink (Compare, the
# last, composes its sides since).
MAX_SCREEN_LINES = 400
LONG_SCREENS: set[str] = set()
MIXED_SCREENS: set[str] = set()
SCREEN_BASE = "AppScreen"


def _app_classes(paths: list[Path]) -> dict[str, tuple[int, list[str]]]:
    """Each class of ``paths`` by name: its lines and the names of its bases."""
    found = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                bases = [ast.unparse(b).split(".")[-1] for b in node.bases]
                found[node.name] = (node.end_lineno - node.lineno + 1, bases)
    return found


def _screens(classes: dict[str, tuple[int, list[str]]]) -> dict[str, tuple[int, list[str]]]:
    """Each screen (a class built on AppScreen that no class builds on) with its lines and those of the
    project's classes under it, and the project's classes it builds on but AppScreen."""

    def ancestors(name: str) -> list[str]:
        bases = [b for b in classes[name][1] if b in classes]
        return bases + [a for b in bases for a in ancestors(b)]

    built_on = {b for _, bases in classes.values() for b in bases}
    out = {}
    for name in classes.keys() - built_on:
        under = list(dict.fromkeys(ancestors(name)))
        if SCREEN_BASE in under:
            lines = classes[name][0] + sum(classes[a][0] for a in under)
            out[name] = (lines, [a for a in under if a != SCREEN_BASE])
    return out


def test_no_screen_over_400_lines_with_its_bases_nor_built_on_mixins() -> None:
    screens = _screens(_app_classes(APP))
    over = {name: lines for name, (lines, _) in screens.items() if lines > MAX_SCREEN_LINES}
    mixed = {name for name, (_, mixins) in screens.items() if mixins}
    assert "AuditScreen" in screens and over.keys() <= LONG_SCREENS, \
        f"screens over {MAX_SCREEN_LINES} lines with the project's classes they build on: {over}"
    assert mixed <= MIXED_SCREENS, \
        f"screens built on the project's classes but {SCREEN_BASE} (compose parts): {mixed - MIXED_SCREENS}"


def test_the_screen_check_sees_mixins(tmp_path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("class AppScreen(Screen):\n    pass\n\n\nclass State(AppScreen):\n    x = 1\n\n\n"
                     "class Part(State):\n    y = 1\n\n\nclass Shown(Part, State):\n    pass\n\n\n"
                     "class Plain(AppScreen):\n    pass\n")
    screens = _screens(_app_classes([probe]))
    assert screens == {"Shown": (2 + 2 + 2 + 2, ["Part", "State"]), "Plain": (2 + 2, [])}
