"""Batched vs per-constraint judging: LLM calls, prompt tokens and wall time.

25 instructions x 39 constraints (the paper's scale per domain), one ~500-word response each,
judged through the evaluation stage (``run_judge``) against the fake OpenAI server with a
latency model: a fixed overhead per request, plus time per prompt token (prefill) and per
completion token (decoding). Defaults are a fast remote endpoint scaled down 10x so the bench
runs in well under a minute: 20 ms + 0.05 ms/prompt token + 1 ms/completion token; the
endpoint takes 8 requests at once.

Run: .venv/bin/python -m bench.judging [--instructions 25] [--constraints 39] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.config import parse_config
from pipeline.llm.client import LLMClient
from pipeline.stages.evaluate import EvaluateOptions, run_judge
from pipeline.store.database import Store, now, open_store
from tests.fakes.fake_server import FakeOpenAIServer, Reply, last_user_message

VOCAB = ("council budget residents library harbour ferry storm bridge market school teachers parents "
         "funding vote meeting officials report hospital housing taxes park transport jobs workers").split()


@dataclass(frozen=True)
class Latency:
    base_s: float = 0.020
    per_prompt_token_s: float = 0.00005
    per_completion_token_s: float = 0.001

    def of(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (self.base_s + prompt_tokens * self.per_prompt_token_s + completion_tokens
                * self.per_completion_token_s)


def _between(text: str, name: str) -> str:
    return text.split(f"<<<{name}", 1)[1].split(f"{name}>>>", 1)[0]


def make_responder(latency: Latency):
    """A judge that answers in the contract: Yes (quoting a sentence) for about 60% of constraints."""

    def responder(request: dict) -> Reply:
        prompt = last_user_message(request)
        text = _between(prompt, "TEXT")
        sentences = [s for s in re.split(r"(?<=\.)\s+", text.strip()) if s]
        rng = random.Random(len(prompt))

        def verdict() -> dict:
            if rng.random() < 0.6:
                return {"verdict": "yes", "quote": rng.choice(sentences)[:160], "reason": ""}
            return {"verdict": "no", "quote": "", "reason": "the text does not do this"}

        if "<<<CONSTRAINTS" in prompt:
            n = len(re.findall(r"^\d+\. ", _between(prompt, "CONSTRAINTS"), re.MULTILINE))
            reply = json.dumps({"verdicts": [{"id": i, **verdict()} for i in range(1, n + 1)]})
        else:
            reply = json.dumps(verdict())
        prompt_chars = sum(len(str(m.get("content", ""))) for m in request["messages"])
        # Tokens as the fake server counts them (about four characters a token).
        return Reply(text=reply, delay_s=latency.of(prompt_chars // 4, len(reply) // 4))

    return responder


def build_store(path: Path, n_instructions: int, n_constraints: int, words: int = 500) -> Store:
    rng = random.Random(0)
    store = open_store(path)
    for i in range(n_instructions):
        iid = store.db["instructions"].insert({"run_id": "bench", "domain": "news", "condition": "eval",
                                               "article_a": i, "main_task": f"Write a news article {i}.",
                                               "n_constraints": n_constraints, "status": "done",
                                               "created_at": now()}).last_pk
        store.conn.executemany(
            "INSERT INTO constraints (instruction_id, position, text, origin, active) VALUES (?, ?, "
            "?, 'synthesized', 1)",
            [(iid, p,
              f"Describe how the {rng.choice(VOCAB)} affects the {rng.choice(VOCAB)} over several sentences.")
             for p in range(1, n_constraints + 1)],
        )
        sentences, count = [], 0
        while count < words:
            s = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(8, 18))).capitalize() + "."
            sentences.append(s)
            count += len(s.split())
        body = " ".join(sentences)
        store.db["generations"].insert({"kind": "response", "instruction_id": iid, "model": "m",
                                        "mode": "direct",
                                        "text_hash": store.put_text(body), "words": count})
    store.commit()
    return store


async def judge_all(mode: str, n_instructions: int, n_constraints: int, concurrency: int, latency: Latency,
                    tmp: Path) -> dict:
    store = build_store(tmp / f"{mode}.sqlite", n_instructions, n_constraints)
    with FakeOpenAIServer(make_responder(latency)) as server:
        config = parse_config({"endpoints": {"judge": {"base_url": server.base_url, "model": "judge",
                                                       "concurrency": concurrency}},
                               "roles": {"judges": ["judge"], "models_under_test": ["judge"],
                                         "summarizer": "judge"}})
        client = LLMClient(config, store)
        started = time.perf_counter()
        summary = await run_judge(store, config, client, EvaluateOptions(rejudge=True, judging=mode))
        wall = time.perf_counter() - started
        await client.aclose()
    verdicts = store.scalar("SELECT count(*) FROM verdicts")
    yes = store.scalar("SELECT sum(verdict) FROM verdicts")
    found = store.scalar("SELECT count(*) FROM verdicts WHERE quote_found = 'exact'")
    store.close()
    assert summary.failed == 0 and verdicts == n_instructions * n_constraints, (summary, verdicts)
    return {"mode": mode, "calls": client.usage.calls, "prompt_tokens": client.usage.prompt_tokens,
            "completion_tokens": client.usage.completion_tokens, "wall_s": wall, "verdicts": verdicts,
            "yes": yes, "quotes_found": found}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instructions", type=int, default=25)
    ap.add_argument("--constraints", type=int, default=39)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--base-ms", type=float, default=20.0)
    ap.add_argument("--prompt-ms-per-token", type=float, default=0.05)
    ap.add_argument("--completion-ms-per-token", type=float, default=1.0)
    args = ap.parse_args()
    latency = Latency(args.base_ms / 1000, args.prompt_ms_per_token / 1000,
                      args.completion_ms_per_token / 1000)
    print(f"judging {args.instructions} responses x {args.constraints} constraints; endpoint concurrency "
          f"{args.concurrency}; latency {args.base_ms:g} ms + {args.prompt_ms_per_token:g} ms/prompt token + "
          f"{args.completion_ms_per_token:g} ms/completion token")
    with tempfile.TemporaryDirectory() as tmp:
        results = [asyncio.run(judge_all(mode, args.instructions, args.constraints, args.concurrency,
                                         latency, Path(tmp)))
                   for mode in ("batched", "per_constraint")]
    print(f"{'mode':<16}{'calls':>8}{'prompt tok':>12}{'compl. tok':>12}{'wall s':>9}{'verdicts':>10}")
    for r in results:
        print(f"{r['mode']:<16}{r['calls']:>8}{r['prompt_tokens']:>12,}{r['completion_tokens']:>12,}"
              f"{r['wall_s']:>9.2f}{r['verdicts']:>10}")
    b, p = results
    print(f"per_constraint / batched: calls x{p['calls'] / b['calls']:.1f}, prompt tokens "
          f"x{p['prompt_tokens'] / b['prompt_tokens']:.1f}, completion tokens "
          f"x{p['completion_tokens'] / b['completion_tokens']:.2f}, wall time "
          f"x{p['wall_s'] / b['wall_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
