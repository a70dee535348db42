"""One home per constant (issue 36, item 4): a number or a list of names the code relies on in
several places is defined once and imported, never written out again.

- The summary-ratio tolerance is ``pipeline.core.definitions.RATIO_TOLERANCE`` (compared through
  ``same_ratio``, or interpolated into the store's SQL): no bare ``1e-9`` anywhere else but as the
  value of a named module constant.
- ``DEFAULT_RATIO`` and ``DEFAULT_RATIOS`` live side by side in ``pipeline.core.definitions``.
- The corpus formats are ``pipeline.core.formats.FORMATS`` / ``BUNDLED``, the import formats
  ``pipeline.importing.common.FORMATS``: no module writes either tuple again.
- The judging modes are ``pipeline.core.definitions.JUDGING_MODES``: no module lists them again, not even
  in part (a list of two of them is how a third one went missing from three commands' choices).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pipeline.core import definitions, formats
from pipeline.importing import common
from tests.support.code import code_lines, offenders

ROOT = Path(__file__).resolve().parents[1]
CODE = sorted(p for d in ("pipeline", "unspecific_tui") for p in (ROOT / d).rglob("*.py"))


def _assignments(tree: ast.AST) -> dict[str, list[ast.expr]]:
    """Module-level names assigned a value, anywhere in the module (a redefinition counts)."""
    out: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.setdefault(node.target.id, []).append(node.value)
    return out


def _tolerance_literals(tree: ast.Module) -> list[int]:
    """Lines holding the literal 1e-9 where it is not a named module constant's value (numerical
    guards such as a norm's 1e-12 are another matter)."""
    named = {id(node.value) for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
             and isinstance(node.value, ast.Constant)}
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, float)
            and node.value == 1e-9 and id(node) not in named]


def _bare_tolerances(path: Path) -> list[str]:
    text = path.read_text()
    bare = [f"line {i}: a bare tolerance; use RATIO_TOLERANCE or name it"
            for i in _tolerance_literals(ast.parse(text))]
    return bare + [f"line {i}: interpolate RATIO_TOLERANCE into the SQL"
                   for i, line in enumerate(text.splitlines(), 1) if re.search(r"<\s*1e-0?9", line)]


def test_the_ratio_tolerance_is_named_once() -> None:
    found = {str(p.relative_to(ROOT)): hits for p in CODE if (hits := _bare_tolerances(p))}
    assert found == {}, offenders(found)


# Names with one home each: (name, the module that defines it).
HOMES = {
    "RATIO_TOLERANCE": "pipeline/core/definitions.py",
    "DEFAULT_RATIO": "pipeline/core/definitions.py",
    "DEFAULT_RATIOS": "pipeline/core/definitions.py",
    "BUNDLED": "pipeline/core/formats.py",
    "JUDGING_MODES": "pipeline/core/definitions.py",
    "DEFAULT_YES_THRESHOLD": "pipeline/core/definitions.py",
    # The suspicion score's weights, the echo rule and the ratio keys' rounding (issue 50).
    "SUSPICION_WEIGHTS": "pipeline/core/definitions.py",
    "ECHO_RULE": "pipeline/core/definitions.py",
    "RATIO_DIGITS": "pipeline/core/definitions.py",
    "SCORE_DIGITS": "pipeline/core/definitions.py",
}


def _strays(path: Path) -> list[str]:
    name = path.relative_to(ROOT).as_posix()
    defined = _assignments(ast.parse(path.read_text()))
    return [f"{n} again (import it from {home})" for n, home in HOMES.items()
            if n in defined and name != home]


def test_each_constant_is_defined_in_its_home_only() -> None:
    found = {str(p.relative_to(ROOT)): strays for p in CODE if (strays := _strays(p))}
    assert found == {}, offenders(found)


def test_the_default_ratios_start_from_the_default_ratio() -> None:
    assert definitions.DEFAULT_RATIOS == (definitions.DEFAULT_RATIO,)
    assert definitions.same_ratio(0.1, 0.1 + definitions.RATIO_TOLERANCE / 2)


def _formats_copies(path: Path) -> list[int]:
    name = path.relative_to(ROOT).as_posix()
    homes = {"pipeline/core/formats.py": formats.FORMATS, "pipeline/importing/common.py": common.FORMATS}
    copies = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) for e in node.elts):
            values = tuple(e.value for e in node.elts)  # type: ignore[attr-defined]
            copies += [node.lineno for home, tup in homes.items() if values == tup and name != home]
    return copies


def test_no_module_writes_a_formats_tuple_out_again() -> None:
    found = {str(p.relative_to(ROOT)): f"lines {lines}: a copy of a FORMATS tuple; import it"
             for p in CODE if (lines := _formats_copies(p))}
    assert found == {}, offenders(found)


def _judging_modes_copies(path: Path) -> list[int]:
    if path.relative_to(ROOT).as_posix() == "pipeline/core/definitions.py":
        return []
    return [node.lineno for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) >= 2
            and all(isinstance(e, ast.Constant) for e in node.elts)
            and {e.value for e in node.elts} <= set(definitions.JUDGING_MODES)]  # type: ignore[attr-defined]


def test_no_module_lists_judging_modes_again() -> None:
    found = {str(p.relative_to(ROOT)): f"lines {lines}: judging modes written out; import JUDGING_MODES"
             for p in CODE if (lines := _judging_modes_copies(p))}
    assert found == {}, offenders(found)


def _flag_name_lists(path: Path) -> list[int]:
    """Lines of ``path`` where a tuple, list, set or dict literal names two or more quality flags: the
    names are listed in pipeline.core.definitions.FLAG_KINDS only (issue 59: they were listed four times)."""
    if path.relative_to(ROOT).as_posix() == "pipeline/core/definitions.py":
        return []
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        elements = (node.keys if isinstance(node, ast.Dict)
                    else node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [])
        named = [e for e in elements if isinstance(e, ast.Constant) and e.value in definitions.FLAG_KINDS]
        if len(named) >= 2:
            lines.append(node.lineno)
    return lines


def test_no_module_lists_flag_names_again() -> None:
    found = {str(p.relative_to(ROOT)): f"lines {lines}: flag names written out; read FLAG_KINDS"
             for p in CODE if (lines := _flag_name_lists(p))}
    assert found == {}, offenders(found)


# Whether a table (or a column) exists is asked in one place, pipeline.store.database.has_table and
# table_columns (issue 59: six modules wrote the query out). Migrations ask through sqlite_utils.
SCHEMA_READS = re.compile(r"sqlite_master|table_info")
SCHEMA_HOME = "pipeline/store/database.py"


def test_whether_a_table_exists_is_asked_in_one_place() -> None:
    found = {str(p.relative_to(ROOT)): [i for i, line in code_lines(p) if SCHEMA_READS.search(line)]
             for p in CODE if p.relative_to(ROOT).as_posix() != SCHEMA_HOME}
    found = {name: f"lines {lines}: use has_table / table_columns" for name, lines in found.items() if lines}
    assert found == {}, offenders(found)
