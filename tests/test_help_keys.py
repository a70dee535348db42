"""Each screen's help names its keys and only its keys: every key the screen binds (with a
description) is written in its help/*.md, and every key the help writes is bound on the screen, on
the app, or on a screen the help says it opens (Instructions opens the queue, the queue Audit): a
help that promises a key that is not there, or forgets one, fails here."""

from __future__ import annotations

import re

import pytest
from textual.binding import Binding

from unspecific_tui.app import UnspecificApp
from unspecific_tui.screens.help import HELP_DIR

SCREENS = {
    "build": "unspecific_tui.screens.build:BuildScreen",
    "instructions": "unspecific_tui.screens.instructions:InstructionsScreen",
    "audit": "unspecific_tui.screens.audit.screen:AuditScreen",
    "compare": "unspecific_tui.screens.compare:CompareScreen",
    "annotate": "unspecific_tui.screens.annotate:AnnotateScreen",
    "report": "unspecific_tui.screens.report:ReportScreen",
    "queue": "unspecific_tui.screens.queue:QueueScreen",
}
# How a key is written in the help beside how Textual names it.
WRITTEN = {"pageup": "PgUp", "pagedown": "PgDn", "question_mark": "?", "slash": "/", "plus": "+", "minus": "-",
           "left_square_bracket": "[", "right_square_bracket": "]", "full_stop": ".", "exclamation_mark": "!",
           "escape": "escape", "space": "space", "enter": "enter", "tab": "tab"}
NAMED = set(WRITTEN.values()) | {"up", "down", "left", "right", "esc", "ctrl+p", "ctrl+r"}
KEY = re.compile(r"`([^`\s]+)`")
# Screens whose keys a help may name because the screen it describes opens them.
ALSO = {"instructions": ("queue", "audit"), "queue": ("audit",)}
PLAIN = ("space", "enter", "escape", "tab")  # named keys a help may write without backticks


def _screen_class(name: str) -> type:
    import importlib

    module, cls = SCREENS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def _written(binding: Binding) -> set[str]:
    keys = set()
    for key in binding.key.split(","):
        keys.add(WRITTEN.get(key, key))
    if binding.key_display:
        keys.add(binding.key_display)
    return keys


def _bound(cls: type) -> list[Binding]:
    """The screen's own bindings (its classes in unspecific_tui; Textual's focus and copy keys aside)."""
    return [b for klass in reversed(cls.__mro__) if klass.__module__.startswith("unspecific_tui")
            for b in klass.__dict__.get("BINDINGS", []) if isinstance(b, Binding) and b.description]


def _keys_in_help(text: str) -> tuple[set[str], set[str]]:
    """The keys the help writes: (every backticked token that can be a key, with the named keys it
    writes plainly; the ones that must be a key: a lower-case letter, a digit, a sign, a named key)."""
    tokens = {part for token in KEY.findall(text) for part in (token, *token.split("/")) if part}
    tokens |= {word for word in PLAIN if re.search(rf"\b{word}\b", text, re.IGNORECASE)}
    keys = {t for t in tokens if (len(t) == 1 and (t.islower() or t.isdigit() or t in "[]/+?!.")) or t in NAMED}
    return tokens, keys


@pytest.mark.parametrize("name", sorted(SCREENS))
def test_help_names_the_screens_keys_and_no_others(name: str) -> None:
    text = (HELP_DIR / f"{name}.md").read_text(encoding="utf-8")
    cls = _screen_class(name)
    mine = _bound(cls)
    app_keys = {k for b in UnspecificApp.BINDINGS if isinstance(b, Binding) for k in _written(b)}
    others = {k for other in ALSO.get(name, ()) for b in _bound(_screen_class(other)) for k in _written(b)}
    # enter selects a table's row on every screen (DataTable's own binding).
    bound = {k for b in mine for k in _written(b)} | app_keys | others | {"esc", "up", "down", "left", "right", "enter"}
    written, keys = _keys_in_help(text)
    unknown = sorted(k for k in keys if k not in bound and not k.isdigit())
    assert not unknown, f"help/{name}.md names keys {name} has not: {unknown}"
    missing = sorted(f"{b.key} ({b.description})" for b in mine if not (_written(b) & written))
    assert not missing, f"help/{name}.md does not name these keys of the screen: {missing}"
