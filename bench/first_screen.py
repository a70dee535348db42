"""The app's first screen: from start to the Build screen painted with its runs (issue 26, item 9).

Measures, on the synthetic store bench/app_latency.py uses (2,000 instructions by default):

- cold: a new process started as `unspecific tui --store PATH` starts (interpreter, the CLI's
  parser, Textual, the app) until the first paint that shows the runs table filled and the
  footer's keys (Textual's footer fills in one paint after the rest of the screen);
- in process: from creating UnspecificApp (Textual and the app already imported) to that paint;
- with pilot.pause(): creation until the runs table is filled, waited for as
  bench/app_latency.py does, after ``pilot.pause()``. The pause waits until the process is idle,
  up to 1 s, and the store-wide pass the app starts after its first paint keeps it busy: the
  line shows how much of that bench's "first screen" is the pause, not the screen.

Each is the median of several runs (after one warm-up run), printed beside the 1 s target with
the load average. The runs keep compiled bytecode (in a cache under the temp directory, not in
the repository) as an installed `unspecific` does, even where PYTHONDONTWRITEBYTECODE is set:
compiling the project's modules at every start costs some 25 ms no user pays.
``--no-bytecode-cache`` measures without it.
Usage: python -m bench.first_screen [--store PATH] [--instructions 2000] [--runs 5] [--size 160x48]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

TARGET_S = 1.0

# The child of the cold run: what `unspecific tui --store PATH` does, headless. At the paint it
# prints, in ms since its first line: the app created, the paint; and its CPU time. The parent
# times the whole process (the interpreter's start included).
COLD = """
import asyncio, sys, time
t0 = time.perf_counter()
from pipeline.cli import build_parser
args = build_parser().parse_args(["tui", "--store", sys.argv[1]])
from pipeline.cli.tui_cmd import make_app
app = make_app(args)
t_app = time.perf_counter()
width, height = int(sys.argv[2]), int(sys.argv[3])

async def go():
    shown = asyncio.Event()
    display = app._display

    def hook(screen, renderable):
        display(screen, renderable)
        runs, footer = app.screen.query("#runs"), app.screen.query("Footer")
        if runs and runs.first().row_count and footer and footer.first().children and not shown.is_set():
            print(f"painted {1000 * (t_app - t0):.0f} {1000 * (time.perf_counter() - t0):.0f}"
                  f" {1000 * time.process_time():.0f}", flush=True)
            shown.set()

    app._display = hook
    async with app.run_test(size=(width, height)):
        await asyncio.wait_for(shown.wait(), 60)
        app.exit()

asyncio.run(go())
"""


def child_env(bytecode_cache: bool) -> dict[str, str]:
    env = dict(os.environ)
    if bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "unspecific-first-screen-pycache")
    return env


def cold_once(store: Path, size: tuple[int, int], env: dict[str, str]) -> tuple[float, float, float, float]:
    """(whole process to the paint, child's imports and app creation, child's start to the paint,
    the child's CPU time to the paint), in s."""
    t0 = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", COLD, str(store), str(size[0]), str(size[1])],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    assert child.stdout is not None
    line = child.stdout.readline()
    whole = time.perf_counter() - t0
    _, err = child.communicate(timeout=120)
    if not line.startswith("painted"):
        raise RuntimeError(f"the cold run painted no first screen: {err[-2000:]}")
    _, created_ms, painted_ms, cpu_ms = line.split()
    return whole, float(created_ms) / 1000, float(painted_ms) / 1000, float(cpu_ms) / 1000


def first_screen_shown(app: Any) -> bool:
    """The Build screen lists the runs and its footer shows the keys."""
    runs, footer = app.screen.query("#runs"), app.screen.query("Footer")
    return bool(runs and runs.first().row_count and footer and footer.first().children)


async def in_process_once(store: Path, size: tuple[int, int], pause: bool) -> tuple[float, float]:
    """Seconds from creating the app to the first paint with the runs listed (``pause``: to the
    runs table filled after ``pilot.pause()``, as bench/app_latency.py waits), and the CPU time
    it took (all threads)."""
    from unspecific_tui.app import UnspecificApp

    t0, c0 = time.perf_counter(), time.process_time()
    app = UnspecificApp(store, stages={})
    shown: list[tuple[float, float]] = []
    display = app._display

    def hook(screen: Any, renderable: Any) -> None:
        display(screen, renderable)
        if not shown and first_screen_shown(app):
            shown.append((time.perf_counter() - t0, time.process_time() - c0))

    app._display = hook  # type: ignore[method-assign]
    async with app.run_test(size=size) as pilot:
        if pause:
            from bench.app_timing import wait_for_first_screen

            await pilot.pause()
            await wait_for_first_screen(app)
            took = (time.perf_counter() - t0, time.process_time() - c0)
        else:
            deadline = time.perf_counter() + 60
            while not shown and time.perf_counter() < deadline:
                await asyncio.sleep(0.002)
            if not shown:
                raise TimeoutError("no first screen after 60 s")
            took = shown[0]
        app.exit()
    return took


def in_process(store: Path, size: tuple[int, int], pause: bool, env: dict[str, str]) -> tuple[float, float]:
    """One run in a fresh process (so no run warms the next one's caches), imports excluded."""
    code = ("import asyncio\n"
            "from bench.first_screen import in_process_once\n"
            f"print(*asyncio.run(in_process_once(__import__('pathlib').Path({str(store)!r}), "
            f"{size!r}, {pause!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    wall, cpu = out.stdout.split()[-2:]
    return float(wall), float(cpu)


def ensure_store(path: Path, instructions: int) -> None:
    if path.exists():
        return
    from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store

    t = time.perf_counter()
    summary = build_synthetic_store(path, SyntheticSpec(n_instructions=instructions))
    print(f"built {summary.instructions:,} instructions, {summary.constraints:,} constraints in "
          f"{time.perf_counter() - t:.1f} s -> {path}")


def line(name: str, values: list[float], note: str) -> str:
    median = statistics.median(values)
    verdict = "OK" if median < TARGET_S else "SLOW"
    return (f"{name:<18}{1000 * median:6.0f} ms   (min {1000 * min(values):.0f}, max "
            f"{1000 * max(values):.0f})   target < {1000 * TARGET_S:.0f} ms   {verdict}   {note}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None,
                        help="the store (default: bench/app_latency.py's synthetic one)")
    parser.add_argument("--instructions", type=int, default=2000, help="instructions of the synthetic store")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--size", default="160x48", help="terminal size, WIDTHxHEIGHT")
    parser.add_argument("--no-pause-line", action="store_true", help="skip the pilot.pause() comparison")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="compile the modules at every start (as PYTHONDONTWRITEBYTECODE=1 does)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    store = Path(args.store or Path(tempfile.gettempdir()) / f"unspecific-bench-{args.instructions}.sqlite")
    ensure_store(store, args.instructions)
    width, height = (int(x) for x in args.size.lower().split("x"))
    size = (width, height)
    env = child_env(not args.no_bytecode_cache)
    cold_once(store, size, env)  # warm-up: the OS file cache, and the bytecode cache
    load_before = os.getloadavg()[0]
    cold: list[float] = []
    cold_cpu: list[float] = []
    created: list[float] = []
    child: list[float] = []
    warm: list[float] = []
    warm_cpu: list[float] = []
    paused: list[float] = []
    for _ in range(args.runs):  # interleaved: a burst of load touches every measure alike
        whole, made, painted, cpu = cold_once(store, size, env)
        cold.append(whole)
        cold_cpu.append(cpu)
        created.append(made)
        child.append(painted)
        wall, cpu = in_process(store, size, pause=False, env=env)
        warm.append(wall)
        warm_cpu.append(cpu)
        if not args.no_pause_line:
            paused.append(in_process(store, size, pause=True, env=env)[0])
    cache = "no bytecode cache" if args.no_bytecode_cache else "bytecode cached"
    print(f"store: {store}; terminal {args.size}; {args.runs} runs, {cache}; load average "
          f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs")
    print(line("cold start", cold,
               "(new process, `unspecific tui` to the paint with the runs and keys shown)"))
    print(f"  CPU time        {1000 * statistics.median(cold_cpu):6.0f} ms   (min "
          f"{1000 * min(cold_cpu):.0f}; what "
          "the machine's load does not inflate)")
    print(f"  of which         {1000 * statistics.median(created):6.0f} ms   imports, the "
          "CLI's parser and the "
          f"app created; {1000 * (statistics.median(child) - statistics.median(created)):.0f} ms the app to "
          "its first screen")
    print(line("in process", warm, "(app created to the paint with the runs and keys shown)"))
    print(f"  CPU time        {1000 * statistics.median(warm_cpu):6.0f} ms   (min "
          f"{1000 * min(warm_cpu):.0f})")
    if paused:
        print(line("with pilot.pause()", paused, "(bench/app_latency.py's wait: the pause idles up to 1 s "
                                                 "while the store-wide pass runs)"))
    return 0 if statistics.median(cold) < TARGET_S and statistics.median(warm) < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
