"""`unspecific report --format markdown|csv|json` and the text report, as a paper and a script read
them (issue 47, item 6): markdown tables no wider than 100 characters, split by concern; one
interval style ("[low, high]") in text, markdown, HTML and the app; and piped text no wider than
COLUMNS, else 100."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.core.intervals import ci, ci_parts
from pipeline.outputs.report import ReportOptions, build_report
from pipeline.outputs.report_text import document, render, write_format
from pipeline.outputs.suspicion import REPORT_TOP
from pipeline.outputs.tables import MARKDOWN_WIDTH, Sheet
from pipeline.stages.copy_evidence import compute_copy_evidence
from pipeline.stages.similarity import compute_similarities
from pipeline.store.database import open_store
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store

# An interval written with a hyphen between its bounds ("[71.8-82.1]"): the old style.
HYPHENATED = re.compile(r"\[-?\d+(\.\d+)?-\d")
# The one style: "[71.8, 82.1]", a bound possibly negative or signed.
BOUNDS = re.compile(r"\[[-+]?\d+(\.\d+)?, [-+]?\d+(\.\d+)?\]")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two models, two judges, four conditions, three ratios, similarity and copy evidence (so the
    suspicion ranking has copy reasons)."""
    path = tmp_path_factory.mktemp("formats") / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=24, n_constraints=8, ratios=(0.5, 0.25, 0.1),
                                              domains=("news",)))
    store = open_store(path)
    compute_similarities(store, None)
    compute_copy_evidence(store)
    store.close()
    return path


@pytest.fixture(scope="module")
def report(store_path: Path):  # noqa: ANN201
    store = open_store(store_path, create=False, readonly=True)
    try:
        return build_report(store, ReportOptions(n_resamples=50))
    finally:
        store.close()


def _written(report, fmt: str) -> str:  # noqa: ANN001
    out = io.StringIO()
    write_format(report, fmt, out)
    return out.getvalue()


def _sheets(report) -> list[Sheet]:  # noqa: ANN001
    return [i for i in document(report) if isinstance(i, Sheet) and i.rows]


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
