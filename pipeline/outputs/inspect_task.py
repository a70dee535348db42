"""The inspect_ai task of an exported benchmark (`unspecific export --format inspect`): the folder's
task.py calls ``unspecific_task`` on its own folder.

Samples are the instructions as a model under test sees them in ``evaluate`` (the ``respond_direct``
prompt, pipeline.stages.generation.direct_messages); their ids are the store's instruction ids, and
their metadata holds the constraints (id, position, text). The scorer (``core_satisfaction``) does
what ``evaluate`` does after the response, with this project's own definitions, imported, not copied:
the summary at the benchmark's ratio (``summarize``, then ``summarize_shorten`` when the first is the
wrong length; the summary contract of pipeline.stages.generation), the judging modes of
pipeline.stages.judging (their prompts, reply parsers and follow-up rounds) on the response and on the
summary, and the pass rule of pipeline.analysis.harness.sample_scores. The section-by-section summary
``evaluate`` falls back on for a small local model is not done here: a summary still the wrong length
after both prompts is kept when it is near enough, as ``evaluate`` keeps one (nearest_within).

The judge and the summarizer are inspect model roles, ``grader`` and ``summarizer``
(``--model-role grader=openai/gpt-4o``); a role not given is the model under evaluation, said once as
a warning (a model judging itself favours itself). Each score holds Org, Core and superficial (the
task's metrics: Org and Core mean and stderr over samples; superficial pooled as the report pools it,
flipped over passed on the response summed over samples, with a delta-method stderr) and, in its
metadata, the summary and each constraint's two verdicts (``unspecific import inspect`` brings them
back as verdicts of the grader's model).

May import inspect_ai (only this module and the exporter's task.py do) and the pipeline's rooms below.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspect_ai import Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
    ModelOutput,
    get_model,
    model_roles,
)
from inspect_ai.scorer import (
    Metric,
    SampleScore,
    Score,
    Scorer,
    Target,
    mean,
    metric,
    scorer,
    stderr,
)
from inspect_ai.solver import TaskState, generate

from pipeline.analysis.harness import DATASET_FILE, HARNESS_KEY, SCORER_NAME, pooled_share, sample_scores
from pipeline.core.definitions import DEFAULT_RATIO, DEFAULT_YES_THRESHOLD, JUDGING_MODES
from pipeline.llm.prompts import Template
from pipeline.llm.structured import ReplyError, repair_message
from pipeline.stages import judging
from pipeline.stages.generation import (
    NearestSummary,
    nearest_within,
    response_budget,
    summary_budget,
    summary_check,
    summary_messages,
)

log = logging.getLogger(__name__)
GRADER, SUMMARIZER = "grader", "summarizer"
JUDGE_FORMATS = ("lines", "json")
_warned: set[str] = set()


def unspecific_task(folder: Path, *, judging_mode: str = "batched", judge_format: str = "lines",
                    ratio: float | None = None, threshold: float = DEFAULT_YES_THRESHOLD) -> Task:
    """The task of an exported folder: its samples (DATASET_FILE) and the Core scorer."""
    spec = json.loads((folder / "benchmark.json").read_text(encoding="utf-8"))
    if judging_mode not in JUDGING_MODES:
        raise ValueError(f"judging_mode: one of {', '.join(JUDGING_MODES)}, got {judging_mode!r}")
    if judge_format not in JUDGE_FORMATS:
        raise ValueError(f"judge_format: one of {', '.join(JUDGE_FORMATS)}, got {judge_format!r}")
    ratio = float(spec["ratio"] if ratio is None else ratio)
    if not 0 < ratio < 1:
        raise ValueError(f"ratio: between 0 and 1, got {ratio}")
    return Task(
        dataset=MemoryDataset(_samples(folder / DATASET_FILE), name=spec.get("name")),
        solver=generate(),
        scorer=core_satisfaction(judging_mode=judging_mode, judge_format=judge_format, ratio=ratio,
                                 threshold=threshold),
        # The response as evaluate asks for it: greedy, with room for about a third more words.
        config=GenerateConfig(temperature=0.0, max_tokens=response_budget(int(spec["words"]))),
        metadata={HARNESS_KEY: spec},
    )


def _samples(path: Path) -> list[Sample]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            out.append(Sample(id=record["id"], input=chat(record["input"]), metadata=record["metadata"]))
    return out


def chat(messages: Sequence[dict[str, str]]) -> list[ChatMessage]:
    """This project's messages (role, content) as inspect_ai's."""
    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    return [kinds[m["role"]](content=m["content"]) for m in messages]


def role_model(role: str) -> Model:
    """The model bound to ``role``, else the model under evaluation, with a warning said once."""
    if role not in model_roles():
        if role not in _warned:
            _warned.add(role)
            log.warning("no --model-role %s=...: the model under evaluation is its own %s (a model "
                        "favours its own text; give another model)", role, role)
        return get_model()
    return get_model(role=role)


def model_name(model: Model) -> str:
    """The model as inspect names it: provider/model."""
    return str(model)


@metric
def pooled() -> Metric:
    """The superficial share as the report pools it: flipped over passed on the response, summed over
    samples (pipeline.analysis.harness.pooled_share), not a mean of each sample's share."""

    def compute(scores: list[SampleScore]) -> float:
        return _pooled(scores)[0]

    return compute


@metric
def pooled_stderr() -> Metric:
    """The pooled share's standard error (delta method over samples)."""

    def compute(scores: list[SampleScore]) -> float:
        return _pooled(scores)[1]

    return compute


def _pooled(scores: list[SampleScore]) -> tuple[float, float]:
    counts = [(s.score.metadata or {}).get("counts") or {} for s in scores]
    return pooled_share([c.get("flipped", 0) for c in counts], [c.get("passed_full", 0) for c in counts])


@scorer(metrics={"org": [mean(), stderr()], "core": [mean(), stderr()],
                 "superficial": [pooled(), pooled_stderr()]})
def core_satisfaction(judging_mode: str = "batched", judge_format: str = "lines",
                      ratio: float = DEFAULT_RATIO, threshold: float = DEFAULT_YES_THRESHOLD) -> Scorer:
    """Org, Core and superficial of each response, each constraint's verdicts in the metadata."""

    async def score(state: TaskState, target: Target) -> Score:
        constraints = state.metadata["constraints"]
        texts = [c["text"] for c in constraints]
        response = state.output.completion
        grader, summarizer = role_model(GRADER), role_model(SUMMARIZER)
        judge = _Judge(grader, judging_mode, judge_format, threshold)
        full = await judge.text(response, texts)
        summary = await summarize(summarizer, response, ratio) if response.strip() else None
        on_summary = await judge.text(summary, texts) if summary else [
            judging.judgement(i, None, "") for i in range(len(texts))]
        scores = sample_scores([j.verdict for j in full], [j.verdict for j in on_summary])
        return Score(
            value=scores.value(), answer=response,
            explanation=(f"{scores.judged} of {len(texts)} constraints judged on the response, "
                         f"{scores.judged_both} on both texts; {scores.flipped} passed on the response "
                         f"only (superficial)"),
            metadata={SCORER_NAME: SCORER_NAME, "counts": scores.counts(), "judge": model_name(grader),
                      "summarizer": model_name(summarizer), "judging_mode": judging_mode,
                      "prompt_hash": judge.prompt_hash, "ratio": ratio, "summary": summary,
                      "constraints": [{"id": c["id"], "position": c["position"],
                                       "response": _verdict(f), "summary": _verdict(s)}
                                      for c, f, s in zip(constraints, full, on_summary, strict=True)]})

    return score


def _verdict(j: judging.Judgement) -> dict[str, Any]:
    return {"verdict": None if j.verdict is None else ("yes" if j.verdict else "no"), "quote": j.quote,
            "reason": j.reason, "quote_found": j.quote_found, "p_yes": j.p_yes}


async def summarize(model: Model, text: str, ratio: float) -> str | None:
    """The summary of ``text`` at ``ratio`` by this project's prompts and contract: ``summarize``, then
    ``summarize_shorten``; the first kept, else the nearest refused for its length alone when it misses
    the band by no more than the band again (as ``evaluate`` keeps one), else None: no summary, so no
    Core for the sample (junk or a refusal is never a summary)."""
    nearest: NearestSummary | None = None
    for prompt in ("summarize", "summarize_shorten"):
        _, messages, target = summary_messages(text, ratio, prompt)
        nearest = nearest or NearestSummary(target)
        output = await model.generate(chat(messages), config=GenerateConfig(
            temperature=0.0, max_tokens=summary_budget(target)))
        try:
            return summary_check(text, target, nearest)(output.completion)
        except ReplyError:
            continue
    return nearest_within(nearest) if nearest else None


class _Judge:
    """One grader in one judging mode, asking through inspect_ai: the project's prompts and parsers
    (pipeline.stages.judging), one repair round for an unusable reply, as the project's client does."""

    def __init__(self, model: Model, mode: str, judge_format: str, threshold: float) -> None:
        self.model, self.mode, self.judge_format, self.threshold = model, mode, judge_format, threshold
        self.prompt_hash = judging.prompt_hash(mode, judge_format)

    async def text(self, text: str, constraints: list[str]) -> list[judging.Judgement]:
        if self.mode == "batched":
            return await judging.judge_batched_rounds(text, constraints, self.judge_format, self._ask_batch)
        if self.mode == "per_constraint":
            return [await self._single(text, c, i) for i, c in enumerate(constraints)]
        return [await self._yes_no(text, c, i) for i, c in enumerate(constraints)]

    async def _repaired(self, messages: list[dict[str, str]], parse: Any, schema: dict[str, Any] | None,
                        max_tokens: int) -> tuple[Any, str | None]:
        """(parsed reply, None), or (None, the last reply) when unusable after one repair round."""
        convo = list(messages)
        reply: str | None = None
        for _ in range(2):
            output = await self.model.generate(chat(convo), config=GenerateConfig(
                temperature=0.0, max_tokens=max_tokens))
            reply = output.completion
            try:
                return parse(reply), None
            except ValueError as exc:
                convo = list(messages) + [{"role": "assistant", "content": reply or "(unusable reply)"},
                                          {"role": "user", "content": repair_message(str(exc), schema)}]
        return None, reply

    async def _ask_batch(self, messages: list[dict[str, str]], template: Template,
                         n: int) -> judging.BatchAnswer:
        schema = None if self.judge_format == "lines" else judging.BATCH_SCHEMA
        items, raw = await self._repaired(messages, lambda t: judging.parse_batched_reply(t, n), schema,
                                          judging.batched_budget(n, self.judge_format))
        return judging.BatchAnswer(items, None, raw)

    async def _single(self, text: str, constraint: str, index: int) -> judging.Judgement:
        _, messages = judging.single_messages(text, constraint)
        item, raw = await self._repaired(messages, judging.parse_single_reply, judging.SINGLE_SCHEMA, 400)
        return judging.judgement(index, item, text, None, raw)

    async def _yes_no(self, text: str, constraint: str, index: int) -> judging.Judgement:
        _, messages = judging.yes_no_messages(text, constraint, self.judge_format)
        output = await self.model.generate(chat(messages), config=GenerateConfig(
            temperature=0.0, max_tokens=1, logprobs=True, top_logprobs=judging.TOP_LOGPROBS))
        top = _top_logprobs(output)
        p_yes = judging.yes_probability(top) if top else None
        if p_yes is not None:
            return judging.probability_judgement(index, p_yes, self.threshold, text, constraint, None)
        word = judging.written_verdict(output.completion)  # no probabilities: the word it wrote
        if word is None:
            return judging.judgement(index, None, text, None, output.completion)
        return judging.probability_judgement(index, float(word), self.threshold, text, constraint, None,
                                             read_word=True)


def _top_logprobs(output: ModelOutput) -> dict[str, float] | None:
    """The first token's alternatives (token -> log-probability), or None when none came back."""
    choice = output.choices[0] if output.choices else None
    if choice is None or choice.logprobs is None or not choice.logprobs.content:
        return None
    first = choice.logprobs.content[0]
    return {t.token: t.logprob for t in first.top_logprobs or []} or {first.token: first.logprob}
