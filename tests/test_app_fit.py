"""Every screen readable from 80x24 up: nothing in the footer, a table or a one-line text is cut.

Each of the six screens at 80x24 and 160x48, on a synthetic store with real-length model names
("meta-llama/Llama-3.1-70B-Instruct") and ~200-character constraints, both response modes:

- footer: every key it shows is whole inside the screen, and the screen keys (1-6) and ``?``
  are among them (the rest are in ``?``'s list);
- tables: the columns fit the table's visible width (no sideways scrolling to see a column);
- one-line texts (``text-wrap: nowrap``) fit or end in an ellipsis; a text of fixed or maximum
  height shows all its lines.

``-k audit`` (or build, instructions, compare, annotate, report) runs one screen.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from textual.widgets import DataTable, Footer, Static

from tests.support.app import textual_private
from tests.support.snapshot_app import make_app
from unspecific_tui.app import SCREENS_ORDER, UnspecificApp

FooterKey = textual_private("textual.widgets._footer", "FooterKey")


def _sizes() -> list[tuple[int, int]]:
    """80x24 and 160x48; sizes in between with UNSPECIFIC_FIT_SIZES="100x30,120x36,200x60" (by hand)."""
    extra = [size.split("x") for size in os.environ.get("UNSPECIFIC_FIT_SIZES", "").split(",") if size]
    return [(80, 24), (160, 48), *((int(w), int(h)) for w, h in extra)]


SIZES = _sizes()


@pytest.fixture(scope="module")
def long_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fit")
    make_app(folder, both_modes=True, long_names=True)  # builds folder/store.sqlite once
    return folder / "store.sqlite"


async def _settle(app: UnspecificApp, pilot) -> None:  # noqa: ANN001
    for _ in range(3):
        await pilot.pause()
        await app.workers.wait_for_complete()
    await pilot.pause()


def footer_problems(app: UnspecificApp) -> list[str]:
    footers = [f for f in app.screen.query(Footer) if f.display]
    if len(footers) != 1:
        return [f"{len(footers)} footers on the screen"]
    footer = footers[0]
    keys = [k for k in footer.query(FooterKey) if k.display]
    problems = [f"footer key {k.key_display!r} {k.description!r} ends at column "
                f"{k.region.right}, the footer at"
                f" {footer.region.right}: it is cut (use unspecific_tui.widgets.footer.KeyFooter)"
                for k in keys if k.region.right > footer.region.right or k.region.width < k.get_content_width(
                    footer.size, footer.size)]
    shown = {k.key_display for k in keys if k.region.right <= footer.region.right}
    problems += [f"footer does not show {need!r}" for need in ("1-6", "?") if need not in shown]
    return problems


def table_problems(app: UnspecificApp) -> list[str]:
    problems = []
    for table in app.screen.query(DataTable):
        if not table.display or table.region.width == 0:
            continue
        needed = sum(c.get_render_width(table) for c in table.ordered_columns)
        visible = table.scrollable_content_region.width
        if needed > visible:
            labels = " | ".join(f"{c.label.plain}={c.get_render_width(table)}" for c in table.ordered_columns)
            problems.append(f"table #{table.id}: columns need {needed} columns, {visible} visible ({labels})")
    return problems


def static_problems(app: UnspecificApp) -> list[str]:
    problems = []
    for static in app.screen.query(Static):
        if not static.display or static.region.width == 0 or isinstance(static, FooterKey):
            continue
        width = static.content_region.width
        if static.styles.text_wrap == "nowrap" and static.styles.text_overflow != "ellipsis":
            needed = static.get_content_width(static.content_region.size, static.content_region.size)
            if needed > width:
                problems.append(f"one-line text #{static.id} needs {needed} columns, has {width}: cut")
        elif static.styles.overflow_y not in ("auto", "scroll"):  # a fixed or maximum height loses lines
            lines = static.get_content_height(static.content_region.size, static.content_region.size, width)
            # What shows: its content rows inside what its containers leave visible (their clip).
            geometry = app.screen.find_widget(static)
            shown = static.content_region.intersection(geometry.clip).height
            if lines > shown:
                problems.append(f"text #{static.id} has {lines} lines, shows {shown}")
    return problems


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", SCREENS_ORDER)
async def test_screen_fits(screen: str, size: tuple[int, int], long_store: Path, tmp_path: Path) -> None:
    shutil.copy(long_store, tmp_path / "store.sqlite")
    app = make_app(tmp_path, long_names=True)
    async with app.run_test(size=size) as pilot:
        await _settle(app, pilot)
        await pilot.press(str(SCREENS_ORDER.index(screen) + 1))
        await _settle(app, pilot)
        assert app.current_mode == screen
        problems = footer_problems(app) + table_problems(app) + static_problems(app)
    assert not problems, f"{screen} at {size[0]}x{size[1]}:\n" + "\n".join(problems)


def test_fitting_skips_what_does_not_fit_whole() -> None:
    from unspecific_tui.widgets.footer import Item, fitting

    items = [Item("1", "1-6", "screens", "a"), Item("x", "x", "a long description", "b"),
             Item("y", "y", "Go", "c")]
    assert [i.key for i in fitting(items, 20)] == ["1", "y"]  # 12 + 5 fit; the 21-wide one is skipped
    assert [i.key for i in fitting(items, 100)] == ["1", "x", "y"]
    assert fitting(items, 3) == []


@pytest.mark.parametrize(("model", "others", "width"), [
    ("model-a", ["model-b"], 6),  # from the end both read "model…"
    ("meta-llama/Llama-3.1-70B-Instruct", ["meta-llama/Llama-3.1-8B-Instruct"], 14),
    ("meta-llama/Llama-3.1-70B-Instruct", ["gpt-4o-mini"], 14),
    ("org/abc-7b-chat-v1-long-suffix", ["org/abc-7b-chat-v2-long-suffix"], 8),
])
def test_a_clipped_model_name_keeps_what_tells_it_apart(model: str, others: list[str], width: int) -> None:
    from unspecific_tui.screens.queue_rows import writer_cell
    from unspecific_tui.widgets.fit import distinct_clip

    mine = distinct_clip(model, others, width)
    theirs = {distinct_clip(o, [model], width) for o in others}
    assert len(mine) <= width and mine not in theirs and "…" in mine
    cell = writer_cell(model, "direct", width + 9, others)
    assert cell.endswith(" [direct]") and cell != writer_cell(others[0], "direct", width + 9, [model])


def test_the_queue_widens_the_model_column_to_its_labels_where_there_is_room() -> None:
    from unspecific_tui.screens.queue_rows import ROOMY_CONSTRAINT, WRITER, layout

    label = len("meta-llama/Llama-3.1-70B-Instruct [direct]")
    narrow, _ = layout(80, label)
    assert next(c.width for c in narrow if c.key == "writer") == WRITER.width
    wide, text = layout(200,
                        label)  # every optional column shown: it grows while the constraint keeps its room
    assert WRITER.width < next(c.width for c in wide
                               if c.key == "writer") < label and text == ROOMY_CONSTRAINT
    wider, text = layout(260, label)
    assert next(c.width for c in wider if c.key == "writer") == label and text > ROOMY_CONSTRAINT


def test_the_report_and_instructions_clip_model_names_apart() -> None:
    from unspecific_tui.screens.report import short_model

    models = ["meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"]
    shown = {short_model(m, 10, models) for m in models}  # from the end both read "Llama-3.1…"
    assert len(shown) == 2 and all(len(s) <= 10 for s in shown)
