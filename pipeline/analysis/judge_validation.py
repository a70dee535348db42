"""The judges against people: does a text satisfy a constraint? (issue 15, item 2)

Every number rests on an LLM judge. Here people answer the judge's own question, Yes or No,
on a seeded sample of (constraint, text) items, texts being responses and their summaries,
without seeing what any judge said (the Annotate screen shows the verdicts only once the person
has answered). Then, per judge (a judge in one judging mode is a rater, as in pipeline.analysis.metrics),
over all items, per domain, per text kind, per place of the constraint in its list and per text
length:
  - accuracy, precision of Yes (of the judge's Yes, the share people call Yes), recall of Yes
    (of people's Yes, the share the judge says Yes to) and Cohen's kappa, with 95% bootstrap
    intervals over items;
  - ``yes_bias``: the judge's Yes rate minus people's, a lenient (> 0) or strict (< 0) judge.
    Position bias shows as accuracy or bias drifting from the first third of the list to the
    last (batched judging reads 39 constraints in one call); length bias as the same between
    the shorter and the longer half of the texts.

A judge's verdict is its latest one (pipeline.store.scores.LATEST_VERDICT); a missing verdict is
missing, never No: the item does not count for that judge. People's label of an item is the
adjudicator's when there is one, else the majority (ties left out).
"""

from __future__ import annotations

import csv
import math
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.analysis.stats import DEFAULT_RESAMPLES, Interval
from pipeline.analysis.validation import ADJUDICATOR
from pipeline.analysis.validation_plan import ValidationError
from pipeline.analysis.validation_sheets import (
    ImportResult,
    RowError,
    SheetKind,
    SheetRowError,
    read_answers,
    row_owner,
)
from pipeline.core.definitions import DEFAULT_RATIO
from pipeline.store.validation import (
    JudgedText,
    JudgeItem,
    StoredJudgePlan,
    TextLabelRow,
    VerdictText,
    annotator_text_labels,
    constraint_places,
    constraint_text,
    judge_plan_exists,
    judge_plan_words,
    judge_verdict_texts,
    judged_texts,
    replace_judge_plan,
    save_text_labels,
    stored_judge_plan,
    text_labels,
)
from pipeline.store.verdicts import latest_verdicts
from pipeline.store.view import store_of

if TYPE_CHECKING:
    from pipeline.store.database import Store
    from pipeline.store.view import StoreReader

DEFAULT_PLAN = "judges"
PER_STRATUM = 25  # items per (domain, text kind)
_NAN = Interval(math.nan, math.nan, math.nan, 0)


@dataclass(frozen=True)
class JudgePlan:
    name: str
    ratio: float
    seed: int
    run: str | None
    strata: dict[str, tuple[int, int]]  # "domain/kind" (or a real-text check's) -> (population, drawn)
    items: tuple[JudgeItem, ...]
    # A real-text check (``by_verdict``): the judge (rater) whose verdicts it was stratified by, and each
    # item's stratum, "kind|model|yes" or "kind|model|no". Empty: the older plan, by domain and kind.
    judge: str | None = None
    item_strata: dict[tuple[int, int], str] = field(default_factory=dict)

    @property
    def weighted(self) -> bool:
        """Drawn by the judge's verdict: its labelled items correct the judge's rates with weights."""
        return bool(self.item_strata)


STRATUM_SEP = "|"


def verdict_stratum(text_kind: str, model: str, verdict: int) -> str:
    return STRATUM_SEP.join((text_kind, model, "yes" if verdict else "no"))


def draw_judge_plan(store: Store, *, name: str = DEFAULT_PLAN, ratio: float = DEFAULT_RATIO,
                    per_stratum: int = PER_STRATUM, seed: int = 0, run: str | None = None,
                    judge: tuple[str, str] | None = None) -> JudgePlan:
    """``per_stratum`` (constraint, text) items per domain and text kind, among those a judge has
    a verdict on (nothing else can validate a judge), seeded; in one shuffled order.

    ``judge`` (judge, mode): a real-text check of that rater instead, stratified by text kind x model
    under test x its verdict, so that its rare Yes are drawn as often as its No; each stratum keeps its
    population, and the correction weights the labelled items by it."""
    if judge is not None:
        return _draw_by_verdict(store, name, ratio, per_stratum, seed, run, judge)
    population = judged_texts(store, ratio, run)
    if not population:
        raise ValidationError(f"nothing to sample: no verdict on a response or a summary at ratio {ratio:g}"
                              + (f" in run {run}" if run else ""))
    by_stratum: dict[str, list[JudgedText]] = defaultdict(list)
    for row in population:
        by_stratum[f"{row.domain}/{row.text_kind}"].append(row)
    rng = random.Random(seed)
    chosen, strata = [], {}
    for stratum in sorted(by_stratum):
        pool = by_stratum[stratum]
        picked = rng.sample(pool, min(per_stratum, len(pool)))
        strata[stratum] = (len(pool), len(picked))
        chosen += picked
    rng.shuffle(chosen)
    items = tuple(JudgeItem(k, t.constraint_id, t.generation_id, t.text_kind, t.instruction_id, t.domain)
                  for k, t in enumerate(chosen, 1))
    return JudgePlan(name, ratio, seed, run, strata, items)


def _draw_by_verdict(store: Store, name: str, ratio: float, per_stratum: int, seed: int, run: str | None,
                     judge: tuple[str, str]) -> JudgePlan:
    population = judge_verdict_texts(store, ratio, run, *judge)
    if not population:
        raise ValidationError(f"nothing to sample: judge {judge[0]} ({judge[1]}) has no verdict on a "
                              f"response or a summary at ratio {ratio:g}" + (f" in run {run}" if run else ""))
    by_stratum: dict[str, list[VerdictText]] = defaultdict(list)
    for row in population:
        by_stratum[verdict_stratum(row.text_kind, row.model, row.verdict)].append(row)
    rng = random.Random(seed)
    chosen: list[VerdictText] = []
    strata: dict[str, tuple[int, int]] = {}
    item_strata: dict[tuple[int, int], str] = {}
    for stratum in sorted(by_stratum):
        pool = by_stratum[stratum]
        picked = rng.sample(pool, min(per_stratum, len(pool)))
        strata[stratum] = (len(pool), len(picked))
        chosen += picked
        item_strata.update({(t.constraint_id, t.generation_id): stratum for t in picked})
    rng.shuffle(chosen)  # one order: the labeller cannot tell a Yes stratum from a No one
    items = tuple(JudgeItem(k, t.constraint_id, t.generation_id, t.text_kind, t.instruction_id, t.domain)
                  for k, t in enumerate(chosen, 1))
    return JudgePlan(name, ratio, seed, run, strata, items, f"{judge[0]} [{judge[1]}]", item_strata)


def items_for_width(half_width: float, share: float = 0.5, z: float = 1.96) -> int:
    """Labelled items a stratum needs for its share of true Yes to be known within +-``half_width``
    (95%; ``share`` 0.5 is the worst case): z^2 p (1 - p) / h^2, rounded up."""
    if not 0 < half_width < 1:
        raise ValidationError(f"the wanted interval's half-width must be between 0 and 1, got {half_width:g}")
    return math.ceil(z * z * share * (1 - share) / (half_width * half_width))


def save_judge_plan(store: Store, plan: JudgePlan, *, replace: bool = False) -> None:
    from pipeline.store.database import now

    if judge_plan_exists(store, plan.name) and not replace:
        raise ValidationError(f"a judge plan named {plan.name!r} exists; pass --replace to draw it again "
                              "(labels are kept) or --name for another plan")
    params: dict[str, Any] = {"strata": plan.strata}
    if plan.weighted:
        params.update(judge=plan.judge, item_strata=[[c, g, s] for (c, g), s in plan.item_strata.items()])
    replace_judge_plan(store, StoredJudgePlan(plan.name, plan.ratio, plan.seed, plan.run, params, plan.items),
                       now())


def load_judge_plan(reader: StoreReader, name: str | None = None) -> JudgePlan | None:
    """A stored judge plan by name, or the newest; None when there is none."""
    store = store_of(reader)
    row = stored_judge_plan(store, name)
    if row is None:
        return None
    strata = {k: (int(v[0]), int(v[1])) for k, v in row.params["strata"].items()}
    item_strata = {(int(c), int(g)): str(s) for c, g, s in row.params.get("item_strata", [])}
    return JudgePlan(row.name, row.ratio, row.seed, row.run, strata, row.items, row.params.get("judge"),
                     item_strata)


# -- people's answers --------------------------------------------------------------------------


def people_verdict(by: dict[str, int]) -> int | None:
    if ADJUDICATOR in by:
        return by[ADJUDICATOR]
    yes = sum(by.values())
    no = len(by) - yes
    return None if yes == no else int(yes > no)


# -- the judges' scores ------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeScore:
    judge: str  # a rater: the judge, or "judge [mode]" when it judged in both modes
    by: str  # all | domain | text | position | length
    group: str
    n: int  # items with the judge's verdict and people's label
    accuracy: Interval
    precision: Interval  # of Yes
    recall: Interval  # of Yes
    kappa: Interval
    yes_bias: float  # the judge's Yes rate minus people's

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"judge": self.judge, "by": self.by, "group": self.group, "n": self.n,
                               "yes_bias": self.yes_bias}
        for name in ("accuracy", "precision", "recall", "kappa"):
            iv = getattr(self, name)
            out.update({name: iv.value, f"{name}_low": iv.low, f"{name}_high": iv.high})
        return out

    def line(self) -> str:
        """'accuracy 84.0 [78.0, 90.0], κ 0.66 [0.52, 0.79], n=150': for the report beside a judge."""
        return (f"accuracy {self.accuracy.fmt()}, κ {self.kappa.fmt(2, 1.0)}, Yes precision "
                f"{self.precision.fmt()}, recall {self.recall.fmt()}, n={self.n}")


def judge_scores(reader: StoreReader, plan: JudgePlan | None = None, *, n_resamples: int = DEFAULT_RESAMPLES,
                 seed: int = 0) -> list[JudgeScore]:
    """Every judge against people's labels of ``plan`` (the newest judge plan; none: no scores)."""
    store = store_of(reader)
    plan = plan or load_judge_plan(store)
    if plan is None or not plan.items:
        return []
    labels = text_labels(store)
    people = {(i.constraint_id,
               i.generation_id): people_verdict(labels.get((i.constraint_id, i.generation_id), {}))
              for i in plan.items}
    verdicts: dict[tuple[int, int], dict[tuple[str, str], int]] = defaultdict(dict)
    for v in latest_verdicts(store, sorted({i.generation_id for i in plan.items})):
        if v.verdict is not None:
            verdicts[(v.constraint_id, v.generation_id)][(v.judge, v.judging_mode)] = int(v.verdict)
    from pipeline.analysis.metrics import rater_names

    raters = sorted({r for by in verdicts.values() for r in by})
    names = dict(zip(raters, rater_names(raters)))
    groups = _groups(store, plan)
    out = []
    for rater in raters:
        for by, group, members in groups:
            pairs = [(verdicts[k][rater], person) for k in members
                     if (person := people.get(k)) is not None and rater in verdicts.get(k, {})]
            if pairs or by == "all":
                out.append(_score(names[rater], by, group, pairs, n_resamples, seed))
    return out


def _groups(store: Store, plan: JudgePlan) -> list[tuple[str, str, list[tuple[int, int]]]]:
    """(by, group, items): all; per domain; per text kind; per third of the constraint list; per
    half of the texts by length."""
    keys = {i.position: (i.constraint_id, i.generation_id) for i in plan.items}
    out: list[tuple[str, str, list[tuple[int, int]]]] = [("all", "all", list(keys.values()))]
    for attr, by in (("domain", "domain"), ("text_kind", "text")):
        split: dict[str, list] = defaultdict(list)
        for i in plan.items:
            split[getattr(i, attr)].append(keys[i.position])
        out += [(by, g, split[g]) for g in sorted(split)]
    place = constraint_places(store, plan.name)
    thirds: dict[str, list] = defaultdict(list)
    for i in plan.items:
        pos, n = place.get(i.constraint_id, (None, 0))
        if pos and n:
            thirds[("first", "middle", "last")[min(2, (pos - 1) * 3 // n)]
                   + " third"].append(keys[i.position])
    out += [("position", g, thirds[g]) for g in ("first third", "middle third", "last third") if g in thirds]
    words = judge_plan_words(store, plan.name)
    known = sorted(w for w in words.values() if w is not None)
    if known:
        median = known[len(known) // 2]
        halves: dict[str, list] = defaultdict(list)
        for i in plan.items:
            w = words.get(i.generation_id)
            if w is not None:
                halves[f"shorter than {median} words" if w < median else f"{median} words or more"].append(
                    keys[i.position])
        out += [("length", g, halves[g]) for g in sorted(halves, key=lambda g: not g.startswith("shorter"))]
    return out


def _score(judge: str, by: str, group: str, pairs: Sequence[tuple[int, int]], n_resamples: int,
           seed: int, alpha: float = 0.05) -> JudgeScore:
    n = len(pairs)
    if n == 0:
        return JudgeScore(judge, by, group, 0, _NAN, _NAN, _NAN, _NAN, math.nan)
    j = np.array([a for a, _ in pairs], dtype=float)
    h = np.array([b for _, b in pairs], dtype=float)
    cells = np.stack([j * h, j * (1 - h), (1 - j) * h, (1 - j) * (1 - h)])  # tp, fp, fn, tn per item
    point = _stats(cells.sum(axis=1)[:, None])
    if n > 1:
        idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
        boot = _stats(cells[:, idx].sum(axis=2))
    else:
        boot = [np.array([math.nan])] * 4

    def interval(k: int) -> Interval:
        samples = boot[k][~np.isnan(boot[k])]
        low, high = np.quantile(samples, [alpha / 2, 1 - alpha / 2]) if samples.size else (math.nan, math.nan)
        return Interval(float(point[k][0]), float(low), float(high), n)

    return JudgeScore(judge, by, group, n, interval(0), interval(1), interval(2), interval(3),
                      float(j.mean() - h.mean()))


def _stats(sums: np.ndarray) -> list[np.ndarray]:
    """Accuracy, precision and recall of Yes, kappa, from (4, k) sums of tp, fp, fn, tn."""
    tp, fp, fn, tn = sums
    n = tp + fp + fn + tn
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = (tp + tn) / n
        precision = np.where(tp + fp > 0, tp / (tp + fp), np.nan)
        recall = np.where(tp + fn > 0, tp / (tp + fn), np.nan)
        p_e = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
        kappa = np.where(np.isclose(p_e, 1.0), np.nan, (accuracy - p_e) / (1 - p_e))
    return [accuracy, precision, recall, kappa]


def judge_validation_by_name(scores: Sequence[JudgeScore]) -> dict[str, JudgeScore]:
    """Each judge's overall score (the ``all`` group), for the report to print beside the judge."""
    return {s.judge: s for s in scores if s.by == "all" and s.n > 0}


def validated_score(judge: str, validated: dict[str, JudgeScore]) -> JudgeScore | None:
    """The judge's overall score, if people validated it. Rater names can differ between the
    whole store and the plan's items ("j [batched]" where the store has j in two modes and the plan
    holds one): a rater named "judge [mode]" falls back to the judge's plain name."""
    return validated.get(judge) or validated.get(judge.split(" [")[0])


def describe(judge: str, validated: dict[str, JudgeScore]) -> str:
    """One judge's validation as the report prints it beside the judge's numbers, or
    "unvalidated"."""
    score = validated_score(judge, validated)
    if score is None:
        return f"{judge}: unvalidated (no people's answers on its verdicts: `unspecific validate judge-plan`)"
    return f"{judge}: {score.line()}"


# -- sheets ------------------------------------------------------------------------------------

JUDGE_SHEET_COLUMNS = ("plan", "item", "constraint_id", "text_id", "text_kind", "domain",
                       "main_task", "constraint",
                       "text", "annotator", "answer", "note")
_ANSWERS = {"yes": 1, "y": 1, "1": 1, "no": 0, "n": 0, "0": 0}
JUDGE_SHEET = SheetKind("judge sheet", "`unspecific validate export --judges`", "answer", "text_id", "text",
                        "judge plan", "generation_id")


def _answer(raw: str, row: dict[str, str]) -> int:
    if raw not in _ANSWERS:
        raise SheetRowError(f"answer {row.get('answer')!r} is not yes or no (or y, n, 1, 0)")
    return _ANSWERS[raw]


def _answered_twice(who: str, position: int, _answer: int, _first: int, where: RowError) -> str:
    return f"{who} answers item {position} both yes and no ({where.sheet}:{where.line})"


def judge_sheet_rows(store: Store, plan: JudgePlan, *, annotator: str = "") -> list[dict[str, Any]]:
    """One row per judge-plan item: the constraint and the text, nothing any judge said; the
    ``answer`` column pre-filled with ``annotator``'s answers so far."""
    mine = {key: ("yes" if given.answer else "no", given.note)
            for key, given in annotator_text_labels(store, annotator).items()}
    rows = []
    for i in plan.items:
        texts = constraint_text(store, i.constraint_id, i.generation_id)
        if texts is None:
            raise ValidationError(f"judge plan {plan.name!r} item {i.position}: constraint "
                                  f"{i.constraint_id} or text "
                                  f"{i.generation_id} is no longer in the store; draw the "
                                  "plan again (--replace)")
        answer, note = mine.get((i.constraint_id, i.generation_id), ("", ""))
        rows.append({"plan": plan.name, "item": i.position, "constraint_id": i.constraint_id,
                     "text_id": i.generation_id, "text_kind": i.text_kind, "domain": i.domain,
                     "main_task": texts.main_task, "constraint": texts.constraint, "text": texts.text,
                     "annotator": annotator, "answer": answer, "note": note})
    return rows


def is_judge_sheet(path: str | Path) -> bool:
    """A judge sheet has a ``text_id`` column; a metric sheet a ``response_id`` one."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            return "text_id" in (next(csv.reader(fh), None) or [])
    except OSError as exc:
        raise ValidationError(f"{path}: cannot read the sheet ({exc})") from exc


def import_judge_sheets(store: Store, paths: Sequence[str | Path], *, annotator: str | None = None,
                        plan: JudgePlan | None = None) -> ImportResult:
    """Answered judge sheets back into ``text_labels``; as pipeline.analysis.validation.import_sheets:
    every row checked first, errors name the sheet and row, nothing saved when any is wrong,
    rows without an answer skipped."""
    from pipeline.store.database import now

    owner = partial(row_owner, annotator=annotator, plan=plan, plans={plan.name: plan} if plan else {},
                    load=lambda name: load_judge_plan(store, name), default_plan=DEFAULT_PLAN,
                    what="judge plan")
    result = ImportResult()
    answers = read_answers(paths, JUDGE_SHEET, result, owner, _answer, _answered_twice)
    rows = [TextLabelRow(cid, gid, who, answer, note) for (cid, gid, who), (answer, note) in answers.items()]
    return result.unless_failed(lambda: save_text_labels(store, rows, now()), len(rows))
