"""Where the auditor is, carried from screen to screen: the one thing the screens share with the app.

The screens import it from here, plainly; the app imports the screens (through
``screens/registry.py``), so neither imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.screen import Screen

from pipeline.store.view import Writer


@dataclass(frozen=True)
class Context:
    """Where the auditor is: the instruction, the response (its writer: model and mode), the
    summary ratio and the constraint. A screen that shows one offers it as ``context()``; the app
    keeps the last one offered, and Audit, Compare, Instructions and Annotate open on it."""

    instruction_id: int | None = None
    writer: Writer | None = None
    ratio: float | None = None
    constraint_id: int | None = None

    def target(self) -> tuple[int, Writer | None, int | None] | None:
        """Where Audit and Compare open next (the navigator's target); None when nowhere yet."""
        if self.instruction_id is None:
            return None
        return (self.instruction_id, self.writer, self.constraint_id)


def context_of(screen: Screen) -> Context | None:
    """What ``screen`` shows now (its ``context()``), or None when it shows no instruction."""
    offered = getattr(screen, "context", None)
    if callable(offered):
        found = offered()
        return found if isinstance(found, Context) else None
    return None
