"""Scale: a store of benchmark size, and how long `unspecific report` and opening the app take.

The store comes from bench/report_scale.py (10,000 instructions x 39 constraints = 390,000
constraints; 2 models under test with one 25% summary each = 40,000 generations; 2 judges =
3,120,000 verdicts). Timed, each as the user meets it:

- `unspecific report` in a fresh process (start-up included), with and without the copied
  n-gram metrics (which read every response and reference);
- the app, headless (``run_test``): time to the first screen with its runs table filled, the
  background analysis, opening Audit, and moving in it (bench/app_latency.py's measure).

    .venv/bin/python -m bench.scale [--instructions 10000] [--store PATH] [--moves 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.app_timing import analysis_then_audit, paint_event, wait_for_first_screen

HERE = Path(__file__).resolve().parent

INTERACTIVE_S = 3.0  # "a few seconds": the most a user should wait for a command's answer or a screen


async def measure_app(store: Path, moves: int) -> dict[str, float]:
    """First screen, analysis, opening Audit and a few Audit moves, each with a generous
    timeout (bench/app_latency.py's measure waits 5 s for a paint, which a loaded machine and
    a big store can exceed; a slow step should show as a number, not a crash)."""
    import statistics

    from unspecific_tui.app import UnspecificApp

    out: dict[str, float] = {}
    t0, c0 = time.perf_counter(), time.process_time()
    app = UnspecificApp(store, stages={})
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await wait_for_first_screen(app)
        out["first_screen_s"] = time.perf_counter() - t0
        out["first_screen_cpu_s"] = time.process_time() - c0
        # Is the app responsive while the analysis works in the background? Open Instructions,
        # timed to the paint that shows it (pilot.press would wait for the worker to finish: its
        # idle test looks at the whole process's CPU).
        busy = any(w.is_running for w in app.workers)
        painted = paint_event(app)
        t = time.perf_counter()
        await app.run_action("switch_mode('instructions')")
        painted.clear()
        await asyncio.wait_for(painted.wait(), 120)  # the screen is up: the next paint shows it
        out["switch_while_busy_s"] = time.perf_counter() - t
        out["busy"] = float(busy)
        while app.analysis is None:  # the per-instruction counts: the Instructions table fills
            await asyncio.sleep(0.005)
        out["tables_ready_s"] = time.perf_counter() - t0
        out.update(await analysis_then_audit(app, pilot, t0, audit_workers=True))
        screen = app.screen
        painted = paint_event(app)  # a move is timed to the paint that follows it
        times: list[float] = []
        for i in range(moves):
            painted.clear()
            t = time.perf_counter()
            await app.run_action("move(1)" if i % 5 else "next_flipped", screen)
            await asyncio.wait_for(painted.wait(), 120)
            times.append(time.perf_counter() - t)
        out["move_median_s"] = statistics.median(times) if times else float("nan")
        out["move_max_s"] = max(times) if times else float("nan")
    return out


def timed_cli(store: Path, *argv: str) -> tuple[float, int, str]:
    """Wall seconds, exit code, output tail; the note carries the child's CPU seconds (less
    sensitive than wall time to the other processes on a shared machine)."""
    import resource

    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "COLUMNS": "160", "HF_HUB_OFFLINE": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c",
                           "import sys; from pipeline.cli import main; sys.exit(main())",
                           "--store", str(store), *argv], env=env, capture_output=True,
                          text=True, timeout=3600)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, done.returncode, f"CPU {cpu:.1f} s, exit {done.returncode}" + (""
                                                                                if done.returncode == 0 else
                                                                             "\n" + (done.stderr
                                                                                     or done.stdout)[-400:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instructions", type=int, default=10_000)
    parser.add_argument("--store", default=None, help="build the store here, or reuse it if it exists")
    parser.add_argument("--moves", type=int, default=30, help="Audit moves to time in the app")
    parser.add_argument("--skip-copy", action="store_true", help="do not time the report with copy metrics")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from bench.report_scale import build_scale_store
    from pipeline.store.database import open_store

    path = Path(args.store or Path(tempfile.gettempdir()) / f"unspecific-scale-{args.instructions}.sqlite")
    if not path.exists():
        t = time.perf_counter()
        sizes = build_scale_store(path, instructions=args.instructions)
        print(f"built {path}: {sizes} in {time.perf_counter() - t:.0f} s")
    store = open_store(path)
    sizes = {t: store.scalar(f"SELECT count(*) FROM {t}")
             for t in ("instructions", "constraints", "generations", "verdicts")}
    store.close()
    print(f"store {path} ({path.stat().st_size / 1e6:.0f} MB): "
          + ", ".join(f"{n:,} {t}" for t, n in sizes.items()))
    print(f"CPU is shared: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores while timing")

    rows: list[tuple[str, float, str]] = []
    secs, code, note = timed_cli(path, "report", "--no-copy")
    rows.append(("unspecific report --no-copy", secs, note))
    secs, code, note = timed_cli(path, "report", "--no-copy", "--resamples", "200")
    rows.append(("unspecific report --no-copy --resamples 200", secs, note))
    if not args.skip_copy:
        secs, code, note = timed_cli(path, "report")
        rows.append(("unspecific report (with copied n-grams)", secs, note))
    for name, secs, note in rows:
        print(f"{name:<44} {secs:>8.2f} s  {note}", flush=True)
    app = asyncio.run(measure_app(path, args.moves))
    rows.append(("app: first screen (runs table filled)", app["first_screen_s"],
                 f"CPU {app['first_screen_cpu_s']:.2f} s"))
    rows.append(("app: open Instructions during the analysis", app["switch_while_busy_s"],
                 "analysis was running" if app["busy"] else "analysis had finished"))
    rows.append(("app: Instructions table filled", app["tables_ready_s"], "per-instruction counts"))
    rows.append(("app: analysis ready (background worker)", app["analysis_ready_s"],
                 "with the metrics' intervals"))
    rows.append(("app: open Audit", app["open_audit_s"], ""))
    rows.append(("app: Audit move, median (action to repaint)", app["move_median_s"], ""))
    rows.append(("app: Audit move, slowest", app["move_max_s"], ""))
    print(f"{'':<44} {'seconds':>8}")
    for name, secs, note in rows:
        flag = "ok" if secs <= INTERACTIVE_S else "SLOW"
        print(f"{name:<44} {secs:>8.2f}  {flag} {note}")
    return 0 if all(s <= INTERACTIVE_S for _, s, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
