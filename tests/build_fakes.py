"""Shared by the build tests: a tiny store with pairs, a config on the fake server, and a
scripted model that reads each prompt (which template, how many items) and answers it."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.config import Config, parse_config
from pipeline.fake_server import Reply
from pipeline.store import Store, now, open_store

ARTICLE_A = (
    "The town council of Smithfield met on Tuesday evening to argue over a budget shortfall that has left "
    "the public library closed for three weeks. Councillor Mary Dawson said the gap of two hundred thousand "
    "pounds came from rising heating costs. Residents who rely on the library for internet access told the "
    "meeting they felt abandoned. Several parents said their children had nowhere quiet to study. The council "
    "will vote next month on whether to raise local fees or cut opening hours at the swimming pool."
)
ARTICLE_B = (
    "Riverton's elected board spent Monday night debating how to close a funding hole that forced the "
    "community centre to shut its doors. Board chair Ahmed Khan blamed higher insurance premiums for the "
    "deficit. Older residents said the centre was the only place where they could meet friends during the "
    "winter. Volunteers described a petition signed by hundreds of people. A decision on raising parking "
    "charges or trimming the bus service is expected before the end of the year."
)

# A constraint that copies six words of ARTICLE_A and names its councillor: flagged twice.
LEAKY = "Explain what Councillor Dawson said about the gap of two hundred thousand pounds came from rising costs."
DUPLICATE = "Describe how residents reacted to the closure of a public service."
NEAR_DUPLICATE = "Describe how the residents reacted to the closure of the public service."


def make_store(path: Path, n_pairs: int = 1, *, domain: str = "news", rule: str = "paper") -> Store:
    store = open_store(path)
    for i in range(n_pairs):
        ids = []
        for label, body in (("a", ARTICLE_A), ("b", ARTICLE_B)):
            text = body + f" (story {i}{label})"
            h = store.put_text(text)
            ids.append(store.db["articles"].insert({
                "corpus": "test", "domain": domain, "source_id": f"{i}{label}", "title": f"story {i}{label}",
                "text_hash": h, "words": len(text.split()), "status": "kept", "duplicate_of": None, "imported_at": now(),
            }).last_pk)
        store.db["pairs"].insert({
            "domain": domain, "rule": rule, "params": "{}", "article_a": ids[0], "article_b": ids[1],
            "cosine": 0.8, "rank": 1, "candidates": "[]", "created_at": now(),
        })
    store.commit()
    return store


def fake_config(base_url: str, *, concurrency: int = 2, build: dict[str, Any] | None = None) -> Config:
    raw: dict[str, Any] = {
        "endpoints": {"fake": {"base_url": base_url, "model": "fake-model", "concurrency": concurrency,
                               "max_retries": 1, "structured": "json_object_schema"}},
        "roles": {"generator": "fake", "judges": ["fake"], "summarizer": "fake", "naturalness_judge": "fake",
                  "models_under_test": ["fake"]},
    }
    if build:
        raw["build"] = build
    return parse_config(raw)


def config_toml(base_url: str, *, concurrency: int = 1) -> str:
    return f"""
[endpoints.fake]
base_url = "{base_url}"
model = "fake-model"
concurrency = {concurrency}
max_retries = 1

[roles]
generator = "fake"
judges = ["fake"]
summarizer = "fake"
naturalness_judge = "fake"
models_under_test = ["fake"]
"""


def _block(text: str, name: str) -> str:
    m = re.search(rf"<<<{name}\n(.*?)\n{name}>>>", text, re.DOTALL)
    return m.group(1) if m else ""


def _numbered_items(block: str) -> list[tuple[int, str]]:
    out = []
    for line in block.splitlines():
        m = re.match(r"^(\d+)\. (.*)$", line)
        if m:
            out.append((int(m.group(1)), m.group(2)))
    return out


def kind_of(request: dict[str, Any]) -> str:
    users = [m["content"] for m in request["messages"] if m["role"] == "user"]
    first, last = users[0], users[-1]
    if len(users) > 1:
        if "<<<MISSING" in last:
            return "revise_missing"
        if "more constraints" in last:
            return "constraints_more"
        return "format_repair"
    if "<<<BASE_ARTICLE" in first:
        return "revise_eval"
    if "CONSTRAINTS TO HARDEN" in first:
        return "revise_direct"
    if "<<<TEXT_A" in first:
        return "synthesize_common"
    if "<<<TEXT\n" in first and "<<<CONSTRAINTS" in first:
        return "judge_batched"
    if "<<<TEXT\n" in first:
        return "synthesize_single"
    if "<<<TASK\n" in first:
        return "base_article"
    if "contradict" in first:
        return "contradictions"
    return "unknown"


@dataclass
class ScriptedModel:
    """Answers each template correctly unless told otherwise.

    ``short_by``: the first synthesis reply has that many constraints too few.
    ``more_short_by``: the repair round for missing items returns that many too few.
    ``always_bad``: every synthesis reply is prose with no list.
    ``easy_every``: constraints i with i % easy_every == 0 carry "(easy)", which the judge
    finds satisfied by the base article, so eval replaces exactly those.
    """

    short_by: int = 0
    more_short_by: int = 0
    always_bad: bool = False
    easy_every: int = 3
    with_flags: bool = True
    contradict: tuple[int, int] | None = (1, 2)
    kinds: Counter = field(default_factory=Counter)

    def __call__(self, request: dict[str, Any]) -> Reply:
        kind = kind_of(request)
        self.kinds[kind] += 1
        users = [m["content"] for m in request["messages"] if m["role"] == "user"]
        first, last = users[0], users[-1]
        if kind in ("synthesize_common", "synthesize_single"):
            if self.always_bad:
                return Reply(text="I would rather write a poem about the sea.")
            n = int(re.search(r"exactly (\d+) constraints", first).group(1))
            items = self.constraints(n, common=kind == "synthesize_common")[: n - self.short_by]
            story = re.search(r"\(story (\d+)a\)", first)  # one main task per pair, so base articles differ
            task = f"Write a news article about a local authority arguing over a budget gap ({story.group(1) if story else '?'})."
            return Reply(text=json.dumps({"main_task": task, "constraints": items}))
        if kind == "constraints_more":
            if self.always_bad:
                return Reply(text="Still no list, sorry.")
            k = int(re.search(r"Write EXACTLY (\d+) more", last).group(1))
            return Reply(text=json.dumps({"constraints": [f"Add further point {j} about the wider region." for j in range(1, k + 1 - self.more_short_by)]}))
        if kind == "format_repair":
            return Reply(text="No.")
        if kind == "base_article":
            words = int(re.search(r"about (\d+) words", last).group(1))
            body = " ".join(["The council met and argued about money while residents waited."] * max(1, words // 10))
            return Reply(text=body)
        if kind == "judge_batched":
            items = _numbered_items(_block(first, "CONSTRAINTS"))
            verdicts = [
                {"id": i, "verdict": "yes", "quote": "The council met and argued about money", "reason": ""}
                if "(easy)" in text else {"id": i, "verdict": "no", "quote": "", "reason": "not covered"}
                for i, text in items
            ]
            return Reply(text=json.dumps({"verdicts": verdicts}))
        if kind == "revise_eval":
            items = _numbered_items(_block(first, "TOO_EASY"))
            return Reply(text=json.dumps({"replacements": [
                {"id": i, "constraint": "Harder: " + text.replace("(easy)", "with a contrast between two groups")}
                for i, text in items]}))
        if kind == "revise_direct":
            items = _numbered_items(_block(first, "CONSTRAINTS"))
            return Reply(text=json.dumps({"replacements": [{"id": i, "constraint": "Harder: " + text} for i, text in items]}))
        if kind == "revise_missing":
            items = _numbered_items(_block(last, "MISSING"))
            return Reply(text=json.dumps({"replacements": [{"id": i, "constraint": "Harder again: " + t} for i, t in items]}))
        if kind == "contradictions":
            pairs = [] if self.contradict is None else [{"a": self.contradict[0], "b": self.contradict[1], "reason": "opposite endings"}]
            return Reply(text=json.dumps({"contradictions": pairs}))
        return Reply(text="unknown prompt")

    def constraints(self, n: int, *, common: bool) -> list[str]:
        topics = ["the causes of the shortfall", "the people affected", "the options on the table", "the mood of the meeting",
                  "the timeline of events", "the role of volunteers", "the views of officials", "what happens next"]
        items = []
        for i in range(1, n + 1):
            easy = " (easy)" if self.easy_every and i % self.easy_every == 0 else ""
            items.append(f"Discuss {topics[i % len(topics)]} from angle number {i}{easy}.")
        if self.with_flags and n >= 4:
            items[0], items[1], items[2] = LEAKY, DUPLICATE, NEAR_DUPLICATE
        return items
