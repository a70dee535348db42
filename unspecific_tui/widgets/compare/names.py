"""What Compare calls its sides and their writers: the two sides' names, a writer's label (escaped for
Rich markup) and what fills side B when an instruction has one response (said by B's pane, the head
and the `m`/`M`/`d` keys)."""

from __future__ import annotations

from pipeline.store.view import Writer

SIDES = ("a", "b")


def second_writer(writer: Writer | None) -> str:
    """What fills side B when an instruction has one response (``writer``'s): said by B's pane, m and M."""
    other = "direct" if writer is not None and writer.mode == "edit" else "edit"
    return (f"a second model (`unspecific evaluate --models NAME`) or the {other} response mode "
            f"(`unspecific evaluate --mode {other}`) fills side B")


def markup_escape(text: str) -> str:
    return text.replace("[", r"\[")


def writer_label(writer: Writer | None) -> str:
    """The writer's name and mode, escaped for Rich markup ("m1 [edit]" is not a tag)."""
    return markup_escape(writer.label) if writer else "-"
