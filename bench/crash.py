"""Crash safety: SIGKILL `unspecific build` and `unspecific evaluate` at random points, restart
each time, and check the end state against an uninterrupted reference run.

For each command: a reference run (fresh store, never killed) gives the calls the work needs
and its results. Then, on another fresh store, the same command is started, killed with
SIGKILL when the fake server has answered a seeded random number of requests (a point of 0
means a random moment of start-up, before any call), started again, ... and finally left to
finish. Checked at the end:

- lost / duplicated rows: instructions, constraints, generations and verdicts compared with
  the reference by natural key (condition and articles, position, model, judge), and every
  expected row present exactly once;
- repeated LLM calls: a request whose (model, messages) was already answered before is a
  repeat; it is a repeat *of stored work* (a bug) when that answer was in the store's cache
  when the process was killed. Repeats of the calls in flight at a kill are allowed (at most
  the endpoints' concurrency per kill).

    .venv/bin/python -m bench.crash [--pairs 6] [--constraints 39] [--kills 6] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.store.database import open_store
from tests.fakes.fake_server import FakeOpenAIServer
from tests.fakes.responders import (
    ScriptedModel,
    audit_rows,
    make_store,
    multi_config_toml,
    result_fingerprint,
)

ROOT = Path(__file__).resolve().parents[1]

CLI = "import sys; from pipeline.cli import main; sys.exit(main())"
CONDITIONS = ("single", "none", "direct", "eval")
RUN = "crash-run"


@dataclass
class Setup:
    pairs: int = 6
    constraints: int = 39
    models: int = 2
    judges: int = 2
    concurrency: int = 2
    words: int = 80
    latency_s: float = 0.01


@dataclass
class PhaseResult:
    command: str
    reference_calls: int
    calls: int = 0
    kills: list[int] = field(default_factory=list)  # server calls answered when each kill landed
    finished_early: int = 0  # restarts that finished before their kill point
    repeats: int = 0  # requests whose answer had been given before
    stored_repeats: int = 0  # ... and was in the store's cache at the kill: must be 0
    torn: int = 0  # requests cut off by a kill before their body arrived
    exit_code: int | None = None


def _canon(model: str, messages: list) -> str:
    return model + "|" + json.dumps(messages, sort_keys=True, ensure_ascii=False)


def _stored_keys(path: Path) -> set[str]:
    store = open_store(path)
    try:
        return {_canon(r["model"], json.loads(r["request"])["messages"])
                for r in store.query("SELECT model, request FROM llm_calls")}
    finally:
        store.close()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["COLUMNS"] = "200"
    env["HF_HUB_OFFLINE"] = "1"
    return env


def command(setup: Setup, store: Path, config: Path, name: str) -> list[str]:
    base = [sys.executable, "-c", CLI, "--store", str(store), "--config", str(config)]
    if name == "build":
        return base + ["build", "--n", str(setup.pairs), "--constraints", str(setup.constraints), "--words",
                       str(setup.words), "--new-run", RUN]
    return base + ["evaluate", "--run", RUN, "--words", str(setup.words)]


def _prepare(folder: Path, name: str, setup: Setup, server: FakeOpenAIServer) -> tuple[Path, Path]:
    store = folder / f"{name}.sqlite"
    make_store(store, setup.pairs).close()
    config = folder / f"{name}.toml"
    config.write_text(multi_config_toml(server.base_url, models=setup.models, judges=setup.judges,
                                        concurrency=setup.concurrency, max_retries=2, timeout_s=30))
    return store, config


def _run_to_end(cmd: list[str]) -> int:
    done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], file=sys.stderr)
    return done.returncode


def reference(folder: Path, setup: Setup) -> tuple[Path, dict[str, int]]:
    """The uninterrupted run: build then evaluate; the calls each needed."""
    calls: dict[str, int] = {}
    with FakeOpenAIServer(ScriptedModel(), latency_s=setup.latency_s) as server:
        store, config = _prepare(folder, "reference", setup, server)
        for name in ("build", "evaluate"):
            before = server.calls
            code = _run_to_end(command(setup, store, config, name))
            if code != 0:
                raise SystemExit(f"reference {name} failed with exit code {code}")
            calls[name] = server.calls - before
        keys = [_canon(r["model"], r["messages"]) for r in server.requests]
        if len(set(keys)) != len(keys):
            raise SystemExit("the reference run asked the same thing twice: the check below "
                             "would be meaningless")
    return store, calls


def crash_phase(setup: Setup, server: FakeOpenAIServer, store: Path, config: Path, name: str,
                reference_calls: int,
                kills: int, rng: random.Random) -> PhaseResult:
    result = PhaseResult(name, reference_calls)
    start = server.calls
    # One kill always lands in start-up (point 0: a random moment before any call), the rest
    # at a random number of answered calls.
    points = [0] + sorted(rng.randrange(1, max(2, reference_calls)) for _ in range(kills - 1))
    answered: set[str] = set()  # canonical requests answered so far
    seen = start

    def count_new(upto: int, stored: set[str]) -> None:
        nonlocal seen
        for req in server.requests[seen:upto]:
            if not req.get("messages"):
                result.torn += 1
                continue  # a request torn by the kill: its body never arrived, nothing was answered
            key = _canon(req["model"], req["messages"])
            if key in answered:
                result.repeats += 1
                result.stored_repeats += key in stored
            answered.add(key)
        seen = upto

    stored: set[str] = set()
    for point in points:
        proc = subprocess.Popen(command(setup, store, config, name), env=_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        if point == 0:
            time.sleep(rng.uniform(0.0,
                                   1.5))  # somewhere in start-up: imports, opening the store, the run record
        else:
            while server.calls - start < point and proc.poll() is None:
                time.sleep(0.002)
        if proc.poll() is not None:
            result.finished_early += 1
        else:
            os.kill(proc.pid, signal.SIGKILL)
            result.kills.append(server.calls - start)
        proc.wait(timeout=60)
        time.sleep(0.05)  # let the server finish the requests the dead client left in flight
        count_new(server.calls, stored)
        stored = _stored_keys(store)
    result.exit_code = _run_to_end(command(setup, store, config, name))
    count_new(server.calls, stored)
    result.calls = server.calls - start
    return result


def compare(reference_store: Path, store: Path, setup: Setup) -> dict[str, tuple[int, int, int]]:
    """Per kind: (rows in the reference, lost, extra or different)."""
    ref_s, got_s = open_store(reference_store), open_store(store)
    try:
        ref, got = result_fingerprint(ref_s, RUN), result_fingerprint(got_s, RUN)
        out = {}
        for kind in ("instructions", "constraints", "generations", "verdicts"):
            r, g = ref[kind], got[kind]
            lost = sum(1 for k in r if k not in g)
            extra = sum(1 for k in g if k not in r) + sum(1 for k in r if k in g and g[k] != r[k])
            out[kind] = (len(r), lost, extra)
        rows = audit_rows(got_s, build_run=RUN, n_pairs=setup.pairs, conditions=CONDITIONS,
                          n_constraints=setup.constraints, models=setup.models, judges=setup.judges)
        out["rows present exactly once"] = (sum(x.expected for x in rows),
                                            sum(x.expected - min(x.present, x.expected)
                                            for x in rows), sum(x.duplicates for x in rows))
        return out
    finally:
        ref_s.close()
        got_s.close()


def crash_test(folder: Path, setup: Setup, kills: int, seed: int) -> tuple[list[PhaseResult], dict]:
    rng = random.Random(seed)
    ref_store, ref_calls = reference(folder, setup)
    with FakeOpenAIServer(ScriptedModel(), latency_s=setup.latency_s) as server:
        store, config = _prepare(folder, "crashed", setup, server)
        phases = [crash_phase(setup, server, store, config, name, ref_calls[name], kills, rng)
                  for name in ("build", "evaluate")]
    return phases, compare(ref_store, store, setup)


def report(phases: list[PhaseResult], diff: dict) -> bool:
    ok = True
    for p in phases:
        in_flight = p.repeats - p.stored_repeats
        print(f"{p.command}: {len(p.kills)} SIGKILLs at calls {p.kills}"
              + (f" ({p.finished_early} restart(s) finished before the kill point)"
                 if p.finished_early else ""))
        print(f"  calls made {p.calls} / uninterrupted {p.reference_calls}; repeated requests {p.repeats} "
              f"(of stored work: {p.stored_repeats}; in flight at a kill: {in_flight}); final "
              f"exit code {p.exit_code}")
        ok &= p.stored_repeats == 0 and p.exit_code == 0
    print(f"{'compared with the reference':<28} {'rows':>7} {'lost':>6} {'extra/different':>16}")
    for kind, (n, lost, extra) in diff.items():
        print(f"{kind:<28} {n:>7} {lost:>6} {extra:>16}")
        ok &= lost == 0 and extra == 0
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--constraints", type=int, default=39)
    parser.add_argument("--kills", type=int, default=6, help="SIGKILLs per command (build, evaluate)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    setup = Setup(pairs=args.pairs, constraints=args.constraints)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"crash: {setup.pairs} pairs x {len(CONDITIONS)} conditions x {setup.constraints} constraints, "
              f"{setup.models} models, {setup.judges} judges; {args.kills} SIGKILLs per "
              f"command, seed {args.seed}")
        phases, diff = crash_test(Path(tmp), setup, args.kills, args.seed)
        ok = report(phases, diff)
    print(f"{'OK' if ok else 'FAILED'} in {time.perf_counter() - started:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
