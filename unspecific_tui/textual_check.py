"""The Textual versions the app's private overrides were written for, checked at start-up.

Three widgets and the app reach into Textual's private API for speed: the Audit list
(widgets/constraint_list.py) overrides DataTable's ``render_line`` and ``_update_dimensions``, draws
its rows as ``_render_line_in_row`` would, and reads its private attributes; the text pane
(widgets/text_pane.py) calls ``_scroll_update`` and writes ``_border_subtitle`` (to repaint its
bottom row alone); the key footer (widgets/footer.py) builds ``textual.widgets._footer.FooterKey``
and waits on ``Footer._bindings_ready``; the app (app_paint.py) hooks its paint, ``_display``
(``after_paint``), and quitting walks ``_screen_stacks``. Private names change without notice, so
each use is guarded by ``private_api_ok()``: outside the tested versions, or with a name gone, the
app says so once and falls back to the stock behaviour (DataTable's own drawing, a plain
``virtual_size`` update, Textual's call_after_refresh and collections whenever they fall, the
current mode's screens). tests/test_textual_check.py fails when the installed Textual leaves the
range, so a version bump is a decision made with the overrides re-tested.
"""

from __future__ import annotations

import re
from functools import cache

# [low, high): the Textual releases the overrides were written and tested against (pyproject's bound).
TESTED_FROM = (8, 0)
TESTED_BELOW = (9,)
# What the overrides read on a DataTable, a Widget and the App.
DATA_TABLE_NAMES = (
    "_update_dimensions", "_render_line", "_get_offsets", "_row_locations", "_header_row_key",
    "_show_hover_cursor",
    "_update_count", "_pseudo_class_state", "_get_styles_to_render_cell", "_labelled_row_exists",
    "_row_label_column_width", "_total_row_height",
)
WIDGET_NAMES = ("_scroll_update",)
WIDGET_INSTANCE_NAMES = ("_border_subtitle",)  # the text pane repaints its subtitle row alone
FOOTER_NAMES = ("_bindings_ready",)  # on a Footer: the key footer lays out its keys once they are known
# Private modules imported by name: the key footer builds Textual's own key widget.
PRIVATE_MODULES = (("textual.widgets._footer", "FooterKey"),)
APP_HOOKS = ("_display",)  # on the App class
APP_NAMES = ("_screen_stacks",)  # on a running app


def textual_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # only when checked: some 30 ms to import

    try:
        return version("textual")
    except PackageNotFoundError:  # a source checkout: the module says
        import textual

        return str(getattr(textual, "__version__", "0"))


def release(text: str) -> tuple[int, ...]:
    """The leading numbers of a version string: "8.2.8" -> (8, 2, 8); "9.0.0a1" -> (9, 0, 0)."""
    match = re.match(r"\d+(?:\.\d+)*", text)
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


def in_tested_range(text: str) -> bool:
    return TESTED_FROM <= release(text) < TESTED_BELOW


def missing_names() -> list[str]:
    """The private names the overrides use that this Textual does not have."""
    from textual.app import App
    from textual.widget import Widget
    from textual.widgets import DataTable

    table: DataTable[object] = DataTable()
    gone = [f"DataTable.{n}" for n in DATA_TABLE_NAMES if not hasattr(table, n)]
    gone += [f"Widget.{n}" for n in WIDGET_NAMES if not hasattr(Widget, n)]
    gone += [f"Widget.{n}" for n in WIDGET_INSTANCE_NAMES if not hasattr(Widget(), n)]
    gone += [f"App.{n}" for n in APP_HOOKS if not hasattr(App, n)]
    from textual.widgets import Footer

    footer = Footer()
    gone += [f"Footer.{n}" for n in FOOTER_NAMES if not hasattr(footer, n)]
    gone += [f"{module}.{name}" for module, name in PRIVATE_MODULES if private_import(module, name) is None]
    return gone


def private_import(module: str, name: str) -> object | None:
    """``name`` from a private Textual module, or None when it moved."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None


@cache
def private_api_problem() -> str | None:
    """Why the private overrides are off (a sentence for the user), or None when they are on."""
    found = textual_version()
    low, high = ".".join(map(str, TESTED_FROM)), ".".join(map(str, TESTED_BELOW))
    if not in_tested_range(found):
        why = f"Textual {found} is outside {low} to below {high}, the versions they were written for"
    elif gone := missing_names():
        why = f"Textual {found} no longer has {', '.join(gone)}"
    else:
        return None
    return (f"{why}: the Audit list and the text panes fall back to Textual's stock drawing and scrolling "
            f"(slower on long lists). Install textual>={low},<{high} to restore them.")


def private_api_ok() -> bool:
    return private_api_problem() is None


def app_names_ok(app: object) -> bool:
    """Whether the running app has the private names quitting walks (checked on the instance)."""
    return private_api_ok() and all(hasattr(app, n) for n in APP_NAMES)
