"""A tiny benchmark for the harness round trips (tests/test_harness.py), and a scripted model for
inspect_ai's ``mockllm/model`` that plays the model under test, the summarizer and the judge.

The benchmark: two instructions imported from JSONL (so they are finished, with active constraints),
each constraint asking for one marker word (``copper``, ``lantern``, ``meadow``). The scripted model
answers by the prompt it gets: the summarizer's (this project's ``summarize`` prompt) with SUMMARY,
the judge's with Yes (and the sentence holding it) when the TEXT holds the constraint's marker word and
No otherwise, in each judging mode's form (``judge_lines``: one line a constraint; ``judge_single``:
JSON; ``judge_yes_no``: one word, with its token's log-probabilities, P(Yes) 0.9 or 0.2), and anything
else (the instruction) with RESPONSE. So the
verdicts, and Org, Core and superficial, follow from which words each text holds:
  q1 (copper, lantern, meadow): the response holds all three, its summary copper alone:
     Org 1, Core 1/3, superficial 2/3.
  q2 (copper, harbour): the response holds copper alone, so does its summary: Org 1/2, Core 1/2,
     superficial 0.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from pipeline.importing.common import ImportOptions
from pipeline.importing.importer import import_file
from pipeline.store.database import Store
from tests.support.import_files import write_jsonl

MARKERS = {"q1": ["copper", "lantern", "meadow"], "q2": ["copper", "harbour"]}
EXPECTED = {"q1": {"org": 1.0, "core": 1 / 3, "superficial": 2 / 3},
            "q2": {"org": 0.5, "core": 0.5, "superficial": 0.0}}
RESPONSE = {
    "q1": ("The old workshop stood at the end of the lane, and every morning the smith polished a copper "
           "kettle until it shone. A brass lantern hung above the door and swung in the wind off the hills. "
           "Beyond the fence a wide meadow ran down to the river, green in spring and gold by August. "
           "Children crossed it on their way to school and stopped to watch the sparks fly from the forge. "
           "The smith never said much, but he waved to each of them and kept the fire burning all day."),
    "q2": ("The village kept a copper bell in the square, and the keeper rang it at noon so the farmers "
           "in the fields would know the hour. People came in from the lanes to buy bread and talk about "
           "the weather. In winter the bell sounded thin and cold, in summer warm and slow. Nobody "
           "remembered who had cast it, but everyone agreed that the square would feel empty without it "
           "and the days would run into each other with no noon to divide them."),
}
SUMMARY = {
    "q1": "A smith polishes a copper kettle each morning while children stop to watch the forge.",
    "q2": "A village rings its copper bell at noon so farmers in the fields know the hour.",
}


def benchmark_lines(ids: tuple[str, ...] = ("q1", "q2")) -> list[dict[str, Any]]:
    return [{"id": key, "instruction": f"Write a short piece about {key}.",
             "constraints": [f"Mention the word {word} in the text." for word in MARKERS[key]],
             "condition": "common+eval", "domain": "blog"} for key in ids]


def make_benchmark(store: Store, tmp_path: Path, ids: tuple[str, ...] = ("q1", "q2")) -> dict[str, int]:
    """The instructions in ``store``: their JSONL id -> the store's instruction id."""
    path = write_jsonl(tmp_path / "bench.jsonl", benchmark_lines(ids))
    import_file(store, ImportOptions("jsonl", path, name="bench"))
    rows = store.query("SELECT id, source_id FROM instructions ORDER BY id")
    return {r["source_id"]: r["id"] for r in rows}


_CONSTRAINT = re.compile(r"^(\d+)\. Mention the word (\w+) in the text\.$", re.MULTILINE)


def _block(prompt: str, name: str) -> str:
    found = re.search(rf"<<<{name}\n(.*?)\n{name}>>>", prompt, re.DOTALL)
    return found.group(1) if found else ""


def _word(constraint: str) -> str:
    found = re.search(r"Mention the word (\w+)", constraint)
    return found.group(1) if found else ""


def _sentence_with(text: str, word: str) -> str | None:
    return next((s for s in re.split(r"(?<=\.)\s+", text) if word and word in s), None)


def yes_no_answer(prompt: str) -> bool | None:
    """The yes_no judge's answer (``judge_yes_no``: TEXT first, INSTRUCTION last), None for another prompt."""
    if "Answer with one word: Yes or No" not in prompt:
        return None
    text = prompt.split("TEXT:\n", 1)[1].split("\n\nDoes the TEXT", 1)[0]
    return _sentence_with(text, _word(prompt.rsplit("INSTRUCTION: ", 1)[1])) is not None


def scripted_reply(prompt: str) -> str:
    """The reply to one prompt (its messages' contents joined), as the module docstring says."""
    answer = yes_no_answer(prompt)
    if answer is not None:
        return "Yes" if answer else "No"
    if "whether the TEXT satisfies one CONSTRAINT" in prompt:  # judge_single: JSON
        sentence = _sentence_with(_block(prompt, "TEXT"), _word(_block(prompt, "CONSTRAINT")))
        return json.dumps({"verdict": "yes", "quote": sentence, "reason": ""} if sentence
                          else {"verdict": "no", "quote": "", "reason": "not mentioned"})
    if "You summarise texts" in prompt:
        text = _block(prompt, "TEXT")
        key = "q1" if "lantern" in text else "q2"
        return SUMMARY[key]
    if "strict grader" in prompt:
        text = _block(prompt, "TEXT")
        lines = []
        for number, word in _CONSTRAINT.findall(_block(prompt, "CONSTRAINTS")):
            sentence = _sentence_with(text, word)
            lines.append(f'{number}. Yes - "{sentence}"' if sentence else f"{number}. No - not mentioned")
        return "\n".join(lines)
    key = "q1" if "about q1" in prompt else "q2"
    return RESPONSE[key]


def mock_outputs(messages: list[Any], tools: Any, tool_choice: Any, config: Any) -> Any:
    """mockllm/model's ``custom_outputs`` callable: the scripted reply as a ModelOutput."""
    from inspect_ai.model import Logprob, Logprobs, ModelOutput, ModelUsage, TopLogprob

    prompt = "\n".join(m.text for m in messages)
    output = ModelOutput.from_content(model="mockllm/model", content=scripted_reply(prompt))
    answer = yes_no_answer(prompt)
    if answer is not None and config.logprobs:  # the answer token's alternatives: P(Yes) 0.9 or 0.2
        p_yes = 0.9 if answer else 0.2
        top = [TopLogprob(token="Yes", logprob=math.log(p_yes)),
               TopLogprob(token="No", logprob=math.log(1 - p_yes))]
        output.choices[0].logprobs = Logprobs(content=[Logprob(token=output.completion, logprob=math.log(
            p_yes if answer else 1 - p_yes), top_logprobs=top)])
    # Usage given: else mockllm counts tokens with tiktoken, whose encoding is downloaded (no network here).
    tokens_in, tokens_out = len(prompt.split()), len(output.completion.split())
    output.usage = ModelUsage(input_tokens=tokens_in, output_tokens=tokens_out,
                              total_tokens=tokens_in + tokens_out)
    return output
