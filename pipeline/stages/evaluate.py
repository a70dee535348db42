"""The evaluation stage: responses, summaries and verdicts (docs/method.md part 3, "Judging").

Three steps, each runnable alone (the app's step mode) and all three by ``run_evaluate``:
- ``run_respond``: a response per selected instruction and model under test (mode direct or edit);
- ``run_summarize``: a summary of each response at each ratio (default 0.25);
- ``run_judge``: every active constraint judged on each response and summary by every judge.

A unit of work is one response, one summary, or one (text, judge) judging; each is committed
as it finishes and found again on a re-run, so a killed run resumes without paying twice.
Units run through pipeline.stages.units (the runner build and naturalness use too) under its
``RECORD_AND_CONTINUE`` policy: a unit that fails (the endpoint gave up, a reply that stayed
unusable) is logged and counted, and the others go on; only a string of endpoint failures in a
row (a dead endpoint, a wrong key) stops the step. ``rejudge`` skips the first two steps: a new
judge, or a changed judge prompt (its hash is part of each verdict's key), re-scores stored
texts without regenerating them.

Judging is checked, not trusted: a judge whose every verdict on ``MAX_UNUSABLE_IN_A_ROW``
texts in a row is missing (its replies could not be parsed) is stopped alone, whatever the
concurrency (pipeline.stages.units.StrikeGate: until it has given one usable text it has no more
texts in flight than it would take to stop it); the other judges finish, and then ``JudgeStopped``
is raised, showing one raw reply and carrying what was done (its coverage too). After judging, the
coverage of each group judged (pipeline.analysis.coverage) is compared with ``min_coverage``: the
CLI exits non-zero when a group is under it.

Config, ``[evaluate]``: ``ratios`` (default [0.25]), ``judging`` (one of core.definitions.JUDGING_MODES for
every judge; unset, each judge's own ``judging``), ``mode`` ("direct" or "edit"), ``response_words`` (500),
``summary_slack`` (0.5: a summary outside 0.5x-1.5x of its target is asked again once, then fails;
false: any length),
``min_coverage`` (0.95).
Roles: ``models_under_test``, ``judges``, ``summarizer``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pipeline.analysis.coverage import MIN_COVERAGE, Coverage, GroupKey, group_coverage, low_groups
from pipeline.core.config import Config
from pipeline.core.definitions import same_ratio
from pipeline.core.errors import StageError, UnusableEndpointError
from pipeline.core.progress import ProgressHook, StopFlag, no_progress
from pipeline.llm.client import LLMClient
from pipeline.stages.generation import respond, summarize
from pipeline.stages.judging import JudgeSummary, judge_generation, judge_generation_pending, judging_mode_of
from pipeline.stages.settings import EvaluateSettings, checked, section
from pipeline.stages.units import (
    RECORD_AND_CONTINUE,
    Budget,
    Failure,
    RunUsage,
    StageSummary,
    StrikeGate,
    Unit,
    run_units,
)
from pipeline.store.constraints import active_constraints
from pipeline.store.coverage import selected_texts
from pipeline.store.database import Store
from pipeline.store.generations import (
    StoredResponse,
    StoredSummary,
    achieved_ratio,
    responses_to,
    summaries_of,
)
from pipeline.store.imports import imported_models
from pipeline.store.instructions import any_instruction_with, finished_instruction_ids, instruction_values
from pipeline.store.scores import refresh_scores
from pipeline.store.verdicts import yes_count

# Texts in a row on which a judge gave no usable verdict at all: then its replies are junk (a
# wrong model, a proxy's error page with 200 OK) and that judge stops. Three: one bad text is
# chance, three in a row with repair rounds between is the endpoint.
MAX_UNUSABLE_IN_A_ROW = 3
MAX_PARALLEL = 32


@dataclass
class EvaluateOptions:
    """What to evaluate. ``None`` means: the config's default (roles and [evaluate])."""

    build_run: str | None = None
    models: list[str] | None = None
    mode: str | None = None  # direct | edit
    ratios: list[float] | None = None
    judges: list[str] | None = None
    judging: str | None = None  # batched | per_constraint
    conditions: list[str] | None = None
    domain: str | None = None
    instruction_ids: list[int] | None = None
    rejudge: bool = False  # judge stored texts only: no new responses or summaries
    response_words: int | None = None
    parallel: int | None = None  # units in flight at once (the client limits each endpoint)
    # Models whose responses were imported (pipeline.importing.importer.imported_models): named like
    # endpoints in ``models``, but their responses are only summarised and judged, never written.
    imported_models: list[str] | None = None
    # The embedder of the constraint's echo (pipeline.stages.echo): None: [build] embedder, else the default.
    embedder: str | None = None


@dataclass(frozen=True)
class Plan:
    """Options resolved against the config and checked."""

    build_run: str | None
    models: tuple[str, ...] | None  # None: every model with stored responses (rejudge)
    mode: str | None  # None: both modes (rejudge)
    ratios: tuple[float, ...] | None  # None: every stored ratio (rejudge)
    judges: tuple[str, ...]
    judging: str | None  # the run's judging mode for every judge; None: each judge's own (Endpoint.judging)
    summarizer: str
    conditions: tuple[str, ...] | None
    domain: str | None
    instruction_ids: tuple[int, ...] | None
    rejudge: bool
    response_words: int
    parallel: int
    summary_slack: float | None  # None: never ask a long summary to shorten
    min_coverage: float = MIN_COVERAGE  # a judged group under it fails the evaluation
    imported: tuple[str, ...] = ()  # models of imported responses: no endpoint, never asked to respond
    judging_modes: tuple[tuple[str, str], ...] = ()  # (judge, the mode it judges in)

    def mode_of(self, judge: str) -> str:
        """How ``judge`` judges in this run."""
        return dict(self.judging_modes).get(judge) or self.judging or "batched"


def resolve(config: Config, options: EvaluateOptions) -> Plan:
    """Fill defaults from the config and check every name, mode and ratio."""
    rejudge = options.rejudge
    imported = tuple(options.imported_models or ())
    # Imported responses are evaluated by default, beside the models under test: they were
    # brought in to be summarised and judged like the project's own.
    models = options.models or (None if rejudge
                                else list(dict.fromkeys([*config.roles.models_under_test, *imported])))
    judges = options.judges or list(config.roles.judges)
    for name in [*(m for m in models or [] if m not in imported), *judges, config.roles.summarizer]:
        config.endpoint(name)  # ConfigError naming the unknown endpoint
    file = section(config, "evaluate")
    mode = options.mode or (None if rejudge else file.mode)
    ratios = options.ratios or (None if rejudge else list(file.ratios))
    judging = options.judging or file.judging
    words = options.response_words or file.response_words
    slack, min_coverage = file.summary_slack, file.min_coverage
    # The command line's values against the same declarations as the file's (pipeline.stages.settings).
    given = {"mode": mode, "ratios": ratios, "judging": judging, "response_words": words}
    checked(EvaluateSettings, {k: v for k, v in given.items() if v is not None},
            f"{config.path or 'config'} [evaluate] / command line")
    names = {m for m in models or config.roles.models_under_test if m not in imported} | set(judges) \
        | {config.roles.summarizer}
    parallel = options.parallel or min(MAX_PARALLEL, sum(config.endpoint(n).concurrency for n in names))
    return Plan(
        build_run=options.build_run,
        models=tuple(dict.fromkeys(models)) if models else None,
        mode=mode,
        ratios=tuple(sorted({float(r) for r in ratios}, reverse=True)) if ratios else None,
        judges=tuple(dict.fromkeys(judges)),
        judging=judging,
        judging_modes=tuple((j, judging_mode_of(config, j, judging)) for j in dict.fromkeys(judges)),
        summarizer=config.roles.summarizer,
        conditions=tuple(options.conditions) if options.conditions else None,
        domain=options.domain,
        instruction_ids=tuple(options.instruction_ids) if options.instruction_ids else None,
        rejudge=rejudge,
        response_words=words,
        parallel=max(1, parallel),
        summary_slack=None if slack is None else float(slack),
        min_coverage=float(min_coverage),
        imported=imported,
    )


# -- summaries of what happened ---------------------------------------------------------------


@dataclass
class EvaluateSummary:
    stages: dict[str, StageSummary] = field(default_factory=dict)
    run_id: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    halted: bool = False  # later steps were not run (stop flag or unit budget)
    min_coverage: float = MIN_COVERAGE  # the plan's, for whoever prints the result
    # batch mode: pipeline.llm.batch.Submitted, sent at the end
    batches: list[Any] = field(default_factory=list)

    @property
    def deferred(self) -> int:
        return sum(s.deferred for s in self.stages.values())

    @property
    def failed(self) -> int:
        return sum(s.failed for s in self.stages.values())

    @property
    def stopped(self) -> bool:
        return self.halted or any(s.stopped for s in self.stages.values())

    @property
    def failures(self) -> list[Failure]:
        return [f for s in self.stages.values() for f in s.failures]

    @property
    def coverage(self) -> dict[GroupKey, Coverage]:
        judge = self.stages.get("judge")
        return judge.coverage if judge is not None else {}

    def low_coverage(self, threshold: float = MIN_COVERAGE) -> list[tuple[GroupKey, Coverage]]:
        """Groups judged under ``threshold``; nothing when judging stopped early or waits on a
        batch (not finished)."""
        return [] if self.stopped or self.deferred else low_groups(self.coverage, threshold)


class JudgeStopped(UnusableEndpointError):
    """A judge stopped for unusable replies, raised once the other judges finished. ``result`` is
    what the evaluation did (run_evaluate fills it in), so the CLI can still show it and its coverage."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.judge_summary: StageSummary | None = None
        self.result: EvaluateSummary | None = None


# -- selection ----------------------------------------------------------------------------------


def select_instructions(store: Store, plan: Plan) -> list[int]:
    """Finished instructions matching the filters, in id order."""
    return finished_instruction_ids(store, run_id=plan.build_run, conditions=plan.conditions,
                                    domain=plan.domain,
                                    ids=plan.instruction_ids)


def check_selection(store: Store, plan: Plan) -> None:
    """A filter that matches nothing is a mistake (a typo), not an order to do nothing: raise
    StageError naming it. Each filter is checked alone first, so the message names the one that
    is wrong; then together. Without filters an empty selection is left alone."""
    checks: list[tuple[str, str, Any]] = []  # (the filter as given, instruction column, value)
    if plan.build_run:
        checks.append((f"--run {plan.build_run}", "run_id", plan.build_run))
    if plan.domain:
        checks.append((f"--domain {plan.domain}", "domain", plan.domain))
    for condition in plan.conditions or ():
        checks.append((f"--conditions: {condition}", "condition", condition))
    for iid in plan.instruction_ids or ():
        checks.append((f"--instructions: {iid}", "id", iid))
    if not checks:
        return
    for name, column, value in checks:
        if not any_instruction_with(store, column, value):
            raise StageError(f"{name} matches no instruction in "
                             f"{store.path}{_present(store, name)}; nothing was run")
    if not select_instructions(store, plan):
        given = ", ".join(name for name, _, _ in checks)
        raise StageError(f"no finished instruction matches all of {given} together in "
                         f"{store.path} (each matches "
                         "something alone; unfinished instructions are not evaluated); nothing was run")


def _present(store: Store, name: str) -> str:
    """What the filter could have named: ' (build runs: a, b)'."""
    column = {"--run": "run_id", "--domain": "domain",
              "--conditions": "condition"}.get(name.split()[0].rstrip(":"))
    if column is None:
        return ""
    values = instruction_values(store, column, limit=12)
    label = {"run_id": "build runs", "domain": "domains", "condition": "conditions"}[column]
    return f" ({label} here: {', '.join(values)})" if values else " (it has no instructions yet)"


def _stored_responses(store: Store, plan: Plan, instructions: Sequence[int]) -> list[StoredResponse]:
    return responses_to(store, instructions, plan.models, plan.mode)


def _stored_summaries(store: Store, plan: Plan, response_ids: Sequence[int]) -> list[StoredSummary]:
    rows = summaries_of(store, response_ids)
    if plan.ratios is None:
        return rows
    return [r for r in rows if any(same_ratio(r.ratio, x) for x in plan.ratios)
            and r.model == plan.summarizer]


# -- the three steps --------------------------------------------------------------------------


async def run_respond(store: Store, config: Config, client: LLMClient, options: EvaluateOptions, *,
                      progress: ProgressHook = no_progress, stop: StopFlag | None = None,
                      max_units: int | None = None, budget: Budget | None = None) -> StageSummary:
    """A response per selected instruction and model under test."""
    plan = resolve(config, options)
    summary = StageSummary("respond")
    if plan.rejudge:
        return summary
    assert plan.models is not None and plan.mode is not None
    mode = plan.mode
    instructions = select_instructions(store, plan)
    stored = {(r.instruction_id, r.model) for r in _stored_responses(store, plan, instructions)}
    units = []
    for iid in instructions:
        for model in plan.models:
            if (iid, model) in stored:
                summary.skipped += 1
                continue
            if model in plan.imported:
                continue  # written elsewhere: only the instructions it answered have a response

            async def work(iid: int = iid, model: str = model) -> str:
                gid, _ = await respond(store, client, iid, model, mode, words=plan.response_words)
                return f"instruction {iid}: {model} responded ({mode}), generation {gid}"

            units.append(Unit(f"instruction {iid}, model {model} ({mode})", work))
    return await run_units(summary, units, policy=RECORD_AND_CONTINUE, parallel=plan.parallel,
                           progress=progress,
                           stop=stop, budget=budget or Budget(max_units),
                           usage=RunUsage(store, client.run_id, client.usage))


async def run_summarize(store: Store, config: Config, client: LLMClient, options: EvaluateOptions, *,
                        progress: ProgressHook = no_progress, stop: StopFlag | None = None,
                        max_units: int | None = None, budget: Budget | None = None) -> StageSummary:
    """A summary of each stored response of the selection at each ratio."""
    plan = resolve(config, options)
    summary = StageSummary("summarize")
    if plan.rejudge:
        return summary
    assert plan.ratios is not None
    responses = _stored_responses(store, plan, select_instructions(store, plan))
    have = {(r.parent_id, r.ratio) for r in _stored_summaries(store, plan, [r.id for r in responses])}
    units = []
    for resp in responses:
        for ratio in plan.ratios:
            if (resp.id, ratio) in have:
                summary.skipped += 1
                continue

            async def work(resp: StoredResponse = resp, ratio: float = ratio) -> str:
                gid, _ = await summarize(store, client, resp.id, ratio, plan.summarizer,
                                         slack=plan.summary_slack)
                achieved = achieved_ratio(store, gid)
                return (f"instruction {resp.instruction_id}: {resp.model}'s response summarised at {ratio:g}"
                        f" (achieved {achieved:.2f})")

            units.append(Unit(f"response {resp.id} (instruction {resp.instruction_id}), ratio {ratio:g}",
                              work))
    return await run_units(summary, units, policy=RECORD_AND_CONTINUE, parallel=plan.parallel,
                           progress=progress,
                           stop=stop, budget=budget or Budget(max_units),
                           usage=RunUsage(store, client.run_id, client.usage))


async def run_judge(store: Store, config: Config, client: LLMClient, options: EvaluateOptions, *,
                    progress: ProgressHook = no_progress, stop: StopFlag | None = None,
                    max_units: int | None = None, budget: Budget | None = None) -> StageSummary:
    """Every active constraint judged on each response and summary of the selection by every judge.
    Verdicts already stored for the same judge, mode and judge prompt are skipped."""
    plan = resolve(config, options)
    summary = StageSummary("judge")
    responses = _stored_responses(store, plan, select_instructions(store, plan))
    summaries = _stored_summaries(store, plan, [r.id for r in responses])
    # Each response is followed by its own summaries: the same constraints open both judge prompts
    # (judge_lines puts them before the text), so a llama.cpp server reads them once, from its
    # cached prefix, for the summary.
    by_response: dict[int, list[StoredSummary]] = {}
    for s in summaries:
        by_response.setdefault(s.parent_id, []).append(s)
    texts = []
    for r in responses:
        texts.append((r.id, r.instruction_id, f"response {r.id} ({r.model})"))
        texts += [(s.id, s.instruction_id, f"summary {s.id} at {s.ratio:g} of response {s.parent_id}")
                  for s in by_response.get(r.id, [])]
    constraints_of: dict[int, list[tuple[int, str]]] = {}
    gate = StrikeGate(MAX_UNUSABLE_IN_A_ROW)  # a judge answering junk stops alone
    units = []
    for gid, iid, what in texts:
        if iid not in constraints_of:
            constraints_of[iid] = [(c.id, c.text) for c in active_constraints(store, iid)]
        constraints = constraints_of[iid]
        for judge in plan.judges:
            if not judge_generation_pending(store, gid, [c for c, _ in constraints], config.endpoint(judge),
                                            plan.mode_of(judge)):
                summary.skipped += 1
                continue

            async def work(gid: int = gid, judge: str = judge, what: str = what,
                           constraints: list[tuple[int, str]] = constraints) -> str:
                result = await judge_generation(store, client, judge, gid, constraints,
                                                mode=plan.mode_of(judge))
                refresh_scores(store)  # the report's totals stay current as verdicts arrive
                _check_usable(gate, judge, result)
                yes = yes_count(store, gid, judge, plan.mode_of(judge))
                extra = f", {result.unanswered} missing (no usable verdict)" if result.unanswered else ""
                return f"{what}: {judge} judged {result.judged} constraint(s), {yes} satisfied{extra}"

            units.append(Unit(f"{what}, judge {judge}", work, group=judge))
    for name in dict.fromkeys(u.group for u in units if u.group):
        if plan.mode_of(name) == "yes_no":
            await client.check_logprobs(name)  # an endpoint without them is said now, not mid-run
    try:
        await run_units(summary, units, policy=RECORD_AND_CONTINUE, parallel=plan.parallel, progress=progress,
                        stop=stop, budget=budget or Budget(max_units),
                        usage=RunUsage(store, client.run_id, client.usage),
                        gate=gate)
    except JudgeStopped as exc:
        exc.judge_summary = summary  # the other judges finished: what they did goes with the error
        raise
    finally:
        summary.coverage = judged_coverage(store, [gid for gid, _, _ in texts],
                                           [(j, plan.mode_of(j)) for j in plan.judges])
    return summary


def _check_usable(gate: StrikeGate, judge: str, result: JudgeSummary) -> None:
    """Counts a text on which the judge gave no usable verdict at all as a strike against it;
    raises JudgeStopped at the strike that stops it."""
    if result.judged and not result.all_missing:
        gate.clean(judge)
        return
    if not result.all_missing or not gate.strike(judge):
        return
    raw = (result.unusable_reply or "").strip()
    shown = raw if len(raw) <= 400 else raw[:400] + f"... ({len(raw)} characters)"
    raise JudgeStopped(
        f"judge '{judge}': no usable verdict on {gate.strikes_in_a_row(judge)} texts in a "
        "row (each asked again "
        f"with a repair round), so that judge stopped and any other judge went on; its verdicts there are "
        f"stored as missing, not No. Check that endpoint's model and output format. One raw reply: {shown!r}")


def judged_coverage(store: Store, generation_ids: Sequence[int], raters: Sequence[tuple[str, str]]
                    ) -> dict[GroupKey, Coverage]:
    """Coverage per group of these texts by these raters (judge, judging mode), as the report
    computes it (pipeline.analysis.coverage over the kept per-text totals)."""
    if not generation_ids:
        return {}
    with selected_texts(store, generation_ids) as texts:
        return group_coverage(store, texts, list(raters))


async def run_evaluate(store: Store, config: Config, client: LLMClient, options: EvaluateOptions, *,
                       progress: ProgressHook = no_progress, stop: StopFlag | None = None,
                       max_units: int | None = None) -> EvaluateSummary:
    """Respond, summarise, judge (or only judge, with ``rejudge``). Stops early on the stop flag
    or after ``max_units`` units across the three steps."""
    options = with_imported_models(store, options)
    resolve(config, options)  # fail on a bad option before any call
    budget = Budget(max_units)
    result = EvaluateSummary(run_id=client.run_id)
    steps = (("respond", run_respond), ("summarize", run_summarize), ("judge", run_judge))
    for name, step in steps:
        if options.rejudge and name != "judge":
            continue
        if (stop is not None and stop.stopped) or budget.exhausted:
            result.halted = True
            break
        try:
            result.stages[name] = await step(store, config, client, options, progress=progress, stop=stop,
                                             budget=budget)
        except JudgeStopped as exc:
            if exc.judge_summary is not None:
                result.stages[name] = exc.judge_summary
            result.usage = client.usage.as_dict()
            exc.result = result
            raise
    if not result.halted and not (stop is not None and stop.stopped):
        from pipeline.stages.copy_evidence import compute_copy_evidence
        from pipeline.stages.echo import compute_echo

        # The suspicion ranking's copy evidence for the new responses (word n-grams: seconds), and the
        # constraint's echo on each response and summary (an embedder: about 30 sentences a response).
        ids = select_instructions(store, resolve(config, options))
        compute_copy_evidence(store, instruction_ids=ids, progress=progress, stop=stop)
        embedder = echo_embedder(config, options)
        if embedder is not None:
            compute_echo(store, embedder, instruction_ids=ids, progress=progress, stop=stop)
    result.usage = client.usage.as_dict()
    return result


async def evaluate(store: Store, config: Config, options: EvaluateOptions, *,
                   progress: ProgressHook = no_progress,
                   stop: StopFlag | None = None, max_units: int | None = None,
                   on_event: Callable[[str, str], None] | None = None, name: str = "",
                   batch: bool = False, pricing: Any = None) -> EvaluateSummary:
    """``run_evaluate`` inside a run record (kind 'evaluate') with its own client: the CLI's entry.

    ``batch``: first collect finished batches, then run with calls nobody answered yet left to
    a batch, and send those as provider batches at the end (pipeline.llm.batch); run it again
    once they are done to go on."""
    from pipeline.stages.runs import create_run, open_client, recording

    options = with_imported_models(store, options)
    plan = resolve(config, options)
    check_selection(store, plan)  # before the run row: a typo leaves no trace
    endpoints = list(plan.judges) if plan.rejudge else [
        *(m for m in plan.models or () if m not in plan.imported), plan.summarizer, *plan.judges]
    if batch:
        from pipeline.llm.batch import collect

        await collect(store, config, on_event=lambda m: on_event("batch", m) if on_event else None)
    run_id = create_run(store, "evaluate", config, name=name, options=_public_options(options))
    with recording(store, run_id) as end:
        # The units add their usage to the run as they finish (pipeline.stages.units.RunUsage).
        async with open_client(config, store, run_id=run_id, on_event=on_event, endpoints=endpoints,
                               batch=batch, pricing=pricing) as client:
            try:
                result = await run_evaluate(store, config, client, options, progress=progress, stop=stop,
                                            max_units=max_units)
            except JudgeStopped as exc:
                if exc.result is not None:
                    exc.result.run_id, exc.result.min_coverage = run_id, plan.min_coverage
                raise
        if batch:
            from pipeline.llm.batch import submit_stage

            result.batches = await submit_stage(store, config, on_event)
        result.run_id = run_id
        result.min_coverage = plan.min_coverage
        errors = []
        if result.failures:
            lines = [f"{f.stage}: {f.unit}: {f.error}" for f in result.failures[:50]]
            more = len(result.failures) - len(lines)
            errors.append(f"{len(result.failures)} unit(s) failed (run again to retry them):\n"
                          + "\n".join(lines)
                          + (f"\n... and {more} more" if more > 0 else ""))
        low = result.low_coverage(plan.min_coverage)
        if low:
            errors.append(coverage_message(low, plan.min_coverage))
        end.status = "paused" if result.stopped or result.deferred else "failed" if low else "done"
        end.error = "\n".join(errors) or None
    return result


def echo_embedder(config: Config, options: EvaluateOptions) -> Any:
    """The embedder of the constraint's echo: --embedder, else [build] embedder, else the default;
    None for lexical (no echo without vectors)."""
    from pipeline.stages.similarity import resolve_embedder

    where = "--embedder" if options.embedder else f"{config.path or 'config'} [build] embedder"
    return resolve_embedder(options.embedder or section(config, "build").embedder, where)


def with_imported_models(store: Store, options: EvaluateOptions) -> EvaluateOptions:
    """The options knowing which models' responses were imported (unless the caller said)."""
    if options.imported_models is not None:
        return options
    return replace(options, imported_models=imported_models(store))


def coverage_message(low: Sequence[tuple[GroupKey, Coverage]], threshold: float) -> str:
    """The groups judged under the minimum coverage, one line each."""
    from pipeline.analysis.coverage import describe

    lines = [f"  {describe(key)}: {c.judged} of {c.expected} verdicts given ({100 * c.rate:.1f}%)"
             for key, c in low]
    return (f"judging coverage under {100 * threshold:g}% in {len(low)} group(s) (their "
            "missing verdicts are left "
            "out of every rate; run again to ask the judges again, or fix the judge endpoint):\n"
            + "\n".join(lines))


def _public_options(options: EvaluateOptions) -> dict[str, Any]:
    return {k: v for k, v in replace(options).__dict__.items() if v not in (None, False)}
