"""The Report's chart (unspecific_tui/widgets/chart.py) is true to its values at any width (issue 62):
each bar's length is its value to an eighth of a cell, two values unlike are never drawn alike, every
label stands whole, and the axis ticks are 0, 25, 50, 75 and 100 (the midpoint among them)."""

from __future__ import annotations

import pytest

from unspecific_tui.widgets.chart import EIGHTHS, Bar, bar_chart

LABELS = ("single · qwen2.5-1.5b-instruct [direct]", "single · smollm2-1.7b-instruct [direct]",
          "eval · qwen2.5-1.5b-instruct [direct]", "eval · smollm2-1.7b-instruct [direct]")


def _length(line: str, start: int) -> float:
    """A bar's length in cells, from the column after its axis mark."""
    cells = 0.0
    for ch in line[start:]:
        if ch == "█":
            cells += 1
        elif ch in EIGHTHS[1:]:
            cells += EIGHTHS.index(ch) / 8
            break
        else:
            break
    return cells


@pytest.mark.parametrize("width", [40, 78, 62])
def test_bars_true_to_value_labels_whole_ticks_with_the_midpoint(width):
    values = (17.4, 44.4, 100.0, 0.0)
    text = bar_chart("news: superficial", [Bar(label, (v,)) for label, v in zip(LABELS, values)],
                     ("superficial",), width).plain
    lines = text.split("\n")
    assert all(len(line) <= width for line in lines), lines
    axis = next(line for line in lines if "└" in line)
    start, room = axis.index("└"), axis.count("─") + axis.count("┴")
    ticks = lines[lines.index(axis) + 1].split()
    assert ticks == ["0", "25", "50", "75", "100"]
    assert axis[start + round(room / 2)] == "┴"  # the midpoint's tick under 50
    bars = [line for line in lines if "│" in line and line.split("│")[1].strip()]
    assert len(bars) == len(values)
    for line, value in zip(bars, values):
        length = _length(line, line.index("│") + 1)
        assert abs(length - value / 100 * room) <= 1 / 16, (line, value)
        assert f"{value:.1f}" in line
    # Every label whole on the screen, wrapped under itself where the column is narrow.
    label_text = "".join(line.split("│")[0].replace(" ", "") for line in lines if "│" in line)
    for label in LABELS:
        assert label.replace(" ", "") in label_text


def test_two_values_draw_the_smaller_inside_the_larger():
    text = bar_chart("t", [Bar("a", (60.0, 20.0))], ("Org", "Core"), 60)
    line = next(line for line in text.plain.split("\n") if "│" in line)
    assert "60.0 / 20.0" in line
    axis = next(line for line in text.plain.split("\n") if "└" in line)
    room = axis.count("─") + axis.count("┴")
    assert abs(_length(line, line.index("│") + 1) - 0.6 * room) <= 1 / 16
    spans = [s for s in text.spans if s.end > s.start]
    assert len({str(s.style) for s in spans}) >= 2  # the two values in two colours
