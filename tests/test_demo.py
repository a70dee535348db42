"""The demo: depth-first (one pair through every stage before the next), resumable, and run
inside the app's Build screen as a child process that quitting stops at once."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.core.config import load_config
from pipeline.core.progress import ProgressEvent
from pipeline.stages.demo import DemoOptions, run_demo_blocking
from pipeline.store.database import open_store
from tests.fakes.fake_server import FakeOpenAIServer
from tests.fakes.responders import ScriptedModel, config_toml
from tests.support.app import goto, settle
from unspecific_tui.app import UnspecificApp
from unspecific_tui.screens.audit import AuditScreen

ROOT = Path(__file__).resolve().parent.parent
SMALL = DemoOptions(pairs=2, constraints=6, articles=30, embedder="hash")


def _config(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "unspecific.toml"
    path.write_text(config_toml(base_url))
    return path


def test_the_demo_takes_one_pair_through_every_stage_before_the_next(tmp_path):
    events: list[ProgressEvent | int] = []
    store_path = tmp_path / "demo.sqlite"
    written_when_ready: list[int] = []

    def on_auditable(instruction_id: int) -> None:
        events.append(instruction_id)
        conn = sqlite3.connect(store_path)
        written_when_ready.append(conn.execute("SELECT count(*) FROM instructions "
                                               "WHERE run_id = 'demo'").fetchone()[0])
        conn.close()

    with FakeOpenAIServer(ScriptedModel()) as server:
        config = load_config(str(_config(tmp_path, server.base_url)))
        result = run_demo_blocking(str(store_path), config, SMALL, progress=events.append,
                                   on_auditable=on_auditable)
        calls = server.calls
        assert calls > 0

        # Depth-first: pair 1's instructions are judged (auditable) before pair 2 starts.
        first_ready = next(i for i, e in enumerate(events) if isinstance(e, int))
        pair_two = next(i for i, e in enumerate(events)
                        if isinstance(e, ProgressEvent) and e.message.startswith("pair 2 of 2"))
        assert first_ready < pair_two
        stages_before = [e.stage for e in events[:first_ready] if isinstance(e, ProgressEvent)]
        for stage in ("synthesize", "base", "revise", "respond", "summarize", "judge"):
            assert stage in stages_before, stage
        # Pair 1's single instruction is ready before its eval sibling (and the shared common
        # synthesis it starts from) is written; pair 2 is untouched until pair 1 is all ready.
        assert written_when_ready == [1, 3, 4, 6]

        assert result.failed == []
        assert len(result.auditable) == 4  # 2 pairs x (eval, single)
        assert result.first_auditable_s is not None and result.first_auditable_s > 0
        store = open_store(store_path)
        try:
            done = store.scalar("SELECT count(*) FROM instructions WHERE run_id = 'demo' AND status = 'done'")
            runs = dict(store.conn.execute("SELECT id, status FROM runs").fetchall())
        finally:
            store.close()
        assert done == 4
        assert runs == {"demo": "done", "demo-evaluate": "done"}

        # Again: nothing is paid for twice, nothing is added.
        again = run_demo_blocking(str(store_path), config, SMALL)
        assert server.calls == calls
        assert sorted(again.auditable) == sorted(result.auditable)


def test_demo_events_come_as_json_lines_from_the_command(tmp_path):
    store_path = tmp_path / "demo.sqlite"
    with FakeOpenAIServer(ScriptedModel()) as server:
        cfg = _config(tmp_path, server.base_url)
        proc = subprocess.run(
            [sys.executable, "-m", "pipeline.cli", "--store", str(store_path), "--config", str(cfg),
             "demo", "--no-app",
             "--events", "--pairs", "1", "--constraints", "5", "--articles", "30", "--embedder", "hash"],
            capture_output=True, text=True, cwd=ROOT, timeout=300,
        )
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    ready = [e["auditable"] for e in events if "auditable" in e]
    assert len(ready) == 2
    assert events[-1]["finished"]["auditable"] == ready
    assert {e.get("stage") for e in events} >= {"synthesize", "respond", "judge"}


FAKE_DEMO = """
import json, sys, time
def emit(o):
    print(json.dumps(o), flush=True)
emit({"stage": "synthesize", "done": 1, "total": 1, "message": "instruction 1 written", "kind": "progress"})
emit({"stage": "judge", "done": 1, "total": 1, "message": "judged", "kind": "progress"})
emit({"auditable": 1})
print("a stray line that is not JSON", flush=True)
if "--hang" in sys.argv:
    time.sleep(120)
emit({"finished": {"auditable": [1], "failed": [], "seconds": {}, "first_auditable_s": 1.0}})
"""


def _fake_demo(tmp_path: Path, *extra: str) -> list[str]:
    script = tmp_path / "fake_demo.py"
    script.write_text(FAKE_DEMO)
    return [sys.executable, str(script), *extra]


async def test_the_app_runs_the_demo_and_offers_the_first_instruction_to_audit(tmp_path, monkeypatch):
    from tests.support.app import make_known_store

    monkeypatch.setenv("UNSPECIFIC_CACHE", str(tmp_path / "cache"))
    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, demo_command=_fake_demo(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert screen.runner.running is None  # the demo finished
        log = "\n".join(str(line.text) for line in screen.query_one("#build-log").lines)
        assert "instruction #1 is judged on its response and summary" in log
        assert "demo finished: 1 instruction(s) ready to audit" in log
        assert screen.stages.states["judge"] == "done"
        await goto(app, pilot, "a")
        assert isinstance(app.screen, AuditScreen)


async def test_quitting_stops_a_running_demo_at_once(tmp_path, monkeypatch):
    from tests.support.app import make_known_store

    monkeypatch.setenv("UNSPECIFIC_CACHE", str(tmp_path / "cache"))
    known = make_known_store(tmp_path / "s.sqlite")
    app = UnspecificApp(known.path, demo_command=_fake_demo(tmp_path, "--hang"))
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 20
        while app.demo is None or not app.demo.running:
            assert time.monotonic() < deadline
            await pilot.pause(0.05)
        while app.screen.written.last_instruction != 1:  # its first events arrived while it runs on
            assert time.monotonic() < deadline
            await pilot.pause(0.05)
        child = app.demo
        t0 = time.monotonic()
    assert not child.running
    assert time.monotonic() - t0 < 6


def test_the_demo_builds_one_pair_at_a_time(tmp_path):
    from pipeline.stages.build import BuildOptions, build_identity

    store_path = tmp_path / "demo.sqlite"
    events: list[ProgressEvent] = []
    with FakeOpenAIServer(ScriptedModel()) as server:
        config = load_config(str(_config(tmp_path, server.base_url)))
        run_demo_blocking(str(store_path), config, SMALL, progress=events.append)
    store = open_store(store_path)
    try:
        built = [r[0]
                 for r in store.conn.execute("SELECT DISTINCT pair_id FROM instructions WHERE run_id "
                                             "= 'demo' ORDER BY id")]
    finally:
        store.close()
    assert built == [1, 2]
    # Each pair's build names that pair alone, so a later pair's build never re-asks an earlier one.
    syntheses = [e.message for e in events if e.stage == "synthesize" and "to do" in e.message]
    assert syntheses and all(m.startswith("synthesize: 1 to do") for m in syntheses)
    # A build that names no pairs keeps the identity (and the run id) it had before the field existed.
    assert "pair_ids" not in build_identity(config, BuildOptions())["options"]
    assert build_identity(config, BuildOptions(pair_ids=(3,)))["options"]["pair_ids"] == (3,)


def test_conditions_go_cheapest_first_and_each_call_names_all_so_far():
    from pipeline.stages.demo import cumulative

    assert cumulative(("eval", "single")) == [("single",), ("single", "eval")]
    assert cumulative(("eval", "direct", "none", "single"))[-1] == ("single", "none", "direct", "eval")


class JunkJudge(ScriptedModel):
    """Every judge call answers 200 OK with prose that holds no verdict."""

    def __call__(self, request):
        from tests.fakes.fake_server import Reply
        from tests.fakes.responders import kind_of

        if kind_of(request) in ("judge_batched", "format_repair") and "TEXT" in str(request["messages"]):
            if kind_of(request) == "judge_batched" or "verdict" in str(request["messages"][-1]).lower():
                return Reply(text="What a lovely text. I enjoyed reading it.")
        return super().__call__(request)


def test_a_demo_whose_judge_answers_junk_fails_loudly_and_counts_nothing_as_no(tmp_path):
    store_path = tmp_path / "demo.sqlite"
    with FakeOpenAIServer(JunkJudge()) as server:
        config = load_config(str(_config(tmp_path, server.base_url)))
        result = run_demo_blocking(str(store_path), config, DemoOptions(pairs=1, constraints=5, articles=30,
                                                                        conditions=("single",),
                                                                        embedder="hash"))
    assert result.auditable == []  # nothing was judged: nothing to audit
    assert result.failed, "a judge answering junk must not pass as a finished demo"
    store = open_store(store_path)
    try:
        no = store.scalar("SELECT count(*) FROM verdicts WHERE verdict = 0")
        status = store.scalar("SELECT status FROM runs WHERE id = 'demo-evaluate'")
    finally:
        store.close()
    assert no == 0
    assert status == "failed"


class CopyingSummarizer(ScriptedModel):
    """Hands the first response (or a section of it) back whole whenever it is asked to summarise
    or shorten it."""

    first: str | None = None

    def __call__(self, request):
        from tests.fakes.fake_server import Reply
        from tests.fakes.responders import kind_of

        prompt = str(request["messages"][-1]["content"])
        if kind_of(request) == "summarize" or "Shorten it to" in prompt:
            body = prompt.split("<<<TEXT\n", 1)[1].split("\nTEXT>>>", 1)[0]
            self.first = self.first or body
            if body in self.first:
                return Reply(text=body)
        return super().__call__(request)


def test_a_unit_that_failed_is_not_asked_again_in_the_same_demo_run(tmp_path):
    """Pair 1's single response cannot be summarised: its summary is asked for (summarise, then
    shorten) while pair 1's single instruction is evaluated, and not again with its eval sibling;
    the next run asks again."""
    store_path = tmp_path / "demo.sqlite"
    model = CopyingSummarizer()
    with FakeOpenAIServer(model) as server:
        config = load_config(str(_config(tmp_path, server.base_url)))
        options = DemoOptions(pairs=1, constraints=5, articles=30, embedder="hash")
        result = run_demo_blocking(str(store_path), config, options)
        asked = [str(r["messages"][-1]["content"]) for r in server.requests]
        first_asks = sum(model.first in a for a in asked if "Summarise it" in a or "Shorten it to" in a)
        assert first_asks == 2
        assert len(result.auditable) == 1 and len(result.failed) == 1 and "summarize" in result.failed[0]
        calls = server.calls
        run_demo_blocking(str(store_path), config, options)
        assert server.calls > calls  # the next run asks again


def test_the_demo_bench_reads_refusals_and_tokens_from_a_store(tmp_path, monkeypatch) -> None:
    """bench/demo.py runs for 45 minutes before it reads the store: a broken reader there costs a
    whole run (it once called a store method that no longer existed)."""

    from bench import demo as bench
    from pipeline.store.database import now, open_store
    path = tmp_path / "s.sqlite"
    store = open_store(path)
    for i, body in enumerate(["I'm sorry, I can't help with that.", "A plain answer about the town."]):
        iid = store.db["instructions"].insert({"run_id": "r", "domain": "news", "condition": "single",
                                               "article_a": 100 + i, "main_task": "Write.",
                                               "n_constraints": 1,
                                               "status": "done", "created_at": now()}).last_pk
        store.db["generations"].insert({"kind": "response", "instruction_id": iid, "model": "m",
                                        "mode": "direct",
                                        "text_hash": store.put_text(body), "words": len(body.split())})
    store.db["llm_calls"].insert({"cache_key": "k", "template": "judge_lines", "prompt_tokens": 10,
                                  "completion_tokens": 5, "latency_s": 1.5, "created_at": now()})
    store.commit()
    store.close()
    assert bench.refusals(path) == (1, 2)
    assert bench.token_table(path) == [("judge_lines", 1, 10, 5, 1.5)]


def test_the_demo_bench_says_per_step_where_the_time_goes(tmp_path, monkeypatch) -> None:
    """bench/demo.py's lines on a demo store built against the fake server, which reports the prompt tokens
    it read from its one-slot prompt cache: per step, the tokens evaluated anew are the prompt's less those;
    the judge's line, in its exact form, sums the judge steps; the whole run and each model under test
    are set against the sum of their ideals, a model whose raw speeds were not measured said so."""
    import re

    from bench import demo as bench
    from tests.fakes.responders import multi_config_toml
    path = tmp_path / "demo.sqlite"
    with FakeOpenAIServer(ScriptedModel(), prompt_cache=True) as server:
        config_path = tmp_path / "unspecific.toml"
        config_path.write_text(multi_config_toml(server.base_url, models=2, judges=1, concurrency=1))
        options = DemoOptions(pairs=1, constraints=5, articles=30, embedder="hash")
        result = run_demo_blocking(str(path), load_config(str(config_path)), options)
    assert result.failed == []

    rows = bench.call_totals_of(path)
    speeds = {"model-gen": (100.0, 10.0), "model-j1": (50.0, 5.0), "model-m1": (200.0, 20.0),
              "model-summ": (100.0, 10.0)}
    lines = bench.step_lines(rows, speeds, "model-gen")
    store = open_store(path, readonly=True)
    try:
        said = store.scalar("SELECT count(*) FROM llm_calls WHERE cached_prompt_tokens > 0")
        judged = store.one("SELECT count(*) AS calls, sum(prompt_tokens) AS prompt, sum(cached_prompt_tokens)"
                           " AS cached, sum(completion_tokens) AS written, sum(latency_s) AS s FROM llm_calls"
                           " WHERE template LIKE 'judge%'")
        templates = [r[0] for r in store.conn.execute("SELECT DISTINCT template FROM llm_calls")]
    finally:
        store.close()
    assert said > 0  # the fake said, and the judges' shared instructions were found in its cache
    assert judged["calls"] > 0 and judged["cached"] > 0

    judge = [line for line in lines if line.startswith("judge:")]
    assert len(judge) == 1
    m = re.fullmatch(r"judge: (\d+) calls, (\d+) new prompt tokens, ([\d.]+) s model time, ([\d.]+) s ideal",
                     judge[0])
    assert m, judge
    new = judged["prompt"] - judged["cached"]
    assert (int(m[1]), int(m[2])) == (judged["calls"], new)
    assert float(m[3]) == pytest.approx(judged["s"], abs=0.06)
    # at the judge's speeds
    assert float(m[4]) == pytest.approx(new / 50.0 + judged["written"] / 5.0, abs=0.06)

    steps = {line.split()[0]: line.split()[1:] for line in lines[1:lines.index(judge[0])]}
    assert set(steps) == {t or "(no template)" for t in templates}
    for template in steps:
        calls, read, new_tokens, _written, _s, _ideal = (float(v) for v in steps[template])
        assert new_tokens <= read and calls > 0
    assert sum(float(v[2]) for k, v in steps.items() if k.startswith("judge")) == new

    whole = next(line for line in lines if line.startswith("whole run:"))
    assert re.fullmatch(r"whole run: \d+ calls, \d+ new prompt tokens, \d+ generated, [\d.]+ s model time, "
                        r"[\d.]+ s ideal = [\d.]+x", whole), whole
    models = [line for line in lines if line.startswith("model ")]
    assert [line.split(":")[0] for line in models] == [
        "model model-gen", "model model-j1", "model model-m1", "model model-m2", "model model-summ"]
    assert models[3].endswith("(at model-gen's raw speeds: its own were not measured)")
    assert not any(line.endswith("measured)") for line in models[:3])


def test_the_demo_bench_measures_a_shipped_models_own_speed_when_it_finds_its_file(monkeypatch) -> None:
    """The other local models the demo called get their own raw speeds where the bench finds their files:
    the embedded model's always; none for a model this checkout does not ship."""

    from bench import demo as bench
    from pipeline.llm import model_file
    monkeypatch.setattr(model_file, "model_path", lambda *a, **k: Path("/models/embedded.gguf"))
    assert bench.model_file_of(model_file.MODEL_ALIAS) == (Path("/models/embedded.gguf"), "chatml")
    assert bench.model_file_of("gpt-4o-mini") is None


def test_builds_stage_bars_count_what_each_stage_has_to_do(tmp_path):
    """Build's bars (StoreView.stage_coverage) on a finished demo: revision counted over the instructions
    revised (it showed dots), answers over the instructions a model is asked (a common condition's
    source list is never answered: it showed 4 of 6 under a full bar)."""
    from pipeline.store.view import StoreView

    store_path = tmp_path / "demo.sqlite"
    with FakeOpenAIServer(ScriptedModel()) as server:
        config = load_config(str(_config(tmp_path, server.base_url)))
        run_demo_blocking(str(store_path), config, SMALL)
    view = StoreView.open(store_path)
    try:
        assert view.stage_coverage("revise", None) == (2, 2)
        assert view.stage_coverage("respond", None) == (4, 4)
    finally:
        view.close()
