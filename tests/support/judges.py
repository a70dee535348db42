"""Judges that misbehave, for the coverage and judge-stop tests: junk replies and the text flattener."""

from __future__ import annotations

JUNK = "%%%garbage%%% <html>502 upstream</html>"


def flat_text(text: str) -> str:
    """Rich wraps long lines: compare messages with whitespace collapsed."""
    return " ".join(text.replace("│", " ").split())  # rich panels: borders out, wrapped lines joined
