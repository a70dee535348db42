"""One rule decides the summary ratio every view shows (pipeline.core.definitions.view_ratio): on
random stores and random choices, the app's analysis, the app's screens (app.view_ratio: Compare and
Annotate, their own choices included), `report`, `export --suspicious` and the suspicion ranking name
the same ratio; and a ratio becomes a grouping key by one rounding (ratio_key, RATIO_DIGITS)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pipeline.analysis.suspicion import suspicion_queue
from pipeline.cli.export_cmd import _shown_ratio
from pipeline.core.definitions import DEFAULT_RATIO, next_ratio, ratio_key, same_ratio, view_ratio
from pipeline.outputs.report import ReportOptions, build_report
from pipeline.store.database import open_store
from pipeline.store.generations import summary_ratios
from pipeline.store.view import StoreView
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from unspecific_tui.data import compute_analysis

CHOICES = (None, 0.1, 0.25, 0.3, 0.5, 0.9, 0.25000000001)


@pytest.mark.parametrize("seed", range(6))
def test_every_view_names_the_same_ratio(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    ratios = tuple(sorted(rng.sample((0.1, 0.25, 0.5, 0.75), rng.randint(1, 3)), reverse=True))
    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=4, n_constraints=4, ratios=ratios, seed=seed,
                                              domains=("news",)))
    store = open_store(path)
    view = StoreView.open(path)
    try:
        stored = summary_ratios(store)
        assert [round(r, 9) for r in stored] == [round(r, 9) for r in ratios]
        for asked in CHOICES:
            expected = view_ratio(stored, asked)
            assert any(same_ratio(expected, r) for r in stored)  # always a ratio the store holds
            analysis = compute_analysis(view, ratio=asked)
            assert same_ratio(analysis.ratio, expected) and analysis.ratios == stored
            report = build_report(store, ReportOptions(ratio=DEFAULT_RATIO if asked is None
                                                       else asked, n_resamples=20,
                                                       copy=False))
            assert report.ratio is not None and same_ratio(report.ratio, expected), asked
            if asked is None or any(same_ratio(asked, r)
                                    for r in stored):  # export refuses an unstored --ratio
                exported = _shown_ratio(store, None, asked)
                assert exported is not None and same_ratio(exported, expected)
            queue = suspicion_queue(store, ratio=asked, limit=5)
            assert all(same_ratio(e.ratio, expected) for e in queue)
    finally:
        view.close()
        store.close()


def test_no_summaries_means_the_default_and_r_cycles_by_tolerance() -> None:
    assert view_ratio([], None) == DEFAULT_RATIO and view_ratio([], 0.5) == DEFAULT_RATIO
    assert next_ratio([0.5, 0.25, 0.1], 0.25000000001) == 0.1  # a ratio read back, not the same float
    assert next_ratio([0.5, 0.25, 0.1], 0.1) == 0.5 and next_ratio([0.5, 0.25], 0.3) == 0.5
    # The metrics group by the same tolerance the views compare with.
    assert ratio_key(0.25000000001) == ratio_key(0.25) and ratio_key(0.2500001) != ratio_key(0.25)
    assert same_ratio(0.25000000001, 0.25) and not same_ratio(0.2500001, 0.25)


async def test_compare_and_annotate_ask_the_rule(tmp_path: Path) -> None:
    """Compare and Annotate show the ratio app.view_ratio names for their choice (pipeline.core.
    definitions.view_ratio of the store's summaries): in their heads, panes and context; Compare's `r`
    goes through it too, and its choice holds on every instruction (one without summaries at it says
    so, never shows another ratio); Annotate's item is shown at its summary's ratio, by the same rule."""
    import sqlite3

    from tests.support.app import goto, settle, text_of
    from unspecific_tui.app import UnspecificApp

    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=3, n_constraints=6, ratios=(0.5, 0.25, 0.1),
                                              seed=2, domains=("news",)))
    conn = sqlite3.connect(path)
    with conn:  # the second instruction summarised at 0.75 where the others are at 0.1
        second = conn.execute("SELECT min(id) FROM instructions"
                              " WHERE id > (SELECT min(id) FROM instructions)")
        conn.execute("UPDATE generations SET ratio = 0.75 WHERE kind = 'summary' AND abs(ratio - 0.1) < 1e-6"
                     " AND instruction_id = ?", second.fetchone())
    conn.close()
    app = UnspecificApp(path, stages={})
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(app, pilot)
        stored = app.view.summary_ratios()
        assert [ratio_key(r) for r in stored] == [0.75, 0.5, 0.25, 0.1]
        screen = await goto(app, pilot, "4")
        assert screen.data is not None and screen.context().ratio == view_ratio(stored) == DEFAULT_RATIO
        for asked in CHOICES:
            screen.ratio = asked
            screen.load()
            expected = view_ratio(stored, asked)
            context = screen.context()
            assert context is not None and context.ratio == app.view_ratio(asked) == expected, asked
            assert f"summary {expected:g}" in text_of(screen.query_one("#compare-head"))
            assert screen.query_one("#cmp-a-summary").border_title.endswith(f"summary {expected:g}")
        screen.ratio = 0.25
        screen.load()
        await pilot.press("r")  # the instruction's next ratio, through the rule
        await pilot.pause()
        expected = view_ratio(stored, next_ratio(screen.data.ratios, 0.25))
        assert same_ratio(expected, 0.1) and screen.context().ratio == expected
        await pilot.press("right_square_bracket")  # the second instruction: nothing at 0.1
        await pilot.pause()
        assert not any(same_ratio(r, 0.1) for r in screen.data.ratios)
        assert screen.context().ratio == expected  # the choice holds: no other ratio shown instead
        assert screen.query_one("#cmp-a-summary")._text.plain == "(no summary at this ratio)"

        screen = await goto(app, pilot, "5")
        assert screen.queue.items, "the synthetic store has flipped constraints to label"
        item = screen.queue.items[screen.queue.index]
        summary = app.view.instruction(item.instruction_id).generations[item.summary_id]
        assert summary.ratio is not None
        context = screen.context()
        assert context is not None
        assert context.ratio == app.view_ratio(summary.ratio) == view_ratio(stored, None)
        elsewhere = next(g for g in app.view.instruction(item.instruction_id).generations.values()
                         if g.kind == "summary" and g.ratio is not None
                         and not same_ratio(g.ratio, summary.ratio))
        assert elsewhere.ratio is not None
        # A plan's item, at its plan's ratio.
        assert screen._item_ratio(elsewhere) == view_ratio(stored, elsewhere.ratio)
        assert screen._item_ratio(None) == view_ratio(stored, screen.queue.ratio)


def test_ratio_keys_have_one_rounding() -> None:
    """A ratio is rounded to a key in one place: pipeline.core.definitions.ratio_key (RATIO_DIGITS),
    and the store's SQL rounds to the same RATIO_DIGITS; no module rounds a ratio to digits of its own."""
    import re

    root = Path(__file__).resolve().parents[1]
    # round(g.ratio, 6), round(float(ratio), 9)
    own = re.compile(r"round\(\s*[\w.]*ratio\w*\s*\)?\s*,\s*\d+\s*\)")
    code = sorted(p for d in ("pipeline", "unspecific_tui") for p in (root / d).rglob("*.py"))
    strays = [f"{p.relative_to(root)}:{n}" for p in code
              for n, line in enumerate(p.read_text().splitlines(), 1)
              if own.search(line.replace("float(", ""))]
    assert strays == [], f"round a ratio with ratio_key (SQL: RATIO_DIGITS): {strays}"
    assert ratio_key(None) is None and ratio_key(0.1 + 0.2) == ratio_key(0.3)
