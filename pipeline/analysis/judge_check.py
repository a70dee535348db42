"""The built-in judge check (issue 27, item 1): a judge against a set whose truth is known by construction.

The set (``judge_check_data/<domain>.jsonl``, written for this project, CC BY 4.0; see its README)
holds short original texts in three domains (news, story, blog), each with constraints it does or
does not satisfy. Each item has a kind, so a judge's errors can be read by what fooled it:
  - ``direct`` (Yes): the text plainly does it;
  - ``peripheral`` (Yes): only one passing sentence, usually the last, does it;
  - ``absent`` (No): the text never touches it;
  - ``changed_fact`` (No): a paraphrase of the text that changes the fact;
  - ``wrong_role`` (No): the right person in the wrong role;
  - ``off_by_one`` (No): the text's number, off by one.
The quick subset (one text per domain, marked ``quick``) is about 40 items in three batched calls,
for the embedded model.

This module loads the set and scores a judge's stored check (pipeline.store.judge_checks); the
judges are run by pipeline.stages.judge_check. Per judge, over all items, per domain and per kind:
accuracy, sensitivity and specificity of Yes with 95% bootstrap intervals, Cohen's kappa, and the
share of Yes whose quote was found in the text. The intervals resample items, as
pipeline.analysis.judge_validation does against people. (Resampling texts, the unit of a batched
call, was tried: every text holds the same mix of kinds, so a judge that errs alike on every text got
an interval of zero width, which claimed more than 21 texts can show.) A rate of 0 or 1 still gets
a zero-width interval: read it with its n.

It is a constructed check, not human gold: it says how a judge reads clear cases and planted
near-misses, not how it reads the benchmark's own texts.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from pipeline.analysis.stats import (
    DEFAULT_RESAMPLES,
    NAN_INTERVAL,
    Interval,
    bootstrap_ratio,
    kappa_from_counts,
)
from pipeline.store.judge_checks import CheckItem, JudgeCheck

SOURCE = "builtin"  # the judge_checks source of this check
DOMAINS = ("news", "story", "blog")
POSITIVE_KINDS = ("direct", "peripheral")
NEGATIVE_KINDS = ("absent", "changed_fact", "wrong_role", "off_by_one")
KINDS = POSITIVE_KINDS + NEGATIVE_KINDS
NOT_GOLD = ("A constructed check, not human gold: texts and constraints written for the "
            "purpose, truth known by "
            "construction. It shows how a judge reads clear cases and planted near-misses, not "
            "the benchmark's texts.")
FOUND = ("exact", "fuzzy")  # quote_found values that mean the quote is in the text


class CheckSetError(ValueError):
    """The shipped set is malformed (a packaging fault, not a user error)."""


@dataclass(frozen=True)
class CheckEntry:
    key: str  # "<domain>-<text>.<item>": the item_key stored in judge_checks
    constraint: str
    truth: bool
    kind: str


@dataclass(frozen=True)
class CheckText:
    key: str  # "<domain>-<text>"
    domain: str
    text: str
    quick: bool
    entries: tuple[CheckEntry, ...]


def _parse(domain: str, line: str, where: str) -> CheckText:
    raw = json.loads(line)
    entries = tuple(CheckEntry(str(i["id"]), str(i["constraint"]), bool(i["truth"]), str(i["kind"]))
                    for i in raw["items"])
    for e in entries:
        if (e.kind not in KINDS or e.truth != (e.kind in POSITIVE_KINDS)
            or not e.key.startswith(f"{raw['id']}.")):
            raise CheckSetError(f"{where}: item {e.key} has kind {e.kind!r} and truth "
                                f"{e.truth}, or a foreign id")
    return CheckText(str(raw["id"]), domain, str(raw["text"]), bool(raw.get("quick")), entries)


@cache
def check_set() -> tuple[CheckText, ...]:
    """Every text of the shipped set, domain by domain, in file order."""
    folder = resources.files("pipeline.analysis").joinpath("judge_check_data")
    out = []
    for domain in DOMAINS:
        path = folder.joinpath(f"{domain}.jsonl")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                out.append(_parse(domain, line, f"judge_check_data/{domain}.jsonl:{n}"))
    return tuple(out)


def selected_texts(*, quick: bool = False) -> tuple[CheckText, ...]:
    """The texts a check runs on: all of them, or the quick subset."""
    return tuple(t for t in check_set() if t.quick or not quick)


def entry_kinds(texts: Sequence[CheckText] | None = None) -> dict[str, str]:
    """Item key -> its kind, in ``texts`` (default: the shipped set)."""
    return {e.key: e.kind for t in (check_set() if texts is None else texts) for e in t.entries}


# -- a user's own set (validate judges --items FILE.jsonl) --------------------------------------------


OWN_SOURCE = "own"  # the judge_checks source of a user's own set


class CheckFileError(ValueError):
    """A user's check file is malformed: the message names the file and line."""


def load_check_file(path: str) -> tuple[CheckText, ...]:
    """A check set in the shipped set's format: one JSON object a line, ``{"id", "text", "items":
    [{"id"?, "constraint", "truth", "kind"?}], "domain"?}``. Item ids default to the item's position;
    a missing kind is ``unlabelled``; the domain defaults to ``own``. Raises CheckFileError naming the
    first bad line."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        raise CheckFileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckFileError(f"{path}: cannot be read as UTF-8 text ({exc})") from None
    texts: list[CheckText] = []
    seen: set[str] = set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        text = _own_text(line, f"{path}, line {n}")
        if text.key in seen:
            raise CheckFileError(f"{path}, line {n}: text id {text.key!r} is used twice")
        seen.add(text.key)
        texts.append(text)
    if not texts:
        raise CheckFileError(f"{path}: no texts (one JSON object a line, as "
                             "pipeline/analysis/judge_check_data/*.jsonl)")
    return tuple(texts)


def _own_text(line: str, where: str) -> CheckText:
    try:
        raw = json.loads(line)
    except ValueError as exc:
        raise CheckFileError(f"{where}: not JSON ({exc.args[0] if exc.args else exc})") from None
    if not isinstance(raw, dict):
        raise CheckFileError(f"{where}: expected a JSON object with text and items")
    text_id, text, items = raw.get("id"), raw.get("text"), raw.get("items")
    if not isinstance(text_id, (str, int)) or isinstance(text_id, bool) or str(text_id).strip() == "" \
            or "." in str(text_id):
        raise CheckFileError(f"{where}: id must be a text's name without dots, got {text_id!r}")
    if not isinstance(text, str) or not text.strip():
        raise CheckFileError(f"{where}: text must be a non-empty string")
    if not isinstance(items, list) or not items:
        raise CheckFileError(f"{where}: items must be a non-empty list of {{constraint, truth, kind}}")
    domain = raw.get("domain", "own")
    if not isinstance(domain, str) or not domain:
        raise CheckFileError(f"{where}: domain must be a string, got {domain!r}")
    entries = []
    keys: set[str] = set()
    for k, item in enumerate(items, 1):
        at = f"{where}: item {k}"
        if not isinstance(item, dict):
            raise CheckFileError(f"{at}: expected an object with constraint, truth and kind")
        constraint, truth, kind = item.get("constraint"), item.get("truth"), item.get("kind", "unlabelled")
        if not isinstance(constraint, str) or not constraint.strip():
            raise CheckFileError(f"{at}: constraint must be a non-empty string")
        if not isinstance(truth, bool):
            raise CheckFileError(f"{at}: truth must be true or false, got {truth!r}")
        if not isinstance(kind, str) or not kind:
            raise CheckFileError(f"{at}: kind must be a string, got {kind!r}")
        item_id = str(item.get("id", k))
        key = item_id if item_id.startswith(f"{text_id}.") else f"{text_id}.{item_id}"
        if key in keys:
            raise CheckFileError(f"{at}: item id {item_id!r} is used twice in this text")
        keys.add(key)
        entries.append(CheckEntry(key, constraint, truth, kind))
    return CheckText(str(text_id), domain, text, False, tuple(entries))


# -- scores ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckScore:
    judge: str
    by: str  # all | domain | kind
    group: str
    n: int  # items the judge answered
    missing: int  # items it gave no verdict on (left out of every number)
    accuracy: Interval
    sensitivity: Interval  # of Yes: of the true Yes, the share it said Yes to
    specificity: Interval  # of the true No, the share it said No to
    kappa: float
    quote_found: Interval  # of its Yes, the share whose quote was found in the text (no interval)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"judge": self.judge, "by": self.by, "group": self.group, "n": self.n,
                               "missing": self.missing, "kappa": self.kappa}
        for name in ("accuracy", "sensitivity", "specificity", "quote_found"):
            iv = getattr(self, name)
            out.update({name: iv.value, f"{name}_low": iv.low, f"{name}_high": iv.high})
        return out

    def line(self) -> str:
        """One line for beside a judge's numbers: 'built-in check: accuracy 84.0 [..], ...'."""
        kappa = "-" if math.isnan(self.kappa) else f"{self.kappa:.2f}"
        return (f"built-in check (constructed, not human gold): accuracy {self.accuracy.fmt()}, sensitivity "
                f"{self.sensitivity.fmt()}, specificity {self.specificity.fmt()}, κ {kappa}, n={self.n}")


def _score(judge: str, by: str, group: str, items: Sequence[CheckItem], n_resamples: int,
           seed: int) -> CheckScore:
    answered = [i for i in items if i.verdict is not None]
    missing = len(items) - len(answered)
    if not answered:
        return CheckScore(judge, by, group, 0, missing, NAN_INTERVAL, NAN_INTERVAL, NAN_INTERVAL, math.nan,
                          NAN_INTERVAL)
    # Per item (the unit resampled): correct, answered, true positive, positive, true negative,
    # negative, Yes with a found quote, Yes the judge was to quote (a yes_no judge's, read from P(Yes),
    # carries at most a located sentence: its quote share is "-", not 0).
    sums = np.zeros((len(answered), 8))
    for k, i in enumerate(answered):
        t, v = bool(i.truth), bool(i.verdict)
        sums[k] = [t == v, 1, t and v, t, not t and not v, not t, v and i.quote_found in FOUND,
                   v and i.p_yes is None]

    def rate(num: int, den: int) -> Interval:
        return bootstrap_ratio(sums[:, num], sums[:, den], n_resamples=n_resamples, seed=seed)

    tp, pos, tn, neg = sums[:, 2].sum(), sums[:, 3].sum(), sums[:, 4].sum(), sums[:, 5].sum()
    # Within one kind the truth never varies, and agreement beyond chance means nothing there.
    kappa = math.nan if by == "kind" else kappa_from_counts([[tp, pos - tp], [neg - tn, tn]]).kappa
    yes = sums[:, 7].sum()
    found = Interval(float(sums[:, 6].sum() / yes), math.nan, math.nan, int(yes)) if yes else NAN_INTERVAL
    return CheckScore(judge, by, group, len(answered), missing, rate(0, 1), rate(2, 3),
                      rate(4, 5), kappa, found)


def check_scores(check: JudgeCheck, *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                 texts: Sequence[CheckText] | None = None) -> list[CheckScore]:
    """A judge's stored check scored over all items, per domain, and per kind of item (kinds from
    ``texts``, default the shipped set)."""
    kinds = entry_kinds(texts)
    groups: list[tuple[str, str, list[CheckItem]]] = [("all", "all", list(check.items))]
    by_domain: dict[str, list[CheckItem]] = defaultdict(list)
    by_kind: dict[str, list[CheckItem]] = defaultdict(list)
    for item in check.items:
        by_domain[item.domain].append(item)
        by_kind[kinds.get(item.item_key, "unknown")].append(item)
    order = {d: k for k, d in enumerate(DOMAINS)}
    groups += [("domain", d, by_domain[d])
               for d in sorted(by_domain, key=lambda d: (order.get(d, len(order)), d))]
    groups += [("kind", k, by_kind[k])
               for k in (*KINDS, *sorted(set(by_kind) - set(KINDS) - {"unknown"}), "unknown")
               if k in by_kind]
    return [_score(check.judge, by, group, items, n_resamples, seed) for by, group, items in groups]
