"""`unspecific report --format markdown|csv|json` and the text report, as a paper and a script read
them (issue 47, item 6): the suspicion list in every format; JSON numbers as numbers and intervals
as [low, high]; CSV one rectangular table (a ``table`` column first) or one file a table; markdown
tables no wider than 100 characters, split by concern; one interval style ("[low, high]") in text,
markdown, HTML and the app; no line sending the reader to a file that was not written; and piped
text no wider than COLUMNS, else 100."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.core.intervals import ci, ci_parts
from pipeline.outputs.report import ReportOptions, build_report
from pipeline.outputs.report_text import document, render, write_csv_tables, write_format
from pipeline.outputs.suspicion import REPORT_TOP
from pipeline.outputs.tables import MARKDOWN_WIDTH, Sheet
from pipeline.store.database import open_store
from tests.support.hand_store import report_store

# An interval written with a hyphen between its bounds ("[71.8-82.1]"): the old style.
HYPHENATED = re.compile(r"\[-?\d+(\.\d+)?-\d")
# The one style: "[71.8, 82.1]", a bound possibly negative or signed.
BOUNDS = re.compile(r"\[[-+]?\d+(\.\d+)?, [-+]?\d+(\.\d+)?\]")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return report_store(tmp_path_factory.mktemp("formats") / "s.sqlite")


@pytest.fixture(scope="module")
def report(store_path: Path):  # noqa: ANN201
    store = open_store(store_path, create=False, readonly=True)
    try:
        return build_report(store, ReportOptions(n_resamples=50, suspicious=REPORT_TOP))
    finally:
        store.close()


def _written(report, fmt: str) -> str:  # noqa: ANN001
    out = io.StringIO()
    write_format(report, fmt, out)
    return out.getvalue()


def _sheets(report) -> list[Sheet]:  # noqa: ANN001
    return [i for i in document(report) if isinstance(i, Sheet) and i.rows]


# -- the suspicion list, in every format ---------------------------------------------------------


def test_every_format_carries_the_suspicion_list(report) -> None:  # noqa: ANN001
    queue = report.suspicious
    assert queue, "the synthetic store has suspicious items"
    top = queue[0]
    md = _written(report, "markdown")
    first_item = rf"^1\. \*\*{top.score():.2f}\*\* instruction {top.instruction_id} "
    assert "**Most suspicious" in md and re.search(first_item, md, re.MULTILINE)
    rows = [r for r in csv.DictReader(io.StringIO(_written(report, "csv"))) if r["table"] == "suspicious"]
    assert len(rows) == min(REPORT_TOP, len(queue))
    assert rows[0]["rank"] == "1" and int(rows[0]["instruction_id"]) == top.instruction_id
    assert rows[0]["constraint"] == top.text and rows[0]["reasons"]
    data = json.loads(_written(report, "json"))
    first = data["suspicious"][0]
    assert {"rank", "instruction_id", "constraint", "model", "mode", "score", "reasons"} <= set(first)
    assert (first["rank"], first["instruction_id"], first["constraint"]) == (1, top.instruction_id, top.text)
    assert (first["model"], first["mode"]) == (top.writer.model, top.writer.mode)
    assert isinstance(first["score"], float) and first["score"] == pytest.approx(top.score(), abs=0.005)
    assert isinstance(first["reasons"], list) and all(isinstance(r, str) for r in first["reasons"])


# -- JSON: numbers as numbers ----------------------------------------------------------------------


def test_json_holds_numbers_and_intervals_as_two_numbers(report) -> None:  # noqa: ANN001
    data = json.loads(_written(report, "json"))
    table = next(t for t in data["tables"] if t["name"] == "org_core_news")
    group = next(g for g in report.metrics.groups if g.ratio is None and g.condition == "single")
    row = next(r for r in table["rows"]
               if (r["condition"], r["model"], r["mode"]) == ("single", group.model, group.mode))
    assert isinstance(row["org"], float) and row["org"] == pytest.approx(100 * group.org.value, abs=0.05)
    assert isinstance(row["org_ci"], list) and len(row["org_ci"]) == 2
    assert all(isinstance(x, float) for x in row["org_ci"])
    assert row["org_ci"] == pytest.approx([100 * group.org.low, 100 * group.org.high], abs=0.05)
    assert isinstance(row["n"], int) and isinstance(row["judge_kappa"], float)
    copied = [r for r in table["rows"] if r.get("copied_5_grams_b", 0) is None]
    assert copied, "a missing figure ('-' on screen) is null"
    for each in data["tables"]:  # no number left as a string, anywhere
        for r in each["rows"]:
            for key, value in r.items():
                if isinstance(value, str):
                    assert not re.fullmatch(r"[-+]?[\d.,]+( \[.*\])?", value), (each["name"], key, value)


# -- CSV: one rectangular table, or one file a table -----------------------------------------------


def test_csv_on_stdout_is_one_rectangular_table_named_by_a_first_column(report) -> None:  # noqa: ANN001
    rows = list(csv.reader(io.StringIO(_written(report, "csv"))))
    header = rows[0]
    assert header[0] == "table" and len({len(r) for r in rows}) == 1, "one header, every row as wide"
    tables = list(dict.fromkeys(r[0] for r in rows[1:]))
    assert tables == [*[s.name for s in _sheets(report)], "suspicious"]
    first = [dict(zip(header, r, strict=True)) for r in rows[1:] if r[0] == "org_core_news"][0]
    assert float(first["org_low"]) <= float(first["org"]) <= float(first["org_high"])


def test_csv_tables_one_file_each(report, tmp_path: Path) -> None:  # noqa: ANN001
    paths = write_csv_tables(report, tmp_path)
    assert {p.stem for p in paths} == {*(s.name for s in _sheets(report)), "suspicious"}
    for path in paths:
        rows = list(csv.reader(path.open(encoding="utf-8")))
        assert len(rows) > 1 and len({len(r) for r in rows}) == 1, path.name
        assert "table" not in rows[0] and not rows[0][0].startswith("#"), path.name
    rows = list(csv.DictReader((tmp_path / "org_core_news.csv").open(encoding="utf-8")))
    assert all(float(r["org"]) >= 0 and float(r["org_high"]) >= float(r["org_low"]) for r in rows)


def test_report_format_csv_out_writes_a_file_a_table(store_path: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "tables"
    assert main(["--store", str(store_path), "report", "--resamples", "20", "--format", "csv", "--out",
                 str(out)]) == 0
    assert "org_core_news" not in capsys.readouterr().out  # the tables went to files, not to the screen
    assert (out / "org_core_news.csv").is_file() and (out / "suspicious.csv").is_file()
    assert (out / "summary.csv").is_file()  # --out's data files as ever


# -- markdown: narrow tables, split by concern ------------------------------------------------------


def test_markdown_tables_fit_100_characters_split_by_concern(report) -> None:  # noqa: ANN001
    md = _written(report, "markdown")
    table_lines = [line for line in md.splitlines() if line.startswith("|")]
    assert table_lines and max(map(len, table_lines)) <= MARKDOWN_WIDTH
    first = _sheets(report)[0]  # the main table
    for block in first.blocks:  # the terminal's concerns, each a table of its own
        assert f"**{first.title} ({block.name})**" in md, block.name


# -- one interval style -------------------------------------------------------------------------------


def test_one_interval_style_and_negative_bounds_read_as_such() -> None:
    assert ci_parts((0.769, 0.718, 0.821)) == ("76.9", "[71.8, 82.1]")
    assert ci((-0.031, -0.052, 0.024), signed=True) == "-3.1 [-5.2, +2.4]"
    assert ci((0.5, float("nan"), float("nan"))) == "50.0" and ci_parts((float("nan"),) * 3) == "-"
    assert ci((0.63, 0.601, 0.66), scale=1.0, digits=2) == "0.63 [0.60, 0.66]"


def test_text_markdown_html_and_the_app_write_intervals_alike(report) -> None:  # noqa: ANN001
    from rich.console import Console

    from pipeline.outputs.html_tables import tables_html
    from unspecific_tui.screens.report import _fmt

    console = Console(width=160, record=True, file=io.StringIO(), color_system=None)
    render(report, console)
    outputs = {"text": console.export_text(), "markdown": _written(report, "markdown"),
               "html": tables_html(report)}
    for name, shown in outputs.items():
        assert BOUNDS.search(shown), name
        assert not HYPHENATED.search(shown), (name, HYPHENATED.search(shown))
    assert _fmt((0.814, 0.782, 0.846)) == "81.4 [78.2, 84.6]"
    assert _fmt((0.814, 0.782, 0.846), "short") == "81.4 [78, 85]"


# -- "see X" only when X was written ------------------------------------------------------------------


def test_no_line_sends_the_reader_to_a_file_not_written(report, store_path: Path,  # noqa: ANN001
                                                        tmp_path: Path, capsys: pytest.CaptureFixture
                                                        ) -> None:
    assert main(["--store", str(store_path), "report", "--resamples", "20"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "see comparisons.csv" not in shown
    out = tmp_path / "out"
    assert main(["--store", str(store_path), "report", "--resamples", "20", "--out", str(out)]) == 0
    shown = "".join(capsys.readouterr().out.split())
    assert (out / "comparisons.csv").is_file() and "".join(str(out / "comparisons.csv").split()) in shown
    for fmt in ("markdown", "json"):  # written to standard output: no file beside them
        assert "see comparisons.csv" not in _written(report, fmt)
        assert "every test is in" not in _written(report, fmt)


# -- piped text: wrapped at COLUMNS, else 100 ---------------------------------------------------------


@pytest.mark.parametrize("columns", [None, 64])
def test_piped_text_is_wrapped_and_grep_still_finds_each_item(store_path: Path, capsys: pytest.CaptureFixture,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              columns: int | None) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["--store", str(store_path), "report", "--resamples", "20"]) == 0
    lines = capsys.readouterr().out.splitlines()
    width = columns or 100
    assert max(map(len, lines)) <= width, max(lines, key=len)
    start = next(i for i, line in enumerate(lines) if line.startswith("Most suspicious"))
    ranked = [line for line in lines[start:] if re.match(r"^\s*\d+\. ", line)]
    assert [int(line.split(".")[0]) for line in ranked] == list(range(1, REPORT_TOP + 1))
    assert all(re.match(r"^\s*\d+\.\s+\d+\.\d\d  instruction \d+ #\d+ ", line) for line in ranked)
