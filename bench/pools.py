"""Endpoint pools: 400 calls against fake servers answering in 50 ms, each member at
concurrency 4. Prints the wall time of one server, a pool of four, and a pool of four with one
member down (connection refused) and one slow (250 ms), against the ideal of each
(calls x latency / total concurrency of the live members), and how the calls spread. Each
fake server runs in a process of its own, so servers do not compete with the client for the GIL.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import tempfile
import time
from pathlib import Path

CALLS = 400
LATENCY = 0.05
CONCURRENCY = 4


async def run(urls: list[str], label: str, ideal: float) -> None:
    from pipeline.core.config import parse_config
    from pipeline.llm.client import LLMClient
    from pipeline.store.database import open_store

    endpoints = {f"m{i}": {"base_url": u, "model": "fake-model", "concurrency": CONCURRENCY,
                           "timeout_s": 10.0}
                 for i, u in enumerate(urls)}
    endpoints["fleet"] = {"pool": list(endpoints), "drain_after": 2, "drain_s": 60}
    config = parse_config({"endpoints": endpoints, "roles": {"judges": ["fleet"]}})
    store = open_store(Path(tempfile.mkdtemp()) / "s.sqlite")
    client = LLMClient(config, store, backoff_base_s=0.01, backoff_cap_s=0.1)
    t = time.perf_counter()
    await asyncio.gather(*(client.chat("fleet", [{"role": "user", "content": f"{label} {i}"}])
                           for i in range(CALLS)))
    wall = time.perf_counter() - t
    spread = {m: s["calls"] for m, s in client.pool_status("fleet").items()}
    await client.aclose()
    store.close()
    print(f"{label:<34} {wall:6.2f}s  ideal {ideal:5.2f}s  ratio {wall / ideal:4.2f}  calls "
          f"per member {spread}  retries {client.usage.retries}")


def _slow(request: dict) -> object:
    from tests.fakes.fake_server import Reply

    return Reply(text="slow", delay_s=0.2)


def serve(latency_s: float, slow: bool, conn) -> None:
    from tests.fakes.fake_server import FakeOpenAIServer, echo_responder

    server = FakeOpenAIServer(_slow if slow else echo_responder, latency_s=latency_s).start()
    conn.send(server.base_url)
    conn.recv()
    server.stop()


def start(slow: bool = False) -> tuple[str, object, mp.Process]:
    parent, child = mp.Pipe()
    proc = mp.Process(target=serve, args=(LATENCY, slow, child), daemon=True)
    proc.start()
    return parent.recv(), parent, proc


async def main() -> None:
    from tests.fakes.fake_server import dead_url

    servers = [start() for _ in range(4)]
    slow = start(slow=True)
    urls = [u for u, _, _ in servers]
    per_slot = CALLS * LATENCY
    try:
        await run(urls[:1], "one server", per_slot / CONCURRENCY)
        await run(urls, "pool of four", per_slot / (4 * CONCURRENCY))
        # Two healthy members, one slow (5x latency, so worth 1/5 of a member), one refused.
        await run([urls[0], urls[1], slow[0], dead_url()], "pool: one down, one 5x slower",
                  per_slot / (2.2 * CONCURRENCY))
    finally:
        for _, conn, proc in [*servers, slow]:
            conn.send("stop")
            proc.join(5)


if __name__ == "__main__":
    asyncio.run(main())
