"""Annotate's items: ``Item`` (one constraint on one response, and the summary the metric compared it
with), where they come from (``load_items``: the newest validation plan, else every flipped
constraint and a seeded sample of pass-both ones), and ``LabelQueue``, which owns the items served,
the one shown, the plan and ratio they were read at and the app's context it last opened on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from pipeline.core.definitions import same_ratio
from pipeline.store.view import StoreView, Writer
from unspecific_tui.context import Context
from unspecific_tui.data import Analysis

if TYPE_CHECKING:
    from pipeline.analysis.validation import Basis

SAMPLE_SHARE = 0.25  # pass-both items mixed in, relative to the flipped ones
SAMPLE_MIN = 10
LABELS = {"i": "integrated", "s": "superficial", "a": "ambiguous"}
Given = Mapping[tuple[int, int], Mapping[str, object]]  # (constraint id, text id) -> annotator -> label


class Keyed(Protocol):
    """An item to label or to answer: a constraint on a text."""

    @property
    def constraint_id(self) -> int: ...

    @property
    def generation_id(self) -> int: ...


def waiting_for(annotator: str, given: Given) -> Callable[[Keyed], bool]:
    """Whether an item still waits for ``annotator``'s label (or answer), by what was ``given``."""
    return lambda item: annotator not in given.get((item.constraint_id, item.generation_id), {})


def next_undone(items: Sequence[Keyed], index: int, done: Given, annotator: str) -> int | None:
    """The first item after ``index``, round the list (``index`` last), that ``annotator`` has not
    labelled or answered in ``done`` ((constraint, text) -> annotator -> label); None when none."""
    waiting = waiting_for(annotator, done)
    for k in range(1, len(items) + 1):
        i = (index + k) % len(items)
        if waiting(items[i]):
            return i
    return None


T = TypeVar("T", bound=Keyed)


@dataclass(frozen=True)
class Item:
    constraint_id: int
    generation_id: int  # the response
    summary_id: int  # the summary the metric compared it with
    instruction_id: int
    model: str
    mode: str
    flipped: bool  # the metric's call: superficial
    full_score: float

    @property
    def writer(self) -> Writer:
        return Writer(self.model, self.mode)


def load_items(view: StoreView, analysis: Analysis, seed: int) -> tuple[list[Item], str | None]:
    """The newest validation plan's items and its name; with no plan, pipeline.analysis.metrics' items:
    every flipped constraint plus a seeded sample of pass-both ones (and no name)."""
    from pipeline.analysis.metrics import items_to_annotate
    from pipeline.analysis.validation_plan import annotation_items, load_plan

    plan = load_plan(view)
    if plan is not None:
        chosen, name = annotation_items(view, plan), plan.name
    else:
        sample = max(SAMPLE_MIN, math.ceil(SAMPLE_SHARE * analysis.n_flipped))
        chosen, name = items_to_annotate(view, ratio=analysis.ratio, passed_sample=sample, seed=seed), None
    return [Item(i.constraint_id, i.response_id, i.summary_id, i.instruction_id, i.model, i.mode, i.flipped,
                 i.full_score) for i in chosen], name


def item_for(items: list[Item], context: Context) -> int | None:
    """The index of the item that best matches ``context``, or None when its instruction has none."""
    ranked = [(it.writer != context.writer, it.constraint_id != context.constraint_id, k)
              for k, it in enumerate(items) if it.instruction_id == context.instruction_id]
    return min(ranked)[2] if ranked else None


class Stepper(Generic[T]):
    """Items and the one shown: moved by a step (held at the ends), or to the next one not done."""

    def __init__(self) -> None:
        self.items: list[T] = []
        self.index = 0

    @property
    def current(self) -> T | None:
        return self.items[self.index] if self.items else None

    def move(self, step: int) -> bool:
        """``step`` items on, held at the ends; False with no item."""
        if not self.items:
            return False
        self.index = max(0, min(len(self.items) - 1, self.index + step))
        return True

    def to_next_undone(self, done: Given, annotator: str) -> bool:
        """On to the next item ``annotator`` has not labelled (answered) in ``done``, round the list;
        False when every item is done."""
        at = next_undone(self.items, self.index, done, annotator)
        if at is not None:
            self.index = at
        return at is not None


class LabelQueue(Stepper[Item]):
    """The items to label, the one shown, and what they were read from."""

    def __init__(self) -> None:
        super().__init__()
        self.plan: str | None = None  # the validation plan served, if any
        # The metric's side of the validation (pipeline.analysis.validation.Basis), read with the items.
        self.basis: Basis | None = None
        self.ratio: float | None = None  # the analysis' ratio the items were read at
        self._followed: Context | None = None  # the app's context last opened on (once each)

    def stale(self, ratio: float) -> bool:
        """Whether the items are to be read (again) for an analysis at ``ratio``, which they take."""
        if self.ratio is not None and same_ratio(self.ratio, ratio) and self.items:
            return False
        self.ratio = ratio
        return True

    def replace(self, items: list[Item], plan: str | None, basis: Basis | None) -> None:
        """The items read; the one shown stays shown when it is among them."""
        current = self.current
        self.items, self.plan, self.basis = items, plan, basis
        self.index = items.index(current) if current in items else 0

    def follow(self, context: Context) -> tuple[bool, str | None]:
        """Open on the context's item, once per context: the same constraint and response, else the
        instruction's first item for that response, else its first item. Whether the item changed, and
        what to say when the instruction has no item here (the item stays as it was)."""
        if context.instruction_id is None or context == self._followed or not self.items:
            return False, None
        self._followed = context
        index = item_for(self.items, context)
        if index is None:
            return False, (f"instruction #{context.instruction_id} has no item to label here; "
                           f"still on item {self.index + 1} of {len(self.items)}")
        moved = index != self.index
        self.index = index
        return moved, None
