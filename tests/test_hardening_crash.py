"""Crash safety, the fast version of bench/crash.py: `unspecific build` SIGKILLed at 5 seeded
random points (one of them in start-up) and `unspecific evaluate` at 3, each restarted, then
left to finish. Nothing is lost or duplicated against an uninterrupted run, and no request
whose answer was already stored is sent again."""

from __future__ import annotations

import random

from bench import crash
from tests.fakes.fake_server import FakeOpenAIServer
from tests.fakes.responders import ScriptedModel


def test_sigkill_build_and_evaluate_lose_nothing_and_repeat_no_stored_call(tmp_path) -> None:
    setup = crash.Setup(pairs=2, constraints=6, models=1, judges=2, concurrency=2, words=50)
    rng = random.Random(3)
    ref_store, ref_calls = crash.reference(tmp_path, setup)
    with FakeOpenAIServer(ScriptedModel(), latency_s=setup.latency_s) as server:
        store, config = crash._prepare(tmp_path, "crashed", setup, server)
        build = crash.crash_phase(setup, server, store, config, "build", ref_calls["build"], 5, rng)
        evaluate = crash.crash_phase(setup, server, store, config, "evaluate", ref_calls["evaluate"], 3, rng)
    diff = crash.compare(ref_store, store, setup)
    ok = crash.report([build, evaluate], diff)

    assert len(build.kills) + build.finished_early == 5 and len(build.kills) >= 3
    assert len(evaluate.kills) >= 2
    for phase in (build, evaluate):
        assert phase.exit_code == 0
        assert phase.stored_repeats == 0, phase
        # Only requests in flight at a kill are asked again: a bounded number per kill.
        assert phase.repeats <= len(phase.kills) * 2 * setup.concurrency * (1 + setup.models + setup.judges)
        assert phase.calls - phase.repeats - phase.torn == phase.reference_calls  # the same work, once
    for kind, (n, lost, extra) in diff.items():
        assert n > 0 and lost == 0 and extra == 0, (kind, n, lost, extra)
    assert ok
