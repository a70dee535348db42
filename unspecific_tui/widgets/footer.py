"""The app's footer: the keys that fit, never one cut in half.

Textual's Footer lays every key out on one line and the terminal cuts the rest (at 80 columns
"Audit wha", and the screen keys 1-6 and ``?`` never showed). This one shows, in order, the
app's keys first ("1-6 screens", "? keys": the way to everything else), then the screen's own
keys while they fit whole. ``?`` lists every key, shown here or not.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer

from unspecific_tui.textual_check import private_api_ok, private_import

# The app's six screen keys share this group: the footer shows them as one "1-6 screens" item.
SCREENS_GROUP = Binding.Group("screens", compact=True)


@dataclass(frozen=True)
class Item:
    """One key as the footer shows it: what to press, what it does, the action it runs."""

    key: str
    display: str
    description: str
    action: str
    enabled: bool = True
    tooltip: str = ""

    @property
    def width(self) -> int:
        """Columns taken in the compact style: key, a space, description, a margin of one."""
        return len(self.display) + (1 + len(self.description) if self.description else 0) + 1


def fitting(items: list[Item], width: int) -> list[Item]:
    """The items, in order, that fit whole in ``width`` columns: an item too wide is skipped
    (a later, shorter one may still fit), never cut."""
    shown: list[Item] = []
    used = 0
    for item in items:
        if used + item.width <= width:
            shown.append(item)
            used += item.width
    return shown


class KeyFooter(Footer):
    """Compact footer: the app's keys first, then the screen's keys that fit whole."""

    def __init__(self) -> None:
        super().__init__(compact=True, show_command_palette=False)
        self._laid_out_for = 0

    def items(self) -> list[Item]:
        """Every key to show, app keys first, in the order they should be given room."""
        screen_keys: list[Item] = []
        app_keys: list[Item] = []
        screens_key: Item | None = None
        seen_actions: set[str] = set()
        for node, binding, enabled, tooltip in self.screen.active_bindings.values():
            if not binding.show or binding.action in seen_actions:
                continue
            seen_actions.add(binding.action)
            if binding.group is SCREENS_GROUP:
                if screens_key is None:  # one item for the six: pressing it shows where 1-6 go
                    screens_key = Item(binding.key, "1-6", SCREENS_GROUP.description, "app.help",
                                       tooltip="1 Build · 2 Instructions · 3 Audit · 4 Compare · "
                                               "5 Annotate · 6 Report")
                continue
            item = Item(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                        enabled, tooltip)
            (app_keys if node is self.app else screen_keys).append(item)
        return ([screens_key] if screens_key else []) + app_keys + screen_keys

    def compose(self) -> ComposeResult:
        footer_key = private_import("textual.widgets._footer", "FooterKey") if private_api_ok() else None
        if footer_key is None:  # a Textual the overrides were not written for: the stock footer
            yield from super().compose()
            return
        if not self._bindings_ready:
            return
        width = self.size.width or self.app.size.width
        self._laid_out_for = width
        for item in fitting(self.items(), width):
            yield footer_key(item.key, item.display, item.description, item.action,  # type: ignore[operator]
                             disabled=not item.enabled,
                             tooltip=item.tooltip or item.description).data_bind(compact=Footer.compact)

    def on_resize(self, event: events.Resize) -> None:
        if private_api_ok() and self._bindings_ready and event.size.width != self._laid_out_for:
            self.call_after_refresh(self.recompose)
