"""Audit: an instruction's constraints listed beside one constraint's detail (reference A,
reference B, the response, its summary, and the judges' verdicts).

The list (widgets/constraint_list.py) shows, for the shown model and mode, each constraint's
outcome, the judges' agreement on both texts, the copy evidence and the flags; selecting a row
shows its detail. Its rows are pipeline.analysis.suspicion's Evidence (one definition for the
list, the suspicion queue and the reports: pipeline.analysis.trust's "split" and "unquoted",
the stored similarity, the copied phrases) with the outcome pipeline.analysis.metrics counts.

Auditing the suspicion queue is a loop: the head says "suspicion queue item k of N" and how many
are done; `y` / `d` mark the item confirmed / dismissed (through the app, stored by the store's
narrow writer) and go on to the next; `o` shows the copied span of the response beside the same span
in its source (reference A, reference B, or the constraint itself). What a key changed is said in
the legend line (at 80 columns, where the legend gives way, in Textual's notice area), never in a
pane's title. At 80x24 one pane fills the detail inside its whole border (its title says which, `t`
the next; its footer gives its words and what was copied), and `l` swaps it for the list.

Moving between constraints of one instruction costs no query: an instruction's rows, verdicts
and flags are read once per (instruction, response, ratio) and cached; the widgets are built once
and updated in place; the list's rows are replaced only when the instruction, response, sort or
filter changes.

The screen (``screen.py``: AuditScreen) composes its parts, each in unspecific_tui/widgets/audit/
and each owning its state: the head (head.py), the constraint list (listing.py, which posts
``AuditList.Picked`` / ``Chosen`` when its cursor moves or enter picks a row), the detail (detail.py:
the panes, the source view, the legend and the verdicts) and the follower (follower.py: n / p, the
flag picker's choices, the suspicion queue and its marks). The screen keeps where the auditor is and
draws it through them. Its style is ``audit.tcss`` beside it.
"""

from unspecific_tui.screens.audit.screen import AuditScreen
from unspecific_tui.widgets.audit.follower import MARK_KEYS
from unspecific_tui.widgets.audit.head import HEAD, NARROW_HEAD
from unspecific_tui.widgets.audit.listing import CACHE
from unspecific_tui.widgets.audit.pane_text import CONSTRAINT_N, REFERENCE_N
from unspecific_tui.widgets.audit.state import NARROW, PANE_TITLES, PANES, SOURCE_PANE, Rows, Shown

__all__ = ["CACHE", "CONSTRAINT_N", "HEAD", "MARK_KEYS", "NARROW", "NARROW_HEAD", "PANES", "PANE_TITLES",
           "REFERENCE_N", "SOURCE_PANE", "AuditScreen", "Rows", "Shown"]
