"""The report read in 80-, 120- and 160-column terminals: every table fits, no column squashed to
nothing, no header cut, no value dropped (tables split by concern, intervals under their values, as
pipeline.outputs.tables lays them out); piped, the same at COLUMNS or 100 columns; and the same
tables as markdown, CSV and JSON (tests/test_report_formats.py holds what each format promises)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.outputs.report import ReportOptions, build_report
from pipeline.outputs.report_text import Note, document, render, write_format
from pipeline.outputs.tables import Cell, Sheet, Value
from pipeline.store.database import open_store
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.hand_store import report_store


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    store = open_store(report_store(tmp_path_factory.mktemp("widths") / "s.sqlite"))
    built = build_report(store, ReportOptions(n_resamples=50))
    store.close()
    return built


def _parts(cell: Cell) -> tuple[str, ...]:
    """What a cell shows: its value, and its interval where it has one."""
    if isinstance(cell, Value):
        return (cell.shown, cell.interval) if cell.interval else (cell.shown,)
    return cell if isinstance(cell, tuple) else (cell,)


def _rendered(report, width: int) -> str:  # noqa: ANN001
    console = Console(width=width, force_terminal=True, color_system=None, record=True, file=io.StringIO())
    render(report, console)
    return console.export_text()


@pytest.mark.parametrize("width", [80, 120, 160])
def test_every_table_fits_with_nothing_cut_or_dropped(report, width: int) -> None:  # noqa: ANN001
    out = _rendered(report, width)
    sheets = [i for i in document(report) if isinstance(i, Sheet) and i.rows]
    assert len(sheets) >= 3  # the main table, copying, the depth profile
    table_lines = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert table_lines and all(len(line) <= width for line in table_lines)
    assert not any("…" in line for line in table_lines), "a header or a value was cut"
    assert not any("┳┳" in line or "╇╇" in line for line in table_lines), "a column squashed to nothing"
    flat = " ".join(out.split())
    for sheet in sheets:
        for header in sheet.headers:  # every header whole (it may wrap between its words)
            assert all(word in flat for word in header.split()), header
        for row in sheet.rows:
            for cell in row:
                for part in _parts(cell):
                    assert part in flat, (width, sheet.title, part)


def test_a_wide_terminal_keeps_the_main_table_whole(report) -> None:  # noqa: ANN001
    out = _rendered(report, 250)
    header = next(line for line in out.splitlines() if "condition" in line and "Org" in line)
    assert "coverage %" in header and "judge κ" in header  # one table, not split


def test_the_same_tables_as_markdown_csv_and_json(report) -> None:  # noqa: ANN001
    sheets = [i for i in document(report) if isinstance(i, Sheet) and i.rows]
    md = io.StringIO()
    write_format(report, "markdown", md)
    flat = " ".join(md.getvalue().split())
    for sheet in sheets:  # every header and value, in tables split as the terminal splits them
        cells = flat.replace(" ", "")
        assert all(f"|{header}|".replace(" ", "") in cells for header in sheet.headers), sheet.title
        assert all(part in flat for row in sheet.rows for cell in row for part in _parts(cell)), sheet.title
    out = io.StringIO()
    write_format(report, "csv", out)
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    assert [name for name in dict.fromkeys(row[0] for row in rows[1:])] == [s.name for s in sheets]
    out = io.StringIO()
    write_format(report, "json", out)
    data = json.loads(out.getvalue())
    assert [t["title"] for t in data["tables"]] == [s.title for s in sheets]
    assert data["notes"] == [i.text for i in document(report) if isinstance(i, Note)]


def test_report_cli_formats_and_wrapped_pipes(tmp_path: Path, capsys: pytest.CaptureFixture,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.cli import main

    path = tmp_path / "cli.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=6, n_constraints=5, domains=("news",)))
    assert main(["--store", str(path), "report", "--resamples", "20", "--format", "markdown"]) == 0
    got = capsys.readouterr().out
    assert "|condition|model" in got.replace(" ", "") and "┃" not in got
    # Piped (no terminal): fitted to COLUMNS when set, else to 100 columns, as a terminal that wide.
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["--store", str(path), "report", "--resamples", "20"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 100
    assert any("Org" in line and "superficial" in line for line in lines)  # the rates, one table
    assert not any("Org" in line and "coverage %" in line for line in lines)  # split by concern
    monkeypatch.setenv("COLUMNS", "72")
    assert main(["--store", str(path), "report", "--resamples", "20"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 72 and any("Org" in line for line in lines)


def _lines_fit(out: str, width: int) -> None:
    table_lines = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert table_lines and all(len(line) <= width for line in table_lines)
    assert not any("…" in line for line in table_lines), "a header or a value was cut"


@pytest.mark.parametrize("width", [80, 120, 160])
def test_validate_judges_and_batch_status_fit(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`validate judges --builtin` (a judge's check, per kind of item) and `batch status` at each width."""
    from pipeline.analysis.judge_check import CheckScore
    from pipeline.analysis.stats import Interval
    from pipeline.cli import common
    from pipeline.cli.batch_cmd import _print_status
    from pipeline.cli.validate_cmd import _print_check

    console = Console(width=width, force_terminal=True, color_system=None, record=True, file=io.StringIO())
    monkeypatch.setattr(common, "console", lambda: console)
    iv = Interval(0.834, 0.781, 0.882, 205)
    scores = [CheckScore(judge, by, group, 205, 3, iv, iv, iv, 0.67, iv)
              for judge in ("local", "gpt-4o-mini-judge")
              for by, group in (("all", "all"), ("domain", "news"), ("kind", "changed_fact"),
                                ("kind", "off_by_one"))]
    _print_check(scores)
    batches = [{"id": f"b{k}", "kind": "judge", "endpoint": "openai-main",
                "remote_id": "batch_6750c2f1e4a8b8190",
                "path": None, "state": "in_progress", "requests": 20000, "completed": 12345, "failed": 3,
                "collected_at": None} for k in range(2)]
    _print_status(console, {"batches": batches, "requests": {"pending": 7655}, "paid": {},
                            "collected_not_used": {"calls": 0, "cost": 0.0}})
    out = console.export_text()
    _lines_fit(out, width)
    flat = " ".join(out.split())
    assert "83 [78, 88]" in flat or ("83" in flat and "[78, 88]" in flat)
    assert "batch_6750c2f1e4a8b8190" in flat and "20000" in flat and "12345" in flat
