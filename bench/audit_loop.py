"""The auditor's loop on the 2,000-instruction bench store: open the suspicion queue, step through
it in Audit, and confirm items with the fewest keys.

Uses bench/app_latency.py's store (2,000 instructions x 39 constraints, 2 models, 2 judges; built
and given its copy evidence there when missing) and measures, headless (``run_test``):

- queue open: from `!` on Instructions to the ranked table painted (target < 2 s);
- next item: Audit's `n` following the queue, key to repaint, median and 95th percentile over
  ITEMS items, each READ_S after the last paint (target p95 < 50 ms), and GAP_S after it;
- a scripted auditor (Pilot) that confirms CONFIRM items: `!`, enter on the first, then `y` on each
  (confirm, and on to the next): the keys pressed, and keys per item.

The marks it gives are cleared at the end (the store is left as it was). Usage:
    python -m bench.audit_loop [--instructions 2000] [--store PATH] [--size 80x24]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

from bench.app_latency import GAP_S, QUEUE_TARGET_S, bench_store, pct, queue_ready, send_key
from bench.app_timing import paint_event, wait_for_first_screen

NEXT_TARGET_MS = 50.0  # the 95th percentile
ITEMS = 100  # next-item moves timed
CONFIRM = 20  # items the scripted auditor confirms
READ_S = 0.25  # between an item shown and the next `n`: an auditor reads first (far less than one reads)


async def measure(store: Path, size: tuple[int, int]) -> dict[str, float]:
    from unspecific_tui.app import UnspecificApp
    from unspecific_tui.screens.audit import AuditScreen

    app = UnspecificApp(store, stages={})
    out: dict[str, float] = {}
    async with app.run_test(size=size) as pilot:
        await wait_for_first_screen(app)
        await app.workers.wait_for_complete()
        painted = paint_event(app)
        out.update(await queue_ready(app, painted))

        # The scripted auditor: enter on the first suspect, then `y` on each item (confirm and go
        # on): the keys pressed from the queue shown to CONFIRM items confirmed.
        keys = 0
        t = time.perf_counter()
        await pilot.press("enter")
        keys += 1
        await app.workers.wait_for_complete()
        await pilot.pause()
        audit = app.screen
        assert isinstance(audit, AuditScreen), type(audit).__name__
        marked: list[tuple[int, int]] = []
        for _ in range(CONFIRM):
            shown = audit.shown
            marked.append((shown.response_id or 0, shown.constraint_id or 0))
            await pilot.press("y")
            keys += 1
        await pilot.pause()
        out["confirm_s"] = time.perf_counter() - t
        confirmed = sum(1 for key in marked if app.marks.get(key) == "confirmed")
        out["confirmed"] = confirmed
        out["keys"] = keys
        out["keys_per_item"] = keys / max(1, confirmed)

        # Next item: `n` following the queue, key to repaint; sent READ_S after the last paint, as an
        # auditor reads an item before the next (Audit reads the next item's rows meanwhile), and
        # GAP_S after it, as keys held down come.
        for name, gap in (("next", READ_S), ("next_fast", GAP_S)):
            ms: list[float] = []
            for _ in range(ITEMS):
                took = await send_key(app, painted, "n", 2.0)
                if took is None:
                    break
                ms.append(took)
                await asyncio.sleep(gap)
            out[f"{name}_median_ms"] = statistics.median(ms) if ms else float("nan")
            out[f"{name}_p95_ms"] = pct(ms, 0.95) if ms else float("nan")
            out[f"{name}_moves"] = len(ms)
        for key in marked:  # leave the bench store as it was
            app.mark(*key, None)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instructions", type=int, default=2000)
    parser.add_argument("--store", default=None, help="reuse/create the synthetic store here")
    parser.add_argument("--size", default="80x24", help="terminal size, WIDTHxHEIGHT (default 80x24)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    path = bench_store(args.store, args.instructions)
    width, height = (int(x) for x in args.size.lower().split("x"))
    r = asyncio.run(measure(path, (width, height)))
    ok_queue = r["queue_ready_s"] < QUEUE_TARGET_S
    ok_next = r["next_p95_ms"] < NEXT_TARGET_MS
    print(f"store: {path}, terminal {args.size}; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    print(f"queue open        {r['queue_ready_s'] * 1000:7.0f} ms   target < {QUEUE_TARGET_S * 1000:.0f} ms"
          f"   {'OK' if ok_queue else 'SLOW'}  ({int(r['queue_rows']):,} suspects; ranking in the worker"
          f" {r['queue_worker_s'] * 1000:.0f} ms)")
    print(f"next item (n)     median {r['next_median_ms']:5.1f} ms, p95 "
          f"{r['next_p95_ms']:5.1f} ms   target p95 <"
          f" {NEXT_TARGET_MS:.0f} ms   {'OK' if ok_next else 'SLOW'}  ({int(r['next_moves'])} "
          "moves, key to repaint,"
          f" each {READ_S * 1000:.0f} ms after the last paint)")
    print(f"  back to back    median {r['next_fast_median_ms']:5.1f} ms, p95 {r['next_fast_p95_ms']:5.1f} ms"
          f"   (each {GAP_S * 1000:.0f} ms after the last paint: the next item's rows not read ahead)")
    print(f"scripted auditor  {int(r['confirmed'])} confirmed in {int(r['keys'])} keys: "
          f"{r['keys_per_item']:.2f} keys"
          f" per item (enter, then y per item), {r['confirm_s']:.1f} s")
    return 0 if ok_queue and ok_next and r["confirmed"] == CONFIRM else 1


if __name__ == "__main__":
    sys.exit(main())
