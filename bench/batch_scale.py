"""Batch mode at scale: the judge calls of 10,000 instructions x 2 models x 2 judges (40,000
calls) through the fake Files and Batches API, with a kill between submit and collect and a
kill half way through collect.

Prints: the requests per batch; calls asked twice after the kills (target 0); the store's size
and the time to file 10,000 results; what the batch calls cost against online prices (target
0.5x); and the client's own CPU time per call, deferring and then taking the answers.

Each call goes through LLMClient exactly as a stage's does (cache look-up, deferral, then the
accept-and-cache path); prompts are about 1,500 characters, distinct. The fake server runs in a
process of its own, so its work is not counted as the client's CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

VERDICTS = "\n".join(f'{i}. Yes - "quote {i}"' for i in range(1, 21))


def serve(conn) -> None:
    from tests.fakes.fake_server import FakeOpenAIServer, Reply

    server = FakeOpenAIServer(lambda body: Reply(text=VERDICTS)).start()
    server.batch_polls = 1
    conn.send(server.base_url)
    conn.recv()
    calls = server.batch_calls
    conn.send({"answered": len(calls), "distinct": len(set(calls)), "online": server.calls,
               "creates": server.batch_creates})
    server.stop()


def prompt(i: int) -> list[dict[str, str]]:
    body = f"Text number {i}. " + ("The council met and argued about money and the library. " * 24)
    return [{"role": "system", "content": "You judge numbered constraints."},
            {"role": "user", "content": body + "\n"
             + "\n".join(f"{k}. constraint {k} of {i}" for k in range(1, 21))}]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instructions", type=int, default=10_000)
    parser.add_argument("--models", type=int, default=2)
    parser.add_argument("--judges", type=int, default=2)
    args = parser.parse_args()

    from pipeline.core.config import parse_config
    from pipeline.core.errors import BatchPending
    from pipeline.llm import batch as B
    from pipeline.llm.client import LLMClient
    from pipeline.store.database import open_store

    parent, child = mp.Pipe()
    proc = mp.Process(target=serve, args=(child,), daemon=True)
    proc.start()
    url = parent.recv()
    judges = [f"j{k}" for k in range(1, args.judges + 1)]
    config = parse_config({"endpoints": {j: {"base_url": url, "model": f"judge-{j}", "concurrency": 64,
                                             "price_prompt_per_mtok": 2.5, "price_completion_per_mtok": 10.0,
                                             "timeout_s": 600.0} for j in judges},
                           "roles": {"judges": judges}})
    n = args.instructions * args.models
    calls = [(j, prompt(i)) for i in range(n) for j in judges]
    print(f"{len(calls):,} judge calls ({args.instructions:,} instructions x {args.models} models x "
          f"{args.judges} judges)")
    tmp = Path(tempfile.mkdtemp())
    path = tmp / "store.sqlite"
    store = open_store(path)

    # 1. The stage in batch mode: every call deferred.
    client = LLMClient(config, store, batch=True)
    cpu = time.process_time()
    for j, messages in calls:
        try:
            await client.chat(j, messages)
        except BatchPending:
            pass
    await client.aclose()
    defer_cpu = time.process_time() - cpu
    t = time.perf_counter()
    sent = await B.submit_stage(store, config)
    submit_s = time.perf_counter() - t
    print(f"submitted {len(sent)} batch(es) in {submit_s:.1f}s: requests per batch "
          f"{[s.requests for s in sent]}, MB per file {[round(s.bytes / 1e6, 1) for s in sent]}")

    # 2. Killed between submit and collect: a new process (here a new handle) collects.
    store.close()
    store = open_store(path)
    for _ in range(3):
        await B.refresh(store, config)

    # 3. Killed half way through filing the results, then collected again.
    real = B.ingest_lines
    half = len(calls) // (2 * max(1, len(sent)))

    def dies_half_way(store_, config_, lines, batch_id=None, commit_every=2000):
        def gen():
            for k, line in enumerate(lines):
                if k == half:
                    raise KeyboardInterrupt
                yield line
        return real(store_, config_, gen(), batch_id, commit_every)

    B.ingest_lines = dies_half_way
    try:
        await B.collect(store, config)
    except KeyboardInterrupt:
        pass
    B.ingest_lines = real
    got = await B.collect(store, config)
    filed = B.status(store)["requests"]
    print(f"collect after the kill: {got.ingested.done:,} filed, {got.ingested.duplicates:,} "
          "already filed before "
          f"the kill; requests now {filed}")
    t = time.perf_counter()
    # The time to file results, measured alone on a fresh copy of the lines: undo and file again.
    store.conn.execute("UPDATE batch_requests SET status = 'submitted', response = NULL")
    store.commit()
    lines = []
    for row in store.query("SELECT output_file_id, endpoint FROM batches"):
        client_ = B._client(config.endpoint(row["endpoint"]))
        lines += await B._download(client_, row["output_file_id"])
        await client_.close()
    t = time.perf_counter()
    redo = B.ingest_lines(store, config, lines)
    ingest_s = time.perf_counter() - t
    print(f"filing {redo.done:,} results: {ingest_s:.2f}s, {ingest_s / redo.done * 10_000:.2f}s per 10,000")

    # 4. The stage again: every answer taken through the accept-and-cache path.
    client = LLMClient(config, store, batch=True)
    cpu = time.process_time()
    for j, messages in calls:
        await client.chat(j, messages)
    await client.aclose()
    take_cpu = time.process_time() - cpu
    parent.send("stop")
    server = parent.recv()
    proc.join(5)
    batch_cost = store.scalar("SELECT sum(cost) FROM llm_calls WHERE via = 'batch'")
    pt, ct = store.conn.execute("SELECT sum(prompt_tokens), sum(completion_tokens) FROM llm_calls").fetchone()
    online_cost = (pt * 2.5 + ct * 10.0) / 1e6
    freed = store.scalar("PRAGMA freelist_count") * store.scalar("PRAGMA page_size")
    if os.environ.get("BENCH_DBSTAT"):
        for row in store.conn.execute("SELECT name, sum(pgsize), sum(unused) FROM dbstat GROUP BY name "
                                      "ORDER BY 2 DESC LIMIT 8"):
            print("  ", row)
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    size = sum(os.path.getsize(p) for p in tmp.glob("store.sqlite*"))
    repeated = server["answered"] - server["distinct"] + server["online"]
    print(f"calls asked twice after the kills: {repeated} (target 0); batches created {server['creates']}")
    print(f"store: {size / 1e6:.1f} MB for {len(calls):,} cached calls "
          f"({size / len(calls) / 1e3:.1f} kB a call; "
          f"{freed / 1e6:.1f} MB of it free pages the batch requests' bodies left, reused by later calls)")
    print(f"cost: batch ${batch_cost:.2f} against online ${online_cost:.2f} = "
          f"{batch_cost / online_cost:.2f}x (target 0.5x)")
    print(f"client CPU per call: deferring {defer_cpu / len(calls) * 1e3:.3f} ms, taking the answer "
          f"{take_cpu / len(calls) * 1e3:.3f} ms")


if __name__ == "__main__":
    asyncio.run(main())
