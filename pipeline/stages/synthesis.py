"""Constraint synthesis: a main task and exactly N constraints, from one article or two.

- ``single``: back-translated from article A alone (the CS4-style baseline).
- ``common``: a main task implied by both A and B, and constraints satisfied by both (no
  proper nouns, each driving several sentences, content first). The list is scrambled here
  with a seed fixed by the pair, so the order never follows A's narrative even when the
  model ignores that rule, and a re-run gives the same order.

Replies are parsed leniently (JSON in any of a few shapes, fences, preambles, numbered or
bulleted lists). Exact duplicates are dropped, and so are items that are not constraints:
fragments, whole paragraphs, and passages mostly copied from the prompt (its rules or the
articles it shows; small models do both). Too many items: the first N are kept. Too
few: repair rounds (one by default) ask for the missing ones, at most ``MORE_CHUNK`` at a time and
each round about another aspect of the story, in the same conversation; still short, the
synthesis fails with a ``CountError`` (the caller records it), never a short list. Under the
constraint gate (pipeline.stages.gate, the build's default) every candidate is checked too, each
round's ask names what was refused and why, and a list still short after the rounds is kept short,
its ledger saying so.

The stages are in build.py; the instructions and constraints they write, in pipeline.store.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.analysis.gate import Ledger
from pipeline.core.errors import ParseError
from pipeline.core.text import count_words
from pipeline.llm.client import LLMClient, Params, ReplyError, parse_json_lenient, structured_format
from pipeline.llm.prompts import Template, chatml, defuse, load_template
from pipeline.stages.gate import ConstraintGate

CONDITIONS = ("single", "none", "direct", "eval")
COMMON_CONDITIONS = ("none", "direct", "eval")
# Holds the shared common synthesis when the `none` condition is not built (never a condition).
COMMON_SOURCE = "common"


class CountError(ParseError):
    """A list still has the wrong number of usable items after the repair round."""


MIN_CHARS = 15  # the shortest real constraint: "Quote a resident." is 17
# Under a grammar, a runaway item (one string looping until max_tokens) is cut here instead;
# MAX_WORDS (60) words are about 360 characters, so nothing usable is lost.
MAX_CHARS = 400


def list_schema(n: int | None, *, with_task: bool) -> dict[str, Any]:
    # minLength: under a grammar (llama.cpp), a small model cannot answer with the "..." placeholder
    items: dict[str, Any] = {"type": "array",
                             "items": {"type": "string", "minLength": MIN_CHARS, "maxLength": MAX_CHARS}}
    if n is not None:
        items |= {"minItems": n, "maxItems": n}
    if not with_task:
        return {"type": "object", "properties": {"constraints": items}, "required": ["constraints"]}
    return {
        "type": "object",
        "properties": {"main_task": {"type": "string"}, "constraints": items},
        "required": ["main_task", "constraints"],
    }


# -- parsing -------------------------------------------------------------------------------------

_TASK_KEYS = ("main_task", "maintask", "task", "main task", "instruction")
_LIST_KEYS = ("constraints", "items", "list", "requirements")
_ITEM_KEYS = ("constraint", "text", "requirement", "description")
_TASK_LINE = re.compile(r"^\s*[#*_\s]*(?:main\s+task|task)\s*[*_]*\s*[:\-\u2013]\s*[*_]*\s*(.+)$",
                        re.IGNORECASE)
_ITEM_LINE = re.compile(
    r"^\s*(?:[-*\u2022]\s+|\(?\d{1,3}\s*[.):\]]\s*|constraint\s*\d{1,3}\s*[:.)\-]\s*)(.+)$", re.IGNORECASE
)
_LIST_HEADING = re.compile(r"^\s*[#*_\s]*constraints?\s*[*_]*\s*:?\s*[*_]*\s*$", re.IGNORECASE)


def clean_item(text: str) -> str:
    """One constraint as plain text: no numbering, markdown emphasis, wrapping quotes or list commas."""
    s = " ".join(str(text).split())
    s = re.sub(r"^(?:constraint\s*\d{1,3}\s*[:.)\-]\s*)", "", s, flags=re.IGNORECASE)
    s = re.sub(r"\*\*|__", "", s).strip().strip("*").strip()
    s = s.rstrip(",").strip()
    if len(s) >= 2 and s[0] in "\"'\u201c" and s[-1] in "\"'\u201d":
        s = s[1:-1].strip()
    return s


def item_key(text: str) -> str:
    """What makes two constraints 'the same' for de-duplication: words, case-folded."""
    return " ".join(re.findall(r"\w+", text.casefold()))


def _text_of(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        for key in _ITEM_KEYS:
            if isinstance(item.get(key), str):
                return item[key]
    return None


def parse_constraint_list(text: str) -> tuple[str | None, list[str]]:
    """(main task or None, items) from a reply in JSON or as a (numbered) list."""
    try:
        data = parse_json_lenient(text)
    except ReplyError:
        data = None
    task: str | None = None
    raw: list[Any] | None = None
    if isinstance(data, dict):
        lowered = {str(k).strip().lower(): v for k, v in data.items()}
        for key in _TASK_KEYS:
            if isinstance(lowered.get(key), str):
                task = lowered[key]
                break
        for key in _LIST_KEYS:
            if isinstance(lowered.get(key), list):
                raw = lowered[key]
                break
    elif isinstance(data, list):
        raw = data
    if raw is not None:
        items = [clean_item(t) for t in (_text_of(x) for x in raw) if t is not None]
        return (clean_item(task) if task else None), [i for i in items if i]
    # Not JSON: a list in prose, maybe with a preamble, a "Main task:" line and fences.
    items = []
    for line in text.replace("```", "\n").splitlines():
        m = _TASK_LINE.match(line)
        if m and task is None:
            task = clean_item(m.group(1))
            continue
        if _LIST_HEADING.match(line):
            continue
        m = _ITEM_LINE.match(line)
        if m:
            item = clean_item(m.group(1))
            if item:
                items.append(item)
    return task, items


def copies_prompt(item: str, prompt: str, *, n: int = 6, share: float = 0.5) -> bool:
    """True when most of an item is copied from the prompt's own wording (its rules or
    examples): small models restate the instructions instead of following them."""
    from pipeline.analysis.copying import copied_ngrams

    words = len(re.findall(r"\w+", item))
    copied = sum(s.words for s in copied_ngrams(item, prompt, n=n))
    return words > 0 and copied / words >= share


MIN_WORDS = 3  # shorter is a placeholder ("Describe ...") or a fragment, not a constraint
MAX_WORDS = 60  # longer is a pasted paragraph, not a constraint


def unusable_reason(item: str, prompt: str) -> str | None:
    """Why an item is not a constraint (a fragment, a paragraph, a passage copied from the
    prompt's rules or the articles it shows: a copy is not an instruction), or None."""
    words = len(re.findall(r"\w+", item))
    if words == 0:
        return f"{item!r} is a placeholder: write the constraint itself, a whole sentence"
    if words < MIN_WORDS:
        return "too short to be a constraint"
    if words > MAX_WORDS:
        return "a whole paragraph, not one requirement"
    if copies_prompt(item, prompt):
        return "copied from the texts or the instructions instead of written in your own words"
    return None


def main_task_problem(task: str, rules: str) -> str | None:
    """Why a main task is not about the texts, or None. A 1.5B model, shown a form or an example
    in the rules, tends to hand it back: a task about a factory for an article on a bank's profits."""
    if re.search(r"<[^<>]*>", task):
        return ("the main task still holds a <placeholder> from the form: name the kind of "
                "text and its subject")
    if copies_prompt(task, rules, n=5):
        return "the main task copies the instructions' wording: write one about these texts"
    return None


def usable(item: str, prompt: str) -> bool:
    return unusable_reason(item, prompt) is None


def _usable_items(items: Sequence[str], prompt: str, gate: ConstraintGate | None) -> list[str]:
    """The items that are constraints at all; under a gate each one that is not goes into its ledger."""
    out = []
    for item in items:
        reason = unusable_reason(item, prompt)
        if reason is None:
            out.append(item)
        elif gate is not None:
            gate.ledger.written += 1
            gate.reject(item, "usable", reason)
    return out


def prompt_text(messages: Sequence[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages if m["role"] in ("system", "user"))


def dedupe(items: Sequence[str], existing: Sequence[str] = ()) -> list[str]:
    seen = {item_key(x) for x in existing}
    out = []
    for item in items:
        key = item_key(item)
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


# -- asking for a list -----------------------------------------------------------------------------


@dataclass
class Synthesis:
    main_task: str
    constraints: list[str]
    call_ids: list[int] = field(default_factory=list)
    asked_more: int = 0  # items the repair round asked for (0: the first reply had enough)
    dropped: int = 0  # items past N that were cut, plus exact duplicates
    ledger: Ledger | None = None  # what the constraint gate rejected and kept (None: no gate)


# A repair round asks for at most this many items, each round about other aspects of the story:
# asked for 15 more at once, a 1.5B model loops over the list it already wrote.
MORE_CHUNK = 10
ASPECTS = (
    "the people or groups involved and affected, by their role (never by name)",
    "the causes and the background that led to the events",
    "the consequences, the risks and what is expected to happen next",
    "the reactions, opinions and disagreements the texts report",
    "the scale of things in general terms: amounts, changes, comparisons",
    "the sequence of events, the setting and how the situation developed",
    "how the text is written: its tone, the sources it cites, how it opens and ends",
)


def _max_tokens(n: int) -> int:
    return 300 + 60 * n


async def ask_constraints(
    client: LLMClient,
    endpoint: str,
    template: Template,
    fields: dict[str, Any],
    n: int,
    *,
    params: Params | None = None,
    repair_rounds: int = 1,
    gate: ConstraintGate | None = None,
) -> Synthesis:
    """Ask ``template`` for a main task and exactly ``n`` constraints, or the endpoint's
    ``list_items`` if fewer; then ask for the missing ones in up to ``repair_rounds`` rounds.

    ``gate``: every candidate meets its checks (pipeline.stages.gate); each round's ask names what
    was rejected and why, and a list still short after the rounds is kept short, its ledger saying
    so ("37 of 39 after 4 rounds"). Without a gate a short list is a CountError."""
    ep = client.config.endpoint(endpoint)
    first = ep.items_per_ask(n)
    schema = list_schema(first, with_task=True)
    fmt = structured_format(ep, schema)
    params = params or Params(max_tokens=_max_tokens(first))
    messages = template.render(**(fields | {"n": first}))
    rules = "\n".join(m["content"] for m in messages if m["role"] == "system")

    def accept(text: str) -> tuple[str | None, list[str]]:
        task, items = parse_constraint_list(text)
        if not items:
            raise ReplyError("no constraints found: expected a JSON object with a 'constraints' list",
                             reply=text)
        return task, items

    # One repair round for a reply with no usable list at all (count repairs come after).
    (task, items), completion = await client.chat_repaired(
        ep, messages, accept=accept, schema=schema, template=template, params=params, response_format=fmt,
        what="list",
    )
    # The follow-ups (main task, more constraints) all continue from the first reply.
    convo = [*messages, {"role": "assistant", "content": completion.text}]

    call_ids = [completion.call_id] if completion.call_id else []
    problem = "no main task found" if not task else main_task_problem(task, rules)
    if problem:
        # A list with a bad main task is kept: asking for the whole reply again cost as much as
        # the first, and the 1.5B model handed the same form back (twice, for the same pair).
        task, again = await _ask_main_task(client, ep, convo, problem, rules, task)
        call_ids += [again.call_id] if again.call_id else []
    assert task is not None  # a missing task is a problem above, so it was asked for again
    instructions = prompt_text(messages)
    kept = _usable_items(items, instructions, gate)
    # Under a gate an exact repeat is a rejection (distinct) in its ledger, not silently dropped.
    kept = dedupe(kept) if gate is None else await gate.screen(kept, n)
    result = Synthesis(main_task=task, constraints=kept[:n], call_ids=call_ids, dropped=len(items)
                       - len(kept[:n]), ledger=gate.ledger if gate is not None else None)
    rounds = 0
    while len(result.constraints) < n and rounds < repair_rounds:
        missing = n - len(result.constraints)
        ask = min(missing, MORE_CHUNK)
        width = _wave_width(client, ep, missing, repair_rounds - rounds)
        focuses = [ASPECTS[(rounds + j) % len(ASPECTS)] for j in range(width)]
        result.asked_more += ask * width
        notes = gate.notes() if gate is not None else ""
        replies = await _ask_more_together(client, ep, convo, result.constraints, n, ask, focuses,
                                           seed=rounds + 1, notes=notes) \
            if width > 1 else None
        if replies is None:  # one round (or the endpoint refused a list: one round at a time from now)
            focuses = focuses[:1]
            replies = [await _ask_more(client, ep, convo, result.constraints, n, ask, focuses[0],
                                       seed=rounds + 1, notes=notes)]
        rounds += len(focuses)
        if all(reply is None for reply in replies):
            break
        for call_id in dict.fromkeys(reply[1].call_id for reply in replies if reply is not None):
            if call_id:
                result.call_ids.append(call_id)
        # Under a gate the rounds written together are screened together: the judge's calls (two a
        # screen, one a reference) are made once a wave, not once a round.
        pooled: list[str] = []
        written = 0
        for reply, focus in zip(replies, focuses, strict=True):
            if reply is None:
                continue
            new_items = reply[0]
            # the round's own ask counts as prompt wording: "write about <focus>" handed back is no constraint
            added = _usable_items(new_items, instructions + "\n" + focus, gate)
            if gate is not None:
                pooled += added
                written += len(new_items)
                continue
            kept = dedupe(added, result.constraints)[:min(ask, n - len(result.constraints))]
            result.dropped += len(new_items) - len(kept)
            result.constraints += kept
        if gate is not None:
            kept = await gate.screen(pooled, n - len(result.constraints))
            result.dropped += written - len(kept)
            result.constraints += kept
    if gate is not None:
        gate.ledger.rounds, gate.ledger.kept = rounds, len(result.constraints)
    if len(result.constraints) < n and (gate is None or not result.constraints):
        raise CountError(
            f"endpoint '{ep.name}' ({ep.model}), prompt {template.name}: {len(result.constraints)} usable "
            f"constraints of the {n} needed, after {rounds} repair round(s) asking for the missing ones"
        )
    return result


async def _ask_main_task(client: LLMClient, ep: Any, convo: list[dict[str, str]], problem: str,
                         rules: str, bad_task: str | None) -> tuple[str, Any]:
    """The main task asked for alone, after a first reply whose main task was unusable: only its
    subject, put after the bad task's own opening ("Write a news article about"). Asked for the
    whole sentence, the 1.5B model wrote the form's words back, for the same pair, in every run;
    asked what both texts report on, it named it (one repair round; still unusable: ParseError)."""
    template = load_template("main_task_again")
    opening = task_opening(bad_task)

    def accept(text: str) -> str:
        line = next((ln for ln in text.splitlines() if ln.strip()), "")
        subject = re.sub(r"^\s*[*_#]*\s*(?:main[ _]task|subject)?\s*[*_]*\s*[:\-]?\s*", "", line,
                         flags=re.IGNORECASE)
        subject = subject.strip().strip('"\u201c\u201d').strip().rstrip(".").strip()
        if re.match(r"write an? ", subject, flags=re.IGNORECASE):
            task = subject  # the whole sentence after all
        else:
            if subject[:1].isupper() and subject[1:2].islower():
                subject = subject[0].lower() + subject[1:]  # "Media industry", not "TimeWarner"
            task = f"{opening} {subject}"
        problem = ("no main task in the reply" if count_words(subject) < 2 or "___" in subject
                   else main_task_problem(task, rules))
        if problem:
            raise ReplyError(problem, reply=text)
        return task + "."

    return await client.chat_repaired(
        ep, convo + template.render(problem=problem, opening=opening), accept=accept, schema=None,
        template=template,
        params=Params(max_tokens=60), what="main task",
        repair=lambda error: f"That cannot be used: {error}. Reply with the words for ___ only.",
    )


def task_opening(task: str | None) -> str:
    """The words a main task opens with, up to its subject: "Write a news article about"."""
    m = re.match(r"\s*(write an? [\w\s'-]{1,40}? about)\b", task or "", flags=re.IGNORECASE)
    return "Write " + m.group(1)[len("write "):] if m else "Write a text about"


async def _ask_more(client: LLMClient, ep: Any, convo: list[dict[str, str]], have: list[str], n: int,
                    k: int, focus: str, *, seed: int, notes: str = "") -> tuple[list[str], Any] | None:
    """The repair round: ask for exactly ``k`` more items about ``focus``, after the first reply.

    Every round continues the same conversation (the prompt and the first reply), so llama.cpp
    reuses its cached prefix and reads only the short ask. The list is not shown again: shown it,
    the 1.5B model copied it back (1 new item of 10 in a round), and a conversation that kept
    every round made it loop until max_tokens. Measured on one article: 4 rounds in 88 s against
    5 rounds in 166 s."""
    template = load_template("constraints_more")
    ask = template.render(have=len(have), n=n, k=k, focus=focus, notes=defuse(notes))[-1]
    schema = list_schema(k, with_task=False)

    def accept(text: str) -> list[str]:
        _task, items = parse_constraint_list(text)
        if not items:
            raise ReplyError("no constraints found", reply=text)
        return items

    try:
        items, completion = await client.chat(
            # sampled at a fixed seed: asked again at temperature 0, a model tends to repeat itself
            ep, convo + [ask], template=template,
            params=Params(temperature=0.7, seed=seed, max_tokens=_max_tokens(k)),
            response_format=structured_format(ep, schema), accept=accept,
        )
    except ReplyError:
        return None
    return items, completion  # type: ignore[return-value]


# Rounds written together (an endpoint with ``batch_generation``): as many as the missing items
# need, and one more, since a round's items often repeat the list or another round's (the demo's
# first lists: 30 missing took rounds of 10, 10, 10, 10 and 3). At most this many in one request.
MAX_WAVE = 4


def _wave_width(client: LLMClient, ep: Any, missing: int, rounds_left: int) -> int:
    """How many rounds to ask at once: 1 unless the endpoint writes a list of prompts together."""
    if not client.writes_lists_together(ep):
        return 1
    return max(1, min(rounds_left, -(-missing // MORE_CHUNK) + 1, MAX_WAVE))


async def _ask_more_together(client: LLMClient, ep: Any, convo: list[dict[str, str]], have: list[str], n: int,
                             k: int, focuses: list[str], *,
                             seed: int, notes: str = "") -> list[tuple[list[str], Any] | None] | None:
    """The rounds about ``focuses`` as one request: each the prompt ``_ask_more`` sends (ChatML), at
    seeds ``seed``, ``seed + 1``, ... (the server adds each prompt's index). Per round its items, or
    None where its reply held none; None when the endpoint refused the list."""
    template = load_template("constraints_more")
    prompts = [chatml(convo + [template.render(have=len(have), n=n, k=k, focus=f, notes=defuse(notes))[-1]])
               for f in focuses]

    def accept(text: str) -> list[list[str] | None]:
        replies = json.loads(text)
        parsed = [_items_or_none(reply) for reply in replies]
        if not any(parsed):
            raise ReplyError("no constraints found in any round's reply", reply=text)
        return parsed

    written = await client.write_together(
        ep, prompts, template=template, accept=accept,
        params=Params(temperature=0.7, seed=seed, max_tokens=_max_tokens(k)),
        response_format=structured_format(ep, list_schema(k, with_task=False)))
    if written is None:
        return None
    rounds, completion = written
    return [(items, completion) if items else None for items in rounds]


def _items_or_none(reply: str) -> list[str] | None:
    try:
        _task, items = parse_constraint_list(reply)
    except ValueError:
        return None
    return items or None


def scramble(items: Sequence[str], seed: str) -> list[str]:
    """A fixed shuffle of the list for this seed: not the narrative order, and reproducible."""
    out = list(items)
    random.Random(seed).shuffle(out)
    return out


async def synthesize_single(client: LLMClient, endpoint: str, article: str, n: int, *, domain: str,
                            repair_rounds: int = 1, gate: ConstraintGate | None = None) -> Synthesis:
    template = load_template("synthesize_single")
    fields = {"article": defuse(article), "n": n, "domain": domain}
    return await ask_constraints(client, endpoint, template, fields, n, repair_rounds=repair_rounds,
                                 gate=gate)


async def synthesize_common(client: LLMClient, endpoint: str, article_a: str, article_b: str, n: int, *,
                            domain: str, seed: str, repair_rounds: int = 1,
                            gate: ConstraintGate | None = None) -> Synthesis:
    template = load_template("synthesize_common")
    fields = {"article_a": defuse(article_a), "article_b": defuse(article_b), "n": n, "domain": domain}
    result = await ask_constraints(client, endpoint, template, fields, n, repair_rounds=repair_rounds,
                                   gate=gate)
    result.constraints = scramble(result.constraints, seed)
    return result
