"""The app owns its state in parts (issue 59, item 3): UnspecificApp builds on its state alone
(AppState), never on mixins; its navigation (the context, the target, what n / p follow) is one
object, the Navigator; the analysis and the paint's waiting are parts it composes. Read with the
class it builds on, the app stays under 400 lines."""

from __future__ import annotations

import ast
from pathlib import Path

from unspecific_tui.navigator import Navigator

ROOT = Path(__file__).resolve().parents[1]
APP = sorted((ROOT / "unspecific_tui").rglob("*.py"))
MAX_WITH_BASES = 400


def _classes() -> dict[str, tuple[int, list[str]]]:
    found = {}
    for path in APP:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                found[node.name] = (node.end_lineno - node.lineno + 1,
                                    [ast.unparse(b).split(".")[-1] for b in node.bases])
    return found


def test_the_app_builds_on_its_state_alone_and_stays_short() -> None:
    classes = _classes()
    lines, bases = classes["UnspecificApp"]
    assert bases == ["AppState"], bases  # no AnalysisPart, PaintPart: parts are composed
    assert classes["AppState"][1] == ["App[None]"]
    assert lines + classes["AppState"][0] <= MAX_WITH_BASES


def test_no_screen_or_widget_writes_the_navigation_state() -> None:
    """Only the navigator holds the target and what is followed: no module writes ``app.target``,
    ``app.following`` or ``app.context`` (they are the navigator's, through its methods)."""
    offenders = []
    for path in APP:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if any(f"app.{name} =" in line or f"self.{name} =" in line and path.name == "app.py"
                   for name in ("target", "following", "context")):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, offenders


def test_the_navigator_opens_once_and_follows() -> None:
    nav = Navigator()
    nav.open(3, None, 7)
    nav.arrive("audit", "build")
    assert nav.context.instruction_id == 3 and nav.context.constraint_id == 7
    assert nav.take_target() == (3, None, 7) and nav.take_target() is None
    nav.arrive("compare", "audit")  # arriving without a target: the context's place
    assert nav.take_target() == nav.context.target()
    assert nav.following is None


def test_the_follower_reaches_only_what_it_is_handed() -> None:
    """Audit's follower (the part with the most reads of the app) is handed ``Auditing``: it never
    reaches for ``self.app``."""
    source = (ROOT / "unspecific_tui/widgets/audit/follower.py").read_text()
    assert "self.app" not in source and "class Auditing(Protocol)" in source
