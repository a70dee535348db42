"""Every prompt template the build sends is one the scripted model and the dry run's placeholders
recognise and answer. `bench.soak` broke silently when a prompt fell into the wrong kind (the
summary's shortening read as a synthesis, since issue 49); a new or reworded template fails here."""

from __future__ import annotations

import pytest

from pipeline.llm.placeholders import placeholder_reply, prompt_kind
from pipeline.llm.prompts import load_template, prompts_dir
from tests.fakes.responders import ScriptedModel

ARTICLE = "The council met on Monday and argued about the budget. Residents waited outside. " * 6
LIST = "1. Describe the meeting.\n2. Explain the cause of the shortfall.\n3. Report what happens next."
VALUES: dict[str, object] = {
    "article": ARTICLE, "article_a": ARTICLE, "article_b": ARTICLE.replace("Monday", "Friday"),
    "base": ARTICLE, "base_article": ARTICLE, "text": ARTICLE, "domain": "news", "n": 3, "k": 2,
    "have": 1, "words": 120, "target_words": 30, "main_task": "Write a news article about a budget gap.",
    "constraints": LIST, "constraints_1": LIST, "constraints_2": LIST, "task_1": "Write a news article.",
    "task_2": "Write a news article.", "constraint": "Describe the meeting.",
    "too_easy": "1. Describe the meeting.",
    "missing": "2. Explain the cause of the shortfall.", "ids": "2", "focus": "the causes",
    "opening": "Write a news article about", "problem": "it names no subject",
    "notes": "Refused before: 1. Describe the meeting (a copy of one already kept).",
}
# Asked after a first reply, in the same conversation: (the template that opened it, the kind).
FOLLOW_UPS = {"constraints_more": "constraints_more", "main_task_again": "format_repair",
              "revise_missing": "revise_missing"}
# Every template, and the kind the fakes read it as (a new template must be added here).
KINDS = {
    "base_article": "base_article", "contradictions": "contradictions", "judge_batched": "judge_batched",
    "judge_lines": "judge_batched", "judge_single": "judge_single", "judge_yes_no": "judge_yes_no",
    "judge_yes_no_evidence": "judge_yes_no", "naturalness": "naturalness", "respond_direct": "respond_direct",
    "respond_edit": "respond_edit", "revise_direct": "revise_direct", "revise_eval": "revise_eval",
    "summarize": "summarize", "summarize_shorten": "summarize_shorten",
    "synthesize_common": "synthesize_common", "synthesize_single": "synthesize_single", **FOLLOW_UPS,
}


def _request(name: str) -> dict:
    template = load_template(name)
    messages = template.render(**{f: VALUES[f] for f in template.fields})
    if name in FOLLOW_UPS:
        opener = load_template("synthesize_common")
        first = opener.render(**{f: VALUES[f] for f in opener.fields})
        messages = [*first, {"role": "assistant", "content": '{"constraints": ["Describe it."]}'},
                    *[m for m in messages if m["role"] == "user"]]
    return {"model": "m1", "messages": messages}


def test_every_template_has_a_kind_here():
    assert sorted(p.stem for p in prompts_dir().glob("*.md")) == sorted(KINDS)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_the_fakes_read_and_answer_every_template(name):
    request = _request(name)
    assert prompt_kind(request) == KINDS[name]
    if KINDS[name] != "judge_yes_no":  # read from log-probabilities: its tests script their own replies
        assert ScriptedModel(answer_repairs=True)(request).text != "unknown prompt"
    assert placeholder_reply(request, quote_cap=200) is not None


def test_a_shortening_is_answered_with_the_words_it_asks_for():
    reply = ScriptedModel()(_request("summarize_shorten")).text
    assert len(reply.split()) == VALUES["target_words"]
