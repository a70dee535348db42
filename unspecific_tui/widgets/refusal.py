"""The mark of a response that refuses the task ("I'm sorry, but I can't assist with that"): stored
with the generation's refusal flag (pipeline.core.text.is_refusal), scored as the model's answer,
and marked with the same word and colour wherever a screen shows such a response (Instructions,
Audit, Compare), so a 0% reads as a refusal and not as a response that missed every constraint."""

from __future__ import annotations

from rich.text import Text

WORD = "refusal"
STYLE = "bold red"


def refusal_mark(prefix: str = " · ") -> Text:
    """The mark, after ``prefix``."""
    return Text.assemble(prefix, (WORD, STYLE))
