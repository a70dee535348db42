"""Human labels: agreement between annotators, and the metric's superficial call against people."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from pipeline.analysis.metrics.base import Filters
from pipeline.analysis.metrics.items import Item, constraint_items
from pipeline.analysis.stats import Agreement, PrecisionRecall, cohen_kappa, precision_recall

if TYPE_CHECKING:
    from pipeline.store.database import Store


@dataclass(frozen=True)
class AnnotatorAgreement:
    annotator_a: str
    annotator_b: str
    kappa: float
    percent: float
    n: int  # items both labelled

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _annotations(store: Store) -> dict[tuple[int, int], dict[str, str]]:
    out: dict[tuple[int, int], dict[str, str]] = defaultdict(dict)
    for cid, gid, annotator, label in store.conn.execute(
        "SELECT constraint_id, generation_id, annotator, label FROM annotations WHERE label IS NOT NULL"
    ):
        out[(cid, gid)][annotator] = label
    return out


def annotator_agreement(store: Store, *, exclude_ambiguous: bool = False) -> list[AnnotatorAgreement]:
    """Cohen's kappa and percent agreement for each pair of annotators over the items both
    labelled, on the three labels (or two, with ``exclude_ambiguous``: items either person
    called ambiguous are left out)."""
    labels = _annotations(store)
    annotators = sorted({a for by in labels.values() for a in by})
    out = []
    for i, a in enumerate(annotators):
        for b in annotators[i + 1 :]:
            shared = [(by[a], by[b]) for by in labels.values() if a in by and b in by]
            if exclude_ambiguous:
                shared = [(x, y) for x, y in shared if "ambiguous" not in (x, y)]
            if not shared:
                out.append(AnnotatorAgreement(a, b, math.nan, math.nan, 0))
                continue
            ag: Agreement = cohen_kappa([x for x, _ in shared], [y for _, y in shared])
            out.append(AnnotatorAgreement(a, b, ag.kappa, ag.percent, ag.n))
    return out


@dataclass(frozen=True)
class Validation:
    """The metric's "superficial" call (= flipped at the ratio) against human labels."""

    result: PrecisionRecall
    ratio: float
    annotator: str | None  # None: the majority label over annotators (ties left out)
    ambiguous: int  # items labelled ambiguous: left out
    ties: int  # items whose annotators split evenly: left out
    not_applicable: int  # labelled items the metric did not call Yes on the full response, or unjudged

    def as_dict(self) -> dict[str, Any]:
        return {**self.result.as_dict(), "ratio": self.ratio, "annotator": self.annotator,
                "ambiguous_excluded": self.ambiguous, "ties_excluded": self.ties,
                "not_applicable": self.not_applicable}


def metric_validation(store: Store, *, ratio: float = 0.25, annotator: str | None = None,
                      filters: Filters | None = None) -> Validation:
    """Precision and recall of the metric's superficial call against people.

    Positive = label ``superficial``, negative = ``integrated``; ``ambiguous`` is left out and
    counted. An item is (constraint, response); the metric's call is "flipped at ``ratio``".
    Items the judges did not pass on the full response are outside the metric's scope."""
    items = {(i.constraint_id, i.response_id): i for i in constraint_items(store, filters, ratio=ratio)}
    return validate_labels(items, _annotations(store), ratio=ratio, annotator=annotator)


def validate_labels(items: dict[tuple[int, int], Item], labels: dict[tuple[int, int], dict[str, str]], *,
                    ratio: float, annotator: str | None = None) -> Validation:
    """``metric_validation`` over items already read (keyed by (constraint, response)) and labels
    (annotator -> label per item): the Annotate screen scores its own list by this same rule."""
    predicted, truth = [], []
    ambiguous = ties = not_applicable = 0
    for key, by in labels.items():
        if annotator is not None:
            if annotator not in by:
                continue
            label = by[annotator]
        else:
            votes = defaultdict(int)
            for value in by.values():
                votes[value] += 1
            best = max(votes.values())
            top = [v for v, c in votes.items() if c == best]
            if len(top) > 1:
                ties += 1
                continue
            label = top[0]
        if label == "ambiguous":
            ambiguous += 1
            continue
        item = items.get(key)
        # not >= : an item with no call any more (NaN scores) is outside the metric's scope too.
        if item is None or not item.full_score >= 0.5 or label not in ("superficial", "integrated"):
            not_applicable += 1
            continue
        predicted.append(item.flipped)
        truth.append(label == "superficial")
    return Validation(precision_recall(predicted, truth), ratio, annotator, ambiguous, ties, not_applicable)
