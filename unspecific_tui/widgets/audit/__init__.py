"""The Audit screen's parts, each a widget (or, for the follower, a plain object) that owns its state
and tells the screen what happened by a message: ``head.py`` (the task line and the head: where the
auditor is, the constraint and its evidence), ``listing.py`` (the constraint list: its rows, read
once per instruction and cached, their sort and filter), ``detail.py`` (the four text panes, the
source view, the legend and the verdict lines) and ``follower.py`` (what n / p follow and the audit
loop's marks). ``state.py`` holds the plain values they exchange. The screen
(unspecific_tui/screens/audit/) composes them and keeps where the auditor is.
"""
