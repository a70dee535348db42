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
WRITTEN = {"pageup": "PgUp", "pagedown": "PgDn", "question_mark": "?", "slash": "/",
           "plus": "+", "minus": "-",
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
    keys = {t for t in tokens
            if (len(t) == 1 and (t.islower() or t.isdigit() or t in "[]/+?!.")) or t in NAMED}
    return tokens, keys


@pytest.mark.parametrize("name", sorted(SCREENS))
def test_help_names_the_screens_keys_and_no_others(name: str) -> None:
    text = (HELP_DIR / f"{name}.md").read_text(encoding="utf-8")
    cls = _screen_class(name)
    mine = _bound(cls)
    app_keys = {k for b in UnspecificApp.BINDINGS if isinstance(b, Binding) for k in _written(b)}
    others = {k for other in ALSO.get(name, ()) for b in _bound(_screen_class(other)) for k in _written(b)}
    # enter selects a table's row on every screen (DataTable's own binding).
    bound = {k for b in mine for k in _written(b)} | app_keys | others | {"esc", "up", "down", "left",
                                                                          "right", "enter"}
    written, keys = _keys_in_help(text)
    unknown = sorted(k for k in keys if k not in bound and not k.isdigit())
    assert not unknown, f"help/{name}.md names keys {name} has not: {unknown}"
    missing = sorted(f"{b.key} ({b.description})" for b in mine if not (_written(b) & written))
    assert not missing, f"help/{name}.md does not name these keys of the screen: {missing}"


# -- every key the help lists does something there ------------------------------------------------

# Keys the help lists that the test does not press: `q` quits, ctrl+p opens Textual's palette.
NOT_PRESSED = {"q", "ctrl+p"}
# How each screen is reached from Build (the app's first screen).
REACH = {"build": (), "instructions": ("2",), "audit": ("3",), "compare": ("4",), "annotate": ("5",),
         "report": ("6",), "queue": ("2", "exclamation_mark")}
# Textual's name of a key as the help writes it.
PRESS = {written: name for name, written in WRITTEN.items()} | {"esc": "escape", "F1": "f1"}


def _listed_keys(name: str) -> list[str]:
    """Every key `?` lists on the screen (its bindings and the app's) and every key its help page
    writes that is bound there, as Textual names them."""
    cls = _screen_class(name)
    mine = _bound(cls)
    app = [b for b in UnspecificApp.BINDINGS if isinstance(b, Binding) and b.description]
    bound = {PRESS.get(k, k) for b in [*mine, *app] for k in _written(b)} | {"escape", "enter"}
    keys = {PRESS.get(k, k) for b in [*mine, *app] for k in b.key.split(",")}
    _, written = _keys_in_help((HELP_DIR / f"{name}.md").read_text(encoding="utf-8"))
    keys |= {PRESS.get(k, k) for k in written} & bound
    return sorted(keys - NOT_PRESSED)


async def _reach(app, pilot, name: str):  # noqa: ANN001, ANN202
    """The screen ``name``, from wherever the app is: modals closed, its mode, the queue pushed."""
    from tests.support.app import settle

    while len(app.screen_stack) > 1 and app.screen.is_modal:
        app.pop_screen()
        await pilot.pause()
    mode = "instructions" if name == "queue" else name
    if app.current_mode != mode:
        await app.switch_mode(mode)
    if name == "queue" and type(app.screen).__name__ != "QueueScreen":
        await pilot.press("exclamation_mark")
    elif name != "queue":
        while len(app.screen_stack) > 1:
            app.pop_screen()
            await pilot.pause()
    await settle(app, pilot)
    return app.screen


def _seen(app) -> tuple[object, ...]:  # noqa: ANN001
    """What a key can change: the screen shown, the picture, the notices."""
    return (app.screen, app.export_screenshot(), tuple(n.identity for n in app._notifications))


@pytest.mark.parametrize("name", sorted(SCREENS))
async def test_every_listed_key_changes_something_or_says_something(tmp_path, name: str) -> None:
    """On a store with two models and one ratio, each key `?` lists on the screen (its own, the app's,
    and those its help page writes) changes what is shown or says something: none is silently dead
    (the queue's `2`, Report's `g` at 80x24, Compare's `m` with one response did nothing)."""
    from tests.support.app import settle, synthetic_app

    app = synthetic_app(tmp_path, n_instructions=6, seed=7)
    silent = []
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(app, pilot)
        for key in REACH[name]:
            await pilot.press(key)
            await settle(app, pilot)
        for key in _listed_keys(name):
            screen = await _reach(app, pilot, name)
            before = _seen(app)
            await pilot.press(key)
            await settle(app, pilot)
            await pilot.pause(0.05)
            after = _seen(app)
            if after[0] is screen and after[1:] == before[1:]:
                silent.append(key)
    assert not silent, f"{name}: keys that change nothing and say nothing: {silent}"
