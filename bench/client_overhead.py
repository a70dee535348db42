"""The LLM client's overhead: 500 calls against the fake server (50 ms latency) at
concurrency 16, through LLMClient. Prints the wall time, the ideal (calls x latency /
concurrency) and their ratio. Target: ratio <= 1.15.

Every prompt is distinct, so no call is a cache hit; by default each reply is still written to
the cache in the store, as in a real run (`--no-cache` measures the transport alone).
The fake server runs in a separate process, so its work does not compete for our GIL.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET = 1.15


def serve(latency_s: float, conn) -> None:
    from pipeline.fake_server import FakeOpenAIServer

    server = FakeOpenAIServer(latency_s=latency_s).start()
    conn.send(server.base_url)
    conn.recv()  # until told to stop
    server.stop()
    conn.send(time.process_time())


async def run_calls(base_url: str, calls: int, concurrency: int, use_cache: bool, store_dir: Path) -> tuple[float, float]:
    """Returns (wall seconds, this process's CPU seconds) for the calls."""
    from pipeline.config import parse_config
    from pipeline.llm import LLMClient
    from pipeline.store import open_store

    config = parse_config({"endpoints": {"fake": {"base_url": base_url, "model": "fake", "concurrency": concurrency,
                                                   "max_retries": 0}}})
    store = open_store(store_dir / "bench.sqlite")
    client = LLMClient(config, store, use_cache=use_cache)
    await client.chat("fake", [{"role": "user", "content": "warm-up"}])  # imports, connection
    t0, cpu0 = time.perf_counter(), time.process_time()
    results = await asyncio.gather(
        *(client.chat("fake", [{"role": "user", "content": f"prompt number {i}"}]) for i in range(calls))
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await client.aclose()
    assert len(results) == calls and all(text.startswith("echo: ") for text, _ in results)
    assert client.usage.calls == calls + 1 and client.usage.failures == 0
    store.close()
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--no-cache", action="store_true", help="do not write replies to the store's cache")
    parser.add_argument("--in-process", action="store_true", help="run the fake server in this process")
    parser.add_argument("--check", action="store_true", help="exit 1 when the ratio is above target")
    args = parser.parse_args()

    proc = None
    if args.in_process:
        from pipeline.fake_server import FakeOpenAIServer

        server = FakeOpenAIServer(latency_s=args.latency).start()
        base_url = server.base_url
    else:
        parent, child = mp.Pipe()
        proc = mp.get_context("spawn").Process(target=serve, args=(args.latency, child), daemon=True)
        proc.start()
        base_url = parent.recv()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            wall, cpu = asyncio.run(run_calls(base_url, args.calls, args.concurrency, not args.no_cache, Path(tmp)))
    finally:
        server_cpu = None
        if proc is not None:
            parent.send("stop")
            server_cpu = parent.recv()
            proc.join(5)
        else:
            server.stop()
    ideal = args.calls * args.latency / args.concurrency
    ratio = wall / ideal
    print(f"{args.calls} calls, latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}, "
          f"cache {'off' if args.no_cache else 'on (distinct prompts)'}, server {'in-process' if args.in_process else 'own process'}")
    import os

    print(f"client CPU {cpu:.3f}s ({cpu / args.calls * 1000:.2f} ms a call); load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs (a busy machine inflates the ratio)"
          + (f"; fake server CPU {server_cpu:.3f}s" if server_cpu is not None else ""))
    print(f"wall {wall:.3f}s, ideal {ideal:.3f}s, ratio {ratio:.3f} (target <= {TARGET}: {'OK' if ratio <= TARGET else 'ABOVE TARGET'})")
    return 1 if args.check and ratio > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
