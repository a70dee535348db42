"""The Annotate screen's parts, each owning its state: ``items.py`` (the items to label, where they come
from, the one shown and the context last opened on: ``LabelQueue``), ``judge_check.py`` (the judge
plan's items and whether the judge check is on: ``JudgeCheck``, and what its head and verdict pane say)
and ``stats.py`` (the side panel: the metric against people, or the judges against people). The
screen (unspecific_tui/screens/annotate.py) composes them and draws the item shown.
"""
