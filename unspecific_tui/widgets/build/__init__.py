"""The Build screen's parts, each owning its state: ``runs.py`` (the runs table and the current run's
totals; enter on a run posts ``RunSelected``), ``stage_table.py`` (the stages' states, progress and
counts in the store), ``stage_bar.py`` (the status of what runs and its bar), ``written.py`` (what the
last step wrote, and the instruction `a` audits) and ``runner.py`` (a plain object: what runs, a stage
or the demo, in a thread worker of the screen's that reports by messages). The screen
(unspecific_tui/screens/build.py) composes them and hands each message of a run to the parts it changes.
"""
