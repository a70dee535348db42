"""One instruction ready for the generation stage and a config of fake endpoints for it."""

from __future__ import annotations

from pipeline.core.config import parse_config
from pipeline.core.text import count_words
from pipeline.store.database import now
from tests.fakes.fake_server import FakeOpenAIServer

BASE = "A constraint-blind draft about the harbour festival and its crowded quay at dawn."

CONSTRAINTS = ["Open with the weather.", "Quote a fisherman.", "End with the tide."]


def setup_instruction(store, *, with_base: bool = True) -> int:
    base_id = None
    store.db["instructions"].insert({"id": 1, "run_id": "b", "domain": "news", "condition": "eval",
                                     "main_task": "Write a news article about a harbour festival.",
                                     "n_constraints": 3, "status": "done", "created_at": now()})
    if with_base:
        base_id = store.db["generations"].insert({"kind": "base", "instruction_id": 1, "model": "gen", "mode": "",
                                                  "text_hash": store.put_text(BASE), "words": count_words(BASE)}).last_pk
        store.db["instructions"].update(1, {"base_generation_id": base_id})
    for pos, text in enumerate(CONSTRAINTS, 1):
        store.db["constraints"].insert({"instruction_id": 1, "position": pos, "text": text, "origin": "synthesized",
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
