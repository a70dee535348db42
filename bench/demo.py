"""The demo, measured end to end with the real local model, on a fresh store.

Prints: the time to the app's first screen (a new process), the time to the first auditable
instruction, the total time, refusals, and where the limit is: per step (prompt template) its
calls, the prompt tokens the server evaluated anew (those it did not read from its prompt cache, as
it reported them: all of them where it did not say), the tokens generated, the model time (the
calls' own durations) and the ideal (those tokens at the raw llama.cpp speeds measured in the same
run on the same machine: one long prompt for the prompt speed, one long reply for the generation
speed); the judge's steps together in one line; the whole run and each model against the sum of
their ideals, each model at its own raw speeds where the bench finds its file; and the demo's wall
time against the whole ideal. And the CPU seconds the demo's processes used (the demo and its model
server): a host that lends its cores to others stretches the wall clock, not the work done, so two
runs on different hours compare by these.

    .venv/bin/python -m bench.demo                      # the default demo (2 pairs x 39)
    .venv/bin/python -m bench.demo --pairs 1 --constraints 10 --articles 40   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

REFUSAL = re.compile(r"\b(I'm sorry|I am sorry|I can(?:no|')t (?:assist|help|comply)|I'm unable to)\b", re.I)

FIRST_PAINT = """
import asyncio, sys, time
t0 = float(sys.argv[2])
from unspecific_tui.app import UnspecificApp
async def main():
    app = UnspecificApp(sys.argv[1], demo_command=[sys.executable, "-c", "pass"])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        print(time.time() - t0, flush=True)
asyncio.run(main())
"""


def time_to_app(store: Path) -> float:
    from pipeline.store.database import open_store

    open_store(store).close()
    t0 = time.time()
    out = subprocess.run([sys.executable, "-c", FIRST_PAINT, str(store), repr(t0)],
                         capture_output=True, text=True,
                         cwd=ROOT, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _chat(base_url: str, content: str, max_tokens: int) -> tuple[float, dict]:
    body = json.dumps({"model": "local", "messages": [{"role": "user", "content": content}],
                       "max_tokens": max_tokens, "temperature": 0.0}).encode()
    req = urllib.request.Request(f"{base_url}/chat/completions", data=body,
                                 headers={"content-type": "application/json"})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=900) as resp:
        reply = json.loads(resp.read())
    return time.monotonic() - t0, reply["usage"]


def _new_prompt_tokens(usage: dict) -> int:
    """The prompt tokens the server evaluated: those it did not say it read from its prompt cache."""
    from pipeline.llm.call import reply_cached_tokens

    prompt = int(usage["prompt_tokens"])
    return prompt - (reply_cached_tokens(usage, prompt) or 0)


def raw_speed(model: Path | None = None, chat_format: str | None = None) -> tuple[float, float]:
    """(prompt tokens/s, generated tokens/s) of llama.cpp's server, as the demo runs it: on the embedded
    model, or on ``model`` (a GGUF file) in ``chat_format``."""
    from pipeline.llm import local_model as lm
    from pipeline.llm import model_file
    server = lm.LocalServer(model=model or model_file.model_path(), chat_format=chat_format or lm.CHAT_FORMAT)
    server.start(timeout_s=600)
    try:
        words = " ".join(f"The council met on day {i} to weigh line {i * 7} of the budget."
                         for i in range(90))
        seconds, usage = _chat(server.base_url, words + "\nReply with one word.", 1)
        prompt_speed = _new_prompt_tokens(usage) / seconds
        seconds, usage = _chat(server.base_url,
                               "Write a long story about a harbour town, at least 400 words.", 256)
        # the generation time, less the (short) prompt's share at the speed just measured
        gen_speed = usage["completion_tokens"] / max(1e-6, seconds - _new_prompt_tokens(usage) / prompt_speed)
        return prompt_speed, gen_speed
    finally:
        server.stop()


def model_file_of(model: str) -> tuple[Path, str | None] | None:
    """The GGUF file and chat format of a local model the demo called, to measure its raw speed: the
    embedded model's, or a shipped one's where pipeline.llm.model_file has a registry of them (issue 48);
    None when this checkout cannot find it (a remote model, say)."""
    from pipeline.core.errors import UnspecificError
    from pipeline.llm import model_file
    from pipeline.llm.local_model import CHAT_FORMAT

    if model == model_file.MODEL_ALIAS:
        return model_file.model_path(), CHAT_FORMAT
    shipped = getattr(model_file, "shipped_model", None)
    if shipped is None:
        return None
    try:
        found = shipped(model)
        return found.path(), found.chat_format
    except (UnspecificError, OSError):
        return None


def run_demo(store: Path, args: argparse.Namespace) -> dict:
    argv = [sys.executable, "-m", "pipeline.cli", "--store", str(store), "demo", "--no-app", "--events",
            "--pairs", str(args.pairs), "--constraints", str(args.constraints), "--articles",
            str(args.articles)]
    if args.embedder:
        argv += ["--embedder", args.embedder]
    t0 = time.monotonic()
    first = None
    finished: dict = {}
    stages: dict[str, float] = {}
    events_log = store.with_suffix(".events.jsonl")  # every event, timed, to read after the run
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    with events_log.open("w", encoding="utf-8") as log:
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            log.write(json.dumps({"t": round(time.monotonic() - t0, 1), **event}) + "\n")
            log.flush()
            if "auditable" in event and first is None:
                first = time.monotonic() - t0
            elif "finished" in event:
                finished = event["finished"]
            elif event.get("stage"):
                stages.setdefault(event["stage"], time.monotonic() - t0)
    code = proc.wait()
    # The demo waits for its server, so the server's CPU time is counted in the demo's children.
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"code": code, "first_auditable_s": first, "total_s": time.monotonic() - t0, "cpu_s": cpu_s,
            "stage_starts": stages,
            "failed": finished.get("failed", []), "events": str(events_log)}


def call_totals_of(store: Path) -> list[Any]:
    """Per template and model, the calls' tokens and time (tests.support.store_probes.CallTotals)."""
    from pipeline.store.database import open_store
    from tests.support.store_probes import call_totals

    s = open_store(store, readonly=True)
    try:
        return call_totals(s)
    finally:
        s.close()


def token_table(store: Path) -> list[tuple[str, int, int, int, float]]:
    """Per template: calls, prompt tokens, generated tokens and model seconds, the slowest first."""
    sums: dict[str, list] = {}
    for r in call_totals_of(store):
        acc = sums.setdefault(r.template, [0, 0, 0, 0.0])
        for i, value in enumerate((r.calls, r.prompt_tokens, r.completion_tokens, r.model_s)):
            acc[i] += value
    return sorted(((t, *v) for t, v in sums.items()), key=lambda row: -row[4])


Speeds = dict[str, tuple[float, float]]  # per model (as llm_calls records it): prompt, generated tokens/s


def ideal_s(row: Any, speeds: Speeds, fallback: str) -> float:
    """The seconds ``row``'s tokens take at raw speed: the new prompt tokens at the prompt speed and the
    generated ones at the generation speed, of its model (else of ``fallback``'s)."""
    pp, tg = speeds.get(row.model) or speeds[fallback]
    return row.new_prompt_tokens / pp + row.completion_tokens / tg


def _sum(rows: list[Any], speeds: Speeds, fallback: str) -> tuple[int, int, int, float, float]:
    """(calls, new prompt tokens, generated tokens, model seconds, ideal seconds) of ``rows``."""
    return (sum(r.calls for r in rows), sum(r.new_prompt_tokens for r in rows),
            sum(r.completion_tokens for r in rows), sum(r.model_s for r in rows),
            sum(ideal_s(r, speeds, fallback) for r in rows))


def step_lines(rows: list[Any], speeds: Speeds, fallback: str) -> list[str]:
    """Where the limit is: per step (prompt template) its calls, prompt tokens read and evaluated anew,
    generated tokens, model time and ideal; the judge's steps in one line; the whole run and each model
    against the sum of their ideals."""
    heads = ("calls", "read", "new", "written", "model s", "ideal s")
    lines = [f"{'step (template)':<24}{heads[0]:>6}" + "".join(f"{h:>9}" for h in heads[1:])]
    steps: dict[str, list[Any]] = {}
    for r in rows:
        steps.setdefault(r.template or "(no template)", []).append(r)
    for template, group in sorted(steps.items(), key=lambda kv: -sum(r.model_s for r in kv[1])):
        calls, new, written, model_s, ideal = _sum(group, speeds, fallback)
        read = sum(r.prompt_tokens for r in group)
        lines.append(f"{template:<24}{calls:>6}{read:>9}{new:>9}{written:>9}{model_s:>9.0f}{ideal:>9.0f}")
    calls, new, _, model_s, ideal = _sum([r for r in rows if (r.template or "").startswith("judge")], speeds,
                                         fallback)
    lines.append(f"judge: {calls} calls, {new} new prompt tokens, {model_s:.1f} s model time, "
                 f"{ideal:.1f} s ideal")

    def against(name: str, group: list[Any], note: str = "") -> str:
        calls, new, written, model_s, ideal = _sum(group, speeds, fallback)
        return (f"{name}: {calls} calls, {new} new prompt tokens, {written} generated, {model_s:.1f} s model "
                f"time, {ideal:.1f} s ideal = {model_s / max(ideal, 1e-9):.2f}x{note}")

    lines.append(against("whole run", rows))
    for model in sorted({r.model for r in rows}):
        at = "" if model in speeds else f" (at {fallback}'s raw speeds: its own were not measured)"
        lines.append(against(f"model {model or '?'}", [r for r in rows if r.model == model], at))
    return lines


def refusals(store: Path) -> tuple[int, int]:
    from pipeline.store.database import open_store

    s = open_store(store, readonly=True)
    try:
        rows = s.conn.execute("SELECT text_hash FROM generations WHERE kind = 'response'").fetchall()
        texts = [s.get_text(r[0]) for r in rows]
    finally:
        s.close()
    return sum(bool(REFUSAL.search(t[:300])) for t in texts), len(texts)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--constraints", type=int, default=39)
    p.add_argument("--articles", type=int, default=60)
    p.add_argument("--embedder", default=None)
    p.add_argument("--store", default=None, help="store to build into (default: a fresh temp file)")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    store = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="bench-demo-")) / "demo.sqlite"

    app_s = time_to_app(store)
    print(f"time to the app's first screen (new process): {app_s:.2f} s (target 10 s)", flush=True)
    from pipeline.llm.model_file import MODEL_ALIAS

    speeds: Speeds = {MODEL_ALIAS: raw_speed()}
    pp, tg = speeds[MODEL_ALIAS]
    print(f"raw llama.cpp speed here, now: prompt {pp:.1f} tokens/s, generation {tg:.1f} tokens/s",
          flush=True)
    demo = run_demo(store, args)
    first = demo["first_auditable_s"]
    print(f"demo exit {demo['code']}; first auditable instruction at "
          f"{'never' if first is None else f'{first / 60:.1f} min'} (target 10 min); "
          f"total {demo['total_s'] / 60:.1f} min (target 30 min)")
    print(f"CPU time of the demo and its model server: {demo['cpu_s']:.0f} s "
          f"({demo['cpu_s'] / max(demo['total_s'], 1e-9):.2f} cores busy on average)")
    print("stage first seen at: " + ", ".join(f"{k} {v:.0f}s" for k, v in demo["stage_starts"].items()))
    for failure in demo["failed"]:
        print(f"failed: {failure[:300]}")
    print(f"events: {demo['events']}")
    rows = call_totals_of(store)
    for model in sorted({r.model for r in rows} - set(speeds)):  # the other local models, at their own speeds
        found = model_file_of(model)
        if found is not None:
            speeds[model] = raw_speed(*found)
            print(f"raw llama.cpp speed of {model}: prompt {speeds[model][0]:.1f} tokens/s, generation "
                  f"{speeds[model][1]:.1f} tokens/s", flush=True)
    print()
    for line in step_lines(rows, speeds, MODEL_ALIAS):
        print(line)
    ideal_total = sum(ideal_s(r, speeds, MODEL_ALIAS) for r in rows)
    refused, responses = refusals(store)
    print(f"\nrefusals: {refused} of {responses} responses")
    print(f"wall time / raw-speed time of its tokens: {demo['total_s']:.0f} s / {ideal_total:.0f} s = "
          f"{demo['total_s'] / max(ideal_total, 1e-9):.2f} (target 1.2)")
    print(f"store: {store}")


if __name__ == "__main__":
    main()
