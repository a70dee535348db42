"""The app shows missing verdicts as missing and coverage beside the rates (issue 13, item 1)."""

from __future__ import annotations

import sqlite3

from tests.support.app import goto, make_known_store, on_screen, text_of
from unspecific_tui.app import UnspecificApp


def _judge_b_never_answered_on_m1(path) -> None:
    """judge-b's verdicts on m1's response and summary become missing (as the judging stage
    stores a verdict the judge never gave)."""
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE verdicts SET verdict = NULL, quote = NULL, quote_found = NULL,"
                     " reason = 'no verdict from the judge' WHERE judge = 'judge-b' AND "
                     "generation_id IN (1, 2)")


async def test_report_screen_shows_coverage_and_marks_low_groups(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    _judge_b_never_answered_on_m1(known.path)
    app = UnspecificApp(known.path, stages={})
    async with on_screen(app, "6", (200, 40)) as pilot:
        table = app.screen.query_one("#report-table")
        rows = {str(table.get_row_at(i)[2]): table.get_row_at(i) for i in range(table.row_count)}
        assert str(rows["m1"][-1]) == "50.0 !" and str(rows["m2"][-1]) == "100.0"
        # judge-a alone on m1's summary: C1 yes, C2 no, C3 no -> Core 1/3, not judge-b's missing read as No.
        assert rows["m1"][6].startswith("33.3")  # after domain, condition, model, mode, n, Org
        low = "news / eval / m1 (direct), responses: coverage 50.0% (3 of 6 verdicts given, under 95%)"
        assert any(w.startswith(low) for w in app.screen.warnings)
        # One line on the screen; `w` lists every warning in full.
        line = " ".join(text_of(app.screen.query_one("#report-warnings")).split())
        assert line.startswith(f"! {len(app.screen.warnings)} warning(s)")
        await goto(app, pilot, "w")
        listed = " ".join(" ".join(text_of(w).split()) for w in app.screen.query(".warning"))
        assert "! " + low in listed


async def test_audit_shows_a_missing_verdict_as_missing(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    _judge_b_never_answered_on_m1(known.path)
    app = UnspecificApp(known.path, stages={}, annotator="ann")
    async with on_screen(app, "3", (160, 48)):
        lines = text_of(app.screen.query_one("#audit-verdicts")).splitlines()
        judge_b = [line for line in lines if line.startswith("judge-b")]
        # The verdict column reads "missing" (padded as "no     " would be), never No.
        assert len(judge_b) == 2 and all(" missing " in line and " no      " not in line for line in judge_b)
        assert any(line.startswith("judge-a") and "yes" in line for line in lines)
