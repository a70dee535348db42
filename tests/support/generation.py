"""One instruction ready for the generation stage and a config of fake endpoints for it."""

from __future__ import annotations

import pytest

from pipeline.core.config import parse_config
from pipeline.core.errors import ParseError
from pipeline.core.text import count_words
from pipeline.llm.client import LLMClient
from pipeline.stages.generation import respond, summarize
from pipeline.store.database import Store, now
from tests.fakes.fake_server import FakeOpenAIServer, Responder

BASE = "A constraint-blind draft about the harbour festival and its crowded quay at dawn."

CONSTRAINTS = ["Open with the weather.", "Quote a fisherman.", "End with the tide."]


def setup_instruction(store, *, with_base: bool = True) -> int:
    base_id = None
    store.db["instructions"].insert({"id": 1, "run_id": "b", "domain": "news", "condition": "eval",
                                     "main_task": "Write a news article about a harbour festival.",
                                     "n_constraints": 3, "status": "done", "created_at": now()})
    if with_base:
        base_id = store.db["generations"].insert({"kind": "base", "instruction_id": 1,
                                                  "model": "gen", "mode": "",
                                                  "text_hash": store.put_text(BASE),
                                                  "words": count_words(BASE)}).last_pk
        store.db["instructions"].update(1, {"base_generation_id": base_id})
    for pos, text in enumerate(CONSTRAINTS, 1):
        store.db["constraints"].insert({"instruction_id": 1, "position": pos, "text": text,
                                        "origin": "synthesized",
                                        "active": 1})
    # A replaced constraint: never shown to the model under test.
    store.db["constraints"].insert({"instruction_id": 1, "position": None, "text": "Mention the mayor.",
                                    "origin": "synthesized", "active": 0})
    store.commit()
    return 1


def generation_config(server: FakeOpenAIServer):
    ep = {"base_url": server.base_url, "concurrency": 2, "max_retries": 0}
    return parse_config({"endpoints": {"m": {**ep, "model": "writer"}, "s": {**ep, "model": "summ"}},
                         "roles": {"models_under_test": ["m"], "summarizer": "s"}})


async def no_summary(store: Store, responder: Responder, *, words: int, ratio: float, match: str) -> None:
    """``responder`` writes model m's response of ``words`` words to instruction 1, then a summary at
    ``ratio`` fails with a ParseError matching ``match``: no summary is stored."""
    with FakeOpenAIServer(responder) as server:
        client = LLMClient(generation_config(server), store)
        gid, _ = await respond(store, client, 1, "m", "direct", words=words)
        with pytest.raises(ParseError, match=match):
            await summarize(store, client, gid, ratio, "s")
        await client.aclose()
    assert store.scalar("SELECT count(*) FROM generations WHERE kind = 'summary'") == 0
