"""A build: instructions for the chosen conditions (single | none | direct | eval) of each pair.

Three stages, each resumable and usable alone (the app's step mode):
- ``run_synthesize``: per pair, the single-article synthesis (from A) and the common synthesis
  (from A and B), done ONCE and copied into each common condition's instruction. The shared
  synthesis lives in the ``none`` instruction, or, when ``none`` is not built, in an
  instruction of condition ``common`` (status ``source``) that is never a condition itself.
- ``run_base``: per eval instruction, the constraint-blind base article (once per pair) and
  the base article's verdicts on every constraint.
- ``run_revise``: direct and eval revision with lineage, then for every instruction the
  quality flags (and, optionally, the LLM contradiction check); status ``done``.

Every unit commits as it finishes (and every LLM call is cached by the client), so a killed
build started again with the same run id repeats no paid call for stored work. Units run
through pipeline.stages.units (the runner evaluate and naturalness use too), concurrently up to the
generator endpoint's concurrency, under its ``FAIL_FAST`` policy: an unusable reply fails its
instruction, any other error stops the build. ``stop`` is checked before each unit starts and
``max_units`` bounds how many a call processes.

Instruction status: pending -> synthesized -> [base_judged ->] [revised ->] done, or failed
(with ``error``); a failed instruction is retried by the next build of the same run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from typing import Any

from pipeline.analysis.flags import flag_instruction
from pipeline.core.config import Config
from pipeline.core.definitions import GATE_ROUNDS
from pipeline.core.errors import BatchPending, ParseError, StageError
from pipeline.core.progress import ProgressEvent, ProgressHook, StopFlag, no_progress
from pipeline.llm.client import LLMClient, Usage, usage_scope
from pipeline.stages.contradictions import check_contradictions
from pipeline.stages.gate import GateFactory, log_gate
from pipeline.stages.judging import judging_mode_of
from pipeline.stages.pairing import pair_floor
from pipeline.stages.revision import judge_base, revise_direct, revise_eval, write_base_article
from pipeline.stages.runs import create_run, recording
from pipeline.stages.settings import BuildSettings, checked, section
from pipeline.stages.similarity import check_embedder_name, compute_similarities, resolve_embedder
from pipeline.stages.synthesis import (
    COMMON_CONDITIONS,
    COMMON_SOURCE,
    Synthesis,
    synthesize_common,
    synthesize_single,
)
from pipeline.stages.units import FAIL_FAST, Budget, RunUsage, StageSummary, Unit, run_units
from pipeline.store import constraints as constraint_rows
from pipeline.store import instructions as instruction_rows
from pipeline.store.articles import article_text_hash
from pipeline.store.database import Store, now
from pipeline.store.instructions import Instruction
from pipeline.store.ledgers import copy_ledger, put_ledger
from pipeline.store.pairs import Pair, pairs_of

STAGES = ("synthesize", "base", "revise")
# Statuses of an instruction whose constraints are in place.
_HAS_CONSTRAINTS = ("synthesized", "base_judged", "revised", "done", "source")


# The [build] settings BuildOptions takes, by its names (its n and words are n_instructions and
# article_words there), and their declared defaults (pipeline.stages.settings).
_TAKEN = ("domain", "n", "conditions", "n_constraints", "words", "rule", "contradictions", "embedder",
          "judging_mode", "repair_rounds", "generator", "base_judge", "gate", "allow_dissimilar")
_SETTING = {"n": "n_instructions", "words": "article_words"}
_DEFAULT = BuildSettings()


@dataclass
class BuildOptions:
    domain: str = _DEFAULT.domain
    n: int = _DEFAULT.n_instructions  # pairs (one instruction per pair and condition)
    conditions: tuple[str, ...] = _DEFAULT.conditions
    n_constraints: int = _DEFAULT.n_constraints
    words: int = _DEFAULT.article_words  # base article length
    rule: str = _DEFAULT.rule  # which pairing to build on
    run_id: str | None = None
    contradictions: bool = _DEFAULT.contradictions
    # Constraint-reference similarity and the specificity-leak flag (pipeline.stages.similarity):
    # mpnet, minilm, hash, lexical/none (no embedding), a model folder. None: the default (mpnet).
    embedder: str | None = None
    # how the base article is judged; None: the base judge's own (Endpoint.judging)
    judging_mode: str | None = None
    # Rounds asking for exactly the missing items when a reply is short; then a recorded failure.
    # One is the method's contract; small local models need a few more to reach 39.
    repair_rounds: int = _DEFAULT.repair_rounds
    generator: str | None = None  # endpoint name (default: roles.generator)
    base_judge: str | None = None  # endpoint name (default: the first of roles.judges)
    pair_ids: tuple[int, ...] | None = None  # these pairs only (the demo's, one at a time); None: the first n
    # The constraint gate (pipeline.stages.gate): every candidate checked atomic and distinct, a common
    # one also unspecific and held by the judge on both references; off: kept as the model wrote them.
    gate: bool = _DEFAULT.gate
    # Pairs whose cosine is below the floor ([pair] floor, PAIR_FLOOR) are not built unless allowed.
    allow_dissimilar: bool = _DEFAULT.allow_dissimilar

    @classmethod
    def from_config(cls, config: Config, **overrides: Any) -> BuildOptions:
        """Defaults from the [build] section of the config, then the given overrides (None = unset)."""
        file = section(config, "build")
        values: dict[str, Any] = {key: getattr(file, _SETTING.get(key, key)) for key in _TAKEN}
        values.update({k: v for k, v in overrides.items() if v is not None})
        options = cls(**values)
        options.validate(config)
        return options

    def validate(self, config: Config) -> None:
        """The options against the [build] settings' declarations (pipeline.stages.settings), the
        command line's values as the file's."""
        where = f"{config.path or 'config'} [build] / command line"
        given = {_SETTING.get(key, key): getattr(self, key) for key in _TAKEN}
        settings = checked(BuildSettings, given, where)
        self.conditions = settings.conditions  # names with commas, a list: the declared tuple
        config.endpoint(self.generator_name(config))
        config.endpoint(self.judge_name(config))
        check_embedder_name(self.embedder, f"{config.path or 'config'} [build] embedder / --embedder")

    def generator_name(self, config: Config) -> str:
        return self.generator or config.roles.generator

    def judge_name(self, config: Config) -> str:
        return self.base_judge or config.roles.judges[0]

    def endpoints(self, config: Config) -> list[str]:
        """The endpoints a build calls (so only those decide whether the local server starts)."""
        names = [self.generator_name(config)]
        if "eval" in self.conditions or (self.gate and self.common):
            names.append(self.judge_name(config))
        return names

    @property
    def common(self) -> list[str]:
        return [c for c in COMMON_CONDITIONS if c in self.conditions]

    @property
    def holder(self) -> str:
        return "none" if "none" in self.conditions else COMMON_SOURCE


@dataclass
class ConditionReport:
    condition: str
    instructions: int  # done
    failed: int
    unfinished: int  # pending or between stages
    constraints: int  # active constraints of done instructions
    replaced: int  # of those, revisions
    flags: dict[str, int]
    usage: Usage

    @property
    def replaced_share(self) -> float:
        return self.replaced / self.constraints if self.constraints else 0.0


@dataclass
class BuildSummary:
    run_id: str
    stages: list[StageSummary]
    conditions: list[ConditionReport]
    usage: Usage  # this invocation
    complete: bool


# -- pairs and runs ------------------------------------------------------------------------------


def select_pairs(store: Store, options: BuildOptions, floor: float | None = None) -> list[Pair]:
    """The pairs the build makes instructions for. ``floor``: with common conditions, pairs less similar
    than it are refused (a StageError naming them) unless ``allow_dissimilar``; None: no check."""
    if options.pair_ids is not None:
        pairs = pairs_of(store, options.domain, options.rule, ids=options.pair_ids)
    else:
        pairs = pairs_of(store, options.domain, options.rule, limit=options.n)
    if not pairs:
        raise StageError(
            f"{store.path}: no pairs for domain '{options.domain}' with rule '{options.rule}'; "
            f"run `unspecific pair --domain {options.domain}` first"
        )
    if floor is not None and options.common and not options.allow_dissimilar:
        low = [p for p in pairs if p.cosine < floor]
        if low:
            named = ", ".join(f"pair {p.id} (articles {p.article_a} and {p.article_b}, cosine {p.cosine:.2f})"
                              for p in low[:5])
            raise StageError(
                f"{store.path}: {len(low)} of the {len(pairs)} pairs are less similar than the floor "
                f"{floor:.2f}: {named}{' ...' if len(low) > 5 else ''}. Common constraints need similar "
                "articles: import more articles of the domain and pair again, or build them anyway with "
                "--allow-dissimilar ([build] allow_dissimilar = true)")
    return pairs



def start_build_run(store: Store, config: Config, options: BuildOptions) -> BuildOptions:
    """Create (or reopen) the run record; returns the options with ``run_id`` set.

    Without a run id, the id is derived from what the build makes (``build_identity``): an
    identical command resumes its run, whose finished instructions are kept, rather than
    building the same instructions a second time (which would count each pair twice)."""
    opts = asdict(options)
    opts["conditions"] = list(options.conditions)
    run_id = options.run_id or default_run_id(config, options)
    run_id = create_run(store, "build", config, name=f"build {options.domain}", options=opts, run_id=run_id)
    return replace(options, run_id=run_id)


def build_identity(config: Config, options: BuildOptions) -> dict[str, Any]:
    """What decides a build's instructions: its options, and the generator's and base judge's
    model and address. Not concurrency, timeouts, prices or keys: changing those is the same build."""
    opts = asdict(options)
    opts.pop("run_id")
    if opts["pair_ids"] is None:
        opts.pop("pair_ids")  # unset, a build's identity is what it was before the field existed
    opts["conditions"] = sorted(options.conditions)
    endpoints = {}
    for role, name in (("generator", options.generator_name(config)),
                       ("base_judge", options.judge_name(config))):
        endpoint = config.endpoint(name)
        endpoints[role] = {"base_url": endpoint.base_url, "model": endpoint.model,
                           "extra_body": endpoint.extra_body}
    return {"options": opts, "endpoints": endpoints}


def default_run_id(config: Config, options: BuildOptions) -> str:
    digest = hashlib.sha256(json.dumps(build_identity(config, options), sort_keys=True, default=str).encode())
    return f"build-{options.domain}-{digest.hexdigest()[:10]}"


def _run_id(options: BuildOptions) -> str:
    if not options.run_id:
        raise StageError("a build stage needs a run id: start the run first (start_build_run)")
    return options.run_id


def _text(store: Store, article_id: int) -> str:
    h = article_text_hash(store, article_id)
    if h is None:
        raise StageError(f"{store.path}: article {article_id} named by a pair is not in the store")
    return store.get_text(h)


# -- instructions --------------------------------------------------------------------------------------


def get_or_create_instruction(store: Store, run_id: str, condition: str, *, domain: str, pair_id: int,
                              article_a: int, article_b: int | None, n: int) -> Instruction:
    """The run's instruction for this condition and articles, created pending (and committed) if new."""
    row = instruction_rows.find_instruction(store, run_id, condition, article_a, article_b)
    if row is not None:
        return row
    instruction_rows.insert_instruction(store, run_id=run_id, domain=domain, condition=condition,
                                        pair_id=pair_id,
                                        article_a=article_a, article_b=article_b, n_constraints=n,
                                        created_at=now())
    store.commit()
    found = instruction_rows.find_instruction(store, run_id, condition, article_a, article_b)
    assert found is not None
    return found


def set_status(store: Store, instruction_id: int, status: str, error: str | None = None, *,
               base_generation_id: int | None = None) -> None:
    """Record the instruction's status (and error, redacted), committed."""
    from pipeline.core.redact import redact

    instruction_rows.set_instruction_status(store, instruction_id, status, redact(error),
                                            base_generation_id=base_generation_id)
    store.commit()


# -- units (run by pipeline.stages.units) ----------------------------------------------------------------


def _usage_for(summary: StageSummary, condition: str) -> Usage:
    return summary.usage.setdefault(condition, Usage())


def _concurrency(config: Config, options: BuildOptions) -> int:
    return config.endpoint(options.generator_name(config)).concurrency


def _fail(store: Store, instruction_id: int, exc: Exception) -> str:
    """Record the instruction as failed (the next build of the run retries it); the unit's failure
    is reported by the runner."""
    set_status(store, instruction_id, "failed", str(exc))
    return f"instruction {instruction_id}: {exc}"


# -- stage 1: synthesis ---------------------------------------------------------------------------


def _pair_instructions(store: Store, run_id: str, pair: Pair,
                       options: BuildOptions) -> list[tuple[str, int | None]]:
    """(condition, article_b) of every instruction this pair needs, the shared holder included."""
    wanted: list[tuple[str, int | None]] = []
    if "single" in options.conditions:
        wanted.append(("single", None))
    if options.common:
        wanted.append((options.holder, pair.article_b))
        wanted += [(c, pair.article_b) for c in options.common if c != options.holder]
    return wanted


def _needs_synthesis(store: Store, run_id: str, pair: Pair, options: BuildOptions) -> bool:
    for condition, b in _pair_instructions(store, run_id, pair, options):
        row = instruction_rows.find_instruction(store, run_id, condition, pair.article_a, b)
        if row is None or row.status in ("pending", "failed"):
            return True
    return False


async def run_synthesize(store: Store, config: Config, client: LLMClient, options: BuildOptions, *,
                         progress: ProgressHook = no_progress, stop: StopFlag | None = None,
                         max_units: int | None = None, budget: Budget | None = None) -> StageSummary:
    """Per pair: the single synthesis and the shared common synthesis, copied into each common
    condition. One unit = one pair."""
    run_id = _run_id(options)
    summary = StageSummary("synthesize")
    generator = options.generator_name(config)
    n = options.n_constraints
    pairs = [p for p in select_pairs(store, options, pair_floor(config))
             if _needs_synthesis(store, run_id, p, options)]
    gates = GateFactory(store, config, client, options) if options.gate else None
    rounds = max(options.repair_rounds, GATE_ROUNDS) if options.gate else options.repair_rounds

    def instruction(condition: str, pair: Pair, b: int | None) -> Instruction:
        return get_or_create_instruction(store, run_id, condition, domain=options.domain, pair_id=pair.id,
                                         article_a=pair.article_a, article_b=b, n=n)

    def reopen(inst: Instruction, status: str) -> bool:
        """A failed instruction whose constraints are stored failed later on: go back one stage."""
        if inst.status == "failed" and constraint_rows.has_constraints(store, inst.id):
            # A revision is committed with status 'revised': never judge or revise twice.
            revised = constraint_rows.count_revised(store, inst.id)
            set_status(store, inst.id, "revised" if revised else status)
            return True
        return inst.status not in ("pending", "failed")

    def write_synthesis(instruction_id: int, result: Synthesis, status: str) -> None:
        constraint_rows.write_synthesis(store, instruction_id, result.main_task,
                                        result.constraints, status=status,
                                        created_at=now())
        if result.ledger is not None:
            put_ledger(store, instruction_id, "synthesis", result.ledger.as_json(), now())
            store.commit()
            log_gate(progress, "synthesize", instruction_id, result.ledger)

    async def work(pair: Pair) -> str:
        failed: list[str] = []  # instructions of this pair recorded as failed
        # batch mode: the single list waits; the common one is still asked
        waiting: BatchPending | None = None
        if "single" in options.conditions:
            inst = instruction("single", pair, None)
            if not reopen(inst, "synthesized"):
                with usage_scope(_usage_for(summary, "single")):
                    try:
                        result = await synthesize_single(client, generator, _text(store, pair.article_a), n,
                                                         domain=options.domain, repair_rounds=rounds,
                                                         gate=gates.single() if gates else None)
                    except ParseError as exc:
                        failed.append(_fail(store, inst.id, exc))
                    except BatchPending as exc:
                        waiting = exc
                    else:
                        write_synthesis(inst.id, result, "synthesized")
        if options.common:
            b = pair.article_b
            holder_status = "synthesized" if options.holder == "none" else "source"
            holder = instruction(options.holder, pair, b)
            if not reopen(holder, holder_status):
                with usage_scope(_usage_for(summary, "common")):
                    try:
                        text_a, text_b = _text(store, pair.article_a), _text(store, b)
                        result = await synthesize_common(
                            client, generator, text_a, text_b, n,
                            domain=options.domain, seed=f"{pair.article_a}-{b}",
                            repair_rounds=rounds, gate=gates.common(text_a, text_b) if gates else None,
                        )
                    except ParseError as exc:
                        failed.append(_fail(store, holder.id, exc))
                    else:
                        write_synthesis(holder.id, result, holder_status)
            if waiting is None:
                holder = instruction(options.holder, pair, b)
                for condition in options.common:
                    if condition == options.holder:
                        continue
                    inst = instruction(condition, pair, b)
                    if reopen(inst, "synthesized"):
                        continue
                    if holder.status in _HAS_CONSTRAINTS:
                        constraint_rows.copy_synthesis(store, holder.id, inst.id, status="synthesized",
                                                       created_at=now())
                        copy_ledger(store, holder.id, inst.id, "synthesis", now())
                        store.commit()
                    else:
                        failed.append(_fail(store, inst.id,
                                            StageError(f"the common synthesis failed: {holder.error}")))
        if waiting is not None:
            raise waiting
        if failed:  # a reply that stayed unusable: the runner records the unit's failure
            raise ParseError("; ".join(failed))
        return f"pair {pair.id}: synthesized"

    units = [Unit(f"pair {p.id} (articles {p.article_a} and {p.article_b})", partial(work, p)) for p in pairs]
    return await run_units(summary, units, policy=FAIL_FAST, parallel=_concurrency(config, options),
                           progress=progress, stop=stop, budget=budget or Budget(max_units),
                           usage=RunUsage(store, run_id, client.usage))


# -- stage 2: the base article ----------------------------------------------------------------------


async def run_base(store: Store, config: Config, client: LLMClient, options: BuildOptions, *,
                   progress: ProgressHook = no_progress, stop: StopFlag | None = None,
                   max_units: int | None = None, budget: Budget | None = None) -> StageSummary:
    """Per eval instruction: the base article (written once) and its verdicts on every constraint."""
    run_id = _run_id(options)
    summary = StageSummary("base")
    instructions = instruction_rows.instructions_awaiting_base(store,
                                                               run_id) if "eval" in options.conditions else []
    generator, judge = options.generator_name(config), options.judge_name(config)

    async def work(inst: Instruction) -> str:
        with usage_scope(_usage_for(summary, "eval")):
            try:
                gen_id = await write_base_article(store, client, generator, inst.id, inst.main_task
                                                  or "", options.words)
                await judge_base(store, client, judge, inst.id, gen_id,
                                 judging_mode_of(config, judge, options.judging_mode))
            except ParseError as exc:
                _fail(store, inst.id, exc)
                raise
        set_status(store, inst.id, "base_judged", base_generation_id=gen_id)
        return f"instruction {inst.id} (eval): base article {gen_id} written and judged"

    units = [Unit(f"instruction {i.id} (eval)", partial(work, i)) for i in instructions]
    return await run_units(summary, units, policy=FAIL_FAST, parallel=_concurrency(config, options),
                           progress=progress, stop=stop, budget=budget or Budget(max_units),
                           usage=RunUsage(store, run_id, client.usage))


# -- stage 3: revision, flags, contradictions ---------------------------------------------------------


async def run_revise(store: Store, config: Config, client: LLMClient, options: BuildOptions, *,
                     progress: ProgressHook = no_progress, stop: StopFlag | None = None,
                     max_units: int | None = None, budget: Budget | None = None) -> StageSummary:
    """Revise direct and eval instructions (lineage kept), then flag every instruction and store its
    constraint-reference similarity (pipeline.stages.similarity); status done."""
    run_id = _run_id(options)
    summary = StageSummary("revise")
    conditions = list(options.conditions)
    instructions = instruction_rows.instructions_to_revise(store, run_id, conditions)
    generator, judge = options.generator_name(config), options.judge_name(config)
    settings = section(config, "build").flags()
    # Loaded once and shared: the leak flag embeds, similarity reads the same cached vectors.
    embedder = resolve_embedder(options.embedder, f"{config.path or 'config'} [build] embedder / --embedder")
    gates = GateFactory(store, config, client, options) if options.gate else None
    # Under the gate, GATE_ROUNDS rounds for the replacements refused: a replacement that never passes
    # keeps its original (the ledger says how many), so more rounds buy little and cost a call each.
    rounds = GATE_ROUNDS if options.gate else options.repair_rounds

    async def work(inst: Instruction) -> str:
        condition = inst.condition
        with usage_scope(_usage_for(summary, condition)):
            try:
                if inst.status != "revised":
                    if condition == "direct":
                        result = await revise_direct(store, client, generator, inst,
                                                     repair_rounds=rounds, gates=gates)
                    elif condition == "eval":
                        result = await revise_eval(store, client, generator, inst, judge=judge,
                                                   mode=judging_mode_of(config, judge, options.judging_mode),
                                                   repair_rounds=rounds, gates=gates)
                    else:
                        result = None
                    if result is not None:
                        progress(ProgressEvent("revise", 0, 0, f"instruction {inst.id} ({condition}): "
                                               f"{result.replaced} constraints replaced"
                                               + (f"; {result.unshown} Yes on the base "
                                                  "article kept, their quotes"
                                                  " not in it" if result.unshown else ""),
                                               kind="log"))
                        if result.ledger is not None:
                            log_gate(progress, "revise", inst.id, result.ledger)
                flag_instruction(store, inst.id, settings, embedder)
                compute_similarities(store, embedder, instruction_ids=[inst.id])
                if options.contradictions:
                    await check_contradictions(store, client, generator, inst.id)
            except ParseError as exc:
                _fail(store, inst.id, exc)
                raise
        set_status(store, inst.id, "done")
        return f"instruction {inst.id} ({condition}): done"

    units = [Unit(f"instruction {i.id} ({i.condition})", partial(work, i)) for i in instructions]
    return await run_units(summary, units, policy=FAIL_FAST, parallel=_concurrency(config, options),
                           progress=progress, stop=stop, budget=budget or Budget(max_units),
                           usage=RunUsage(store, run_id, client.usage))


# -- the whole build -------------------------------------------------------------------------------------

STAGE_FUNCTIONS = {"synthesize": run_synthesize, "base": run_base, "revise": run_revise}


async def run_build(store: Store, config: Config, client: LLMClient, options: BuildOptions, *,
                    progress: ProgressHook = no_progress, stop: StopFlag | None = None,
                    max_units: int | None = None, stages: Sequence[str] = STAGES) -> BuildSummary:
    """Run the stages in order over the chosen conditions, recording the run and its usage."""
    options = start_build_run(store, config, options)  # creates the run, or reopens it as running
    run_id = _run_id(options)
    if client.run_id is None:
        client.run_id = run_id
    start = Usage(**client.usage.as_dict())
    budget = Budget(max_units)  # shared by the stages of this call
    summaries: list[StageSummary] = []
    with recording(store, run_id) as end:
        for name in stages:
            if (stop is not None and stop) or budget.exhausted:
                break
            s = await STAGE_FUNCTIONS[name](store, config, client, options, progress=progress,
                                            stop=stop, budget=budget)
            summaries.append(s)
        if not (stop is not None and stop):
            from pipeline.stages.copy_evidence import compute_copy_evidence

            # The suspicion ranking's copy evidence for responses the run's instructions already have
            # (imported ones): only pairs lacking it, word n-grams, seconds.
            compute_copy_evidence(store, run_id=run_id, progress=progress, stop=stop)
        complete = is_complete(store, run_id, options)
        end.status = "done" if complete else "paused"
    usage = Usage(**{k: getattr(client.usage, k) - getattr(start, k) for k in start.as_dict()})
    merged: dict[str, Usage] = {}
    for s in summaries:
        for cond, u in s.usage.items():
            merged.setdefault(cond, Usage()).add(u)
    return BuildSummary(run_id, summaries, condition_reports(store, run_id, options, merged), usage, complete)


def is_complete(store: Store, run_id: str, options: BuildOptions) -> bool:
    """Every chosen condition has a finished (done or failed) instruction for every selected pair."""
    pairs = select_pairs(store, options)
    finished = instruction_rows.count_finished(store, run_id, options.conditions)
    return finished >= len(pairs) * len(options.conditions)


def condition_reports(store: Store, run_id: str, options: BuildOptions,
                      usage: dict[str, Usage] | None = None) -> list[ConditionReport]:
    """Per condition, from the store (so a resumed run reports all of its work) and this call's usage.
    The shared common synthesis is reported as its own row, ``common``."""
    usage = usage or {}
    reports = []
    rows = list(options.conditions)
    if options.common:
        rows.insert(1 if "single" in rows else 0, "common")
    for cond in rows:
        if cond == "common":
            reports.append(ConditionReport("common", 0, 0, 0, 0, 0, {}, usage.get("common", Usage())))
            continue
        made = instruction_rows.condition_counts(store, run_id, cond)
        counts = made.statuses
        done, failed = counts.get("done", 0), counts.get("failed", 0)
        unfinished = sum(counts.values()) - done - failed
        reports.append(ConditionReport(cond, done, failed, unfinished, made.constraints,
                                       made.replaced, made.flags,
                                       usage.get(cond, Usage())))
    return reports
