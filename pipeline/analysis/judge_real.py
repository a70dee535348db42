"""The embedded judge on real demo text (issue 61): a labelled set of the demo's own verdicts, shipped.

``judge_real_data/items.jsonl`` holds (constraint, text) items drawn from a demo store's verdicts,
stratified by text kind x model under test x the embedded judge's verdict, each labelled by hand with the
judge's own strict rule (see its README). Each item carries its stratum and that stratum's population in
the store it was drawn from, so a figure over the items stands for the store's verdicts (each item
weighted by population / items of its stratum), and its split (``dev`` or ``held_out``, by instruction:
the judge was tuned on dev only).

``figures.json`` holds the embedded judge's figures on the held-out split, written by
``bench/judge_real.py --write``; the report shows them beside an embedded judge that has no real-text
check of its own yet (``standing_lines``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from pipeline.analysis.stats import kappa_from_counts

FOLDER = "judge_real_data"
SPLITS = ("dev", "held_out")


@dataclass(frozen=True)
class RealItem:
    id: str
    constraint: str
    text: str
    text_kind: str  # response | summary
    model: str  # the model under test (a summary's: its response's writer)
    instruction_id: int
    constraint_id: int
    generation_id: int
    stratum: str  # "kind|model|yes" or "kind|model|no": the demo judge's verdict when drawn
    population: int  # the stratum's verdicts in the store drawn from
    split: str  # dev | held_out
    label: int | None = None  # the hand label (1: the text satisfies the constraint)


def parse_item(raw: dict[str, Any]) -> RealItem:
    return RealItem(str(raw["id"]), str(raw["constraint"]), str(raw["text"]), str(raw["text_kind"]),
                    str(raw["model"]), int(raw["instruction_id"]), int(raw["constraint_id"]),
                    int(raw["generation_id"]), str(raw["stratum"]), int(raw["population"]), str(raw["split"]),
                    None if raw.get("label") is None else int(raw["label"]))


def read_items(lines: Iterable[str]) -> list[RealItem]:
    """Items from JSON lines: one item a line, or (the shipped file) one text a line with its ``items``,
    each holding what differs from item to item (id, constraint, constraint_id, stratum, population,
    label)."""
    out = []
    for line in lines:
        if not line.strip():
            continue
        raw = json.loads(line)
        if "items" in raw:
            shared = {k: v for k, v in raw.items() if k != "items"}
            out += [parse_item({**shared, **item}) for item in raw["items"]]
        else:
            out.append(parse_item(raw))
    return out


TEXT_FIELDS = ("generation_id", "text", "text_kind", "model", "instruction_id", "split")


def grouped_lines(items: Sequence[RealItem]) -> list[str]:
    """The items as the shipped file holds them: one text a line (its text once), its items in it."""
    by: dict[int, list[RealItem]] = {}
    for i in items:
        by.setdefault(i.generation_id, []).append(i)
    lines = []
    for gid in sorted(by):
        first = vars(by[gid][0])
        record = {k: first[k] for k in TEXT_FIELDS}
        record["items"] = [{k: v for k, v in vars(i).items() if k not in TEXT_FIELDS} for i in by[gid]]
        lines.append(json.dumps(record))
    return lines


@cache
def shipped_items() -> tuple[RealItem, ...]:
    """The shipped labelled set (empty when the package holds none)."""
    path = resources.files("pipeline.analysis").joinpath(FOLDER, "items.jsonl")
    if not path.is_file():
        return ()
    return tuple(read_items(path.read_text(encoding="utf-8").splitlines()))


@cache
def shipped_figures() -> dict[str, Any]:
    """The embedded judge's figures on the shipped set ({} when none are shipped)."""
    path = resources.files("pipeline.analysis").joinpath(FOLDER, "figures.json")
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


# -- figures ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """A judge against hand labels on a set of real items, each weighted to stand for its stratum."""

    n: int
    kappa: float
    precision: float  # of the judge's Yes, the (weighted) share labelled Yes
    yes_rate: float  # the judge's weighted Yes rate
    label_rate: float  # the labels' weighted Yes rate
    plain_kappa: float  # unweighted, over the items as drawn

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.n, "kappa": _r(self.kappa), "precision": _r(self.precision),
                "yes_rate": _r(self.yes_rate), "label_rate": _r(self.label_rate),
                "plain_kappa": _r(self.plain_kappa)}


def _r(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 4)


def weights(items: Sequence[RealItem]) -> dict[str, float]:
    """Item id -> population / items of its stratum among ``items``."""
    counts: dict[str, int] = {}
    for i in items:
        counts[i.stratum] = counts.get(i.stratum, 0) + 1
    return {i.id: i.population / counts[i.stratum] for i in items}


def figures(items: Sequence[RealItem], verdicts: dict[str, bool]) -> Figures:
    """``verdicts`` (item id -> the judge's Yes) against the items' labels; items without a label or a
    verdict are left out."""
    scored = [i for i in items if i.label is not None and i.id in verdicts]
    w = weights(scored)
    table = [[0.0, 0.0], [0.0, 0.0]]  # [judge][label]
    plain = [[0.0, 0.0], [0.0, 0.0]]
    for i in scored:
        j, lab = int(verdicts[i.id]), int(i.label or 0)
        table[j][lab] += w[i.id]
        plain[j][lab] += 1
    total = sum(map(sum, table))
    if not total:
        return Figures(0, math.nan, math.nan, math.nan, math.nan, math.nan)
    yes = table[1][0] + table[1][1]
    return Figures(len(scored), kappa_from_counts(table).kappa, table[1][1] / yes if yes else math.nan,
                   yes / total, (table[0][1] + table[1][1]) / total, kappa_from_counts(plain).kappa)


# -- what the report says of the embedded judge ---------------------------------------------------------


def standing_lines(judges: Sequence[str], n_strata: int, embedded: str = "local") -> list[str]:
    """For an embedded judge whose corrected rates rest on a constructed check: how it did on real demo
    text (the shipped held-out figures) and what to label before trusting a number; [] otherwise."""
    from pipeline.analysis.judge_validation import items_for_width

    fig = shipped_figures()
    held = fig.get("held_out", {})
    named = [j for j in judges if j.split(" [")[0] == embedded]
    if not named or not held:
        return []
    per_kind = "; ".join(
        f"on {kind}s it says Yes to {100 * held[kind]['yes_rate']:.0f}% where the labels say "
        f"{100 * held[kind]['label_rate']:.0f}%" for kind in ("response", "summary") if held.get(kind))
    per_stratum = items_for_width(0.15)
    return [
        f"{named[0]} on real demo text ({held['all']['n']} held-out items of the shipped set, labelled by "
        f"hand): κ {held['all']['kappa']:.2f}, its Yes right {100 * held['all']['precision']:.0f}% of the "
        f"time; {per_kind}.",
        f"Before trusting a corrected number, label a real-text check of your own: `unspecific validate "
        f"judge-plan --within 0.15`, then Annotate (5, then v): {per_stratum} items a stratum (text kind x "
        f"model x verdict), about {per_stratum * n_strata} here, each stratum's share of true Yes then "
        "within +-15 points; the report then corrects with it.",
    ]
