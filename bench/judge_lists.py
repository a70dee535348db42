"""The embedded yes_no judge, one call a constraint against one request of a text's constraints
(pipeline.llm.prompt_batch), side by side on the real model in one run.

Each way judges the same texts (a BBC News article cut to ``--words``) on the same constraints
through the stage's own ``judge_text`` and the one client, with no cache; a short unrelated call
before each text leaves the server holding nothing of it, as when the demo moves to a new text.
Prints per way: seconds a constraint (best of two alternating rounds, beside the raw speeds measured
in the same run), and on how many constraints the two ways' verdicts agree.

    .venv/bin/python -m bench.judge_lists [--texts 2] [--constraints 20] [--words 250]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench.demo import raw_speed
from pipeline.core.bundled import bbc_news_dir
from pipeline.core.config import LOCAL, default_config
from pipeline.llm.client import LLMClient, Params
from pipeline.stages.judging import judge_text
from pipeline.store.database import open_store

CONSTRAINTS = [
    "Name the company at the centre of the story.", "Give a figure for the company's profits or losses.",
    "Quote an executive or an analyst.", "Mention a date or a period of time.", "Say what happens next.",
    "Describe how investors or markets reacted.", "Compare this year with an earlier one.",
    "Mention a government or a regulator.", "Explain a cause of the change.", "Use the word 'sharply'.",
    "Mention a country other than the UK.", "Give a percentage.", "Describe a risk or a warning.",
    "Mention a competitor.", "Open with a question.", "Mention a dragon.", "Refer to the weather.",
    "End with a quotation.", "Mention a product the company sells.", "Give the name of a city.",
]


def texts(n: int, words: int) -> list[str]:
    root = bbc_news_dir() / "business"
    out = []
    for path in sorted(root.glob("*.txt"))[: n * 3]:
        body = " ".join(path.read_text(encoding="latin-1").split("\n", 2)[-1].split())
        if len(body.split()) >= words:
            out.append(" ".join(body.split()[:words]))
        if len(out) == n:
            break
    return out


async def judge_all(base_url: str, listed: bool, items: list[str],
                    constraints: list[str]) -> tuple[float, list]:
    config = default_config()
    config = replace(config, endpoints={LOCAL: replace(config.endpoint(LOCAL), judge_batch=listed)})
    store = open_store(Path(tempfile.mkdtemp(prefix="bench-judge-")) / "s.sqlite")
    client = LLMClient(config, store, local_base_url=base_url)
    client.use_cache = False
    verdicts, seconds = [], 0.0
    try:
        for text in items:
            await client.chat(LOCAL, [{"role": "user", "content": "Say hi."}], params=Params(max_tokens=1))
            t0 = time.monotonic()
            judged = await judge_text(client, LOCAL, text, constraints, mode="yes_no")
            seconds += time.monotonic() - t0
            verdicts += [(j.verdict, j.p_yes) for j in judged]
    finally:
        await client.aclose()
        store.close()
    return seconds, verdicts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--texts", type=int, default=2)
    p.add_argument("--constraints", type=int, default=20)
    p.add_argument("--words", type=int, default=250)
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from pipeline.llm import local_model as lm
    from pipeline.llm import model_file

    items = texts(args.texts, args.words)
    constraints = CONSTRAINTS[: args.constraints]
    pp, tg = raw_speed()
    print(f"raw speed: prompt {pp:.1f} tokens/s, generation {tg:.1f} tokens/s", flush=True)
    server = lm.LocalServer(model=model_file.model_path())
    server.start(timeout_s=600)
    try:
        rows = []
        for listed in (False, True, False, True):  # each way twice, alternating: the load may change
            seconds, verdicts = asyncio.run(judge_all(server.base_url, listed, items, constraints))
            rows.append((listed, seconds, verdicts))
            n = len(verdicts)
            print(f"{'one request a text' if listed else 'one call a constraint'}: {n} "
                  f"constraints in {seconds:.1f} s = {seconds / n:.3f} s each", flush=True)
    finally:
        server.stop()
    one = [r for r in rows if not r[0]]
    lists = [r for r in rows if r[0]]
    t_one = min(r[1] for r in one)
    t_list = min(r[1] for r in lists)
    same = sum(a[0] == b[0] for a, b in zip(one[0][2], lists[0][2], strict=True))
    print(f"best of two: one call a constraint {t_one:.1f} s, one request a text {t_list:.1f} s: "
          f"{t_one / t_list:.2f}x; verdicts the same on {same} of {len(one[0][2])}")


if __name__ == "__main__":
    main()
