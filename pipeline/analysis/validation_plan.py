"""The validation plan: which (constraint, response) items people label to check the Core metric
(the reviewers' protocol, issue 15; scored by pipeline.analysis.validation).

A **plan** is a seeded, stratified sample of items, stored so that the Annotate screen, the
exported sheets and the report all work on exactly the same items:
  - ``flipped:<domain>``: ``per_domain`` items the metric calls superficial (flipped at the
    plan's ratio, pipeline.store.scores.item_outcome_sql through pipeline.analysis.metrics.constraint_items),
    for each domain;
  - ``passed``: ``passed`` items satisfied on the response and on its summary.
Items are stored in one shuffled order, so a labeller cannot tell the strata apart. Each stratum
keeps its population at the draw: a labelled item stands for population / labelled items of its
stratum.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pipeline.analysis.metrics.base import Filters
from pipeline.analysis.metrics.items import Item, constraint_items
from pipeline.core.definitions import DEFAULT_RATIO
from pipeline.core.errors import UnspecificError
from pipeline.store.validation import (
    PlanItem,
    StoredPlan,
    instruction_domains,
    plan_exists,
    plan_response_writers,
    replace_plan,
    stored_plan,
)
from pipeline.store.view import store_of

if TYPE_CHECKING:
    from pipeline.store.database import Store
    from pipeline.store.view import StoreReader

DEFAULT_PLAN = "default"
PER_DOMAIN = 50
PASSED = 50
PASSED_STRATUM = "passed"


class ValidationError(UnspecificError):
    """What a validation command refuses (plans, sheets, judge plans), said to the user."""

    title = "Validation error"


@dataclass(frozen=True)
class Stratum:
    name: str
    population: int  # items of this kind in the store when the plan was drawn
    drawn: int

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "population": self.population, "drawn": self.drawn}


@dataclass(frozen=True)
class Plan:
    name: str
    ratio: float
    seed: int
    run: str | None
    strata: tuple[Stratum, ...]
    items: tuple[PlanItem, ...]
    created_at: str = ""

    def stratum(self, name: str) -> Stratum:
        return next(s for s in self.strata if s.name == name)

    @property
    def shortfalls(self) -> list[Stratum]:
        """Strata that had fewer items than asked for (all of them were taken)."""
        return [s for s in self.strata if s.drawn == s.population]


def draw_plan(store: Store, *, name: str = DEFAULT_PLAN, ratio: float = DEFAULT_RATIO,
              per_domain: int = PER_DOMAIN,
              passed: int = PASSED, seed: int = 0, run: str | None = None,
              domains: Sequence[str] | None = None) -> Plan:
    """Draw (not store) a plan: ``per_domain`` flipped items per domain, ``passed`` passed-both
    items, seeded. The same store, options and seed always give the same plan."""
    if per_domain < 0 or passed < 0:
        raise ValidationError("the sample sizes must be zero or more")
    items = items_by_key(store, ratio, run)
    domain_of = instruction_domains(store, {i.instruction_id for i in items.values()})
    if domains:
        unknown = sorted(set(domains) - set(domain_of.values()))
        if unknown:
            raise ValidationError(f"no judged items in domain(s) {', '.join(unknown)} at ratio {ratio:g}")
        items = {k: i for k, i in items.items() if domain_of[i.instruction_id] in domains}
    if not items:
        raise ValidationError(f"nothing to sample: no constraint is judged on a response "
                              "and on its summary at "
                              f"ratio {ratio:g}" + (f" in run {run}" if run else "")
                              + " (run `unspecific evaluate`)")
    rng = random.Random(seed)
    by_stratum: dict[str, list[Item]] = defaultdict(list)
    for key in sorted(items):  # a fixed order before drawing: the seed alone decides the sample
        item = items[key]
        stratum = stratum_of(item, domain_of[item.instruction_id])
        if stratum is not None:
            by_stratum[stratum].append(item)
    chosen: list[tuple[str, Item]] = []
    strata = []
    for stratum in sorted(by_stratum):
        pool = by_stratum[stratum]
        want = passed if stratum == PASSED_STRATUM else per_domain
        picked = rng.sample(pool, min(want, len(pool)))
        strata.append(Stratum(stratum, len(pool), len(picked)))
        chosen += [(stratum, i) for i in picked]
    rng.shuffle(chosen)  # one order for every stratum: the labeller cannot tell them apart
    plan_items = tuple(PlanItem(k, i.constraint_id, i.response_id, i.summary_id, i.instruction_id,
                                domain_of[i.instruction_id], stratum)
                       for k, (stratum, i) in enumerate(chosen, 1))
    return Plan(name, ratio, seed, run, tuple(strata), plan_items)


def items_by_key(store: Store, ratio: float, run: str | None,
                  responses: Iterable[int] | None = None,
                  filters: Filters | None = None) -> dict[tuple[int, int], Item]:
    """The metric's items at ``ratio``, one per (constraint, response): with two summaries at the
    ratio (two summarizers), the one with the lowest id, so the choice never depends on order.
    ``responses``: only those (a plan's few hundred items need not pivot the whole store);
    ``filters``: the report's selection (its ``run`` stands in for ``run``)."""
    out: dict[tuple[int, int], Item] = {}
    base = filters or Filters(run=run)
    if responses is not None:
        base = replace(base, responses=tuple(sorted(set(responses))))
    for item in sorted(constraint_items(store, base, ratio=ratio), key=lambda i: i.summary_id):
        out.setdefault((item.constraint_id, item.response_id), item)
    return out


def save_plan(store: Store, plan: Plan, *, replace: bool = False) -> Plan:
    """Store a plan under its name. An existing plan of that name is kept unless ``replace``:
    people may be labelling it. Labels are never deleted (they belong to the items)."""
    from pipeline.store.database import now

    if plan_exists(store, plan.name) and not replace:
        raise ValidationError(f"a plan named {plan.name!r} exists; pass --replace to draw it again "
                              "(labels are kept) or --name for another plan")
    created = now()
    replace_plan(store, StoredPlan(plan.name, plan.ratio, plan.seed, plan.run,
                                   {"strata": [s.as_dict() for s in plan.strata]}, created, plan.items))
    return Plan(plan.name, plan.ratio, plan.seed, plan.run, plan.strata, plan.items, created)


def load_plan(reader: StoreReader, name: str | None = None) -> Plan | None:
    """A stored plan by name; with no name, the newest one. None when there is none (also in a
    store opened read-only before its migration to schema 5)."""
    store = store_of(reader)
    row = stored_plan(store, name)
    if row is None:
        return None
    strata = tuple(Stratum(s["name"], int(s["population"]), int(s["drawn"])) for s in row.params["strata"])
    return Plan(row.name, row.ratio, row.seed, row.run, strata, row.items, row.created_at)


def require_plan(store: Store, name: str | None = None) -> Plan:
    plan = load_plan(store, name)
    if plan is None:
        raise ValidationError(f"no validation plan {name!r}" if name else
                              "no validation plan yet: draw one with `unspecific validate plan`")
    return plan


def current_items(store: Store, plan: Plan) -> dict[tuple[int, int], Item]:
    """The metric's item now for each of the plan's items (missing when no rater judges it on both
    texts any more)."""
    items = items_by_key(store, plan.ratio, plan.run, [p.response_id for p in plan.items])
    return {(p.constraint_id, p.response_id): items[(p.constraint_id, p.response_id)]
            for p in plan.items if (p.constraint_id, p.response_id) in items}


def annotation_items(reader: StoreReader, plan: Plan) -> list[Item]:
    """The plan's items in its order, as pipeline.analysis.metrics items with the metric's current call
    (for the Annotate screen's list). An item no rater judges on both texts any more keeps its
    place, with no call (scores NaN, not flipped): people still label exactly the plan."""
    store = store_of(reader)
    now_items = current_items(store, plan)
    writers = plan_response_writers(store, plan.name)
    out = []
    for p in plan.items:
        item = now_items.get((p.constraint_id, p.response_id))
        if item is None:
            model, mode = writers.get(p.response_id, ("?", ""))
            item = Item(p.constraint_id, p.response_id, p.summary_id, p.instruction_id, model,
                        mode, plan.ratio,
                        math.nan, math.nan)
        elif item.summary_id != p.summary_id:
            # The summary the plan names is the one people read and the one exported.
            item = replace(item, summary_id=p.summary_id)
        out.append(item)
    return out


def stratum_of(item: Item, domain: str) -> str | None:
    """The stratum a plan draws an item into by the metric's call (None: in no stratum)."""
    if item.flipped:
        return f"flipped:{domain}"
    return PASSED_STRATUM if item.passed_both else None
