"""Running a judge check: each judge on a constructed set (pipeline.analysis.judge_check), the shipped
one or a user's own, and calibrating the yes_no judges on it.

A text of the set is judged exactly as the benchmark judges a response: pipeline.stages.judging's
``judge_text``, in the judge's own mode (or the one the run names), its prompts and reply parsing,
through the normal client (so every call is cached, and a run stopped half-way costs nothing to
resume). Each judge's items are stored as they finish through pipeline.store.judge_checks (a stopped
run leaves the items it finished, each replacing the same item of an earlier check). A full check that
finishes leaves exactly the set's items (an item since dropped from the set goes); the quick one
updates its items only (they are the same calls as the full check's).

A yes_no judge's items carry P(Yes). Once its check finishes, the judge is calibrated on every item of
that check holding one (pipeline.analysis.calibration): the threshold is stored and the judge's stored
benchmark verdicts are read at it again (no call is made; the texts' scores follow). The check's own
items are read held out, each text at the threshold chosen on the others, so the check's accuracy,
sensitivity and specificity (and the corrections built on them) are not flattered by the choice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pipeline.analysis.calibration import RULE, Scored, fit, held_out_verdicts
from pipeline.analysis.judge_check import SOURCE, CheckText, selected_texts
from pipeline.llm.client import LLMClient
from pipeline.stages.judging import MODES, judge_text, judging_mode_of
from pipeline.store.database import Store
from pipeline.store.judge_checks import (
    Calibration,
    CheckItem,
    all_checks,
    clear_checks,
    judge_threshold,
    put_calibration,
    put_check_items,
)
from pipeline.store.verdicts import apply_threshold


@dataclass
class CheckRun:
    texts: int = 0  # texts judged, over all judges
    items: dict[str, int] = field(default_factory=dict)  # judge -> items stored
    missing: dict[str, int] = field(default_factory=dict)  # judge -> items without a verdict
    modes: dict[str, str] = field(default_factory=dict)  # judge -> the judging mode it was checked in
    calibrations: dict[str, Calibration] = field(default_factory=dict)  # yes_no judge -> its new calibration
    rethresholded: dict[str,
                        # judge -> benchmark verdicts the threshold changed
                        int] = field(default_factory=dict)


def text_of(item_key: str) -> str:
    """The text an item belongs to: its key up to the last dot ("news-1.3" -> "news-1")."""
    return item_key.rsplit(".", 1)[0]


async def _judge_one_text(client: LLMClient, judge: str, text: CheckText, mode: str,
                          threshold: float) -> list[CheckItem]:
    judgements = await judge_text(client, judge, text.text, [e.constraint for e in text.entries], mode=mode,
                                  threshold=threshold)
    return [CheckItem(text.domain, e.key, int(e.truth), None if j.verdict is None else int(j.verdict),
                      j.quote_found if j.verdict else None, j.p_yes)
            for e, j in zip(text.entries, judgements, strict=True)]


async def run_judge_check(store: Store, client: LLMClient, judges: Sequence[str], *, mode: str | None = None,
                          quick: bool = False, texts: Sequence[CheckText] | None = None, source: str = SOURCE,
                          on_text: Callable[[str, str], None] | None = None) -> CheckRun:
    """Judge the set (``texts``; default the shipped one, or its quick subset) with each judge, in its
    own mode unless ``mode`` names one; store each text's items as it finishes, under ``source``; then
    calibrate each yes_no judge on its check."""
    if mode is not None and mode not in MODES:
        raise ValueError(f"judging mode must be one of {MODES}, got {mode!r}")
    chosen = tuple(texts) if texts is not None else selected_texts(quick=quick)
    result = CheckRun()
    for judge in judges:
        client.config.endpoint(judge)  # a ConfigError naming an unknown judge, before any call
        judge_mode = judging_mode_of(client.config, judge, mode)
        result.modes[judge] = judge_mode
        if judge_mode == "yes_no":
            await client.check_logprobs(judge)
        threshold = judge_threshold(store, judge, judge_mode)
        done: list[CheckItem] = []

        async def one(text: CheckText, judge: str = judge, judge_mode: str = judge_mode,
                      threshold: float = threshold) -> None:
            items = await _judge_one_text(client, judge, text, judge_mode, threshold)
            put_check_items(store, judge, source, items)
            done.extend(items)
            result.texts += 1
            result.items[judge] = result.items.get(judge, 0) + len(items)
            result.missing[judge] = result.missing.get(judge, 0) + sum(i.verdict is None for i in items)
            if on_text:
                on_text(judge, text.key)

        # Every text's call finishes (and is cached) before a failure propagates: no orphaned tasks.
        outcomes = await asyncio.gather(*(one(t) for t in chosen), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        if not quick:
            _drop_stale(store, judge, source, done)
        if judge_mode == "yes_no":
            calibration = calibrate(store, judge, judge_mode, source)
            if calibration is not None:
                result.calibrations[judge] = calibration
                result.rethresholded[judge] = apply_threshold(store, judge, judge_mode, calibration.threshold)
    return result


def calibrate(store: Store, judge: str, mode: str, source: str) -> Calibration | None:
    """Choose the judge's threshold on every item of its ``source`` check that has a P(Yes) and store it.
    The check's own items are read held out (each text at the threshold chosen on the other texts), so
    the sensitivity and specificity the corrections use are not flattered by the choice. None when no
    item has a P(Yes) (an endpoint without log-probabilities)."""
    check = next((c for c in all_checks(store) if (c.judge, c.source) == (judge, source)), None)
    if check is None:
        return None
    scored = [(i, i.p_yes) for i in check.items if i.p_yes is not None]
    if not scored:
        return None
    items = [Scored(p, bool(i.truth), text_of(i.item_key)) for i, p in scored]
    result = fit(items)
    calibration = Calibration(judge, mode, source, result.threshold, RULE, result.n, result.auc,
                              result.held_out_accuracy)
    put_calibration(store, calibration)
    held = held_out_verdicts(items) or [p >= result.threshold for _, p in scored]
    put_check_items(store, judge, source, [CheckItem(i.domain, i.item_key, i.truth, int(v), i.quote_found, p)
                                           for (i, p), v in zip(scored, held, strict=True)])
    return calibration


def _drop_stale(store: Store, judge: str, source: str, items: list[CheckItem]) -> None:
    """After a full check, the judge's stored items of that source are exactly ``items``."""
    keys = {i.item_key for i in items}
    stored = {i.item_key for c in all_checks(store) if (c.judge, c.source) == (judge, source)
              for i in c.items}
    if stored != keys:
        clear_checks(store, judge, source)
        put_check_items(store, judge, source, items)
