"""The Compare screen's parts, each owning its state: ``sides.py`` (side A and side B: each side's
Org and Core totals, its response and its summary, the judges' quotes of the table's constraint
highlighted; the screen hands it a ``Sides`` and the constraint, and the totals follow the app's
analysis) and ``names.py`` (the sides' names, a writer's label, what fills side B). The screen
(unspecific_tui/screens/compare.py) composes them beside its head and its table of constraints.
"""

from unspecific_tui.widgets.compare.names import SIDES, markup_escape, second_writer, writer_label
from unspecific_tui.widgets.compare.sides import CompareSides, Sides, Verdicts

__all__ = ["SIDES", "CompareSides", "Sides", "Verdicts", "markup_escape", "second_writer", "writer_label"]
