"""Plain English prose of an exact length, for tests that need a real-looking text (a response,
a summary) where ``"word " * n`` would now be junk: the prose contract refuses a word said over
and over (pipeline.core.text.prose_problem)."""

from __future__ import annotations

_SENTENCES = (
    "The council met on Tuesday to discuss the budget gap.",
    "Residents waited outside the town hall for most of the evening.",
    "Several members argued that the library should stay open.",
    "The mayor said the decision would be made before the summer.",
    "Local shops reported fewer visitors since the bridge was closed.",
    "A teacher asked who would pay for the new school roof.",
    "Officials promised to publish the full report next week.",
    "Many people in the harbour district felt ignored by the plan.",
)


def prose(words: int, start: int = 0, *, one_sentence: bool = False) -> str:
    """``words`` whitespace-separated words of plain prose (the sentences above in turn, from the
    ``start``-th), ending on a full stop; ``one_sentence``: its inner full stops made commas."""
    stream: list[str] = []
    i = start
    while len(stream) < words:
        stream += _SENTENCES[i % len(_SENTENCES)].split()
        i += 1
    text = " ".join(stream[:words]).rstrip(".")
    return (text.replace(".", ",") if one_sentence else text) + "."
