"""The screens read and write the store only through typed functions (pipeline.queries,
unspecific_tui.data): a schema change never reaches a screen, and no screen re-implements a
rule the pipeline owns (the latest verdict, flipped)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline import queries

SCREENS = sorted((Path(__file__).parent.parent / "unspecific_tui" / "screens").glob("*.py"))
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE)\b[^\n]*\b(FROM|INTO|SET)\b|\.execute\(|LATEST_VERDICT")


@pytest.mark.parametrize("path", SCREENS, ids=[p.name for p in SCREENS])
def test_no_screen_runs_sql(path: Path) -> None:
    hits = [line.strip() for line in path.read_text().splitlines() if SQL.search(line)]
    assert hits == [], f"{path.name} runs SQL of its own: {hits}"


def test_step_queries_take_only_known_tables(tmp_path) -> None:
    import sqlite3

    conn = sqlite3.connect(tmp_path / "x.sqlite")
    with pytest.raises(ValueError):
        queries.newest_rows(conn, "llm_calls; DROP TABLE runs", 0)
    conn.close()
