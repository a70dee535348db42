"""The screens read and write the store only through typed functions (pipeline.queries,
unspecific_tui.data): a schema change never reaches a screen, and no screen re-implements a
rule the pipeline owns (the latest verdict, flipped)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline import queries

ROOT = Path(__file__).parent.parent
SCREENS = sorted((ROOT / "unspecific_tui" / "screens").glob("*.py"))
# CLI modules only parse and print.
CLI = sorted((ROOT / "pipeline" / "cli").glob("*.py"))
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE)\b[^\n]*\b(FROM|INTO|SET)\b|\.execute\(|LATEST_VERDICT"
                 r"|\bstore\.(one|query|scalar)\(")


@pytest.mark.parametrize("path", SCREENS + CLI, ids=[f"{p.parent.name}/{p.name}" for p in SCREENS + CLI])
def test_no_screen_or_cli_module_runs_sql(path: Path) -> None:
    hits = [line.strip() for line in path.read_text().splitlines() if SQL.search(line)]
    assert hits == [], f"{path.name} runs SQL of its own: {hits}"


def test_step_queries_take_only_known_tables(tmp_path) -> None:
    import sqlite3

    conn = sqlite3.connect(tmp_path / "x.sqlite")
    with pytest.raises(ValueError):
        queries.newest_rows(conn, "llm_calls; DROP TABLE runs", 0)
    conn.close()
