"""The method's named numbers, defined once (docs/method.md): every stage, metric, screen and
command reads them from here."""

from __future__ import annotations

# A constraint passes a text when its judges' mean verdict is at least this (two judges split
# 1-1 pass). The store's score tables keep it in integers: 2 * yes >= judged.
PASS_THRESHOLD = 0.5
# The summary ratio of Core: a response summarised to 25% of its length.
DEFAULT_RATIO = 0.25


def passes(score: float | None) -> bool:
    """Whether a judges' mean verdict passes; a missing score (no verdict) never does."""
    return score is not None and score >= PASS_THRESHOLD


# The lexical quality flags a build stores per constraint (pipeline.analysis.flags computes them;
# screens and reports list them): named here so a reader of flags needs no text analysis loaded.
LEXICAL_FLAGS = ("proper_noun", "specificity_leak", "copied_ngram", "duplicate")
