"""Revision of the common constraints, with lineage.

- ``eval`` (UNSPECIFIC): a constraint-blind *base article* is written from the main task alone
  and judged against every constraint (pipeline.stages.judging). Only the constraints it satisfies
  ("too easy") are replaced, by harder ones it does not satisfy; the rest are kept: still N.
- ``direct``: every constraint is hardened, with no base article (adversarial-filtering style).

Lineage: a replacement is a new row (origin ``revised``) at the old one's position, with
``replaces_id`` (the row it replaced) and ``replaced_reason``. The replaced row stays,
``active = 0`` and ``position`` NULL. In an ``eval`` instruction every original row carries the
base article's verdict and quote on itself, so the replaced row keeps the Yes and the quote
that made it too easy. A replacement's ``base_verdict`` is its own: empty, as the base article
was never judged on it (copying the old row's Yes would read as a judged, satisfied constraint).

Replies: JSON ``{"replacements": [{"id": i, "constraint": ...}]}``, a list of strings in id
order, or numbered lines. Ids with no usable replacement (missing, identical to the
original, a duplicate of another constraint, or not a constraint at all: a fragment, a
paragraph, a passage copied from the articles) are asked for once more, by id; still
missing, the revision fails with a CountError. On an endpoint with ``list_items``, an eval
revision lists at most that many too-easy constraints an ask, the others in the rounds after.
Under the constraint gate a replacement must also be atomic, unspecific, distinct, not its original
with words appended, and (eval) not satisfied by the base article, judged; an id with none that
passes keeps its original, its ledger saying how many were replaced.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.analysis.copy_evidence import word_ngrams
from pipeline.analysis.gate import Ledger
from pipeline.analysis.support import sentence_spans
from pipeline.core.text import count_words
from pipeline.llm.client import LLMClient, Params, ReplyError, parse_json_lenient, structured_format
from pipeline.llm.prompts import Template, defuse, load_template, numbered
from pipeline.stages.gate import ConstraintGate, GateFactory
from pipeline.stages.judging import judge_generation, prompt_hash
from pipeline.stages.synthesis import (
    MIN_CHARS,
    CountError,
    clean_item,
    copies_prompt,
    item_key,
    unusable_reason,
)
from pipeline.store.articles import article_text_hash
from pipeline.store.constraints import ActiveConstraint, Replacement, active_constraints
from pipeline.store.constraints import apply_revision as write_revision
from pipeline.store.database import Store, now
from pipeline.store.generations import NewGeneration, base_generation_id, generation_text, insert_generation
from pipeline.store.instructions import Instruction, set_base_generation
from pipeline.store.ledgers import put_ledger
from pipeline.store.verdicts import BaseVerdict
from pipeline.store.verdicts import base_verdicts as stored_base_verdicts

EASY_REASON = "too easy: the base article satisfied it"
DIRECT_REASON = "direct revision: every constraint hardened"

REPLACEMENTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "replacements": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"},
                               "constraint": {"type": "string", "minLength": MIN_CHARS}},
                "required": ["id", "constraint"],
            },
        }
    },
    "required": ["replacements"],
}

_NUMBERED = re.compile(r"^\s*[*_]*\s*(?:id\s*)?(\d{1,3})\s*[.):\]]\s*[*_]*\s*(.+)$", re.IGNORECASE)


def parse_replacements(text: str, k: int) -> dict[int, str]:
    """Map id (1..k) -> replacement text. Raises ReplyError when the reply holds none."""
    out: dict[int, str] = {}
    try:
        data = parse_json_lenient(text)
    except ReplyError:
        data = None
    if isinstance(data, dict):
        lowered = {str(key).lower(): v for key, v in data.items()}
        data = next((lowered[key] for key in ("replacements", "constraints", "items")
                     if isinstance(lowered.get(key), list)), None)
    if isinstance(data, list):
        body: str | None
        for pos, item in enumerate(data, 1):
            if isinstance(item, str):
                cid, body = pos, item
            elif isinstance(item, dict):
                body = next((item[key] for key in ("constraint", "text", "new", "replacement")
                             if isinstance(item.get(key), str)), None)
                try:
                    cid = int(item.get("id", pos))
                except (TypeError, ValueError):
                    continue
                if body is None:
                    continue
            else:
                continue
            body = clean_item(body)
            if body and 1 <= cid <= k and cid not in out:
                out[cid] = body
    else:
        for line in text.replace("```", "\n").splitlines():
            m = _NUMBERED.match(line)
            if m:
                cid, body = int(m.group(1)), clean_item(m.group(2))
                if body and 1 <= cid <= k and cid not in out:
                    out[cid] = body
    if not out:
        snippet = text.strip().replace("\n", " ")[:120]
        raise ReplyError(f"no replacements found for ids 1..{k} (reply starts: {snippet!r})", reply=text)
    return out


@dataclass
class Replacements:
    texts: list[str | None]  # one per original, in order (None: none passed the gate; the original stays)
    call_ids: list[int]
    asked_again: int  # ids asked for again after a refused (or no) replacement


async def ask_replacements(
    client: LLMClient,
    endpoint: str,
    template: Template,
    fields: dict[str, Any],
    originals: Sequence[str],
    *,
    keep: Sequence[str] = (),
    sources: Sequence[str] = (),
    repair_rounds: int = 1,
    first: int | None = None,
    gate: ConstraintGate | None = None,
    base: str | None = None,
) -> Replacements:
    """One replacement per original (ids 1..k). ``keep``: constraints that stay in the list, which
    a replacement must not duplicate. ``sources``: texts (the articles) a replacement must not
    mostly copy; the originals are not among them, since hardening may reuse their words.

    ``first``: the first ask covers ids 1..first only (``fields`` are rendered for those); the
    rest are asked for in the rounds after it, at most ``first`` ids a round, besides the
    ``repair_rounds`` for ids whose replacement was refused (``Endpoint.items_per_ask``).

    ``gate``: a replacement must also pass its checks (atomic, unspecific, distinct, not its original
    with words appended) and, with the gate's judge and ``base`` (the base article), not be satisfied
    by the base article. Ids still without one after the rounds keep their original (None in the
    texts), the gate's ledger saying how many; without a gate that is a CountError."""
    ep = client.config.endpoint(endpoint)
    k = len(originals)
    first = k if first is None else first
    if not 1 <= first <= k:
        raise ValueError(f"the first ask covers 1 to {k} ids, got {first}")
    fmt = structured_format(ep, REPLACEMENTS_SCHEMA)
    messages = template.render(**fields)
    params = Params(max_tokens=300 + 80 * first)
    # One repair round for a reply with no usable item at all.
    got, completion = await client.chat_repaired(
        ep, messages, accept=lambda t: parse_replacements(t, first), schema=REPLACEMENTS_SCHEMA,
        template=template,
        params=params, response_format=fmt, what="replacements",
    )
    call_ids = [completion.call_id] if completion.call_id else []
    # The system prompt too: a small model copies its example instead of writing a replacement.
    prompt = "\n".join([*sources, messages[0]["content"]])
    chosen, why = _usable(got, originals, keep, {}, prompt, gate)  # type: ignore[arg-type]
    judged: dict[int, str] = {}  # ids whose chosen text the base article was judged on
    if gate is not None:
        await _not_easy(gate, base, chosen, judged, why)
    convo = list(messages) + [{"role": "assistant", "content": completion.text}]
    asked = 0
    rounds = 0
    shown = set(range(1, first + 1))  # ids some ask has listed
    unlisted_rounds = -(-(k - first) // first)  # ceil: the rounds that list the ids not asked for yet
    while len(chosen) < k and rounds < repair_rounds + unlisted_rounds:
        rounds += 1
        missing = [i for i in range(1, k + 1) if i not in chosen][:first]
        asked += len(shown.intersection(missing))
        notes = {i: why.get(i, "none given" if i in shown else "not asked for before") for i in missing}
        shown.update(missing)
        more_template = load_template("revise_missing")
        ask = more_template.render(
            missing="\n".join(f"{i}. {defuse(originals[i - 1])}\n   (your reply for {i}: {notes[i]})"
                              for i in missing),
            k=len(missing), ids=", ".join(map(str, missing)),
        )[-1]
        try:
            # Asked again at temperature 0, a model tends to repeat itself: sample instead (a fixed
            # seed keeps the call reproducible, and it is cached like any other).
            more, more_completion = await client.chat(
                ep, convo + [ask], template=more_template,
                params=Params(temperature=0.7, seed=rounds, max_tokens=300 + 80 * len(missing)),
                response_format=fmt, accept=lambda t: parse_replacements(t, k),
            )
        except ReplyError:
            break
        if more_completion.call_id:
            call_ids.append(more_completion.call_id)
        chosen, why = _usable({i: t for i, t in more.items() if i in missing},  # type: ignore[union-attr]
                              originals, keep, chosen, prompt, gate)
        if gate is not None:
            await _not_easy(gate, base, chosen, judged, why)
    if gate is not None:
        gate.ledger.rounds, gate.ledger.kept = rounds, len(chosen)
        return Replacements([chosen.get(i) for i in range(1, k + 1)], call_ids, asked)
    if len(chosen) < k:
        absent = [i for i in range(1, k + 1) if i not in chosen]
        raise CountError(
            f"endpoint '{ep.name}' ({ep.model}), prompt {template.name}: {len(chosen)} usable "
            f"replacements of the {k} needed after {rounds} repair round(s); missing ids {absent[:10]}"
        )
    return Replacements([chosen[i] for i in range(1, k + 1)], call_ids, asked)


async def _not_easy(gate: ConstraintGate, base: str | None, chosen: dict[int, str], judged: dict[int, str],
                    why: dict[int, str]) -> None:
    """The newly chosen replacements judged on the base article: one it satisfies is too easy too, and
    is refused (its id asked for again). ``judged``: the ids (and texts) already judged."""
    if base is None or gate.judge is None:
        return
    fresh = [cid for cid in sorted(chosen) if judged.get(cid) != chosen[cid]]
    verdicts = await gate.satisfied_by(base, [chosen[cid] for cid in fresh])
    for cid, verdict in zip(fresh, verdicts, strict=True):
        if verdict is False:
            judged[cid] = chosen[cid]
            continue
        reason = ("the base article already satisfies it: ask for something it lacks" if verdict
                  else "the judge gave no verdict on the base article")
        gate.reject(chosen.pop(cid), "easy", reason)
        why[cid] = reason


def _usable(got: dict[int, str], originals: Sequence[str], keep: Sequence[str], chosen: dict[int, str],
            prompt: str, gate: ConstraintGate | None = None) -> tuple[dict[int, str], dict[int, str]]:
    """Add the replacements that are new constraints: not the original, not a kept constraint,
    not another pick, and not a fragment, paragraph or passage copied from the articles; under a
    ``gate`` also its checks (each refusal in its ledger).
    Returns (chosen so far, why each refused id was refused)."""
    out = dict(chosen)
    why: dict[int, str] = {}
    # The originals too: swapping one too-easy constraint for another is no revision.
    taken = {item_key(t) for t in (*keep, *originals, *out.values())}
    for cid in sorted(got):
        if cid in out:
            continue
        item = without_copied_sentences(got[cid], prompt)
        key = item_key(item)
        check = "distinct"
        if key == item_key(originals[cid - 1]):
            why[cid] = "the same as the original"
        elif key in taken:
            why[cid] = "repeats another constraint of the list (or one being replaced)"
        else:
            reason = unusable_reason(item, prompt)
            check = "usable"
            if reason is None and gate is not None:
                found = gate.replacement_problem(item, originals[cid - 1], [*keep, *out.values()])
                check, reason = found if found is not None else (check, None)
            if reason is None:
                out[cid] = item
                taken.add(key)
            else:
                why[cid] = reason
        if gate is not None:
            gate.ledger.written += 1
            if cid in why:
                gate.reject(item, check, why[cid])
    return out, why


def without_copied_sentences(item: str, prompt: str) -> str:
    """``item`` less its sentences copied from the prompt, when what is left is a constraint of its own.

    Shown each too-easy constraint above the base article's words that satisfy it, the embedded 1.5B
    model wrote a constraint and then pasted those words after it. A constraint is one sentence, so
    a pasted one goes and the rest is judged alone; an item that is all copy stays refused."""
    spans = sentence_spans(item)
    if len(spans) < 2:
        return item
    kept = [item[start:end] for start, end in spans if not copies_prompt(item[start:end], prompt)]
    if not kept or len(kept) == len(spans):
        return item
    rest = " ".join(kept)
    return rest if unusable_reason(rest, prompt) is None else item


# -- the base article ------------------------------------------------------------------------------


def clean_article(text: str) -> str:
    """Strip what small models wrap around an article: fences and a 'Sure, here is...' line."""
    body = text.strip()
    fenced = re.fullmatch(r"```[\w-]*\s*(.*?)```", body, re.DOTALL)
    if fenced:
        body = fenced.group(1).strip()
    lines = body.splitlines()
    if lines and re.match(r"^(sure|certainly|here('s| is)|of course)\b.*:\s*$",
                          lines[0].strip(), re.IGNORECASE):
        body = "\n".join(lines[1:]).strip()
    return body


# A small model stops well short of the length asked and, asked again, writes the same short text
# (the embedded model: 148 words for 500, twice). A reply past STUB_SHARE of the length is kept and
# continued from where it stops, up to CONTINUE_ROUNDS times; only a stub is rewritten from scratch.
STUB_SHARE = 0.1
MIN_SHARE = 0.3  # a base article shorter than this share of the length asked is not one
CONTINUE_ROUNDS = 2
REPEAT_SHARE = 0.5  # a continuation whose 5-word runs are mostly in the text already repeats it


def _repeats(text: str, more: str) -> bool:
    grams = word_ngrams(more, 5)
    return bool(grams) and len(grams & word_ngrams(text, 5)) / len(grams) >= REPEAT_SHARE


async def _continued(client: LLMClient, ep: Any, template: Template,
                     messages: list[dict[str, str]], body: str,
                     words: int, minimum: int) -> str:
    """``body`` continued by the model until it reaches ``minimum`` words (CONTINUE_ROUNDS at most);
    a continuation that is junk, a refusal or a repeat of the text ends it."""
    from pipeline.llm.contract import check_prose

    for _ in range(CONTINUE_ROUNDS):
        n = count_words(body)
        if n >= minimum:
            break
        follow = [*messages, {"role": "assistant", "content": body},
                  {"role": "user",
                   "content": f"Go on with the text from where it stops: about {words - n} more words "
                                              "of the same plain prose. Write only the new part."}]
        reply, _ = await client.chat(ep, follow, template=template,
                                     params=Params(max_tokens=int((words - n) * 2.2) + 200))
        try:
            more = check_prose(clean_article(reply), what="continuation", refusal_fails=True)
        except ValueError:
            break
        if _repeats(body, more):
            break
        body = f"{body}\n\n{more}"
    return body


async def write_base_article(store: Store, client: LLMClient, endpoint: str,
                             instruction_id: int, main_task: str,
                             words: int) -> int:
    """The constraint-blind article for an eval instruction, written once and stored; returns its id.
    A short article is continued (STUB_SHARE, above), a stub rewritten."""
    from pipeline.core.errors import ParseError

    existing = base_generation_id(store, instruction_id)
    if existing is not None:
        return existing
    ep = client.config.endpoint(endpoint)
    template = load_template("base_article")
    minimum = max(20, int(words * MIN_SHARE))
    stub = max(20, int(words * STUB_SHARE))

    def accept(text: str) -> str:
        from pipeline.llm.contract import check_prose

        body = clean_article(text)
        n = count_words(body)
        if n < stub:
            raise ReplyError(f"the article has {n} words; about {words} were asked for", reply=text)
        # Junk or a refusal is no base article: the constraints would be judged against nothing.
        return check_prose(body, what="article", refusal_fails=True)

    messages = template.render(main_task=defuse(main_task), words=words)
    # One repair round for an empty or stub article.
    body, completion = await client.chat_repaired(
        ep, messages, accept=accept, schema=None, template=template,
        params=Params(max_tokens=int(words * 2.2) + 200),
        what="base article",
        repair=lambda error: f"That reply cannot be used: {error}. Write the whole text now, "
                             f"about {words} words, "
                             "and nothing else.",
    )
    body = await _continued(client, ep, template, messages, body, words, minimum)
    if count_words(body) < minimum:
        raise ParseError(f"endpoint '{ep.name}' ({ep.model}), prompt {template.name}: no usable "
                         "base article: it has "
                         f"{count_words(body)} words after continuing; about {words} were asked for")
    h = store.put_text(body)
    gen_id = insert_generation(store, NewGeneration(
        kind="base", instruction_id=instruction_id, model=f"{ep.name}/{ep.model}", mode="", text_hash=h,
        words=count_words(body), call_id=completion.call_id,  # type: ignore[union-attr]
    ))
    set_base_generation(store, instruction_id, gen_id)
    store.commit()
    return gen_id


async def judge_base(store: Store, client: LLMClient, judge: str, instruction_id: int, generation_id: int,
                     mode: str) -> None:
    """Verdicts of the base article on every active constraint (stored; already judged ones skipped)."""
    rows = active_constraints(store, instruction_id)
    await judge_generation(store, client, judge, generation_id, [(r.id, r.text) for r in rows], mode=mode)


def base_verdicts(store: Store, instruction_id: int, generation_id: int, judge: str, mode: str,
                  judge_format: str = "json", judge_prompt: str | None = None) -> dict[int, BaseVerdict]:
    """constraint id -> the stored verdict of the base article, for this judge and prompt."""
    return stored_base_verdicts(store, instruction_id, generation_id, judge, mode,
                                prompt_hash(mode, judge_format, judge_prompt))


# -- applying a revision ------------------------------------------------------------------------------


@dataclass
class Change:
    old: ActiveConstraint  # the constraint replaced
    new_text: str
    reason: str
    verdict: int | None = None  # the base article's verdict on the new text, if it was judged on it
    quote: str | None = None


def apply_revision(store: Store, instruction_id: int, changes: Sequence[Change], *,
                   verdicts: dict[int, BaseVerdict] | None = None) -> None:
    """Write the replacements with their lineage, retire the replaced rows, keep the base article's
    verdicts on the originals and mark the instruction revised, in one transaction (a killed run
    never leaves half a revision)."""
    replacements = [Replacement(ch.old.id, ch.old.position, ch.new_text, ch.reason, ch.verdict, ch.quote)
                    for ch in changes]
    write_revision(store, instruction_id, replacements,
                   base_verdicts={cid: (v.verdict, v.quote) for cid, v in (verdicts or {}).items()},
                   created_at=now())


def _articles(store: Store, instruction: Instruction) -> tuple[str, str]:
    def body(article_id: int | None) -> str:
        h = article_text_hash(store, article_id)
        return store.get_text(h) if h is not None else ""

    return body(instruction.article_a), body(instruction.article_b)


@dataclass
class RevisionResult:
    replaced: int
    asked_again: int
    unshown: int = 0  # base Yes verdicts kept because their quote is not in the base article
    ledger: Ledger | None = None  # the gate's, when the revision ran under one


def _store_ledger(store: Store, instruction_id: int, ledger: Ledger | None) -> None:
    if ledger is not None:
        put_ledger(store, instruction_id, "revision", ledger.as_json(), now())
        store.commit()


def too_easy(verdict: BaseVerdict | None) -> bool:
    """Whether the base article's verdict makes a constraint too easy: a Yes, unless the quote
    that should show it was checked and is not in the base article. The embedded 1.5B judge
    quoted the constraint itself for 27 of its 31 Yes on one base article: a Yes it did not show
    is no evidence that the article satisfies the constraint, and replacing it costs a call."""
    return verdict is not None and verdict.verdict == 1 and verdict.quote_found != "missing"


async def revise_eval(store: Store, client: LLMClient, endpoint: str, instruction: Instruction, *, judge: str,
                      mode: str, repair_rounds: int = 1, gates: GateFactory | None = None) -> RevisionResult:
    """Replace the constraints the base article satisfies; keep the rest. ``gates``: each replacement
    passes the gate, the base article judged on it too; one with none that passes keeps its original."""
    gen_id = instruction.base_generation_id or base_generation_id(store, instruction.id)
    if gen_id is None:
        raise ValueError(f"instruction {instruction.id}: no base article yet (run the base stage first)")
    rows = active_constraints(store, instruction.id)
    judge_ep = client.config.endpoint(judge)
    verdicts = base_verdicts(store, instruction.id, gen_id, judge, mode, judge_ep.judge_format,
                             judge_ep.judge_prompt)
    easy = [r for r in rows if too_easy(verdicts.get(r.id))]
    unshown = sum(1 for r in rows if (v := verdicts.get(r.id)) is not None and v.verdict == 1) - len(easy)
    changes: list[Change] = []
    asked = 0
    gate = None
    if gates is not None:
        gate = gates.revision(*_articles(store, instruction), len(easy), len(rows), judged=True)
    if easy:
        article_a, article_b = _articles(store, instruction)
        base = generation_text(store, gen_id) or ""
        # At most list_items ids an ask. Asked for 32 at once, the embedded 1.5B model wrote 13
        # distinct replacements and looped over them (900 tokens, 184 s), and 26 ids were asked for
        # again. Listed 15 at a time, the same 32 took 1,270 tokens and 243 s, against 1,870 and
        # 359 s, with 4 ids asked for again.
        first = client.config.endpoint(endpoint).items_per_ask(len(easy))
        # The ids alone, without the base article's words that satisfy each: shown them, the embedded
        # model pasted them after the original constraint (14 of 15 replacements refused as copies or
        # unchanged, and one id still missing after 1,103 tokens in two calls). Without them, on the
        # same ask: all 15 in two calls and 643 tokens (docs/measurements.md).
        easy_lines = "\n".join(f"{i}. {defuse(r.text)}" for i, r in enumerate(easy[:first], 1))
        template = load_template("revise_eval")
        fields = {
            "main_task": defuse(instruction.main_task or ""), "article_a": defuse(article_a),
            "article_b": defuse(article_b), "base_article": defuse(base),
            # bullets, not numbers: the ids a reply uses are the TOO EASY ones, and a small model
            # mixes up two numbered lists
            "constraints": "\n".join(f"- {defuse(r.text)}" for r in rows), "n": len(rows),
            "too_easy": easy_lines,
            "k": first,
        }
        easy_ids = {r.id for r in easy}
        kept = [r.text for r in rows if r.id not in easy_ids]
        got = await ask_replacements(client, endpoint, template, fields, [r.text for r in easy], keep=kept,
                                     sources=[article_a, article_b, base],
                                     repair_rounds=repair_rounds, first=first, gate=gate, base=base)
        asked = got.asked_again
        # Without a gate no verdict on the new rows: the base article was judged on the old texts only
        # (the old rows keep their Yes and quote, written below by apply_revision). The gate judged it
        # on each replacement it kept: a No.
        changes = [Change(r, text, EASY_REASON, verdict=0 if gate is not None and gate.judge else None)
                   for r, text in zip(easy, got.texts, strict=True) if text is not None]
    apply_revision(store, instruction.id, changes, verdicts=verdicts)
    _store_ledger(store, instruction.id, gate.ledger if gate is not None else None)
    return RevisionResult(len(changes), asked, unshown, gate.ledger if gate is not None else None)


async def revise_direct(store: Store, client: LLMClient, endpoint: str, instruction: Instruction, *,
                        repair_rounds: int = 1, gates: GateFactory | None = None) -> RevisionResult:
    """Harden every constraint (under ``gates``, each replacement passes the gate's text checks; one with
    none that passes keeps its original)."""
    rows = active_constraints(store, instruction.id)
    article_a, article_b = _articles(store, instruction)
    gate = gates.revision(article_a, article_b, len(rows), len(rows), judged=False) if gates else None
    template = load_template("revise_direct")
    fields = {
        "main_task": defuse(instruction.main_task or ""), "article_a": defuse(article_a),
        "article_b": defuse(article_b), "constraints": numbered([r.text for r in rows]), "n": len(rows),
    }
    got = await ask_replacements(client, endpoint, template, fields, [r.text for r in rows],
                                 sources=[article_a, article_b], repair_rounds=repair_rounds, gate=gate)
    changes = [Change(r, t, DIRECT_REASON) for r, t in zip(rows, got.texts, strict=True) if t is not None]
    apply_revision(store, instruction.id, changes)
    _store_ledger(store, instruction.id, gate.ledger if gate is not None else None)
    return RevisionResult(len(changes), got.asked_again, ledger=gate.ledger if gate is not None else None)
