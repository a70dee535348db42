"""The dry run's placeholder replies: what a well-behaved model would answer to each prompt.

``--dry-run`` (pipeline.stages.estimate) prices every call nobody answered yet and must then
answer it, so that the stage goes on to the calls that depend on the reply: the constraints
feed the base article, its verdicts decide what revision replaces, responses feed summaries.
``placeholder_reply`` reads which template a request was rendered from (by its fences) and
writes a reply of the asked shape and length:

- synthesis: the asked number of constraints "Discuss <topic> from angle number i.", every
  third marked "(easy)", which the placeholder judge finds satisfied by the base article, so
  an eval revision is priced for a third of the constraints, as on a typical model;
- the base article, responses and summaries: about the asked number of words; a response
  mentions the angle of every odd-numbered requirement, and a judge says Yes to a constraint
  whose angle the text mentions (quoting that sentence). The base article and each response open
  with the request's ``seed`` (its cache key, which covers the endpoint and model): as a real
  model's texts, no two are alike, so no later call (a summary, a verdict) collapses into a cache
  hit the real run would pay for;
- revisions replace every listed constraint; naturalness prefers the first; no contradictions.

The replies are a pure function of the request and its seed. A prompt it does not recognise
gets None: the estimator counts that unit as unpriced from there on. Never sent, never cached.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

# Every EASY_EVERY-th placeholder constraint is one the base article satisfies.
EASY_EVERY = 3
_TOPICS = ("the causes of the shortfall", "the people affected", "the options on the table",
           "the mood of the meeting",
           "the timeline of events", "the role of volunteers", "the views of officials", "what happens next")
_BASE_SENTENCE = "The council met and argued about money while residents waited."
BASE_QUOTE = "The council met and argued about money"
_FILLER = "People in the town kept talking about what would happen next."
_ANGLE = re.compile(r"angle number (\d+)\b")
# prompts/summarize_shorten.md's ask: the words it wants.
SHORTEN = re.compile(r"Shorten it to (\d+) words")


def fenced(text: str, name: str) -> bool:
    """Does ``text`` open a fence ``<<<NAME`` on a line of its own (a defused line inside data does not)?"""
    return re.search(rf"^<<<{name}$", text, re.MULTILINE) is not None


def block(text: str, name: str) -> str:
    m = re.search(rf"^<<<{name}\n(.*?)\n{name}>>>$", text, re.DOTALL | re.MULTILINE)
    return m.group(1) if m else ""


def numbered_items(text: str) -> list[tuple[int, str]]:
    return [(int(m.group(1)), m.group(2)) for line in text.splitlines()
            if (m := re.match(r"^(\d+)\. (.*)$", line))]


def user_messages(request: dict[str, Any]) -> list[str]:
    return [str(m.get("content", "")) for m in request.get("messages", []) if m.get("role") == "user"]


def prompt_kind(request: dict[str, Any]) -> str:
    """Which template a request was rendered from, by its fences (the first user message) and,
    for a follow-up in the same conversation, by what the last user message asks."""
    users = user_messages(request)
    if not users:
        return "unknown"
    first, last = users[0], users[-1]
    if len(users) > 1:
        if fenced(last, "MISSING"):
            return "revise_missing"
        if "more constraints" in last:
            return "constraints_more"
        return "format_repair"
    checks = (
        ("revise_eval", fenced(first, "BASE_ARTICLE")),
        ("revise_direct", "CONSTRAINTS TO HARDEN" in first),
        ("synthesize_common", fenced(first, "TEXT_A")),
        ("naturalness", fenced(first, "REQUEST1")),
        ("respond_edit", fenced(first, "DRAFT")),
        ("respond_direct", fenced(first, "REQUIREMENTS")),
        ("judge_batched", fenced(first, "TEXT") and fenced(first, "CONSTRAINTS")),
        ("judge_single", fenced(first, "TEXT") and fenced(first, "CONSTRAINT")),
        ("judge_yes_no", yes_no_constraint(first) is not None),
        ("summarize", fenced(first, "TEXT") and "Summarise it in about" in first),
        # Before synthesize_single, which any other prompt with a TEXT fence would fall into.
        ("summarize_shorten", fenced(first, "TEXT") and SHORTEN.search(first) is not None),
        ("synthesize_single", fenced(first, "TEXT")),
        ("base_article", fenced(first, "TASK")),
        ("contradictions", "contradict" in first),
    )
    return next((kind for kind, hit in checks if hit), "unknown")


# The yes_no judge's prompt (prompts/judge_yes_no.md): no fences, which cost it accuracy
# (docs/measurements.md).
_YES_NO_CONSTRAINT = re.compile(r"^INSTRUCTION: (.*)$", re.MULTILINE)
_YES_NO_TEXT = re.compile(r"^TEXT:\n(.*?)\n\n(?:Does the TEXT|Is there|INSTRUCTION: )",
                          re.DOTALL | re.MULTILINE)


def yes_no_constraint(prompt: str) -> str | None:
    """The constraint a yes_no judge prompt asks about (its last ``INSTRUCTION:`` line: a text quoting
    one comes before it), or None when ``prompt`` is not one."""
    found = _YES_NO_CONSTRAINT.findall(prompt)
    return found[-1] if found and prompt.startswith("TEXT:\n") and "Answer Yes or No" in prompt else None


def yes_no_text(prompt: str) -> str:
    m = _YES_NO_TEXT.search(prompt)
    return m.group(1) if m else ""


def constraint_angle(constraint: str) -> str | None:
    m = _ANGLE.search(constraint)
    return m.group(1) if m else None


def placeholder_verdict(constraint: str, text: str) -> dict[str, Any]:
    """Yes for an "(easy)" constraint, or one whose angle the text mentions (quoting its sentence)."""
    if "(easy)" in constraint:
        return {"verdict": "yes", "quote": BASE_QUOTE, "reason": ""}
    angle = constraint_angle(constraint)
    if angle is not None:
        for sentence in re.split(r"(?<=\.)\s+", text):
            if re.search(rf"angle number {angle}\b", sentence):
                return {"verdict": "yes", "quote": sentence.strip().rstrip("."), "reason": ""}
    return {"verdict": "no", "quote": "", "reason": "not covered"}


def _verdict_line(i: int, v: dict[str, Any], quote_cap: int | None) -> str:
    """One line of the lines format; under a grammar (``quote_cap``) a quote stops at its cap and a No
    carries no reason."""
    if v["verdict"] != "yes":
        return f"{i}. No" if quote_cap else f"{i}. No - {v['reason'] or 'not there'}"
    return f'{i}. Yes - "{v["quote"][:quote_cap] if quote_cap else v["quote"]}"'


def _constraints(n: int) -> list[str]:
    return [f"Discuss {_TOPICS[i % len(_TOPICS)]} from angle number "
            f"{i}{' (easy)' if i % EASY_EVERY == 0 else ''}."
            for i in range(1, n + 1)]


def write_response(requirements: list[tuple[int, str]], words: int, opening: str = "") -> str:
    """Mentions the angle of each odd-numbered requirement in its own sentence, in order, then
    pads to about ``words`` words (the tests' scripted model writes the same)."""
    sentences = [opening] if opening else []
    for i, text in requirements:
        angle = constraint_angle(text)
        if angle is not None and i % 2 == 1:
            sentences.append(f"This part of the story turns to angle number {angle} and what "
                             "it meant for the town.")
    while len(" ".join(sentences).split()) < words:
        sentences.append(_FILLER)
    return " ".join(sentences)


def summary_of(prompt: str) -> str:
    """A summarize or summarize_shorten prompt answered: its TEXT's first words, as many as asked."""
    m = SHORTEN.search(prompt)
    target = int(m.group(1)) if m else _number(r"Summarise it in about (\d+) words", prompt)
    return " ".join(block(prompt, "TEXT").split()[:target])


def _number(pattern: str, text: str) -> int:
    m = re.search(pattern, text)
    if m is None:
        raise ValueError(f"no {pattern!r} in the prompt")
    return int(m.group(1))


def _tag(seed: str, prompt: str) -> str:
    """Eight hex digits naming one request: its seed's, else its prompt's."""
    return (seed or hashlib.sha256(prompt.encode()).hexdigest())[:8]


def placeholder_reply(request: dict[str, Any], *, quote_cap: int, seed: str = "") -> str | None:
    """The placeholder reply to an OpenAI-style chat request (``messages``, ``model``, and
    ``grammar`` when the endpoint holds the reply to one); None when the prompt is not one it knows.
    ``quote_cap``: the longest quote a judge's grammar lets through. ``seed``: the request's cache
    key; free text opens with it, so each model's text for each request is its own."""
    kind = prompt_kind(request)
    if kind == "unknown":
        return None
    users = user_messages(request)
    first, last = users[0], users[-1]
    if kind == "format_repair":  # a good model answers the original request again
        messages = request["messages"]
        upto = next(i for i, m in enumerate(messages) if m["role"] == "user")
        return placeholder_reply({**request, "messages": messages[: upto + 1]},
                                 quote_cap=quote_cap, seed=seed)
    if kind in ("synthesize_common", "synthesize_single"):
        n = _number(r"exactly (\d+) constraints", first)
        story = re.search(r"\(story (\d+)a\)", first)
        task = (f"Write a news article about a local authority arguing over a budget gap "
                f"({story.group(1) if story else '?'}).")
        return json.dumps({"main_task": task, "constraints": _constraints(n)})
    if kind == "constraints_more":
        k = _number(r"Write EXACTLY (\d+) more", last)
        return json.dumps({"constraints": [f"Add further point {j} about the wider region."
                                           for j in range(1, k + 1)]})
    if kind == "base_article":
        words = _number(r"about (\d+) words", last)
        return " ".join([f"Draft {_tag(seed, first)}."] + [_BASE_SENTENCE] * max(1, words // 10))
    if kind == "judge_batched":
        text = block(first, "TEXT")
        items = numbered_items(block(first, "CONSTRAINTS"))
        system = " ".join(str(m.get("content", "")) for m in request.get("messages", [])
                          if m.get("role") == "system")
        if "one line per constraint" in system:  # the lines format
            cap = quote_cap if request.get("grammar") else None
            lines = [_verdict_line(i, placeholder_verdict(c, text), cap) + "\n" for i, c in items]
            return "".join(lines) if cap else "".join(lines).rstrip("\n")
        return json.dumps({"verdicts": [{"id": i, **placeholder_verdict(c, text)} for i, c in items]})
    if kind == "judge_single":
        return json.dumps(placeholder_verdict(block(first, "CONSTRAINT"), block(first, "TEXT")))
    if kind == "judge_yes_no":  # one word: the dry run has no probabilities to read
        return placeholder_verdict(yes_no_constraint(first) or "", yes_no_text(first))["verdict"].capitalize()
    if kind in ("respond_direct", "respond_edit"):
        words = _number(r"about (\d+) words", first)
        # Each model's text for its own task: no two responses alike (the seed covers the model).
        task = first.strip().splitlines()[0].removeprefix("Task: ").rstrip(".")
        opening = (f"Brief {_tag(seed, first)}: a text by {request.get('model', 'a model')} "
                   f"for the task: {task}.")
        if kind == "respond_edit":
            opening += " " + block(first, "DRAFT").split(".")[0] + "."
        return write_response(numbered_items(block(first, "REQUIREMENTS")), words, opening)
    if kind in ("summarize", "summarize_shorten"):
        return summary_of(first)
    if kind == "naturalness":
        return json.dumps({"preferred": 1, "reason": "the first reads more naturally"})
    if kind == "revise_eval":
        return json.dumps({"replacements": [
            {"id": i, "constraint": "Harder: " + text.replace("(easy)", "with a contrast between two groups")}
            for i, text in numbered_items(block(first, "TOO_EASY"))]})
    if kind == "revise_direct":
        return json.dumps({"replacements": [{"id": i, "constraint": "Harder: " + text}
                                            for i, text in numbered_items(block(first, "CONSTRAINTS"))]})
    if kind == "revise_missing":
        return json.dumps({"replacements": [{"id": i, "constraint": "Harder again: " + t}
                                            for i, t in numbered_items(block(last, "MISSING"))]})
    return json.dumps({"contradictions": []})  # kind == "contradictions"
