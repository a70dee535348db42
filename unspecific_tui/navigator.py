"""Where the auditor is and is going, owned in one place: the context a screen left (its instruction,
response, ratio, constraint), the target Audit or Compare opens on next, and what Audit's n / p
follow (the suspicion queue, a flag). Screens ask it and tell it through its methods; nothing else
holds these (the app has one Navigator, ``app.nav``)."""

from __future__ import annotations

from dataclasses import replace

from pipeline.store.view import Writer
from unspecific_tui.context import Context
from unspecific_tui.following import Following

Target = tuple[int, Writer | None, int | None]  # instruction, writer (None: any), constraint (None: first)
# The screens that open on the context as a target. Instructions and Annotate follow the context
# themselves when they are shown again (a row, an item); Build and Report keep their own place.
OPEN_ON_CONTEXT = ("audit", "compare")


class Navigator:
    """The context, the target and what is followed."""

    def __init__(self) -> None:
        self.context = Context()  # where the auditor was last: carried from screen to screen
        self._target: Target | None = None  # where Audit / Compare open next
        self._following: Following | None = None

    # -- the context and the target ---------------------------------------------------------
    def left(self, found: Context | None) -> None:
        """A screen was left showing ``found`` (None: nothing to carry)."""
        if found is not None:
            self.context = found

    def arrive(self, mode: str, current: str) -> None:
        """Switching to ``mode`` from ``current``: a target set by ``open`` takes the context's ratio
        and becomes the context; arriving at Audit or Compare otherwise opens on the context."""
        if self._target is not None:
            iid, writer, cid = self._target
            self.context = replace(self.context, instruction_id=iid, writer=writer or self.context.writer,
                                   constraint_id=cid)
        elif mode in OPEN_ON_CONTEXT and mode != current:
            self._target = self.context.target()

    def open(self, instruction_id: int, writer: Writer | None = None,
             constraint_id: int | None = None) -> None:
        """The next screen to arrive opens on this item (``app.open_audit`` / ``open_compare``)."""
        self._target = (instruction_id, writer, constraint_id)

    def take_target(self) -> Target | None:
        """The target for the screen arriving, once (None: stay where it was)."""
        target, self._target = self._target, None
        return target

    @property
    def target(self) -> Target | None:
        return self._target

    # -- what n / p follow ------------------------------------------------------------------
    @property
    def following(self) -> Following | None:
        return self._following

    def follow(self, following: Following) -> None:
        """n / p follow ``following`` from its current stop (the queue screen's enter, `f`)."""
        self._following = following

    def stop_following(self) -> None:
        self._following = None
