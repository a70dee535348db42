"""What the screens read from the store: queries by indexed keys, with small caches.

The app never rebuilds the world on a key press. ``StoreView`` answers the per-constraint
questions of the Audit screen with a handful of primary-key / indexed lookups and caches
each instruction's texts. ``Analysis`` is the store-wide pass (the per-text totals the store
keeps, pipeline.store.scores) that the Instructions, Annotate and Report screens share; it runs in
a worker thread on its own connection.
"""

from __future__ import annotations

import math
import sqlite3
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.store.queries import Writer
from pipeline.store.scores import SHOWN_VERDICT

FLAG_NAMES = ("proper_noun", "specificity_leak", "copied_ngram", "duplicate")  # pipeline.analysis.flags names
# A constraint passes a text when the judges' mean verdict is >= 0.5 (pipeline.analysis.metrics.Item).
PASS_THRESHOLD = 0.5
DEFAULT_RATIO = 0.25




def passes(score: float | None) -> bool:
    return score is not None and score >= PASS_THRESHOLD


def connect(path: str | Path, *, readonly: bool = True) -> sqlite3.Connection:
    """A connection for a worker thread; read-only ones never block a writer under WAL."""
    if readonly:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    else:
        conn = sqlite3.connect(str(path), check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 10000")
    conn.row_factory = sqlite3.Row
    return conn


# -- per-constraint audit data -------------------------------------------------------------


@dataclass
class Constraint:
    id: int
    instruction_id: int
    position: int | None
    text: str
    origin: str
    active: bool
    replaces_id: int | None
    replaced_reason: str | None
    base_verdict: int | None
    base_quote: str | None


@dataclass
class Generation:
    id: int
    kind: str
    model: str
    mode: str  # a response's direct | edit; '' for base articles and summaries
    ratio: float | None
    parent_id: int | None
    text_hash: str
    text: str
    words: int | None


@dataclass
class InstructionData:
    id: int
    run_id: str
    domain: str
    condition: str
    main_task: str
    article_a: str
    article_b: str
    base: Generation | None
    # Keyed by writer (model, mode): one model's direct and edit responses are different texts.
    responses: dict[Writer, Generation]
    summaries: dict[tuple[Writer, float], Generation]  # (writer, ratio) -> summary
    constraints: dict[int, Constraint]  # every constraint, replaced ones too
    generations: dict[int, Generation]  # every text of the instruction, by id

    @property
    def writers(self) -> list[Writer]:
        return sorted(self.responses)

    @property
    def ratios(self) -> list[float]:
        return sorted({r for _, r in self.summaries}, reverse=True)

    def summary(self, writer: Writer, ratio: float) -> Generation | None:
        return self.summaries.get((writer, ratio))


@dataclass
class Verdict:
    generation_id: int
    judge: str
    kind: str  # response | summary | base
    model: str  # the model under test (for a summary, its response's)
    mode: str  # the response's mode (for a summary, its response's)
    ratio: float | None
    verdict: int | None  # None: missing (no usable verdict from the judge), never a No
    quote: str
    reason: str
    quote_found: str | None
    quote_score: float | None


class StoreView:
    """Read access for the UI thread: indexed lookups, cached per instruction."""

    def __init__(self, conn: sqlite3.Connection, path: Path, *, cache_size: int = 64) -> None:
        self.conn = conn
        self.path = path
        self._instructions: OrderedDict[int, InstructionData] = OrderedDict()
        self._cache_size = cache_size
        self._order: list[tuple[int, int]] | None = None
        self._outcomes: OrderedDict[tuple[int, Writer, float], dict[int, Any]] = OrderedDict()

    def _rows(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        cur = self.conn.execute(sql, params)
        cur.row_factory = sqlite3.Row
        return cur.fetchall()

    def forget(self) -> None:
        """Drop the caches: the store changed under us (a stage wrote)."""
        self._instructions.clear()
        self._outcomes.clear()
        self._order = None

    # -- ordering ------------------------------------------------------------------------
    def constraint_order(self, run_id: str | None = None) -> list[tuple[int, int]]:
        """Active constraints as (constraint id, instruction id), in instruction then list order."""
        if self._order is None:
            sql = ("SELECT c.id, c.instruction_id FROM constraints c JOIN instructions i ON i.id = c.instruction_id"
                   " WHERE c.active = 1" + (" AND i.run_id = ?" if run_id else "") +
                   " ORDER BY c.instruction_id, c.position")
            self._order = [(r[0], r[1]) for r in self.conn.execute(sql, (run_id,) if run_id else ())]
        return self._order

    def flagged_ids(self) -> dict[int, set[str]]:
        out: dict[int, set[str]] = {}
        for cid, flag in self.conn.execute("SELECT constraint_id, flag FROM constraint_flags"):
            out.setdefault(cid, set()).add(flag)
        return out

    # -- one instruction -----------------------------------------------------------------
    def instruction(self, iid: int) -> InstructionData:
        hit = self._instructions.get(iid)
        if hit is not None:
            self._instructions.move_to_end(iid)
            return hit
        data = self._load_instruction(iid)
        self._instructions[iid] = data
        if len(self._instructions) > self._cache_size:
            self._instructions.popitem(last=False)
        return data

    def _text(self, h: str | None) -> str:
        if not h:
            return ""
        row = self.conn.execute("SELECT body FROM texts WHERE hash = ?", (h,)).fetchone()
        return row[0] if row else ""

    def _load_instruction(self, iid: int) -> InstructionData:
        row = self.conn.execute(
            "SELECT i.id, i.run_id, i.domain, i.condition, i.main_task, a.text_hash, b.text_hash"
            " FROM instructions i LEFT JOIN articles a ON a.id = i.article_a LEFT JOIN articles b ON b.id = i.article_b"
            " WHERE i.id = ?", (iid,)).fetchone()
        if row is None:
            raise KeyError(iid)
        gens = [Generation(r["id"], r["kind"], r["model"] or "", r["mode"] or "", r["ratio"], r["parent_id"],
                           r["text_hash"], self._text(r["text_hash"]), r["words"])
                for r in self._rows("SELECT id, kind, model, mode, ratio, parent_id, text_hash, words FROM generations"
                                    " WHERE instruction_id = ? ORDER BY id", (iid,))]
        by_id = {g.id: g for g in gens}
        responses = {Writer(g.model, g.mode): g for g in gens if g.kind == "response"}
        summaries: dict[tuple[Writer, float], Generation] = {}
        for g in gens:
            parent = by_id.get(g.parent_id) if g.kind == "summary" else None
            if parent is not None:
                # The first summary at a ratio, as pipeline.store.queries.item_outcomes keeps.
                summaries.setdefault((Writer(parent.model, parent.mode), g.ratio or 0.0), g)
        base = next((g for g in gens if g.kind == "base"), None)
        constraints = {
            r["id"]: Constraint(r["id"], iid, r["position"], r["text"], r["origin"] or "", bool(r["active"]),
                                r["replaces_id"], r["replaced_reason"], r["base_verdict"], r["base_quote"])
            for r in self._rows("SELECT * FROM constraints WHERE instruction_id = ?", (iid,))
        }
        return InstructionData(row[0], row[1] or "", row[2] or "", row[3] or "", row[4] or "", self._text(row[5]),
                               self._text(row[6]), base, responses, summaries, constraints, by_id)

    def outcomes(self, iid: int, writer: Writer, ratio: float) -> dict[int, Any]:
        """pipeline.analysis.metrics.Item per constraint of ``writer``'s response to ``iid`` at ``ratio``:
        the flipped / pass-both call every screen and report shares, read once per response."""
        key = (iid, writer, ratio)
        hit = self._outcomes.get(key)
        if hit is None:
            from pipeline.store.queries import item_outcomes

            hit = self._outcomes[key] = item_outcomes(self.conn, self.path, iid, writer, ratio)
            if len(self._outcomes) > self._cache_size:
                self._outcomes.popitem(last=False)
        self._outcomes.move_to_end(key)
        return hit

    # -- one constraint ------------------------------------------------------------------
    def verdicts(self, cid: int) -> list[Verdict]:
        return [
            Verdict(r["generation_id"], r["judge"], r["kind"], r["model"] or "", r["mode"] or "", r["ratio"],
                    r["verdict"],
                    r["quote"] or "", r["reason"] or "", r["quote_found"], r["quote_score"])
            for r in self._rows(
                # A summary's own model is the summarizer; the model under test is its response's.
                "SELECT v.generation_id, v.judge, v.verdict, v.quote, v.reason, v.quote_found, v.quote_score,"
                " g.kind, coalesce(r.model, g.model) AS model, coalesce(r.mode, g.mode) AS mode, g.ratio FROM verdicts v"
                " JOIN generations g ON g.id = v.generation_id"
                " LEFT JOIN generations r ON r.id = g.parent_id AND g.kind = 'summary'"
                f" WHERE v.constraint_id = ? AND {SHOWN_VERDICT} ORDER BY v.judge", (cid,))
        ]

    def flags(self, cid: int) -> dict[str, str]:
        return {r[0]: r[1] or "" for r in self.conn.execute(
            "SELECT flag, detail FROM constraint_flags WHERE constraint_id = ?", (cid,))}

    def embedding(self, h: str, model: str | None = None) -> tuple[str, list[float]] | None:
        sql = "SELECT model, vector FROM embeddings WHERE text_hash = ?" + (" AND model = ?" if model else "")
        row = self.conn.execute(sql, (h, model) if model else (h,)).fetchone()
        if row is None:
            return None
        import numpy as np

        return row[0], np.frombuffer(row[1], dtype=np.float32).tolist()


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


# -- store-wide analysis ---------------------------------------------------------------------


@dataclass
class InstructionRow:
    """Org / Core / superficial start as the judges' mean per constraint and are replaced by
    pipeline.analysis.metrics' per-rater values when those are computed (``merge_metrics``)."""

    instruction_id: int
    run_id: str
    domain: str
    condition: str
    model: str
    mode: str  # direct | edit: the model's two responses are two rows
    response_id: int
    n: int
    org: float | None
    core: float | None
    passed: int  # constraints satisfied on the full response
    flipped: int
    superficial: float | None  # flipped / passed
    flags: dict[str, int]
    disagree: int
    quote_missing: int

    @property
    def writer(self) -> Writer:
        return Writer(self.model, self.mode)


@dataclass
class Analysis:
    ratio: float
    models: list[str]
    ratios: list[float]
    rows: list[InstructionRow]
    metrics: Any = None  # pipeline.analysis.metrics.Metrics, once computed
    # Each judge's score against people (pipeline.analysis.judge_validation), with the metrics; a judge not
    # in it is unvalidated.
    judges_validated: dict[str, Any] = field(default_factory=dict)

    @property
    def writers(self) -> list[Writer]:
        return sorted({r.writer for r in self.rows})

    @property
    def modes(self) -> list[str]:
        return sorted({r.mode for r in self.rows})

    def flipped_instructions(self, writer: Writer | None) -> set[int]:
        """Instructions with a constraint that flipped on ``writer``'s response at the ratio."""
        return {r.instruction_id for r in self.rows if r.writer == writer and r.flipped}

    @property
    def n_flipped(self) -> int:
        return sum(r.flipped for r in self.rows)


def compute_analysis(conn: sqlite3.Connection, *, run_id: str | None = None, ratio: float | None = None) -> Analysis:
    """One row per (instruction, model, mode) from the store's per-text totals (pipeline.store.scores):
    some 40,000 rows for a benchmark of 10,000 instructions, never its millions of verdicts.
    Per-constraint outcomes are read when a screen shows a constraint."""
    from pipeline.store.scores import current_text_scores, drop_temp_scores

    run_sql, run_args = (" AND i.run_id = ?", (run_id,)) if run_id else ("", ())
    current_text_scores(conn)  # read-only: fresh totals of changed texts on the side
    try:
        gens = conn.execute(
            "SELECT g.id, g.kind, g.instruction_id, g.model, g.ratio, g.parent_id, t.judged, t.passed, t.score_sum,"
            " t.disagree, t.missing, t.flipped, coalesce(g.mode, '') FROM generations g JOIN instructions i ON i.id = g.instruction_id"
            " LEFT JOIN text_items t ON t.gid = g.id WHERE g.kind IN ('response', 'summary')" + run_sql,
            run_args).fetchall()
    finally:
        drop_temp_scores(conn)
    ratios = sorted({g[4] for g in gens if g[1] == "summary" and g[4] is not None}, reverse=True)
    if ratio is None or ratio not in ratios:
        ratio = DEFAULT_RATIO if DEFAULT_RATIO in ratios or not ratios else ratios[0]
    summary_of: dict[int, Any] = {}
    for g in sorted(gens, key=lambda g: g[0]):  # the first summary at the ratio (by id), as Audit shows
        if g[1] == "summary" and g[4] == ratio:
            summary_of.setdefault(g[5], g)
    n_active = dict(conn.execute(
        "SELECT c.instruction_id, count(*) FROM constraints c JOIN instructions i ON i.id = c.instruction_id"
        " WHERE c.active = 1" + run_sql + " GROUP BY c.instruction_id", run_args).fetchall())
    flag_counts: dict[int, dict[str, int]] = {}
    for iid, flag, count in conn.execute(
        "SELECT c.instruction_id, f.flag, count(DISTINCT c.id) FROM constraint_flags f"
        " JOIN constraints c ON c.id = f.constraint_id JOIN instructions i ON i.id = c.instruction_id"
        " WHERE c.active = 1" + run_sql + " GROUP BY c.instruction_id, f.flag", run_args):
        flag_counts.setdefault(iid, {})[flag] = count
    meta = {r[0]: r[1:] for r in conn.execute(
        "SELECT id, run_id, domain, condition FROM instructions" + (" WHERE run_id = ?" if run_id else ""), run_args)}
    rows: list[InstructionRow] = []
    for gid, _, iid, model, _, _, judged, passed, score_sum, disagree, missing, _, mode in sorted(
            (g for g in gens if g[1] == "response"), key=lambda g: (g[2], g[3] or "", g[12])):
        summary = summary_of.get(gid)
        flipped = (summary[11] or 0) if summary is not None else 0
        core = summary[8] / summary[6] if summary is not None and summary[6] else None
        run, domain, condition = meta.get(iid, ("", "", ""))
        flags = flag_counts.get(iid, {})
        rows.append(InstructionRow(
            iid, run or "", domain or "", condition or "", model or "", mode, gid, n_active.get(iid, 0),
            score_sum / judged if judged else None, core, passed or 0, flipped,
            flipped / passed if passed else None, {f: flags.get(f, 0) for f in FLAG_NAMES},
            disagree or 0, missing or 0))
    models = sorted({r.model for r in rows})
    return Analysis(ratio, models, ratios, rows)


def merge_metrics(analysis: Analysis, metrics: Any) -> Analysis:
    """Take Org, Core and the superficial share from pipeline.analysis.metrics (the report's numbers)."""
    by_response = {r.response_id: r for r in metrics.rows if r.ratio is not None and abs(r.ratio - analysis.ratio) < 1e-9}
    full_only = {r.response_id: r for r in metrics.rows if r.ratio is None}
    for row in analysis.rows:
        m = by_response.get(row.response_id)
        if m is not None:
            row.org, row.core = m.org, m.core
            sup = m.superficial
            row.superficial = None if math.isnan(sup) else sup
        elif row.response_id in full_only:
            row.org = full_only[row.response_id].org
    analysis.metrics = metrics
    return analysis
