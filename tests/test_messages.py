"""Error messages keep their meaning whatever the terminal's width and the path's length.

A panel in a terminal wraps at the width; piped output is one unwrapped block. Tests read the
words, never the layout: ``words`` drops the panel's borders and joins wrapped lines."""

from __future__ import annotations

import re

import pytest

from pipeline.cli import main
from pipeline.cli.common import print_error
from pipeline.core.errors import StoreError

BORDER = re.compile(r"[\u2500-\u257f]")


def squashed(text: str) -> str:
    """Text with colour codes, borders and all whitespace gone: a message wrapped anywhere (in
    a word, a path, a URL) squashes to the same string as the unwrapped one."""
    return re.sub(r"\s+", "", BORDER.sub("", re.sub(r"\x1b\[[0-9;]*m", "", text)))


def says(output: str, phrase: str) -> bool:
    return squashed(phrase) in squashed(output)


def long_path(tmp_path) -> str:
    deep = tmp_path / ("a-rather-long-folder-name-" * 3) / ("and-another-one-" * 3)
    return str(deep / "nope.sqlite")


@pytest.mark.parametrize("width", [40, 80, 250])
@pytest.mark.parametrize("terminal", [True, False])
def test_an_error_names_its_path_at_any_width(tmp_path, capsys, monkeypatch, width, terminal):
    monkeypatch.setenv("COLUMNS", str(width))
    if terminal:
        monkeypatch.setenv("FORCE_COLOR", "1")  # Rich treats stderr as a terminal
        monkeypatch.setenv("TTY_COMPATIBLE", "1")
    else:
        monkeypatch.delenv("FORCE_COLOR", raising=False)
        monkeypatch.setenv("NO_COLOR", "1")
    path = long_path(tmp_path)
    assert main(["tui", "--store", path]) == 2
    err = capsys.readouterr().err
    assert says(err, f"{path}: no store here")


def test_piped_errors_are_one_block_with_the_title(capsys):
    print_error(StoreError("/some/where/store.sqlite: no store here (run `unspecific init`)"))
    err = capsys.readouterr().err
    assert err.strip() == "Store error: /some/where/store.sqlite: no store here (run `unspecific init`)"
