"""Annotate serves exactly the stored validation plan (pipeline.validation), in its order."""

from __future__ import annotations

from app_support import settle, text_of

from pipeline.store import open_store
from pipeline.synthetic import SyntheticSpec, build_synthetic_store
from pipeline.validation import draw_plan, load_plan, save_plan, validation_report
from unspecific_tui.app import UnspecificApp


async def test_annotate_serves_the_plan_and_its_labels_reach_the_report(tmp_path):
    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=6, seed=3))
    store = open_store(path)
    save_plan(store, draw_plan(store, per_domain=3, passed=3, seed=5, name="pilot"))
    plan = load_plan(store)
    store.close()
    app = UnspecificApp(path, stages={}, annotator="alice", sample_seed=0)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("5")
        await settle(app, pilot)
        screen = app.screen
        # Exactly the plan, in its order: not the screen's own sample of every flipped item.
        assert [(i.constraint_id, i.generation_id, i.summary_id) for i in screen.items] == \
            [(p.constraint_id, p.response_id, p.summary_id) for p in plan.items]
        assert screen.plan == "pilot" and f"plan pilot · item 1/{len(plan.items)}" in text_of(screen.query_one("#ann-head"))
        # The metric's call stays off the screen: the head names no stratum.
        assert "flipped" not in text_of(screen.query_one("#ann-head")).lower()
        for _ in range(len(screen.items)):
            item = screen.items[screen.index]
            await pilot.press("s" if item.flipped else "i")
            await pilot.pause()
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
