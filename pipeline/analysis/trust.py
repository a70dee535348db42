"""How far a constraint's outcome on one text can be trusted: did its judges agree, and was each
Yes backed by a quote found in the text.

One definition, shared by the app's Audit list and verdict table, the suspicion ranking
(pipeline.analysis.suspicion) and the reports. It agrees with the store's per-text totals
(pipeline.store.scores ``text_items``): ``split`` is their ``disagree`` (raters differ) and
``unquoted`` counts Yes verdicts whose quote was looked for and not found.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Trust:
    """The raters' latest verdicts on one (text, constraint). Missing verdicts are no verdict:
    counted apart, never as No."""

    yes: int = 0
    no: int = 0
    missing: int = 0  # raters with no usable verdict
    unquoted: int = 0  # Yes verdicts whose quote is not in the text
    fuzzy: int = 0  # Yes verdicts whose quote matched only approximately

    @property
    def judged(self) -> int:
        return self.yes + self.no

    @property
    def split(self) -> bool:
        """The judges disagree: some said Yes and some No."""
        return self.yes > 0 and self.no > 0

    @property
    def agreed(self) -> bool:
        return self.judged > 0 and not self.split

    @property
    def mean(self) -> float | None:
        """The judges' mean verdict (Yes = 1); None when none judged (a missing verdict is no No)."""
        return self.yes / self.judged if self.judged else None

    @property
    def marks(self) -> str:
        """A short mark for tables: '' when unanimous and every Yes quoted; else what is wrong."""
        parts = []
        if self.split:
            parts.append(f"split {self.yes}-{self.no}")
        if self.unquoted:
            parts.append("unquoted" if self.unquoted == 1 else f"{self.unquoted} unquoted")
        return " · ".join(parts)
