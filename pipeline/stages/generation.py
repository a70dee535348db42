"""Responses of the models under test, and summaries of those responses.

Stored as ``generations`` rows (the conventions the metrics read):
- ``kind='response'``: ``instruction_id``, ``model`` = the endpoint name of the model under
  test, ``mode`` = ``direct`` (written from the instruction) or ``edit`` (the instruction's
  constraint-blind base article revised to satisfy the constraints: the research code's
  "fit" step); ``ratio`` and ``parent_id`` are NULL.
- ``kind='summary'``: ``parent_id`` = the response summarised, ``ratio`` = the target share of
  its words, ``achieved_ratio`` = summary words / response words, ``model`` = the summarizer's
  endpoint name, ``mode`` = the response's mode (so a summary row alone says what it summarises).
Each finished generation is committed at once; an existing one is found and reused, never
paid for twice.

Every reply keeps the output contract (pipeline.llm.contract) before it is accepted, cached or
stored: prose, not junk; a summary within ``1 +- slack`` of its target length and no refusal
(else a repair round, then the unit fails and the next run asks again). A response that
refuses is the model's answer: stored, with ``refusal = 1``. A response that is junk is none:
after its repair round the unit fails, naming the reply, and nothing is stored or scored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.core.config import Endpoint
from pipeline.core.errors import ParseError, StageError
from pipeline.core.text import count_words, is_refusal
from pipeline.llm.client import LLMClient, Params, ReplyError
from pipeline.llm.contract import check_length, check_prose
from pipeline.llm.prompt_batch import MAX_SEQUENCES
from pipeline.llm.prompts import Template, chatml, defuse, load_template, numbered
from pipeline.stages.revision import clean_article
from pipeline.store.constraints import active_constraints
from pipeline.store.database import Store
from pipeline.store.generations import (
    NewGeneration,
    StoredResponse,
    find_response,
    find_summary,
    insert_generation,
    shared_base_article,
    stored_response,
)
from pipeline.store.generations import generation_text as stored_text
from pipeline.store.instructions import get_instruction

MODES = ("direct", "edit")


def _accept_text(text: str) -> str:
    cleaned = clean_article(text)  # no fence, no "Here is the article:" line
    if count_words(cleaned) < 3:
        raise ReplyError("reply holds no text", reply=text)  # refused replies are not cached
    return cleaned


@dataclass
class _ResponseContract:
    """The accept function of a model under test's reply: prose (a refusal is prose, and its
    answer), with the words of the prompt (``source``) known. Keeps the last reply it refused, so
    a unit that fails can show what the model said."""

    source: str
    refused: str | None = None

    def __call__(self, text: str) -> str:
        try:
            return check_prose(_accept_text(text), what="response", refusal_fails=False, source=self.source)
        except ReplyError:
            self.refused = text
            raise


# How much of a refused reply a failed unit shows: enough to see what the model sent.
SHOWN_REPLY_CHARS = 300


def shown_reply(text: str) -> str:
    """A reply as a failure message shows it: quoted on one line, cut at SHOWN_REPLY_CHARS."""
    cut = text if len(text) <= SHOWN_REPLY_CHARS else text[:SHOWN_REPLY_CHARS] + "..."
    return repr(cut)


@dataclass
class NearestSummary:
    """Of the whole-text summaries refused for their length alone, the one nearest its target."""

    target: int
    body: str | None = None
    error: str = ""

    def offer(self, body: str, error: str) -> None:
        distance = abs(count_words(body) - self.target)
        if self.body is None or distance < abs(count_words(self.body) - self.target):
            self.body, self.error = body, error


@dataclass
class _SummaryContract:
    """The accept function of a summary of ``source``. ``refusal_fails`` is off when the response
    summarised is itself a refusal: its faithful summary reads like one. Keeps the last reply it
    refused as junk (no prose, or a refusal), not for its length, and why; a prose reply refused for
    its length is offered to ``nearest``."""

    target: int
    slack: float | None
    refusal_fails: bool = True
    source: str = ""
    junk: str | None = None
    junk_error: str = ""
    nearest: NearestSummary | None = None

    def __call__(self, text: str) -> str:
        try:
            body = check_prose(_accept_text(text), what="summary", refusal_fails=self.refusal_fails,
                               source=self.source)
        except ReplyError as exc:
            self.junk, self.junk_error = text, str(exc)
            raise
        try:
            return check_length(body, self.target, self.slack, what="summary", at_least=SUMMARY_MIN_MARGIN)
        except ReplyError as exc:
            if self.nearest is not None:
                self.nearest.offer(body, str(exc))
            raise


@dataclass(frozen=True)
class InstructionText:
    id: int
    main_task: str
    constraints: list[tuple[int, str]]  # (constraint id, text), in the final order
    base_generation_id: int | None


def load_instruction(store: Store, instruction_id: int) -> InstructionText:
    row = get_instruction(store, instruction_id)
    if row is None:
        raise StageError(f"{store.path}: no instruction {instruction_id}")
    return InstructionText(
        id=row.id,
        main_task=row.main_task or "",
        constraints=[(c.id, c.text) for c in active_constraints(store, instruction_id)],
        base_generation_id=row.base_generation_id,
    )


def base_article(store: Store, instruction: InstructionText) -> tuple[int, str]:
    """The constraint-blind base article (id, text) that edit mode revises: the instruction's
    own, else (the build writes one per pair, for ``eval``) the one of an instruction of the same
    run and pair with the same main task, as the common conditions share their synthesis."""
    gid = instruction.base_generation_id
    if gid is None:
        gid = shared_base_article(store, instruction.id)
    if gid is None:
        raise StageError(f"instruction {instruction.id}: no base article to edit (edit mode "
                         "revises the build's "
                         "constraint-blind base article, written for the eval condition of each pair)")
    return gid, generation_text(store, gid)


def generation_text(store: Store, generation_id: int) -> str:
    body = stored_text(store, generation_id)
    if body is None:
        raise StageError(f"{store.path}: no generation {generation_id}")
    return body


def _insert_generation(store: Store, generation: NewGeneration) -> int:
    gid = insert_generation(store, generation)
    store.commit()  # each finished generation is committed at once
    return gid


def response_messages(store: Store, instruction: InstructionText, mode: str,
                      words: int) -> tuple[object, list[dict[str, str]]]:
    """The template and messages for a response; edit mode carries the base article."""
    if mode not in MODES:
        raise StageError(f"response mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not instruction.constraints:
        raise StageError(f"instruction {instruction.id}: no active constraints")
    if mode == "direct":
        return direct_messages(instruction.main_task, [t for _, t in instruction.constraints], words)
    constraints = numbered([t for _, t in instruction.constraints])
    template = load_template("respond_edit")
    _, base = base_article(store, instruction)
    return template, template.render(
        main_task=defuse(instruction.main_task), base=defuse(base), constraints=constraints, words=words
    )


def direct_messages(main_task: str, constraints: list[str],
                    words: int) -> tuple[Template, list[dict[str, str]]]:
    """The instruction as a model under test sees it in direct mode: the main task and the numbered
    constraints (the prompt ``evaluate`` sends, and the input of an exported inspect_ai sample)."""
    template = load_template("respond_direct")
    return template, template.render(main_task=defuse(main_task), constraints=numbered(constraints),
                                     words=words)


def _token_budget(words: int) -> int:
    # About 1.4 tokens a word in English, with room for a model that runs long.
    return int(words * 2.2) + 200


def response_budget(words: int) -> int:
    """The tokens a response may take: room for about a third more words than asked (both shipped
    models write about 1.15 tokens a word). Given 750 tokens for 250 words, SmolLM2 wrote 663, the
    last 300 one loop said over; given 490, both models filled it (420-440 words). Each token past
    the length asked is written, then read again by the summarizer and by 39 judge prompts."""
    return int(words * 1.4) + 40


_LAST_SENTENCE_END = re.compile(r"[.!?][\"')\]\u201d\u2019]*(?=\s|$)")


def cut_at_last_sentence(text: str) -> str:
    """A reply stopped by its token budget, ended at its last full sentence (a reply with no sentence
    end in its second half is kept as it is): "...when it comes to future growth. The" reads as cut."""
    ends = list(_LAST_SENTENCE_END.finditer(text))
    if not ends or ends[-1].end() < len(text) / 2:
        return text
    return text[: ends[-1].end()].rstrip()


async def respond(
    store: Store, client: LLMClient, instruction_id: int, model: str, mode: str = "direct", *,
    words: int = 500, temperature: float = 0.0,
) -> tuple[int, bool]:
    """The response of ``model`` (an endpoint name) to an instruction: (generation id, created now?)."""
    existing = find_response(store, instruction_id, model, mode)
    if existing is not None:
        return existing, False
    instruction = load_instruction(store, instruction_id)
    template, messages = response_messages(store, instruction, mode, words)
    # The prompt's words are the response's own: names of the task and its base article are words.
    contract = _ResponseContract(source=" ".join(m["content"] for m in messages))
    budget = response_budget(words)
    try:
        text, completion = await client.chat_repaired(
            model, messages, template=template, schema=None,  # type: ignore[arg-type]
            params=Params(temperature=temperature, max_tokens=budget), accept=contract,
            what="response",
            repair=lambda error: f"That reply cannot be used: {error}. Write the text asked for "
                                                   "now, and nothing else.",
        )
    except ParseError as exc:
        if contract.refused is None:
            raise
        raise ParseError(f"{exc.msg}; its last reply: {shown_reply(contract.refused)}") from None
    body = str(text)
    if completion.completion_tokens >= budget:
        body = cut_at_last_sentence(body)
    gid = _insert_generation(store, NewGeneration(
        kind="response", instruction_id=instruction_id, model=model, mode=mode,
        text_hash=store.put_text(body),
        words=count_words(body), call_id=completion.call_id, refusal=int(is_refusal(body)),
    ))
    return gid, True


def target_words(response_words: int, ratio: float) -> int:
    return max(10, round(response_words * ratio))


SUMMARY_SLACK = 0.5  # a summary is accepted within 0.5x-1.5x of its target length
# ... or within this many words of it: a 35-word refusal, summarised at 25%, had a band of 5 to 15
# words, and the embedded model's 19-word summary of it was refused twice, so the instruction
# could not be audited. A ratio says little about texts this short.
SUMMARY_MIN_MARGIN = 10


# The sections a text is summarised in when the whole would not be. The embedded 1.5B model writes
# about the same few dozen words whatever it is asked for; a section of up to 60 words comes back
# near its 25% (7 to 27 words for 15 asked). Replayed on the 4 stored responses of 530-690 words
# (with repeats dropped, below), the joined summaries were 108-149 words for 132-172 asked, all
# accepted; sections of 250 words accepted 2 of 4, of 120 words 2 of 4.
SECTION_WORDS = 60
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def sections(text: str, max_words: int = SECTION_WORDS) -> list[str]:
    """The text cut at paragraph ends (else sentence ends) into consecutive sections of at most
    about ``max_words`` words; one section when the text is that short."""
    pieces: list[str] = []
    for paragraph in (p.strip() for p in _PARAGRAPH_BREAK.split(text)):
        if not paragraph:
            continue
        if count_words(paragraph) <= max_words:
            pieces.append(paragraph)
        else:
            pieces += [s for s in _SENTENCE_END.split(paragraph) if s]
    out: list[str] = []
    current: list[str] = []
    for piece in pieces:
        if current and count_words(" ".join(current + [piece])) > max_words:
            out.append(" ".join(current))
            current = []
        current.append(piece)
    if current:
        out.append(" ".join(current))
    return out


def without_repeats(text: str) -> str:
    """The text without the sentences that repeat an earlier one word for word (case and spacing
    aside); paragraphs kept. The embedded model's long responses restate themselves: of the 4
    stored ones of 530-690 words, 290-455 words are left, and one ends with a 263-word paragraph
    that repeats the five before it. Summarised section by section, a repeated passage was
    summarised twice, and that response's summary missed its length every way."""
    seen: set[str] = set()
    paragraphs = []
    for paragraph in _PARAGRAPH_BREAK.split(text):
        kept = []
        for sentence in _SENTENCE_END.split(paragraph.strip()):
            key = " ".join(sentence.lower().split())
            if not key or key in seen:
                continue
            seen.add(key)
            kept.append(sentence)
        if kept:
            paragraphs.append(" ".join(kept))
    return "\n\n".join(paragraphs)


def summary_messages(text: str, ratio: float, prompt: str = "summarize",
                     target: int | None = None) -> tuple[Template, list[dict[str, str]], int]:
    """The summarizer's prompt for ``text`` at ``ratio`` of its words (or ``target`` words), and that
    target: ``summarize``, or ``summarize_shorten`` when the first came back the wrong length."""
    target = target if target is not None else target_words(count_words(text), ratio)
    template = load_template(prompt)
    return template, template.render(text=defuse(text), words=count_words(text), target_words=target), target


def summary_budget(target: int) -> int:
    """The tokens a summary of ``target`` words may take."""
    return _token_budget(target)


def summary_check(text: str, target: int, nearest: NearestSummary | None = None) -> Callable[[str], str]:
    """The contract a summary of ``text`` keeps (prose, no refusal unless ``text`` is one, within
    SUMMARY_SLACK or SUMMARY_MIN_MARGIN of ``target`` words): the reply cleaned, or ReplyError. A
    prose reply refused for its length alone is offered to ``nearest`` (nearest_within)."""
    return _SummaryContract(target, SUMMARY_SLACK, refusal_fails=not is_refusal(text), source=text,
                            nearest=nearest)


async def _summary_of(client: LLMClient, summarizer: str, text: str, ratio: float, slack: float | None,
                      refusal_fails: bool, prompt: str = "summarize",
                      nearest: NearestSummary | None = None, target: int | None = None):  # noqa: ANN202
    """(summary, Completion) of ``text`` at ``ratio`` of its words, or at ``target`` words."""
    template, messages, target = summary_messages(text, ratio, prompt, target)
    contract = _SummaryContract(target, slack, refusal_fails=refusal_fails, source=text, nearest=nearest)

    async def ask(convo: list[dict[str, str]]):  # noqa: ANN202
        return await client.chat_repaired(
            summarizer, convo, accept=contract, schema=None, template=template,
            params=Params(temperature=0.0, max_tokens=_token_budget(target)), what="summary", repair_rounds=0)

    # No repair round for a length: told the length was wrong, the embedded model gave the same reply
    # again, to the word (5 of 5 in one demo run, about 25 s each). The next prompt in summarize's
    # chain (shorten, then section by section) is the second chance instead.
    try:
        summary, completion = await ask(messages)
    except ParseError:
        if contract.junk is None:
            raise
        # Junk (or a refusal) is no length the model cannot keep, but an endpoint in trouble: asked
        # once more, the reply quoted, as a response is. Sent down the chain instead, the summary
        # came from another prompt than on a clean run (6 of 48 in a soak with 30% faults).
        junk, contract.junk = contract.junk, None
        summary, completion = await ask(messages + [
            {"role": "assistant", "content": junk},
            {"role": "user",
             "content": f"That reply cannot be used: {contract.junk_error}. Write the summary "
                                        "asked for now, and nothing else."}])
    return str(summary), completion


async def summarize(
    store: Store, client: LLMClient, response_id: int, ratio: float, summarizer: str, *,
    slack: float | None = SUMMARY_SLACK,
) -> tuple[int, bool]:
    """A summary of a stored response at ``ratio`` of its words: (generation id, created now?).

    Small models overshoot the length asked for, and a summary at 45% is not a 25% one; a junk
    reply of 5 words is not one at all: a reply outside ``1 +- slack`` of its target
    (``slack=None``: any length), not prose, or a refusal is refused, and the text is asked to
    be shortened instead (``summarize_shorten``). Still wrong, a text longer
    than a section is summarised section by section at the same ratio (``sections``, of the text
    ``without_repeats``), each section at any length, and the joined summary must keep the same
    contract; too long, it is shortened as a whole once. Still wrong: the nearest summary written is
    kept when it misses the band by no more than the band again (said as a notice); else ParseError,
    nothing stored.
    The achieved ratio is measured on what is stored."""
    if not 0 < ratio < 1:
        raise StageError(f"summary ratio must be between 0 and 1, got {ratio}")
    existing = find_summary(store, response_id, ratio, summarizer)
    if existing is not None:
        return existing, False
    parent = stored_response(store, response_id)
    if parent is None:
        raise StageError(f"{store.path}: no response generation {response_id}")
    text = generation_text(store, response_id)
    words = parent.words or count_words(text)
    target = target_words(words, ratio)
    refusal_fails = not is_refusal(text)
    nearest = NearestSummary(target)
    try:
        body, completion = await _summary_of(client, summarizer, text, ratio, slack, refusal_fails,
                                             nearest=nearest)
    except ParseError:
        try:
            # The embedded 1.5B model hands some texts back whole when asked for a summary (151
            # words for 38 asked, 177 for 109, repair included), but shortens them when asked to
            # shorten them (43 and 60 words). On 6 stored responses: 3 within the accepted length
            # asked to summarise, 2 more asked to shorten; the sixth came back too short both ways.
            body, completion = await _summary_of(client, summarizer, text, ratio, slack, refusal_fails,
                                                 prompt="summarize_shorten", nearest=nearest)
            return _store_summary(store, parent, response_id, ratio, summarizer, body, words,
                                  completion.call_id)
        except ParseError as exc:
            shorten_error = exc
        parts = sections(without_repeats(text))
        if len(parts) < 2:
            kept = _nearest_kept(client, nearest, slack, "the text is too short to summarise by section")
            if kept is None:
                raise shorten_error from None
            return _store_summary(store, parent, response_id, ratio, summarizer, kept, words, None)
        # A small model writes about the same few dozen words whatever length it is asked for
        # (the embedded 1.5B model: 52 words for 266 asked, twice). Each section summarised to
        # the same ratio, in order, gives a summary of the length asked. Only the whole keeps the
        # length contract: held to it section by section, a 681-word response failed (a section
        # of 211 words came back as 118 words for 53 asked), and as a whole it was 253 words for
        # 170 asked. A passage the response says twice is summarised once. Each section's call
        # is cached like any other.
        bodies, completion = await _section_summaries(client, summarizer, parts, ratio, refusal_fails)
        body = "\n\n".join(bodies)
        try:
            _SummaryContract(target, slack, refusal_fails=refusal_fails, source=text, nearest=nearest)(body)
        except ReplyError as exc:
            joined_error = exc
            # The sections' summaries, joined, too long: each section's at about the same length
            # whatever was asked (SmolLM2's 277-word response cut into 5: 134 words for 69 asked,
            # band 34 to 104). Shortened as a whole, as the whole text was.
            shortened = None
            if count_words(body) > target:
                try:
                    shortened = await _summary_of(client, summarizer, body, ratio, slack, refusal_fails,
                                                  prompt="summarize_shorten", nearest=nearest, target=target)
                except ParseError:
                    pass
            if shortened is None:
                kept = _nearest_kept(client, nearest, slack, "no summary kept its length, whole, by section "
                                                             "or shortened")
                if kept is None:
                    raise ParseError("prompt summarize: no usable summary, whole or by section: "
                                     f"{joined_error}") from None
                return _store_summary(store, parent, response_id, ratio, summarizer, kept, words, None)
            body, completion = shortened
    return _store_summary(store, parent, response_id, ratio, summarizer, body, words, completion.call_id)


async def _section_summaries(client: LLMClient, summarizer: str, parts: list[str], ratio: float,
                              refusal_fails: bool):  # noqa: ANN202 - (summaries in order, last Completion)
    """Each section summarised at ``ratio``, at any length, in order. Where the summarizer writes lists
    together, up to MAX_SEQUENCES sections go as one request (greedy, each reply is the one its own
    call would get); a section whose reply there is refused is asked alone, as every section is
    elsewhere."""
    bodies: list[str | None] = [None] * len(parts)
    completion = None
    ep = client.config.endpoint(summarizer)
    for start in range(0, len(parts), MAX_SEQUENCES):
        group = parts[start:start + MAX_SEQUENCES]
        if len(group) < 2 or not client.writes_lists_together(ep):
            break
        written = await _sections_together(client, ep, group, ratio, refusal_fails)
        if written is None:  # the endpoint refused the list: one call a section from here on
            break
        bodies[start:start + len(group)], completion = written
    for i, part in enumerate(parts):
        if bodies[i] is None:
            bodies[i], completion = await _summary_of(client, summarizer, part, ratio, None, refusal_fails)
    return [b for b in bodies if b is not None], completion


async def _sections_together(client: LLMClient, ep: Endpoint, parts: list[str], ratio: float,
                             refusal_fails: bool):  # noqa: ANN202 - (summary or None per section, Completion)
    """The sections' "summarize" prompts as one list (ChatML), the one call ``_summary_of`` would
    make for each; None when the endpoint refused the list."""
    template = load_template("summarize")
    prompts, contracts = [], []
    for part in parts:
        target = target_words(count_words(part), ratio)
        prompts.append(chatml(template.render(text=defuse(part), words=count_words(part),
                                              target_words=target)))
        contracts.append(_SummaryContract(target, None, refusal_fails=refusal_fails, source=part))

    def accept(text: str) -> list[str | None]:
        replies = json.loads(text)
        return [_accepted_or_none(contract, reply)
                for contract, reply in zip(contracts, replies, strict=True)]

    budget = max(_token_budget(c.target) for c in contracts)
    return await client.write_together(ep, prompts, template=template, accept=accept,
                                       params=Params(temperature=0.0, max_tokens=budget))


def _accepted_or_none(contract: _SummaryContract, reply: str) -> str | None:
    try:
        return contract(reply)
    except ReplyError:
        return None


# When no summary keeps its length (a text of one section, a 77-word one-sentence response, has no
# section-by-section summary; or the sections' joined summary, shortened, still misses), the nearest
# of the summaries written is kept if it misses the accepted band by no more than the band again
# (SmolLM2's 77 words: 30 for 19 asked, band 9 to 29; the demo had stopped on it), and the achieved
# ratio stored with it says how far it is. Farther off, nothing is stored.
NEAREST_SLACK_FACTOR = 2


def nearest_within(nearest: NearestSummary, slack: float | None = SUMMARY_SLACK) -> str | None:
    """The nearest prose summary refused for its length, when it misses the band by no more than the
    band again (NEAREST_SLACK_FACTOR); None otherwise (junk is never offered)."""
    if nearest.body is None or slack is None:
        return None
    try:
        check_length(nearest.body, nearest.target, slack * NEAREST_SLACK_FACTOR, what="summary",
                     at_least=SUMMARY_MIN_MARGIN * NEAREST_SLACK_FACTOR)
    except ReplyError:
        return None
    return nearest.body


def _nearest_kept(client: LLMClient, nearest: NearestSummary, slack: float | None, why: str) -> str | None:
    kept = nearest_within(nearest, slack)
    if kept is not None:
        client.emit("notice", f"kept the nearest summary: {nearest.error}; {why}")
    return kept


def _store_summary(store: Store, parent: StoredResponse, response_id: int, ratio: float,
                   summarizer: str, body: str,
                   words: int, call_id: int | None) -> tuple[int, bool]:
    n = count_words(body)
    gid = _insert_generation(store, NewGeneration(
        kind="summary", instruction_id=parent.instruction_id, model=summarizer, mode=parent.mode, ratio=ratio,
        parent_id=response_id, text_hash=store.put_text(body), words=n,
        achieved_ratio=round(n / words, 4) if words else None, call_id=call_id,
    ))
    return gid, True
