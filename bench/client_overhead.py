"""The LLM client's overhead: 500 calls against the fake server (50 ms latency) at
concurrency 16, through LLMClient. Prints the wall time, the ideal (calls x latency /
concurrency) and their ratio. Target: ratio <= 1.15.

Every prompt is distinct, so no call is a cache hit; by default each reply is still written to
the cache in the store, as in a real run (`--no-cache` measures the transport alone). The fake
server runs in a process of its own, so its work does not compete for our GIL. Before timing,
`concurrency` calls open the connection pool (a one-time cost of any run, not a per-call one;
`--cold` includes it). The run is repeated (`--repeat`) and the median ratio is the result: on a
shared machine single runs are noisy. The load average is printed because a busy machine
inflates the ratio; `chrt -f 20 python -m bench.client_overhead` (root) measures without the
neighbours.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TARGET = 1.15


def serve(latency_s: float, conn) -> None:
    from tests.fakes.fake_server import FakeOpenAIServer

    server = FakeOpenAIServer(latency_s=latency_s).start()
    conn.send(server.base_url)
    conn.recv()  # until told to stop
    server.stop()
    conn.send(time.process_time())


@dataclass
class Result:
    wall: float
    cpu: float  # this process, during the timed calls
    latencies: list[float]


async def run_calls(base_url: str, calls: int, concurrency: int, use_cache: bool, cold: bool,
                    store_dir: Path) -> Result:
    from pipeline.core.config import parse_config
    from pipeline.llm.client import LLMClient
    from pipeline.store.database import open_store

    config = parse_config({"endpoints": {"fake": {"base_url": base_url, "model": "fake",
                                                  "concurrency": concurrency,
                                                   "max_retries": 0}}})
    store = open_store(store_dir / "bench.sqlite")
    client = LLMClient(config, store, use_cache=use_cache)
    warm = 1 if cold else concurrency
    await asyncio.gather(*(client.chat("fake", [{"role": "user", "content": f"warm-up {i}"}])
                           for i in range(warm)))
    t0, cpu0 = time.perf_counter(), time.process_time()
    results = await asyncio.gather(
        *(client.chat("fake", [{"role": "user", "content": f"prompt number {i}"}]) for i in range(calls))
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await client.aclose()
    store.close()
    assert len(results) == calls and all(text.startswith("echo: ") for text, _ in results)
    assert client.usage.calls == calls + warm and client.usage.failures == 0
    return Result(wall, cpu, sorted(c.latency_s for _, c in results))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-cache", action="store_true", help="do not write replies to the store's cache")
    parser.add_argument("--cold", action="store_true", help="time the opening of the connection pool too")
    parser.add_argument("--check", action="store_true", help="exit 1 when the median ratio is above target")
    args = parser.parse_args()

    parent, child = mp.Pipe()
    proc = mp.get_context("spawn").Process(target=serve, args=(args.latency, child), daemon=True)
    proc.start()
    base_url = parent.recv()
    ideal = args.calls * args.latency / args.concurrency
    ratios = []
    print(f"{args.calls} calls, latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}, "
          f"cache {'off' if args.no_cache else 'on (distinct prompts)'}, pool "
          f"{'cold' if args.cold else 'warm'}; "
          f"ideal {ideal:.3f}s")
    try:
        for i in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                r = asyncio.run(run_calls(base_url, args.calls, args.concurrency, not args.no_cache,
                                          args.cold, Path(tmp)))
            ratios.append(r.wall / ideal)
            lat = r.latencies
            print(f"run {i + 1}: wall {r.wall:.3f}s, ratio {r.wall / ideal:.3f}; client CPU "
                  f"{r.cpu / args.calls * 1000:.2f} ms a call; "
                  f"latency median {lat[len(lat) // 2] * 1000:.1f} ms, p90 "
                  f"{lat[len(lat) * 9 // 10] * 1000:.1f} ms, max {lat[-1] * 1000:.1f} ms")
    finally:
        parent.send("stop")
        server_cpu = parent.recv()
        proc.join(5)
    ratio = statistics.median(ratios)
    print(f"fake server CPU {server_cpu / (args.calls * args.repeat) * 1000:.2f} ms a call; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"median ratio {ratio:.3f} (target <= {TARGET}: {'OK' if ratio <= TARGET else 'ABOVE TARGET'})")
    return 1 if args.check and ratio > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
