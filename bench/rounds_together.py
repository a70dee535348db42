"""The "more constraints" rounds one at a time against written together (pipeline.llm.prompt_batch),
side by side on the real embedded model in one run.

For each of ``--articles`` BBC News articles, the stage's own ``synthesize_single`` asks the
embedded model for the demo's list (39 constraints, the first reply capped at the model's 15, the
demo's 8 rounds at most) twice on one store: the first list is asked once and read from the cache
the second time, so the two ways differ only in their rounds. The ways alternate which goes first,
article by article, as the host's load may change. Prints per article and way: the rounds' requests,
tokens written, model seconds (the calls' own durations) and the constraints reached; then the
rounds' seconds in all, one way against the other.

    .venv/bin/python -m bench.rounds_together [--articles 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from dataclasses import replace
from pathlib import Path

from bench.judge_lists import texts
from pipeline.core.config import LOCAL, default_config
from pipeline.llm.client import LLMClient
from pipeline.stages.synthesis import synthesize_single
from pipeline.store.database import open_store

ROUNDS_SQL = ("SELECT count(*) AS calls, coalesce(sum(completion_tokens), 0) AS written, "
              "coalesce(sum(latency_s), 0) AS seconds FROM llm_calls WHERE template = "
              "'constraints_more' AND id > ?")


async def rounds(base_url: str, store_path: Path, article: str,
                 together: bool) -> tuple[int, int, float, int]:
    """(requests, tokens written, model seconds) of one way's rounds, and the constraints it reached."""
    config = default_config()
    config = replace(config, endpoints={LOCAL: replace(config.endpoint(LOCAL), batch_generation=together)})
    store = open_store(store_path)
    client = LLMClient(config, store, local_base_url=base_url)
    before = store.scalar("SELECT coalesce(max(id), 0) FROM llm_calls")
    try:
        result = await synthesize_single(client, LOCAL, article, 39, domain="news", repair_rounds=8)
    finally:
        await client.aclose()
    row = store.query(ROUNDS_SQL, (before,))[0]
    store.close()
    return int(row["calls"]), int(row["written"]), float(row["seconds"]), len(result.constraints)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--articles", type=int, default=2)
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from pipeline.llm import local_model as lm
    from pipeline.llm import model_file

    server = lm.LocalServer(model=model_file.model_path())
    server.start(timeout_s=600)
    totals = {False: 0.0, True: 0.0}
    try:
        for i, article in enumerate(texts(args.articles, 250)):
            store_path = Path(tempfile.mkdtemp(prefix="bench-rounds-")) / "s.sqlite"
            for together in ((False, True) if i % 2 == 0 else (True, False)):
                calls, written, seconds, reached = asyncio.run(rounds(server.base_url, store_path,
                                                                      article, together))
                totals[together] += seconds
                way = "written together" if together else "one at a time"
                print(f"article {i + 1}, {way}: {calls} request(s), {written} tokens "
                      f"written, {seconds:.1f} s, {reached} constraints", flush=True)
    finally:
        server.stop()
    print(f"rounds in all: one at a time {totals[False]:.1f} s, written together {totals[True]:.1f} s: "
          f"{totals[False] / max(totals[True], 1e-9):.2f}x")


if __name__ == "__main__":
    main()
