"""Annotate serves exactly the stored validation plan (pipeline.analysis.validation), in its order."""

from __future__ import annotations

from pipeline.analysis.validation import validation_report
from pipeline.analysis.validation_plan import draw_plan, load_plan, save_plan
from pipeline.store.database import open_store
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.app import goto, on_screen, settle, text_of
from unspecific_tui.app import UnspecificApp


async def test_annotate_serves_the_plan_and_its_labels_reach_the_report(tmp_path):
    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=6, seed=3))
    store = open_store(path)
    save_plan(store, draw_plan(store, per_domain=3, passed=3, seed=5, name="pilot"))
    plan = load_plan(store)
    store.close()
    app = UnspecificApp(path, stages={}, annotator="alice", sample_seed=0)
    async with on_screen(app, "5", (140, 40)) as pilot:
        screen = app.screen
        # Exactly the plan, in its order: not the screen's own sample of every flipped item.
        assert [(i.constraint_id, i.generation_id, i.summary_id) for i in screen.queue.items] == \
            [(p.constraint_id, p.response_id, p.summary_id) for p in plan.items]
        head = text_of(screen.query_one("#ann-head"))
        assert screen.queue.plan == "pilot" and f"plan pilot · item 1/{len(plan.items)}" in head
        # The metric's call stays off the screen: the head names no stratum.
        assert "flipped" not in text_of(screen.query_one("#ann-head")).lower()
        for _ in range(len(screen.queue.items)):
            item = screen.queue.items[screen.queue.index]
            await pilot.press("s" if item.flipped else "i")
            await pilot.pause()
        # The panel scores by `validate report`'s rule (pipeline.analysis.validation.annotate_scores).
        shown = screen.stats.scores["alice"]
        assert (shown.precision.value, shown.recall.value, shown.integrated.value) == (1.0, 1.0, 0.0)
    store = open_store(path)
    try:
        report = validation_report(store, annotator="alice", n_resamples=100)
    finally:
        store.close()
    # Alice agreed with the metric on every item: precision and recall 1, nothing integrated.
    flipped = sum(p.stratum != "passed" for p in plan.items)
    assert flipped > 0 and len(plan.items) - flipped == 3
    assert report.labelled == len(plan.items)
    assert (report.tp, report.fp, report.fn, report.tn) == (flipped, 0, 0, 3)
    assert report.precision.value == report.recall.value == 1.0 and report.integrated.value == 0.0


async def test_judge_check_hides_the_verdicts_until_answered(tmp_path):
    from pipeline.analysis.judge_validation import draw_judge_plan, load_judge_plan, save_judge_plan

    def load_plan_items(store):
        return load_judge_plan(store).items

    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=6, seed=3))
    app = UnspecificApp(path, stages={}, annotator="alice", sample_seed=0)
    async with on_screen(app, "5", (140, 40)) as pilot:
        await pilot.press("v")  # no judge plan yet: stays in labelling
        await pilot.pause()
        assert not app.screen.judges.on
    store = open_store(path)
    save_judge_plan(store, draw_judge_plan(store, per_stratum=2, seed=1))
    n = len(load_plan_items(store))
    store.close()
    app = UnspecificApp(path, stages={}, annotator="alice", sample_seed=0)
    async with on_screen(app, "5", (140, 40)) as pilot:
        await pilot.press("v")
        await pilot.pause()
        screen = app.screen
        assert screen.judges.on and len(screen.judges.items) == n > 2
        item = screen.judges.items[0]
        head = text_of(screen.query_one("#ann-head"))
        assert "judge check" in head and f"{item.text_kind} #{item.generation_id}" in head
        verdicts = screen.query_one("#ann-summary")._text.plain
        assert "Hidden until you answer" in verdicts and "judge-a" not in verdicts
        # The pane shows exactly the text the item names.
        shown = screen.query_one("#ann-response")._text.plain
        assert shown == app.view.instruction(item.instruction_id).generations[item.generation_id].text
        await pilot.press("n")  # No, in the judge check: saved, not a move
        await pilot.pause()
        assert screen.judges.index == 0
        assert app.view.text_labels()[(item.constraint_id, item.generation_id)] == {"alice": 0}
        verdicts = screen.query_one("#ann-summary")._text.plain
        assert "judge-a" in verdicts and "judge-b" in verdicts and "Hidden" not in verdicts
        assert "your answer: No" in text_of(screen.query_one("#ann-head"))
        await pilot.press("j", "y")
        await pilot.pause()
        second = screen.judges.items[1]
        assert app.view.text_labels()[(second.constraint_id, second.generation_id)] == {"alice": 1}
        assert f"alice: 2/{n} answered" in text_of(screen.query_one("#ann-stats"))
        await pilot.press("k", "u")  # from the first item: the next one without an answer
        await pilot.pause()
        assert screen.judges.index == 2
        await pilot.press("v")  # back to labelling: n moves again
        await pilot.pause()
        assert not screen.judges.on
        index = screen.queue.index
        await pilot.press("n")
        await pilot.pause()
        assert screen.queue.index == index + 1
        await pilot.press("u")  # alice has labelled nothing: the next item
        await pilot.pause()
        assert screen.queue.index == (index + 2) % len(screen.queue.items)


async def test_report_screen_says_which_judges_are_unvalidated(tmp_path):
    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=6, seed=3))
    app = UnspecificApp(path, stages={}, annotator="alice", sample_seed=0)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        await app.workers.wait_for_complete()
        await goto(app, pilot, "6")
        await app.workers.wait_for_complete()
        await settle(app, pilot)
        judges = " ".join(text_of(app.screen.query_one("#report-judges")).split())
        assert "judge-a unvalidated" in judges and "judge-b unvalidated" in judges
        assert "unspecific validate judges" in judges  # the one command that validates them


def test_the_next_unlabelled_item_is_found_round_the_list() -> None:
    from types import SimpleNamespace

    from unspecific_tui.widgets.annotate.items import next_undone

    items = [SimpleNamespace(constraint_id=c, generation_id=10) for c in (1, 2, 3)]
    done = {(2, 10): {"alice": 1}, (3, 10): {"bob": 0}}
    assert next_undone(items, 0, done, "alice") == 2  # item 1 has alice's label: passed over
    assert next_undone(items, 2, done, "alice") == 0  # round the list
    assert next_undone(items, 1, {**done, (1, 10): {"alice": 0}}, "alice") == 2
    assert next_undone(items, 0, {(c, 10): {"alice": 1} for c in (1, 2, 3)}, "alice") is None
