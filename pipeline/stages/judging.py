"""Judging: does a text satisfy each constraint? Yes/No, with a quote for Yes.

Three modes (core.definitions.JUDGING_MODES; docs/method.md, "Judging"):
- ``batched``: all constraints of one text in one call (the research code's way, cheap).
  Constraints the judge left out are asked again in one follow-up call; those still
  missing are recorded as *missing* (verdict NULL, reason UNANSWERED): never a No, so they are
  left out of every rate and lower the coverage instead.
- ``per_constraint``: one call per constraint (expensive, more robust).
- ``yes_no``: one short call per constraint, the text first and the constraint last (so llama.cpp
  keeps the text's prefix evaluated from one constraint to the next), answering one token. The
  verdict is read from that token's log-probabilities: P(Yes) / (P(Yes) + P(No)), stored beside the
  verdict, against the judge's threshold (its calibration on its check, pipeline.stages.judge_check;
  DEFAULT_YES_THRESHOLD before one). Its Yes has no quote: the sentence that best matches the
  constraint is stored instead, marked ``located`` (pipeline.analysis.support). On an endpoint that
  returns no log-probabilities the mode says so once and reads the word the judge wrote (no P(Yes)).

A reply may be JSON (``{"verdicts": [...]}``) or the research code's lines
(``3. Yes - "quote"`` / ``4. No - reason``); both parse. On an endpoint that takes GBNF
(``gbnf``), lines are asked for under ``lines_grammar``: one line per constraint, quotes capped,
No without a reason. A duplicated item keeps the first. Every Yes quote is checked against the
judged text by pipeline.core.text.find_quote: exact (after normalising whitespace, quotes and
case), else fuzzy (rapidfuzz partial alignment >= 90), else ``missing``, which the app flags as a
possibly hallucinated quote.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.analysis.support import LOCATED, locate_support
from pipeline.core.definitions import DEFAULT_YES_THRESHOLD, JUDGING_MODES
from pipeline.core.errors import ParseError
from pipeline.core.text import QuoteMatch, find_quote
from pipeline.llm.client import LLMClient, ReplyError, accept_json, parse_json_lenient
from pipeline.llm.prompts import defuse, load_template, numbered
from pipeline.store.database import UNANSWERED, Store, now
from pipeline.store.generations import generation_text
from pipeline.store.judge_checks import judge_threshold
from pipeline.store.verdicts import NewVerdict, judged_constraint_ids, put_verdicts

MODES = JUDGING_MODES
YES_NO_TEMPLATE = "judge_yes_no"
# Alternatives asked for the answer token: Yes and No (in their spellings) are nearly always among
# the best 20 of a model that was asked to answer Yes or No.
TOP_LOGPROBS = 20
# UNANSWERED is the reason stored with a missing verdict (left out, or its reply stayed unusable).
# The verdict itself is NULL: a judge that said nothing must not read as a judge that said No.
# Asked again by the next run, since the cause may have been transient.
# The cap on a lines judge's quote under a GBNF grammar (endpoints with ``gbnf``): the 1.5B model
# ignores the prompt's "5 to 15 words" and copies whole sentences, and its speed is tokens written
# (measured on 39 constraints: 649-692 completion tokens and 108 s, not 1025 and 150 s).
QUOTE_CAP = 80  # characters, about 15 words

BATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "verdict": {"type": "string", "enum": ["yes", "no"]},
                    "quote": {"type": "string"},
                    "reason": {"type": "string"},
                },
                "required": ["id", "verdict"],
            },
        }
    },
    "required": ["verdicts"],
}
SINGLE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["yes", "no"]},
        "quote": {"type": "string"},
        "reason": {"type": "string"},
    },
    "required": ["verdict"],
}


@dataclass
class Judgement:
    index: int  # 0-based position in the constraints given
    verdict: bool | None  # None: missing (the judge gave no usable verdict)
    quote: str
    reason: str
    quote_found: str | None  # exact | fuzzy | missing | None (no quote)
    quote_score: float | None
    quote_span: tuple[int, int] | None  # where the quote sits in the judged text
    call_id: int | None
    answered: bool = True  # False: the judge never gave a verdict; stored as missing (NULL)
    raw_reply: str | None = None  # when unanswered because the reply was unusable: that reply
    p_yes: float | None = None  # yes_no mode: P(Yes) / (P(Yes) + P(No)) of the answer token


# -- reply parsing ---------------------------------------------------------------------------

_LINE = re.compile(
    r"^\s*(?:\*\*)?\s*(\d{1,3})\s*[.):\]]\s*(?:\*\*)?\s*(yes|no)\b(?:\*\*)?\s*[-:\u2013\u2014,]?\s*(.*)$",
    re.IGNORECASE,
)


def _item(verdict: str, quote: str, reason: str) -> dict[str, Any]:
    return {"verdict": verdict.strip().lower() == "yes", "quote": quote.strip(), "reason": reason.strip()}


def lines_grammar(n: int) -> str:
    """A GBNF grammar for ``n`` lines in judge_lines' format, numbered 1..n: ``i. Yes - "quote"``
    (1 to QUOTE_CAP characters) or ``i. No``, each ending in a newline, and nothing else. A No
    carries no reason: under a cap the 1.5B model wrote the same cut-off words on every No line
    ("The text does not provide information on"), about 9 tokens a line that told nobody anything.
    The escapes (``\\n``, ``\\"``) are GBNF's, not Python's."""
    if n < 1:
        raise ValueError(f"a lines grammar needs at least one line, got {n}")
    lines = " ".join(f'"{i}. " verdict "\\n"' for i in range(1, n + 1))
    return (
        f"root ::= {lines}\n"
        f'verdict ::= "Yes - \\"" [^"\\n]{{1,{QUOTE_CAP}}} "\\"" | "No"\n'
    )


def _uncap(quote: str, cap: int | None) -> str:
    """A quote the grammar stopped at its cap may end in a mangled word: the next word's token,
    leading space included, would pass the cap, so the model glues (part of) the word on ("the
    town wassignificant"). Drop that last word so the quote stays a verbatim piece of the text."""
    if cap is None or len(quote) < cap:
        return quote
    if quote[-1].isspace():  # cut after a whole word
        return quote.rstrip()
    head, sep, _ = quote.rpartition(" ")
    return head.rstrip() if sep and head.strip() else quote  # one long word: nothing to drop


def parse_batched_reply(text: str, n: int, *, quote_cap: int | None = None) -> dict[int, dict[str, Any]]:
    """Map 1-based constraint id -> {verdict, quote, reason}. Raises ReplyError when nothing
    usable is in the reply. Ids outside 1..n are dropped; a duplicated id keeps the first.
    ``quote_cap``: the reply was written under ``lines_grammar``, whose quotes stop at that many
    characters; a quote at the cap loses its last, possibly mangled, word."""
    items: dict[int, dict[str, Any]] = {}
    try:
        data = parse_json_lenient(text)
    except ReplyError:
        data = None
    if isinstance(data, dict):
        data = data.get("verdicts", data.get("results"))
    if isinstance(data, list):
        for raw in data:
            if not isinstance(raw, dict):
                continue
            try:
                cid = int(raw.get("id"))  # type: ignore[arg-type]  # None: TypeError, skipped below
            except (TypeError, ValueError):
                continue
            verdict = str(raw.get("verdict", "")).strip().lower()
            if verdict not in ("yes", "no") or not 1 <= cid <= n or cid in items:
                continue
            items[cid] = _item(verdict, str(raw.get("quote") or ""), str(raw.get("reason") or ""))
    else:
        for line in text.splitlines():
            m = _LINE.match(line)
            if not m:
                continue
            cid, verdict, rest = int(m.group(1)), m.group(2), m.group(3).strip()
            if not 1 <= cid <= n or cid in items:
                continue
            quoted = re.match(r'^["\u201c](.*?)["\u201d]', rest)
            if verdict.lower() == "yes":
                items[cid] = _item(verdict, _uncap(quoted.group(1), quote_cap) if quoted else rest, "")
            else:
                items[cid] = _item(verdict, "", rest)
    if not items:
        snippet = text.strip().replace("\n", " ")[:120]
        raise ReplyError(f"no verdicts found for constraints 1..{n} (reply starts: {snippet!r})", reply=text)
    return items


# -- judging a text ----------------------------------------------------------------------------


def _judgement(index: int, item: dict[str, Any] | None, text: str, call_id: int | None,
               raw_reply: str | None = None) -> Judgement:
    if item is None:
        return Judgement(index, None, "", UNANSWERED, None, None, None, call_id, answered=False,
                         raw_reply=raw_reply)
    match = find_quote(item["quote"],
                       text) if item["verdict"] and item["quote"] else QuoteMatch(None, None, None)
    return Judgement(index, item["verdict"], item["quote"], item["reason"], match.found, match.score,
                     match.span, call_id)


async def judge_text(
    client: LLMClient,
    judge: str,
    text: str,
    constraints: Sequence[str],
    *,
    mode: str = "batched",
    max_tokens: int | None = None,
    threshold: float = DEFAULT_YES_THRESHOLD,
) -> list[Judgement]:
    """Judge ``text`` against each constraint with one judge endpoint. One Judgement per constraint.
    ``threshold``: a yes_no verdict is Yes when P(Yes) reaches it (the judge's calibration)."""
    if mode not in MODES:
        raise ValueError(f"judging mode must be one of {MODES}, got {mode!r}")
    if not constraints:
        return []
    if mode == "yes_no":
        listed = await _judge_yes_no_listed(client, judge, text, list(constraints), threshold)
        if listed is not None:
            return listed
        return await _gather_all([_judge_yes_no(client, judge, text, c, i, threshold)
                                  for i, c in enumerate(constraints)])
    if mode == "per_constraint":
        return await _gather_all([_judge_one(client, judge, text, c, i, max_tokens)
                                  for i, c in enumerate(constraints)])
    return await _judge_batched(client, judge, text, list(constraints), max_tokens)


async def _judge_one(client: LLMClient, judge: str, text: str, constraint: str, index: int,
                     max_tokens: int | None) -> Judgement:
    from pipeline.llm.client import Params, structured_format

    template = load_template("judge_single")
    messages = template.render(text=defuse(text), constraint=defuse(constraint))
    endpoint = client.config.endpoint(judge)
    # chat_json's contract (lenient JSON, then the schema), through a recorder that keeps the raw
    # reply: a judge stopped for unusable replies is shown one of them.
    recorder = _Recorder(_accept_single)
    try:
        item, completion = await client.chat_repaired(
            endpoint, messages, accept=recorder, schema=SINGLE_SCHEMA, template=template,
            params=Params(max_tokens=max_tokens or 400),
            response_format=structured_format(endpoint, SINGLE_SCHEMA),
        )
    except ParseError:
        return _judgement(index, None, text, None, recorder.last)  # unusable after repair: missing
    return _judgement(index, item, text, completion.call_id)


async def _gather_all(calls: list[Any]) -> list[Judgement]:
    """One call a constraint (per_constraint, yes_no). Every call finishes (each is cached) before a
    failure propagates: no orphaned tasks. Queued in order, so one text's calls reach a one-at-a-time
    server back to back and share its prefix."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return [r for r in results if isinstance(r, Judgement)]


# -- yes_no: one token, read from its probabilities ------------------------------------------------


def yes_probability(top: dict[str, float]) -> float | None:
    """P(Yes) / (P(Yes) + P(No)) from one token's top log-probabilities, every spelling of each
    ("Yes", " yes", "YES"); None when neither is among them. Only the whole word counts: a bare "Y"
    or "N" may begin another word."""
    yes = no = 0.0
    for token, logprob in top.items():
        word = token.strip().lower()
        if word == "yes":
            yes += math.exp(logprob)
        elif word == "no":
            no += math.exp(logprob)
    return yes / (yes + no) if yes + no > 0 else None


def written_verdict(text: str) -> bool | None:
    """The Yes or No a judge wrote as its first word (the fallback without log-probabilities)."""
    m = re.match(r"^\W*(yes|no)\b", text.strip(), re.IGNORECASE)
    return None if m is None else m.group(1).lower() == "yes"


async def _judge_yes_no(client: LLMClient, judge: str, text: str, constraint: str, index: int,
                        threshold: float) -> Judgement:
    from pipeline.llm.client import Params

    endpoint = client.config.endpoint(judge)
    template = load_template(template_name("yes_no", endpoint.judge_format, endpoint.judge_prompt))
    messages = template.render(text=defuse(text), constraint=defuse(constraint))
    if client.gives_logprobs(endpoint) is not False:
        params = Params(max_tokens=1, logprobs=True, top_logprobs=TOP_LOGPROBS)
        reply, completion = await client.chat(endpoint, messages, template=template, params=params)
        top = completion.logprobs[0] if completion.logprobs else None
        if top is not None:
            client.note_logprobs(endpoint, True)
            p_yes = yes_probability(top)
            if p_yes is None:  # neither Yes nor No among its best tokens: no verdict
                return _judgement(index, None, text, completion.call_id, str(reply))
            return _probability_judgement(index, p_yes, threshold, text, constraint, completion.call_id)
        if client.pricing is None:  # a dry run's placeholder carries none; a real reply without them tells
            client.note_logprobs(endpoint, False)
        word = written_verdict(str(reply))
        if word is not None:
            return _probability_judgement(index, float(word), threshold, text, constraint, completion.call_id,
                                          read_word=True)
    # The word, asked without log-probabilities: a few tokens, refused (and repaired once) unless it
    # starts with Yes or No.
    recorder = _Recorder(_accept_word)
    try:
        verdict, completion = await client.chat_repaired(endpoint, messages, accept=recorder, schema=None,
                                                         template=template,
                                                         params=Params(max_tokens=4), what="verdict")
    except ParseError:
        return _judgement(index, None, text, None, recorder.last)
    return _probability_judgement(index, float(verdict), threshold, text, constraint,
                                  completion.call_id, read_word=True)


async def _judge_yes_no_listed(client: LLMClient, judge: str, text: str, constraints: list[str],
                               threshold: float) -> list[Judgement] | None:
    """Every constraint of one text in one request: the same prompts the one-call-a-constraint path
    sends, whole (ChatML), each scored for its one token (Params.prompt_list; the embedded server's
    pipeline.llm.prompt_batch). The server evaluates the text once and each constraint's tail after
    it, without a request's fixed cost per constraint. None when the endpoint does not take lists
    (``judge_batch`` off, refused once, a dry run's placeholder): then one call a constraint."""
    from pipeline.core.errors import EndpointError
    from pipeline.llm.client import Params
    from pipeline.llm.prompts import chatml

    endpoint = client.config.endpoint(judge)
    if len(constraints) < 2 or not endpoint.judge_batch or not client.takes_prompt_lists(endpoint) \
            or client.gives_logprobs(endpoint) is False:
        return None
    template = load_template(template_name("yes_no", endpoint.judge_format, endpoint.judge_prompt))
    prompts = [chatml(template.render(text=defuse(text), constraint=defuse(c))) for c in constraints]
    params = Params(max_tokens=1, logprobs=True, top_logprobs=TOP_LOGPROBS, prompt_list=True)
    try:
        _, completion = await client.chat(endpoint, [{"role": "user", "content": p} for p in prompts],
                                          template=template, params=params)
    except EndpointError as exc:
        client.note_refused_lists(endpoint, str(exc))
        return None
    tops = completion.logprobs
    if tops is None or len(tops) != len(constraints):
        return None
    client.note_logprobs(endpoint, True)
    out = []
    for i, (constraint, top) in enumerate(zip(constraints, tops, strict=True)):
        p_yes = yes_probability(top)
        if p_yes is None:  # neither Yes nor No among its best tokens: no verdict
            out.append(_judgement(i, None, text, completion.call_id, json.dumps(top)))
        else:
            out.append(_probability_judgement(i, p_yes, threshold, text, constraint, completion.call_id))
    return out


def _accept_word(text: str) -> bool:
    verdict = written_verdict(text)
    if verdict is None:
        raise ReplyError("expected the word Yes or No", reply=text)
    return verdict


def _probability_judgement(index: int, p_yes: float, threshold: float, text: str, constraint: str,
                           call_id: int | None, *, read_word: bool = False) -> Judgement:
    """A yes_no verdict: Yes when P(Yes) reaches the threshold; the located sentence as its quote
    (kept for a No too, so a new threshold that turns it Yes needs no call)."""
    verdict = p_yes >= threshold
    support = locate_support(text, constraint)
    reason = "wrote the word (no probabilities)" if read_word else f"P(Yes) {p_yes:.2f}"
    return Judgement(index, verdict, support.sentence if support else "", reason, LOCATED
                     if support else None,
                     support.score if support else None, support.span if support else None, call_id,
                     p_yes=None if read_word else round(p_yes, 4))


class _Recorder:
    """An accept function that remembers the last reply it was given."""

    def __init__(self, accept: Any) -> None:
        self.accept = accept
        self.last: str | None = None

    def __call__(self, text: str) -> Any:
        self.last = text
        return self.accept(text)


def _accept_single(text: str) -> dict[str, Any]:
    return accept_json(text, _validate_single)


def _validate_single(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict) or str(data.get("verdict", "")).strip().lower() not in ("yes", "no"):
        raise ValueError('expected {"verdict": "yes" or "no", "quote": ..., "reason": ...}')
    return _item(str(data["verdict"]), str(data.get("quote") or ""), str(data.get("reason") or ""))


async def _judge_batched(client: LLMClient, judge: str, text: str, constraints: list[str],
                         max_tokens: int | None) -> list[Judgement]:
    from pipeline.llm.client import Params, structured_format

    endpoint = client.config.endpoint(judge)
    lines = endpoint.judge_format == "lines"
    template = load_template(template_name("batched", endpoint.judge_format))
    # Lines: no JSON keys to write for every constraint. Free text, or on a server that takes
    # GBNF, held by lines_grammar to one capped line per constraint (fewer tokens written).
    grammar = lines and endpoint.gbnf
    cap = QUOTE_CAP if grammar else None
    fmt = None if lines else structured_format(endpoint, BATCH_SCHEMA)
    schema = None if lines else BATCH_SCHEMA
    results: dict[int, Judgement] = {}
    pending = list(range(len(constraints)))  # 0-based indices still without a verdict
    raw_reply: str | None = None  # the last unusable reply, if the asking ended on one
    for _round in range(2):  # the first ask, then one follow-up for what was left out
        if not pending:
            break
        subset = [constraints[i] for i in pending]
        messages = template.render(text=defuse(text), constraints=numbered(subset), n=len(subset))
        budget = max_tokens or min(8000, (60 + 50 * len(subset)) if lines else (120 + 90 * len(subset)))
        recorder = _Recorder(lambda t, n=len(subset), cap=cap: parse_batched_reply(t, n, quote_cap=cap))
        params = Params(max_tokens=budget, grammar=lines_grammar(len(subset)) if grammar else None)
        try:
            items, completion = await _ask_batched(client, endpoint, messages, template, fmt, schema,
                                                   recorder, params)
        except ParseError:
            raw_reply = recorder.last
            break  # unusable twice (with the client's repair round): the rest are missing
        for local_id, item in items.items():
            index = pending[local_id - 1]
            results[index] = _judgement(index, item, text, completion.call_id)
        pending = [i for i in pending if i not in results]
    for index in pending:
        results[index] = _judgement(index, None, text, None, raw_reply)
    return [results[i] for i in range(len(constraints))]


async def _ask_batched(client: LLMClient, endpoint: Any, messages: list[dict[str, str]], template: Any,
                       fmt: dict[str, Any] | None, schema: dict[str, Any] | None, accept: _Recorder,
                       params: Any) -> tuple[dict[int, dict[str, Any]], Any]:
    """One batched ask, with one repair round for a reply holding no usable verdict at all."""
    return await client.chat_repaired(
        endpoint, messages, accept=accept, schema=schema, template=template,
        params=params, response_format=fmt, what="verdicts",
    )


# -- judging a stored generation -----------------------------------------------------------------


@dataclass
class JudgeSummary:
    judged: int = 0  # verdict rows written
    skipped: int = 0  # already stored for this judge, mode and prompt
    unanswered: int = 0  # stored as missing because the judge gave no usable verdict
    unusable_reply: str | None = None  # one raw reply that could not be parsed, if any

    @property
    def all_missing(self) -> bool:
        """Every verdict of this judging is missing: the judge's replies were unusable."""
        return self.judged > 0 and self.unanswered == self.judged


def template_name(mode: str, judge_format: str = "json", judge_prompt: str | None = None) -> str:
    if mode == "yes_no":
        return judge_prompt or YES_NO_TEMPLATE
    if mode != "batched":
        return "judge_single"
    return "judge_lines" if judge_format == "lines" else "judge_batched"


def prompt_hash(mode: str, judge_format: str = "json", judge_prompt: str | None = None) -> str:
    return load_template(template_name(mode, judge_format, judge_prompt)).hash


def endpoint_prompt_hash(endpoint: Any, mode: str) -> str:
    """The hash of the template ``endpoint`` judges with in ``mode``."""
    return prompt_hash(mode, endpoint.judge_format, endpoint.judge_prompt)


def judging_mode_of(config: Any, judge: str, override: str | None = None) -> str:
    """How ``judge`` judges: the run's choice when it makes one ([evaluate] judging, --judging), else
    the endpoint's own (``judging``: yes_no for the embedded model, batched otherwise)."""
    return override or config.endpoint(judge).judging


def judge_generation_pending(store: Store, generation_id: int, constraint_ids: Sequence[int], endpoint: Any,
                             mode: str) -> list[int]:
    """Constraint ids not yet judged on this generation by this judge endpoint, mode and the prompt it
    asks with (a missing verdict counts as not judged)."""
    done = judged_constraint_ids(store, generation_id, endpoint.name, mode,
                                 endpoint_prompt_hash(endpoint, mode))
    return [c for c in constraint_ids if c not in done]


async def judge_generation(
    store: Store,
    client: LLMClient,
    judge: str,
    generation_id: int,
    constraints: Sequence[tuple[int, str]],
    *,
    mode: str | None = None,
) -> JudgeSummary:
    """Judge a stored generation against (constraint id, text) pairs; writes ``verdicts`` rows and
    commits. Constraints already judged by this judge, mode and prompt are skipped, so a changed
    judge prompt re-judges and an unchanged one costs nothing. ``mode`` None: the judge's own."""
    summary = JudgeSummary()
    endpoint = client.config.endpoint(judge)
    mode = mode or endpoint.judging
    todo_ids = set(judge_generation_pending(store, generation_id, [c for c, _ in constraints],
                                            endpoint, mode))
    todo = [(cid, text) for cid, text in constraints if cid in todo_ids]
    summary.skipped = len(constraints) - len(todo)
    if not todo:
        return summary
    text = generation_text(store, generation_id)
    if text is None:
        raise ValueError(f"no generation {generation_id} in {store.path}")
    threshold = judge_threshold(store, judge, mode) if mode == "yes_no" else DEFAULT_YES_THRESHOLD
    judgements = await judge_text(client, judge, text, [t for _, t in todo], mode=mode, threshold=threshold)
    ph = endpoint_prompt_hash(endpoint, mode)
    stamp = now()
    rows = []
    for (cid, _), j in zip(todo, judgements, strict=True):
        verdict = None if j.verdict is None else int(j.verdict)  # NULL: missing, never a No
        rows.append(NewVerdict(generation_id, cid, judge, mode, ph, verdict, j.quote or None,
                               j.reason or None,
                               j.quote_found, j.quote_score, j.call_id, stamp, j.p_yes))
        summary.judged += 1
        summary.unanswered += 0 if j.answered else 1
        summary.unusable_reply = summary.unusable_reply or j.raw_reply
    put_verdicts(store, rows)
    store.commit()
    return summary
