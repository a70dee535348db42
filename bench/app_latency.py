"""App latency on a large store: time to first screen, and moving between constraints in Audit.

Builds (or reuses) a synthetic store of 2,000 instructions x 39 constraints (2 models, 2
judges, one summary ratio: about 78,000 constraints and 624,000 verdicts), opens the app
headless with ``run_test`` and measures:

- first screen: from creating the app to the Build screen shown with its runs table filled;
- Audit moves: the action of a key (j / k / f / x) until the screen has repainted, median
  and 95th percentile over many moves; the handler alone; and far jumps (cache misses).

Targets: first screen < 1 s, a move < 50 ms. Usage:
    python bench/app_latency.py [--instructions 2000] [--store PATH] [--moves 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from app_timing import paint_event, wait_for_first_screen  # noqa: E402

FIRST_SCREEN_TARGET_S = 1.0
MOVE_TARGET_MS = 50.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def measure(store: Path, moves: int, size: tuple[int, int] = (160, 48)) -> dict[str, float]:
    from unspecific_tui.app import UnspecificApp

    t0, c0 = time.perf_counter(), time.process_time()
    app = UnspecificApp(store, stages={})
    out: dict[str, float] = {}
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await wait_for_first_screen(app)
        out["first_screen_s"] = time.perf_counter() - t0
        out["first_screen_cpu_s"] = time.process_time() - c0
        await app.workers.wait_for_complete()
        out["analysis_ready_s"] = time.perf_counter() - t0

        t = time.perf_counter()
        await pilot.press("3")
        await pilot.pause()
        out["open_audit_s"] = time.perf_counter() - t
        screen = app.screen

        painted = paint_event(app)  # a move is timed to the paint that follows it
        press_ms: list[float] = []
        cpu_ms: list[float] = []
        handler_ms: list[float] = []
        actions = ["move(1)"] * 6 + ["move(-1)", "next_flagged", "next_flipped", "move(1)"]
        for i in range(moves):
            painted.clear()
            t, c = time.perf_counter(), time.thread_time()
            await app.run_action(actions[i % len(actions)], screen)
            handler_ms.append(1000 * (time.perf_counter() - t))
            await asyncio.wait_for(painted.wait(), 5)
            press_ms.append(1000 * (time.perf_counter() - t))
            cpu_ms.append(1000 * (time.thread_time() - c))
        # Far jumps: the instruction cache misses every time.
        far_ms: list[float] = []
        for i in range(min(moves, 100)):
            screen.index = (i * 7919) % len(screen.order)
            painted.clear()
            t = time.perf_counter()
            screen.refresh_constraint()
            await asyncio.wait_for(painted.wait(), 5)
            far_ms.append(1000 * (time.perf_counter() - t))
        out["far_median_ms"] = statistics.median(far_ms)
        out["far_p95_ms"] = pct(far_ms, 0.95)
        out["move_cpu_median_ms"] = statistics.median(cpu_ms)
        out["move_cpu_p95_ms"] = pct(cpu_ms, 0.95)
        out["move_press_median_ms"] = statistics.median(press_ms)
        out["move_press_p95_ms"] = pct(press_ms, 0.95)
        out["move_handler_median_ms"] = statistics.median(handler_ms)
        out["move_handler_p95_ms"] = pct(handler_ms, 0.95)
        out["constraints"] = len(screen.order)
    return out


COLD = """
import asyncio, sys, time
t0 = time.perf_counter()
from unspecific_tui.app import UnspecificApp
async def go():
    app = UnspecificApp(sys.argv[1], stages={})
    async with app.run_test(size=(160, 48)) as pilot:
        while not app.screen.query("#runs") or not app.screen.query_one("#runs").row_count:
            await asyncio.sleep(0.005)
        print(time.perf_counter() - t0, time.process_time())
        app.exit()
asyncio.run(go())
"""


def cold_start(store: Path) -> tuple[float, float]:
    """A new process: imports of Textual and the app included (what `unspecific` costs)."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", COLD, str(store)], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    wall, cpu = out.stdout.split()[-2:]
    return float(wall), float(cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instructions", type=int, default=2000)
    parser.add_argument("--store", default=None, help="reuse/create the synthetic store here")
    parser.add_argument("--moves", type=int, default=200)
    parser.add_argument("--size", default="160x48", help="terminal size, WIDTHxHEIGHT (default 160x48)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store

    path = Path(args.store or Path(tempfile.gettempdir()) / f"unspecific-bench-{args.instructions}.sqlite")
    if not path.exists():
        t = time.perf_counter()
        summary = build_synthetic_store(path, SyntheticSpec(n_instructions=args.instructions))
        print(f"built {summary.instructions:,} instructions, {summary.constraints:,} constraints, "
              f"{summary.verdicts:,} verdicts in {time.perf_counter() - t:.1f} s -> {path}")
    width, height = (int(x) for x in args.size.lower().split("x"))
    result = asyncio.run(measure(path, args.moves, (width, height)))
    cold = [cold_start(path) for _ in range(3)]
    result["cold_s"] = statistics.median(c[0] for c in cold)
    result["cold_cpu_s"] = statistics.median(c[1] for c in cold)
    ok_first = result["first_screen_s"] < FIRST_SCREEN_TARGET_S
    ok_move = result["move_press_p95_ms"] < MOVE_TARGET_MS
    print(f"store: {path} ({int(result['constraints']):,} active constraints), terminal {args.size}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"first screen      {result['first_screen_s'] * 1000:7.0f} ms   target < {FIRST_SCREEN_TARGET_S * 1000:.0f} ms"
          f"   {'OK' if ok_first else 'SLOW'}")
    print(f"  CPU time        {result['first_screen_cpu_s'] * 1000:7.0f} ms")
    print(f"cold start        {result['cold_s'] * 1000:7.0f} ms   (new process, imports included; CPU "
          f"{result['cold_cpu_s'] * 1000:.0f} ms)")
    print(f"analysis ready    {result['analysis_ready_s'] * 1000:7.0f} ms   (background worker)")
    print(f"open Audit        {result['open_audit_s'] * 1000:7.0f} ms")
    print(f"Audit move        median {result['move_press_median_ms']:5.1f} ms, p95 {result['move_press_p95_ms']:5.1f} ms"
          f"   target < {MOVE_TARGET_MS:.0f} ms   {'OK' if ok_move else 'SLOW'}  (action to repaint)")
    print(f"  CPU time        median {result['move_cpu_median_ms']:5.1f} ms, p95 {result['move_cpu_p95_ms']:5.1f} ms"
          "   (UI thread CPU: what the move costs on an idle machine)")
    print(f"  handler alone   median {result['move_handler_median_ms']:5.1f} ms, p95 {result['move_handler_p95_ms']:5.1f} ms"
          "   (queries + highlight + widget updates)")
    print(f"Audit far jump    median {result['far_median_ms']:5.1f} ms, p95 {result['far_p95_ms']:5.1f} ms"
          "   (random constraint, instruction not cached, to repaint)")
    return 0 if ok_first and ok_move else 1


if __name__ == "__main__":
    sys.exit(main())
