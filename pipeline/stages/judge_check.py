"""Running the built-in judge check: each judge on the constructed set (pipeline.analysis.judge_check).

A text of the set is judged exactly as the benchmark judges a response: pipeline.stages.judging's
``judge_text``, its prompts, mode and reply parsing, through the normal client (so every call is
cached, and a run stopped half-way costs nothing to resume). Each judge's items are stored as they
finish through pipeline.store.judge_checks, source ``builtin`` (a stopped run leaves the items it
finished, each replacing the same item of an earlier check). A full check that finishes leaves
exactly the set's items (an item since dropped from the set goes); the quick one updates its items
only (they are the same calls as the full check's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pipeline.analysis.judge_check import SOURCE, CheckText, selected_texts
from pipeline.llm.client import LLMClient
from pipeline.stages.judging import MODES, judge_text
from pipeline.store.database import Store
from pipeline.store.judge_checks import CheckItem, all_checks, clear_checks, put_check_items


@dataclass
class CheckRun:
    texts: int = 0  # texts judged, over all judges
    items: dict[str, int] = field(default_factory=dict)  # judge -> items stored
    missing: dict[str, int] = field(default_factory=dict)  # judge -> items without a verdict


async def _judge_one_text(client: LLMClient, judge: str, text: CheckText, mode: str) -> list[CheckItem]:
    judgements = await judge_text(client, judge, text.text, [e.constraint for e in text.entries], mode=mode)
    return [CheckItem(text.domain, e.key, int(e.truth), None if j.verdict is None else int(j.verdict),
                      j.quote_found if j.verdict else None)
            for e, j in zip(text.entries, judgements, strict=True)]


async def run_judge_check(store: Store, client: LLMClient, judges: Sequence[str], *, mode: str = "batched",
                          quick: bool = False, on_text: Callable[[str, str], None] | None = None) -> CheckRun:
    """Judge the set (or its quick subset) with each judge; store each text's items as it finishes."""
    if mode not in MODES:
        raise ValueError(f"judging mode must be one of {MODES}, got {mode!r}")
    texts = selected_texts(quick=quick)
    result = CheckRun()
    for judge in judges:
        client.config.endpoint(judge)  # a ConfigError naming an unknown judge, before any call
        done: list[CheckItem] = []

        async def one(text: CheckText, judge: str = judge) -> None:
            items = await _judge_one_text(client, judge, text, mode)
            put_check_items(store, judge, SOURCE, items)
            done.extend(items)
            result.texts += 1
            result.items[judge] = result.items.get(judge, 0) + len(items)
            result.missing[judge] = result.missing.get(judge, 0) + sum(i.verdict is None for i in items)
            if on_text:
                on_text(judge, text.key)

        # Every text's call finishes (and is cached) before a failure propagates: no orphaned tasks.
        outcomes = await asyncio.gather(*(one(t) for t in texts), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        if not quick:
            _drop_stale(store, judge, done)
    return result


def _drop_stale(store: Store, judge: str, items: list[CheckItem]) -> None:
    """After a full check, the judge's stored built-in items are exactly ``items``."""
    keys = {i.item_key for i in items}
    stored = {i.item_key for c in all_checks(store) if (c.judge, c.source) == (judge, SOURCE) for i in c.items}
    if stored != keys:
        clear_checks(store, judge, SOURCE)
        put_check_items(store, judge, SOURCE, items)
