"""The ``judge_checks`` table: each judge's check, item by item, truth against verdict.

A judge (a rater, named as pipeline.analysis.metrics names raters) is checked by a source:
``builtin`` (the constructed set of ``unspecific validate judges --builtin``, truth known by
construction) or ``people`` (people's own Yes/No, pipeline.analysis.judge_validation). Kept per
item, not as totals, so the correction (pipeline.analysis.correction) can resample the check's
items for its interval. A verdict the judge never gave is NULL: missing, never No; it counts in
no total.

A store opened read-only before schema 9 has no such table: the readers then return nothing.

``judge_calibrations`` keeps, per judge and judging mode, the threshold on P(Yes) its check chose
(pipeline.analysis.calibration): a yes_no verdict is Yes when P(Yes) reaches it. Storing one marks the
judge's texts for rescoring (pipeline.store.scores: which verdicts are uncertain moves with it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.store.database import Store, has_table, now, table_columns
from pipeline.store.scores import yes_thresholds

# In order of preference: people's verdicts on the benchmark's own texts are the better truth; then a
# user's own constructed set (validate judges --items); then the shipped one.
SOURCES = ("people", "own", "builtin")
_UPSERT = ("INSERT INTO judge_checks(judge, source, domain, item_key, truth, verdict, "
           "quote_found, p_yes, checked_at)"
           " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(judge, source, item_key) DO UPDATE SET"
           " domain = excluded.domain, truth = excluded.truth, verdict = excluded.verdict,"
           " quote_found = excluded.quote_found, p_yes = excluded.p_yes, checked_at = excluded.checked_at")


@dataclass(frozen=True)
class CheckItem:
    """One checked item: its truth and the judge's verdict on it."""

    domain: str
    item_key: str  # the item's id within its source (a built-in item's name, "constraint:text" for people)
    truth: int  # 1: the text satisfies the constraint
    verdict: int | None  # 1 yes, 0 no, None: the judge gave none
    quote_found: str | None = None  # exact | fuzzy | missing | None (no quote), as verdicts.quote_found
    p_yes: float | None = None  # a yes_no judge's P(Yes) on the item (None: a judge that wrote its verdict)
    stratum: str = ""  # people's check drawn by stratum (a real-text check): the item's stratum


@dataclass(frozen=True)
class JudgeCheck:
    """A judge's check by one source: the confusion counts over its answered items, and the items."""

    judge: str
    source: str  # people | builtin
    tp: int
    fn: int
    tn: int
    fp: int
    items: tuple[CheckItem, ...]
    # A check drawn by stratum (a real-text check: text kind x model x the judge's verdict): each
    # stratum's population when drawn. Its labelled items then stand for population / labelled items
    # of their stratum, and sensitivity and specificity are read from the weighted cells.
    populations: dict[str, int] | None = None

    def weighted_cells(self) -> tuple[float, float, float, float]:
        """tp, fn, tn, fp: plain counts, or for a stratified check each stratum's counts scaled to its
        population (a stratum with no labelled item counts nowhere)."""
        if not self.populations:
            return float(self.tp), float(self.fn), float(self.tn), float(self.fp)
        by: dict[str, list[int]] = {}
        for i in self.answered:
            cells = by.setdefault(i.stratum, [0, 0, 0, 0])
            cells[(0 if i.verdict else 1) if i.truth else (2 if not i.verdict else 3)] += 1
        out = [0.0, 0.0, 0.0, 0.0]
        for stratum, cells in by.items():
            weight = self.populations.get(stratum, 0) / sum(cells)
            out = [o + weight * c for o, c in zip(out, cells, strict=True)]
        return out[0], out[1], out[2], out[3]

    @property
    def sensitivity(self) -> float | None:
        """Of the true Yes, the share the judge says Yes to (None: no true Yes answered)."""
        tp, fn, _, _ = self.weighted_cells()
        return tp / (tp + fn) if self.tp + self.fn and tp + fn > 0 else None

    @property
    def specificity(self) -> float | None:
        """Of the true No, the share the judge says No to (None: no true No answered)."""
        _, _, tn, fp = self.weighted_cells()
        return tn / (tn + fp) if self.tn + self.fp and tn + fp > 0 else None

    @property
    def n(self) -> int:
        return self.tp + self.fn + self.tn + self.fp

    @property
    def answered(self) -> tuple[CheckItem, ...]:
        return tuple(item for item in self.items if item.verdict is not None)


def judge_check(judge: str, source: str, items: Iterable[CheckItem],
                populations: dict[str, int] | None = None) -> JudgeCheck:
    """Count a judge's items into a ``JudgeCheck`` (unanswered items kept, counted nowhere);
    ``populations``: a stratified check's stratum populations (its items carry their stratum)."""
    kept = tuple(items)
    answered = [(i.truth, i.verdict) for i in kept if i.verdict is not None]
    return JudgeCheck(judge=judge, source=source, items=kept, populations=populations,
                      tp=sum(1 for t, v in answered if t and v),
                      fn=sum(1 for t, v in answered if t and not v),
                      tn=sum(1 for t, v in answered if not t and not v),
                      fp=sum(1 for t, v in answered if not t and v))


def put_check_items(store: Store, judge: str, source: str, rows: Iterable[CheckItem]) -> int:
    """Record (or update) a judge's checked items from one source, in one transaction; returns how many."""
    if source not in SOURCES:
        raise ValueError(f"judge check source {source!r}: expected one of {', '.join(SOURCES)}")
    stamp = now()
    values = [(judge, source, r.domain, r.item_key, int(r.truth), None if r.verdict is None
               else int(r.verdict),
               r.quote_found, r.p_yes, stamp) for r in rows]
    with store.conn:
        store.conn.executemany(_UPSERT, values)
    return len(values)


def clear_checks(store: Store, judge: str, source: str) -> None:
    """Forget a judge's check from one source (before recording a new full one)."""
    if has_table(store.conn, "judge_checks"):
        with store.conn:
            store.conn.execute("DELETE FROM judge_checks WHERE judge = ? AND source = ?", (judge, source))


def all_checks(store: Store) -> list[JudgeCheck]:
    """Every (judge, source) check in the store, ordered by judge then source."""
    if not has_table(store.conn, "judge_checks"):
        return []
    grouped: dict[tuple[str, str], list[CheckItem]] = {}
    p_yes = "p_yes" if "p_yes" in table_columns(store.conn, "judge_checks") else "NULL"
    for judge, source, domain, key, truth, verdict, quote, p in store.conn.execute(
            f"SELECT judge, source, domain, item_key, truth, verdict, quote_found, {p_yes} FROM judge_checks"
            " ORDER BY judge, source, item_key"):
        grouped.setdefault((judge, source), []).append(CheckItem(domain, key, int(truth), verdict, quote, p))
    return [judge_check(judge, source, items) for (judge, source), items in grouped.items()]


def check_counts(store: Store) -> dict[str, JudgeCheck]:
    """Per judge, its check: from people when the table holds both sources, else the built-in one."""
    out: dict[str, JudgeCheck] = {}
    for check in all_checks(store):
        held = out.get(check.judge)
        if held is None or SOURCES.index(check.source) < SOURCES.index(held.source):
            out[check.judge] = check
    return out


# -- calibrations ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """A judge's threshold on P(Yes) for one judging mode, chosen on its check."""

    judge: str
    judging_mode: str
    source: str  # the check it was chosen on: people | own | builtin
    threshold: float
    rule: str  # how it was chosen (pipeline.analysis.calibration.RULE)
    n: int  # items it was chosen on
    auc: float | None  # how well P(Yes) ranks the check's items, threshold aside
    held_out_accuracy: float | None  # accuracy with each text's threshold chosen on the other texts
    calibrated_at: str | None = None


def put_calibration(store: Store, c: Calibration) -> None:
    """Record (or replace) a judge's calibration, in one transaction."""
    with store.conn:
        store.conn.execute(
            "INSERT OR REPLACE INTO judge_calibrations(judge, judging_mode, source, threshold, rule, n, auc,"
            " held_out_accuracy, calibrated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (c.judge, c.judging_mode, c.source, c.threshold, c.rule, c.n, c.auc, c.held_out_accuracy, now()))


def calibrations(store: Store) -> dict[tuple[str, str], Calibration]:
    """(judge, judging mode) -> its calibration."""
    if not has_table(store.conn, "judge_calibrations"):
        return {}
    rows = store.conn.execute("SELECT judge, judging_mode, source, threshold, rule, n, "
                              "auc, held_out_accuracy,"
                              " calibrated_at FROM judge_calibrations ORDER BY judge, judging_mode")
    return {(r[0], r[1]): Calibration(*r) for r in rows}


def judge_threshold(store: Store, judge: str, judging_mode: str) -> float:
    """The threshold a judge's P(Yes) verdicts are read at: its calibration's, else the default."""
    from pipeline.core.definitions import DEFAULT_YES_THRESHOLD

    return yes_thresholds(store.conn).get((judge, judging_mode), DEFAULT_YES_THRESHOLD)
