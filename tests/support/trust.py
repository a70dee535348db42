"""pipeline.analysis.trust.Trust counted in Python from a list of verdicts: what the tests check the
store's per-item counts (pipeline.store.suspicion, the Evidence the queue builds) against."""

from __future__ import annotations

from collections.abc import Iterable

from pipeline.analysis.trust import Trust
from pipeline.store.verdicts import Verdict


def text_trust(verdicts: Iterable[Verdict]) -> Trust:
    """Trust of the verdicts given, which should be the latest (or shown) verdict of each rater on
    one (text, constraint): pipeline.store.verdicts.shown_verdicts rows of that pair."""
    yes = no = missing = unquoted = fuzzy = 0
    for v in verdicts:
        if v.verdict is None:
            missing += 1
        elif v.verdict:
            yes += 1
            if v.quote_found == "missing":
                unquoted += 1
            elif v.quote_found == "fuzzy":
                fuzzy += 1
        else:
            no += 1
    return Trust(yes, no, missing, unquoted, fuzzy)
