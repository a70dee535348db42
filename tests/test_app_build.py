"""Build screen: runs, stages with a fake stage function, step mode, pause/resume, errors."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

from pipeline.core.config import parse_config
from pipeline.core.errors import EndpointError
from pipeline.core.progress import ProgressEvent
from pipeline.store.database import now
from tests.support.app import goto, make_known_store, settle, store_rows, text_of
from unspecific_tui.app import UnspecificApp
from unspecific_tui.screens.help import ErrorScreen

CONFIG = parse_config({"endpoints": {"fake": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}},
                       "roles": {"generator": "fake", "judges": ["fake"], "summarizer": "fake",
                                 "naturalness_judge": "fake",
                                 "models_under_test": ["fake"]}})
TOTAL = 6


@dataclass
class FakeOptions:
    run_id: str = ""


@dataclass
class FakeSummary:
    written: int


def make_stage(gate: threading.Event | None = None, calls: list | None = None):
    """A resumable synthesize stage: one instruction per unit, skipping those already stored."""

    async def run_synthesize(store, config, client, options: FakeOptions, *, progress, stop=None,
                             max_units=None):
        assert client is not None and options.run_id  # the app opened a client and filled the run id
        if calls is not None:
            calls.append(max_units)
        have = store.scalar("SELECT count(*) FROM instructions WHERE run_id = ?", [options.run_id])
        written = 0
        for i in range(have, TOTAL):
            if stop or (max_units is not None and written >= max_units):
                break
            while gate is not None and not gate.is_set():  # the stage runs on the worker's own loop
                await asyncio.sleep(0.01)
            store.conn.execute(
                "INSERT INTO instructions(run_id, domain, condition, main_task, status, created_at)"
                " VALUES (?, 'news', 'eval', ?, 'synthesized', ?)", (options.run_id, f"fake task {i}", now()))
            store.commit()
            written += 1
            progress(ProgressEvent("synthesize", i + 1, TOTAL, f"instruction {i + 1} written"))
            await asyncio.sleep(0.01)
        return FakeSummary(written)

    return run_synthesize


async def failing_judge(store, config, client, options, *, progress, stop=None, max_units=None):
    progress(ProgressEvent("judge", 0, 3, "asking the judge"))
    raise EndpointError("endpoint 'fake': 401 Unauthorized (check FAKE_KEY)")


def instructions_in(app, run_id: str) -> int:
    return store_rows(app, "SELECT count(*) FROM instructions WHERE run_id = ?", (run_id,))[0][0]


async def select_stage(pilot, app, name: str) -> None:
    table = app.screen.query_one("#stages")
    table.focus()
    table.move_cursor(row=table.get_row_index(name))
    await pilot.pause()


async def wait_idle(app, pilot) -> None:
    for _ in range(200):
        if app.screen.runner.running is None:
            break
        await asyncio.sleep(0.02)
    await settle(app, pilot)


async def test_runs_and_counts_shown(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, stages={})
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        runs = screen.query_one("#runs")
        assert runs.row_count == 1 and runs.get_row_at(0)[0] == "r1"
        assert screen.stages.counts["synthesize"] == 1 and screen.stages.counts["respond"] == 2
        assert screen.stages.counts["summarize"] == 2 and screen.stages.counts["judge"] == 24
        assert "calls 12" in text_of(screen.query_one("#run-totals"))
        assert str(app.title).endswith(str(known.path)) and "r1" in app.sub_title
        # Stages absent from the registry are marked, not hidden.
        assert screen.stages.states["respond"] == "missing"


async def test_step_then_continue(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    calls: list = []
    app = UnspecificApp(known.path, config=CONFIG, stages={"synthesize": make_stage(calls=calls)})
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        await pilot.press("n", "y")  # a new run, once asked and answered
        await settle(app, pilot)
        run_id = app.run_id
        assert run_id != "r1" and run_id.startswith("build-")
        await select_stage(pilot, app, "synthesize")
        await pilot.press("full_stop")
        await wait_idle(app, pilot)
        assert calls == [1] and instructions_in(app, run_id) == 1
        assert app.screen.stages.states["synthesize"] == "paused"
        step_view = text_of(app.screen.query_one("#step-view"))
        assert "instructions +1" in step_view and "fake task 0" in step_view
        await pilot.press("s")  # continue to the end
        await wait_idle(app, pilot)
        assert calls == [1, None] and instructions_in(app, run_id) == TOTAL
        assert app.screen.stages.states["synthesize"] == "done"
        assert app.screen.stages.progress["synthesize"] == (TOTAL, TOTAL)


async def test_pause_and_resume(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    gate = threading.Event()
    app = UnspecificApp(known.path, config=CONFIG, run_id="r1", stages={"synthesize": make_stage(gate)})
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        await select_stage(pilot, app, "synthesize")
        await pilot.press("s")
        await pilot.pause()
        assert app.screen.stages.states["synthesize"] == "running"
        await pilot.press("space")  # pause requested while the unit waits on the gate
        assert app.screen.runner.stop_flag.stopped
        gate.set()
        await wait_idle(app, pilot)
        assert app.screen.stages.states["synthesize"] == "paused"
        paused_at = instructions_in(app, "r1")
        assert 1 <= paused_at < TOTAL  # the unit in flight finished, no more
        await pilot.press("s")  # resume: only what is missing
        await wait_idle(app, pilot)
        assert instructions_in(app, "r1") == TOTAL
        assert app.screen.stages.states["synthesize"] == "done"


async def test_failed_stage_shows_error_and_app_keeps_running(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, config=CONFIG, run_id="r1",
                        stages={"judge": failing_judge, "synthesize": make_stage()})
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        await select_stage(pilot, app, "judge")
        await pilot.press("s")
        for _ in range(200):
            if isinstance(app.screen, ErrorScreen):
                break
            await asyncio.sleep(0.02)
        assert isinstance(app.screen, ErrorScreen)
        assert "401 Unauthorized" in text_of(app.screen.query_one("#error-msg"))
        assert app.screen.query_one("#error-box").border_title == "LLM endpoint error"
        await pilot.press("escape")
        await pilot.pause()
        build = app.screen
        assert build.stages.states["judge"] == "failed" and build.runner.running is None
        # The run goes on: another stage starts fine.
        await select_stage(pilot, app, "synthesize")
        await pilot.press("s")
        await wait_idle(app, pilot)
        assert build.stages.states["synthesize"] == "done"


async def test_missing_stage_reports_instead_of_crashing(tmp_path):
    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, config=CONFIG, run_id="r1", stages={})
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        await select_stage(pilot, app, "respond")
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, ErrorScreen)


async def test_real_build_stages_step_through_fake_server(tmp_path):
    """The real synthesize/base/revise stages (pipeline.stages.build), driven from the Build screen
    against the scripted fake server: step one pair, inspect, continue, then audit the result."""
    from tests.fakes.fake_server import FakeOpenAIServer
    from tests.fakes.responders import ScriptedModel, fake_config, make_store

    make_store(tmp_path / "s.sqlite", n_pairs=2).close()
    with FakeOpenAIServer(ScriptedModel(with_flags=False)) as server:
        config = fake_config(server.base_url, build={"conditions": ["eval", "single"], "n_instructions": 2})
        app = UnspecificApp(tmp_path / "s.sqlite", config=config)
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(app, pilot)
            assert app.screen.stages.states["synthesize"] == "idle"  # the real module is found
            await pilot.press("n")  # a new run: asked first
            await goto(app, pilot, "y")
            run_id = app.run_id
            await select_stage(pilot, app, "synthesize")
            await pilot.press("full_stop")  # one pair: its single and eval instructions
            await wait_idle(app, pilot)
            log = app.screen.query_one("#build-log").lines
            assert app.screen.stages.states["synthesize"] == "paused", log
            per_pair = instructions_in(app, run_id)  # single, eval (and the shared common source)
            assert per_pair >= 2
            step_view = text_of(app.screen.query_one("#step-view"))
            assert f"instructions +{per_pair}" in step_view and "constraints +" in step_view
            written = app.screen.written.last_instruction
            assert written is not None
            await pilot.press("a")  # inspect what the step wrote
            await settle(app, pilot)
            assert app.current_mode == "audit" and app.screen.shown.instruction_id == written
            await goto(app, pilot, "1")
            await pilot.press("s")
            await wait_idle(app, pilot)
            assert instructions_in(app, run_id) == 2 * per_pair
            for stage in ("base", "revise"):
                await select_stage(pilot, app, stage)
                await pilot.press("s")
                await wait_idle(app, pilot)
                assert app.screen.stages.states[stage] == "done", app.screen.query_one("#build-log").lines
            calls = store_rows(app, "SELECT calls FROM runs WHERE id = ?", (run_id,))[0][0]
            assert calls > 0  # usage recorded once, by the stages themselves
            revised = store_rows(app, "SELECT count(*) FROM constraints WHERE origin = 'revised'")[0][0]
            assert revised > 0
            # Evaluation from the same screen: respond, summarize, judge (pipeline.stages.evaluate).
            for stage in ("respond", "summarize", "judge"):
                await select_stage(pilot, app, stage)
                await pilot.press("s")
                await wait_idle(app, pilot)
                assert app.screen.stages.states[stage] == "done", app.screen.query_one("#build-log").lines
            judged = store_rows(app, "SELECT count(*), sum(quote_found IS NOT NULL) FROM verdicts"
                                " WHERE generation_id IN (SELECT id FROM generations "
                                "WHERE kind = 'summary')")[0]
            assert judged[0] > 0 and judged[1] > 0
            calls_after = store_rows(app, "SELECT calls FROM runs WHERE id = ?", (run_id,))[0][0]
            assert calls_after > calls  # the evaluation stages added their usage to the run, unit by unit
            # Every screen reads what the real stages wrote.
            await goto(app, pilot, "3")
            shown = app.screen.shown
            assert shown.constraint_id is not None and shown.writer.model == "fake"
            assert any(span for _, span in shown.quotes["response"])  # judges' quotes found in the response
            await goto(app, pilot, "2")
            # 2 pairs x (eval, single) x 1 model
            assert app.screen.query_one("#instr-table").row_count == 2 * 2
            await goto(app, pilot, "6")
            assert app.screen.cells and {c.condition for c in app.screen.cells} == {"eval", "single"}
