"""The demo, measured end to end with the real local model, on a fresh store.

Prints: the time to the app's first screen (a new process), the time to the first auditable
instruction, the total time, tokens read and generated per step (prompt template), refusals,
and the ratio of the demo's wall time to what its tokens would take at raw llama.cpp speed,
measured in the same run on the same machine (one long prompt for the prompt speed, one long
reply for the generation speed).

    .venv/bin/python bench/demo.py                      # the default demo (2 pairs x 39)
    .venv/bin/python bench/demo.py --pairs 1 --constraints 10 --articles 40   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

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
    out = subprocess.run([sys.executable, "-c", FIRST_PAINT, str(store), repr(t0)], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _chat(base_url: str, content: str, max_tokens: int) -> tuple[float, dict]:
    body = json.dumps({"model": "local", "messages": [{"role": "user", "content": content}],
                       "max_tokens": max_tokens, "temperature": 0.0}).encode()
    req = urllib.request.Request(f"{base_url}/chat/completions", data=body, headers={"content-type": "application/json"})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=900) as resp:
        reply = json.loads(resp.read())
    return time.monotonic() - t0, reply["usage"]


def raw_speed() -> tuple[float, float]:
    """(prompt tokens/s, generated tokens/s) of llama.cpp's server, as the demo runs it."""
    from pipeline.llm import local_model as lm
    from pipeline.llm import model_file
    server = lm.LocalServer(model=model_file.model_path())
    server.start(timeout_s=600)
    try:
        words = " ".join(f"The council met on day {i} to weigh line {i * 7} of the budget." for i in range(90))
        seconds, usage = _chat(server.base_url, words + "\nReply with one word.", 1)
        prompt_speed = usage["prompt_tokens"] / seconds
        seconds, usage = _chat(server.base_url, "Write a long story about a harbour town, at least 400 words.", 256)
        # the generation time, less the (short) prompt's share at the speed just measured
        gen_speed = usage["completion_tokens"] / max(1e-6, seconds - usage["prompt_tokens"] / prompt_speed)
        return prompt_speed, gen_speed
    finally:
        server.stop()


def run_demo(store: Path, args: argparse.Namespace) -> dict:
    argv = [sys.executable, "-m", "pipeline.cli", "--store", str(store), "demo", "--no-app", "--events",
            "--pairs", str(args.pairs), "--constraints", str(args.constraints), "--articles", str(args.articles)]
    if args.embedder:
        argv += ["--embedder", args.embedder]
    t0 = time.monotonic()
    first = None
    finished: dict = {}
    stages: dict[str, float] = {}
    events_log = store.with_suffix(".events.jsonl")  # every event, timed, to read after the run
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
    return {"code": code, "first_auditable_s": first, "total_s": time.monotonic() - t0, "stage_starts": stages,
            "failed": finished.get("failed", []), "events": str(events_log)}


def token_table(store: Path) -> list[tuple[str, int, int, int, float]]:
    conn = sqlite3.connect(store)
    try:
        return conn.execute(
            "SELECT template, count(*), sum(prompt_tokens), sum(completion_tokens), sum(latency_s) FROM llm_calls"
            " GROUP BY template ORDER BY sum(latency_s) DESC").fetchall()
    finally:
        conn.close()


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
    pp, tg = raw_speed()
    print(f"raw llama.cpp speed here, now: prompt {pp:.1f} tokens/s, generation {tg:.1f} tokens/s", flush=True)
    demo = run_demo(store, args)
    first = demo["first_auditable_s"]
    print(f"demo exit {demo['code']}; first auditable instruction at "
          f"{'never' if first is None else f'{first / 60:.1f} min'} (target 10 min); "
          f"total {demo['total_s'] / 60:.1f} min (target 30 min)")
    print("stage first seen at: " + ", ".join(f"{k} {v:.0f}s" for k, v in demo["stage_starts"].items()))
    for failure in demo["failed"]:
        print(f"failed: {failure[:300]}")
    print(f"events: {demo['events']}")
    rows = token_table(store)
    print(f"\n{'step (template)':<22}{'calls':>6}{'read':>9}{'written':>9}{'model s':>9}{'ideal s':>9}")
    ideal_total = 0.0
    for template, calls, pt, ct, latency in rows:
        ideal = (pt or 0) / pp + (ct or 0) / tg
        ideal_total += ideal
        print(f"{template or '?':<22}{calls:>6}{pt or 0:>9}{ct or 0:>9}{latency or 0:>9.0f}{ideal:>9.0f}")
    refused, responses = refusals(store)
    print(f"\nrefusals: {refused} of {responses} responses")
    print(f"wall time / raw-speed time of its tokens: {demo['total_s']:.0f} s / {ideal_total:.0f} s = "
          f"{demo['total_s'] / max(ideal_total, 1e-9):.2f} (target 1.2)")
    print(f"store: {store}")


if __name__ == "__main__":
    main()
