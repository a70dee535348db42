"""Naturalness (the paper's Table 1): which of two constraint sets written for the same
reference article reads more like what a person would ask for?

For each reference article, every pair of conditions present (e.g. common+eval vs
common+direct vs single, and a human-written set when the user imports one) is shown to an
LLM judge, which prefers one, **in both orders**: once with each set first (``shown_first``).
Each side is first exactly half the time, which cancels the judge's position bias even with a
few instructions, and the two orders of one comparison tell position bias apart from
preference: a judge that prefers a set picks it in both orders, one that prefers a position
changes its answer. Results go to the ``naturalness`` table (one row per judge, pair and order;
``winner`` NULL = tie); ``pipeline.analysis.metrics.naturalness_rates`` turns them into win rates per
condition pair, the share won by the set shown first and the share of comparisons whose two
orders agree, each with a bootstrap interval.

Human-written sets come from a JSONL file, one line per reference article:
``{"article_id": 12, "main_task": "...", "constraints": ["...", ...]}`` (``article_id`` is the
store's article id; ``source_id`` plus an optional ``corpus`` works instead). They are stored as
instructions of condition ``human`` with status ``imported`` (the evaluation never picks them up).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from pipeline.core.config import Config
from pipeline.core.errors import CorpusError, StageError
from pipeline.core.progress import ProgressHook, StopFlag, no_progress
from pipeline.llm.client import LLMClient, Params
from pipeline.llm.prompts import defuse, load_template, numbered
from pipeline.stages.units import RECORD_AND_CONTINUE, Budget, RunUsage, StageSummary, Unit, run_units
from pipeline.store.articles import ArticleDomain, article_domain, articles_with_source_id
from pipeline.store.constraints import active_constraints, insert_constraints
from pipeline.store.database import Store, now
from pipeline.store.imports import rollback
from pipeline.store.instructions import (
    comparable_sets,
    find_instruction,
    get_instruction,
    insert_reference_set,
)
from pipeline.store.naturalness import Preference, judged_orders, put_preference

HUMAN = "human"
# The order conditions are named in a pair: the method's own first, so rates read "eval beats ...".
CONDITION_ORDER = ("eval", "direct", "none", "single", HUMAN)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"preferred": {"type": "integer", "enum": [0, 1, 2]}, "reason": {"type": "string"}},
    "required": ["preferred"],
}


@dataclass
class NaturalnessOptions:
    build_run: str | None = None
    conditions: list[str] | None = None  # compare only these (default: every condition present)
    domain: str | None = None
    judges: list[str] | None = None  # default: the naturalness_judge role
    human_file: str | None = None  # JSONL of human-written sets to import first
    parallel: int | None = None


# -- human-written sets -----------------------------------------------------------------------


def import_human_sets(store: Store, path: str | Path) -> tuple[int, int]:
    """Store each line of a JSONL file as a ``human`` instruction: (added, already there)."""
    from pipeline.stages.corpus import jsonl_records

    path = Path(path)
    run_id = f"human:{path.name}"
    added = kept = 0
    # A file with a bad line imports nothing: fix it and import it again.
    try:
        for _lineno, where, item in jsonl_records(path, "article_id, main_task, constraints"):
            article = _article_of(store, item, where)
            constraints = item.get("constraints")
            if not isinstance(constraints,
                              list) or not constraints or not all(isinstance(c, str) and c.strip()
                                                                  for c in constraints):
                raise CorpusError(f"{where}: field 'constraints' must be a non-empty list of strings")
            main_task = item.get("main_task", "")
            if not isinstance(main_task, str):
                raise CorpusError(f"{where}: field 'main_task' must be a string")
            # A human set's run holds only human sets, none with an article B.
            if find_instruction(store, run_id, HUMAN, article.id, None) is not None:
                kept += 1
                continue
            stamp = now()
            iid = insert_reference_set(store, run_id=run_id, domain=article.domain, condition=HUMAN,
                                       article_a=article.id, main_task=main_task.strip(),
                                       n_constraints=len(constraints), created_at=stamp)
            insert_constraints(store, iid, [c.strip() for c in constraints], created_at=stamp, origin=HUMAN)
            added += 1
    except BaseException:
        rollback(store)
        raise
    store.commit()
    return added, kept


def _article_of(store: Store, item: dict[str, Any], where: str) -> ArticleDomain:
    row: ArticleDomain | None
    if "article_id" in item:
        row = article_domain(store, item["article_id"])
        what = f"article_id {item['article_id']!r}"
    elif "source_id" in item:
        rows = articles_with_source_id(store, str(item["source_id"]), item.get("corpus"))
        if len(rows) > 1:
            raise CorpusError(f"{where}: source_id {item['source_id']!r} is in several corpora; "
                              "add a 'corpus' field")
        row = rows[0] if rows else None
        what = f"source_id {item['source_id']!r}"
    else:
        raise CorpusError(f"{where}: needs 'article_id' (or 'source_id') naming the reference article")
    if row is None:
        raise CorpusError(f"{where}: {what} is not an article in {store.path}")
    return row


# -- which sets to compare --------------------------------------------------------------------


def condition_rank(condition: str) -> tuple[int, str]:
    return (CONDITION_ORDER.index(condition) if condition in CONDITION_ORDER
            else len(CONDITION_ORDER), condition)


def comparison_pairs(store: Store, options: NaturalnessOptions) -> list[tuple[int, int]]:
    """(instruction a, instruction b) pairs to compare: per reference article, one set per
    condition (the newest), every two conditions. ``a`` holds the condition named first."""
    by_article: dict[int, dict[str, int]] = defaultdict(dict)
    for s in comparable_sets(store, run_id=options.build_run, domain=options.domain,
                             imported_condition=HUMAN):
        if options.conditions and s.condition not in options.conditions:
            continue
        by_article[s.article_a][s.condition] = s.id  # ordered by id: the newest set wins
    pairs = []
    for article in sorted(by_article):
        sets = by_article[article]
        for c1, c2 in combinations(sorted(sets, key=condition_rank), 2):
            pairs.append((sets[c1], sets[c2]))
    return pairs


# -- one comparison -------------------------------------------------------------------------------


def _validate(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValueError('expected {"preferred": 1 or 2, "reason": "..."}')
    raw = data.get("preferred")
    if isinstance(raw, str):
        raw = {"1": 1, "2": 2, "0": 0, "tie": 0, "none": 0}.get(raw.strip().lower(), raw)
    if raw not in (0, 1, 2) or isinstance(raw, bool):
        raise ValueError(f'"preferred" must be 1, 2 (or 0 for a tie), got {data.get("preferred")!r}')
    return {"preferred": int(raw), "reason": str(data.get("reason") or "")}


def _instruction(store: Store, iid: int) -> tuple[str, list[str]]:
    instruction = get_instruction(store, iid)
    task = (instruction.main_task if instruction else None) or ""
    texts = [c.text for c in active_constraints(store, iid)]
    if not texts:
        raise StageError(f"instruction {iid}: no active constraints to compare")
    return task, texts


async def compare(store: Store, client: LLMClient, judge: str, a: int, b: int, *, first: int) -> int | None:
    """Judge one pair in one order (``first``, a or b, shown first) and store it; returns the
    winner's instruction id (None for a tie)."""
    if first not in (a, b):
        raise ValueError(f"shown first must be {a} or {b}, not {first}")
    second = b if first == a else a
    (task_1, cons_1), (task_2, cons_2) = _instruction(store, first), _instruction(store, second)
    template = load_template("naturalness")
    messages = template.render(task_1=defuse(task_1), constraints_1=numbered(cons_1),
                               task_2=defuse(task_2), constraints_2=numbered(cons_2))
    reply, completion = await client.chat_json(judge, messages, schema=SCHEMA, validate=_validate,
                                               template=template,
                                               params=Params(max_tokens=300))
    winner = {1: first, 2: second, 0: None}[reply["preferred"]]
    put_preference(store, Preference(judge, a, b, first, winner, reply["reason"], completion.call_id))
    store.commit()
    return winner


async def run_naturalness(store: Store, config: Config, client: LLMClient, options: NaturalnessOptions, *,
                          progress: ProgressHook = no_progress, stop: StopFlag | None = None,
                          max_units: int | None = None) -> StageSummary:
    """Compare every pair of constraint sets for the same reference with each judge, in both
    orders; a unit is one (pair, judge, order). Orders already judged are skipped (a store
    judged in one order only gets the other)."""
    if options.human_file:
        added, kept = import_human_sets(store, options.human_file)
        progress_msg = f"human-written sets: {added} imported, {kept} already stored"
        from pipeline.core.progress import ProgressEvent

        progress(ProgressEvent("naturalness", 0, 0, progress_msg, kind="log"))
    judges = list(dict.fromkeys(options.judges or [config.roles.naturalness_judge]))
    for j in judges:
        config.endpoint(j)
    summary = StageSummary("naturalness")
    done = judged_orders(store)
    units = []
    for a, b in comparison_pairs(store, options):
        for judge in judges:
            for first in (a, b):
                if (judge, a, b, first) in done:
                    summary.skipped += 1
                    continue

                async def work(a: int = a, b: int = b, judge: str = judge, first: int = first) -> str:
                    winner = await compare(store, client, judge, a, b, first=first)
                    return (f"instructions {a} vs {b} ({first} first): {judge} preferred "
                            f"{winner if winner is not None else 'neither (tie)'}")

                units.append(Unit(f"instructions {a} vs {b} ({first} first), judge {judge}", work))
    parallel = options.parallel or sum(config.endpoint(j).concurrency for j in judges)
    return await run_units(summary, units, policy=RECORD_AND_CONTINUE, parallel=parallel,
                           progress=progress, stop=stop,
                           budget=Budget(max_units), usage=RunUsage(store, client.run_id, client.usage))
