"""Every screen opens by key, help and the command palette list keys, 80x24 works; Instructions
filters and sorting; Compare highlights; Annotate saves labels and updates precision/recall."""

from __future__ import annotations

import sqlite3

import pytest

from pipeline.store.view import StoreView
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.app import (
    RESPONSE,
    RESPONSE_2,
    goto,
    make_known_store,
    on_screen,
    settle,
    store_rows,
    text_of,
)
from unspecific_tui.app import SCREENS_ORDER, UnspecificApp
from unspecific_tui.data import compute_analysis
from unspecific_tui.screens.help import HelpScreen


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    path = tmp_path_factory.mktemp("syn") / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=24, seed=3))
    return path


def span(text: str, part: str) -> tuple[int, int]:
    start = text.index(part)
    return (start, start + len(part))


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
async def test_every_screen_by_key(synthetic, size):
    app = UnspecificApp(synthetic, stages={})
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        assert app.current_mode == "build"
        for key, name in zip("123456", SCREENS_ORDER):
            await pilot.press(key)
            await settle(app, pilot)
            assert app.current_mode == name
            assert type(app.screen).__name__.lower() == f"{name}screen"
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = text_of(app.screen.query_one("#help-keys"))
        assert "Chart" in keys and "Build" in keys  # the Report screen's key and the app's
        await pilot.press("escape")
        await pilot.pause()
        assert app.current_mode == "report" and not isinstance(app.screen, HelpScreen)


async def test_help_lists_keys_of_current_screen(synthetic):
    app = UnspecificApp(synthetic, stages={})
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("3", "question_mark")
        await pilot.pause()
        keys = text_of(app.screen.query_one("#help-keys"))
        assert "Flipped" in keys and "Flagged" in keys and "Chart" not in keys


async def test_command_palette_has_screens_and_actions(synthetic):
    app = UnspecificApp(synthetic, stages={})
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("3")
        await pilot.pause()
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert {f"Screen: {n.capitalize()}" for n in SCREENS_ORDER} <= set(titles)
        assert "Audit: Flipped" in titles and "Reload store" in titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Screen: Report")
        await pilot.pause(0.3)
        await goto(app, pilot, "enter")
        assert app.current_mode == "report"


async def test_instructions_filters_and_sort(synthetic):
    view = StoreView.open(synthetic)
    expected = compute_analysis(view)
    view.close()
    app = UnspecificApp(synthetic, stages={})
    async with on_screen(app, "2", (160, 40)) as pilot:
        screen = app.screen
        table = screen.query_one("#instr-table")
        assert table.row_count == len(expected.rows) == 24 * 2
        screen.set_filter("condition", "eval")
        screen.set_filter("model", "model-b")
        await pilot.pause()
        want = [r for r in expected.rows if r.condition == "eval" and r.model == "model-b"]
        assert table.row_count == len(want) > 0
        assert {r.instruction_id for r in screen.rows} == {r.instruction_id for r in want}
        screen.set_filter("flag", "copied_ngram")
        await pilot.pause()
        assert table.row_count == sum(1 for r in want if r.flags["copied_ngram"] > 0)
        screen.set_filter("flag", "quote_missing")
        screen.set_filter("condition", None)
        screen.set_filter("model", None)
        await pilot.pause()
        assert table.row_count == sum(1 for r in expected.rows if r.quote_missing > 0)
        await pilot.press("escape")  # clears every filter
        await pilot.pause()
        assert table.row_count == 48
        screen.sort_by("org", reverse=True)
        await pilot.pause()
        orgs = [r.org for r in screen.rows]
        assert orgs == sorted(orgs, reverse=True) and orgs[0] > orgs[-1]
        assert str(table.get_row_at(0)[5]) == f"{100 * orgs[0]:.0f}"
        screen.sort_by("superficial", reverse=False)
        await pilot.pause()
        sups = [r.superficial for r in screen.rows if r.superficial is not None]
        assert sups == sorted(sups)
        # Enter opens the Audit on that instruction and model.
        first = screen.rows[0]
        table.focus()
        await goto(app, pilot, "enter")
        assert app.current_mode == "audit"
        assert app.screen.shown.instruction_id == first.instruction_id
        assert app.screen.shown.writer == (first.model, first.mode)


async def test_compare_highlights_evidence_in_both(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={})
    async with on_screen(app, "4", (140, 40)) as pilot:
        screen = app.screen
        table = screen.query_one("#compare-table")
        assert table.row_count == 3 and screen.writers == [("m1", "direct"), ("m2", "direct")]
        # C1: both models satisfy it on the full response and the summary.
        assert [str(c) for c in table.get_row_at(0)[1:5]] == ["yes", "yes", "yes", "yes"]
        # C2 (row 2) flipped for both: Core says so, as Audit and the report count it.
        assert [str(c) for c in table.get_row_at(1)[1:5]] == ["yes", "FLIP", "yes", "FLIP"]
        assert screen.highlighted["cmp-a"] == [span(RESPONSE, "a flood defence plan for the river district")]
        assert screen.highlighted["cmp-b"] == [span(RESPONSE_2, "the flood defence plan passed")]
        table.focus()
        await pilot.press("down")
        await pilot.pause()
        assert screen.highlighted["cmp-a"] == sorted([
            span(RESPONSE, "at a packed meeting"),
            span(RESPONSE, "residents argued about it at a packed meeting")])
        assert screen.highlighted["cmp-b"] == [span(RESPONSE_2, "Weather was calm that week")]
        await pilot.press("a")  # audit that constraint
        await settle(app, pilot)
        assert app.current_mode == "audit" and app.screen.shown.constraint_id == known.c2


async def test_compare_shows_a_rejudged_verdict_not_the_one_it_replaced(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    conn = sqlite3.connect(known.path)
    with conn:  # every verdict on C1 judged again under a new prompt, now No
        conn.execute(
            "INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, "
            "prompt_hash, verdict, quote,"
            " created_at) SELECT generation_id, constraint_id, judge, judging_mode, "
            "'new', 0, NULL, created_at"
            " FROM verdicts WHERE constraint_id = ?", (known.c1,))
    conn.close()
    app = UnspecificApp(known.path, stages={})
    async with on_screen(app, "4", (140, 40)):
        table = app.screen.query_one("#compare-table")
        assert [str(c) for c in table.get_row_at(0)[1:5]] == ["no", "no", "no", "no"]
        assert all(len(v) == 2 for (cid, _), v in app.screen.verdicts.items()
                   if cid == known.c1)  # two judges


async def test_annotation_saved_and_scores_update(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={}, annotator="alice", sample_seed=0)
    async with on_screen(app, "5", (140, 40)) as pilot:
        screen = app.screen
        # Flipped: C2 for m1 and m2; pass-both sampled: C1 for m1 and m2.
        assert {(i.constraint_id, i.model, i.flipped) for i in screen.queue.items} == {
            (known.c2, "m1", True), (known.c2, "m2", True), (known.c1, "m1", False), (known.c1, "m2", False)}
        labels = {}
        for _ in range(len(screen.queue.items)):
            item = screen.queue.items[screen.queue.index]
            key = "s" if item.flipped and item.model == "m1" else "i"
            labels[(item.constraint_id, item.generation_id)] = key
            await pilot.press(key)
            await pilot.pause()
        rows = store_rows(app, "SELECT constraint_id, generation_id, annotator, label FROM annotations")
        assert len(rows) == 4 and {r[2] for r in rows} == {"alice"}
        # The metric calls both flipped items superficial; alice agrees on one: precision 1/2, recall 1/1.
        sc = screen.stats.scores["alice"]
        assert (sc.n, sc.precision.value, sc.recall.value) == (4, 0.5, 1.0)
        stats = text_of(screen.query_one("#ann-stats"))
        assert "0.50" in stats and "1.00" in stats
        # A note on the current item keeps its label.
        await pilot.press("e")
        await pilot.press(*"only in a detail", "enter")
        await pilot.pause()
        item = screen.queue.items[screen.queue.index]
        note = store_rows(app,
                          "SELECT label, note FROM annotations WHERE constraint_id = ? AND generation_id = ?"
                          " AND annotator = 'alice'", (item.constraint_id, item.generation_id))[0]
        assert note[1] == "only in a detail" and note[0] in ("superficial", "integrated")


async def test_kappa_between_annotators(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    conn = sqlite3.connect(known.path)
    rows = [(known.c2, known.response, "bob", "superficial"),
            (known.c2, known.response_2, "bob", "integrated"),
            (known.c1, known.response, "bob", "integrated"),
            (known.c1, known.response_2, "bob", "superficial")]
    conn.executemany("INSERT INTO annotations(constraint_id, generation_id, annotator, "
                     "label, note, created_at) VALUES (?, ?, ?, ?, '', 'x')", rows)
    conn.commit()
    conn.close()
    app = UnspecificApp(known.path, stages={}, annotator="alice")
    async with on_screen(app, "5", (140, 40)) as pilot:
        screen = app.screen
        assert ("alice", "bob") not in screen.stats.kappas  # alice has no label yet
        bob = {(c, g): lab for c, g, _, lab in rows}
        for _ in range(len(screen.queue.items)):
            item = screen.queue.items[screen.queue.index]
            await pilot.press("s" if bob[(item.constraint_id, item.generation_id)] == "superficial" else "i")
            await pilot.pause()
        k, n = screen.stats.kappas[("alice", "bob")]
        assert n == 4 and k == pytest.approx(1.0)


async def test_report_shows_metrics_groups_with_intervals(synthetic):
    from pipeline.analysis.metrics import compute_metrics
    from pipeline.store.database import open_store

    store = open_store(synthetic, readonly=True)
    metrics = compute_metrics(store, seed=0)
    store.close()
    groups = [g for g in metrics.groups if g.ratio == 0.25]
    want = {(g.domain, g.condition, g.model,
             f"{100 * g.org.value:.1f} [{100 * g.org.low:.1f}, {100 * g.org.high:.1f}]",
             f"{100 * g.core.value:.1f} [{100 * g.core.low:.1f}, {100 * g.core.high:.1f}]") for g in groups}
    app = UnspecificApp(synthetic, stages={})
    async with on_screen(app, "6", (160, 40)) as pilot:
        table = app.screen.query_one("#report-table")
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        assert {(str(r[0]), str(r[1]), str(r[2]), r[5], r[6]) for r in rows} == want
        assert {str(r[3]) for r in rows} == {g.mode for g in groups}  # the mode has its own column
        conditions = [str(r[1]) for r in rows if r[0] == rows[0][0] and r[2] == rows[0][2]]
        assert conditions == ["single", "none", "direct", "eval"]  # the paper's order
        await pilot.press("g")
        await pilot.pause()
        assert app.screen.chart == "superficial"


async def test_instructions_pages_of_rows(tmp_path, monkeypatch):
    from unspecific_tui.screens import instructions

    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=12, seed=4))
    monkeypatch.setattr(instructions, "PAGE", 10)
    app = UnspecificApp(path, stages={})
    async with on_screen(app, "2", (120, 30)) as pilot:
        screen = app.screen
        table = screen.query_one("#instr-table")
        assert len(screen.rows) == 24 and table.row_count == 10
        assert "+ for more" in text_of(screen.query_one("#instr-status"))
        screen.sort_by("core", reverse=True)  # sorting runs over every row, not the page
        await pilot.pause()
        cores = sorted((r.core for r in screen.rows), reverse=True)
        assert float(str(table.get_row_at(0)[6])) == round(100 * cores[0])
        await pilot.press("plus", "plus")
        await pilot.pause()
        assert table.row_count == 24 and "+ for more" not in text_of(screen.query_one("#instr-status"))


async def test_every_screen_on_an_empty_store(tmp_path):
    app = UnspecificApp(tmp_path / "new.sqlite", stages={})  # created on open
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert "no run yet" in text_of(app.screen.query_one("#run-totals"))
        expected = {"audit": ("#audit-head", "No constraints"),
                    "compare": ("#compare-head", "No instructions"),
                    "annotate": ("#ann-head", "Nothing to annotate"), "report": ("#report-head", "No judged")}
        for key, name in zip("23456", SCREENS_ORDER[1:]):
            await pilot.press(key)
            await settle(app, pilot)
            assert app.current_mode == name
            if name in expected:
                widget, words = expected[name]
                assert words in text_of(app.screen.query_one(widget))
        assert app.return_code is None
