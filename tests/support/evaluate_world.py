"""The evaluation world the evaluate-stage tests share: instructions whose constraints each name one
keyword, a config of fake endpoints, and a scripted server world (``world``) in which writers,
the summarizer and the judges behave deterministically. Used with tests/fakes' FakeOpenAIServer."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pipeline.core.config import parse_config
from pipeline.llm.client import LLMClient
from pipeline.stages.evaluate import EvaluateOptions, run_evaluate
from pipeline.store.database import now, open_store
from tests.fakes.fake_server import FakeOpenAIServer, Responder, last_user_message

KEYWORDS = ["harbour", "lantern", "ferry", "market", "storm", "bridge"]


def _system(request: dict) -> str:
    return str(request["messages"][0]["content"]) if request["messages"][0]["role"] == "system" else ""


def role_of(request: dict) -> str:
    system = _system(request)
    if "skilled writer" in system:
        return "respond_direct"
    if "skilled editor" in system:
        return "respond_edit"
    if "summarise texts" in system:
        return "summarize"
    if "numbered constraint" in system:
        return "judge_batched"
    if "one CONSTRAINT" in system:
        return "judge_single"
    raise AssertionError(f"unknown prompt: {system[:80]}")


def between(text: str, name: str) -> str:
    return text.split(f"<<<{name}", 1)[1].split(f"{name}>>>", 1)[0]


def world(request: dict) -> str:
    """A deterministic fake world: the writer mentions each constraint's keyword in its own
    sentence, in constraint order; the summarizer keeps the first words; a judge says Yes when
    the keyword is in the text, quoting its sentence. Judge 'jb' disagrees on constraint 1."""
    role = role_of(request)
    prompt = last_user_message(request)
    if role.startswith("respond"):
        block = between(prompt, "REQUIREMENTS")
        words = [w for w in re.findall(r"the (\w+)\.", block)]
        # Each model writes its own text: identical texts would make identical judge calls, and whether
        # the second is a cache hit or a second call would depend on timing.
        return f"Written by {request['model']}. " + " ".join(
            f"In this part the {w} matters a great deal to everyone." for w in words)
    if role == "summarize":
        target = int(prompt.split("Summarise it in about ")[1].split()[0])
        return " ".join(between(prompt, "TEXT").split()[:target])
    text = between(prompt, "TEXT")
    sentences = re.split(r"(?<=\.)\s+", text.strip())

    def verdict(constraint: str) -> dict:
        word = re.search(r"the (\w+)\.", constraint).group(1)
        hit = next((s for s in sentences if word in s), None)
        yes = hit is not None
        if request["model"] == "model-jb" and word == KEYWORDS[0]:
            yes = not yes
        return {"verdict": "yes" if yes else "no",
                "quote": (hit or "an invented line about nothing") if yes else "",
                "reason": "" if yes else "absent"}

    if role == "judge_single":
        return json.dumps(verdict(between(prompt, "CONSTRAINT")))
    block = between(prompt, "CONSTRAINTS")
    items = re.findall(r"^(\d+)\. (.*)$", block, re.MULTILINE)
    return json.dumps({"verdicts": [{"id": int(i), **verdict(c)} for i, c in items]})


def make_instructions(store, n: int = 2, k: int = 4, *, condition: str = "eval",
                      run_id: str = "build-1") -> list[int]:
    ids = []
    for i in range(n):
        iid = store.db["instructions"].insert({"run_id": run_id, "domain": "news", "condition": condition,
                                               "article_a": 100 + i,
                                               "main_task": f"Write a news article number {i}.",
                                               "n_constraints": k, "status": "done",
                                               "created_at": now()}).last_pk
        base = f"A plain draft number {i} about a town, with no particular details."
        gid = store.db["generations"].insert({"kind": "base", "instruction_id": iid,
                                              "model": "gen", "mode": "",
                                              "text_hash": store.put_text(base),
                                              "words": len(base.split())}).last_pk
        store.db["instructions"].update(iid, {"base_generation_id": gid})
        for pos in range(1, k + 1):
            store.db["constraints"].insert({"instruction_id": iid, "position": pos, "origin": "synthesized",
                                            "active": 1,
                                            "text": f"Mention the "
                                                    f"{KEYWORDS[(pos - 1 + i) % len(KEYWORDS)]}."})
        ids.append(iid)
    # An unfinished instruction: never evaluated.
    store.db["instructions"].insert({"run_id": run_id, "domain": "news", "condition": condition,
                                     "article_a": 999,
                                     "main_task": "x", "n_constraints": 0, "status": "synthesized",
                                     "created_at": now()})
    store.commit()
    return ids


def make_config(server: FakeOpenAIServer, *, models=("ma", "mb"), judges=("ja", "jb"),
                extra: dict | None = None,
                retries: int = 0):
    names = set(models) | set(judges) | {"summ"}
    endpoints = {n: {"base_url": server.base_url, "model": f"model-{n}", "concurrency": 3,
                     "max_retries": retries}
                 for n in names}
    return parse_config({"endpoints": endpoints,
                         "roles": {"models_under_test": list(models), "judges": list(judges),
                                   "summarizer": "summ"},
                         "evaluate": {"response_words": 60, **(extra or {})}})


def config_file(tmp_path: Path, base_url: str, *, endpoints: Sequence[str] = ("ma", "ja", "summ"),
                judges: Sequence[str] = ("ja",), each: str = "", response_words: int | None = 60) -> Path:
    """``make_config``'s world as the CLI reads it: unspecific.toml in ``tmp_path``, ``endpoints`` on
    ``base_url`` without retries (``each``: more lines for every one), ma under test, summ summarizing."""
    cfg = tmp_path / "unspecific.toml"
    roles = f'[roles]\nmodels_under_test = ["ma"]\njudges = {json.dumps(list(judges))}\nsummarizer = "summ"\n'
    cfg.write_text(
        "\n".join(f'[endpoints.{n}]\nbase_url = "{base_url}"\nmodel = "model-{n}"\nmax_retries = 0\n{each}'
                  for n in endpoints)
        + roles + ("" if response_words is None else f"[evaluate]\nresponse_words = {response_words}\n"))
    return cfg


def instructions_at(store_path: Path, n: int, k: int) -> None:
    """``make_instructions`` in the store at ``store_path``, closed again for the CLI to open."""
    store = open_store(store_path)
    make_instructions(store, n=n, k=k)
    store.close()


def evaluate_cli(store_path: Path, tmp_path: Path, responder: Responder,
                 *args: str) -> tuple[int, FakeOpenAIServer]:
    """`unspecific evaluate *args` on ``config_file``'s world, every endpoint answered by ``responder``:
    the exit code and the (stopped) server."""
    from pipeline.cli import main

    with FakeOpenAIServer(responder) as server:
        cfg = config_file(tmp_path, server.base_url)
        code = main(["--store", str(store_path), "--config", str(cfg), "evaluate", *args])
    return code, server


def roles_called(server: FakeOpenAIServer) -> Counter:
    return Counter(role_of(r) for r in server.requests)


async def evaluate_with(store, config, options=None, **kw):
    client = LLMClient(config, store, backoff_base_s=0.01)
    try:
        return await run_evaluate(store, config, client, options or EvaluateOptions(), **kw)
    finally:
        await client.aclose()
