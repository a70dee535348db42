"""The app's read-only view of the store: every query a screen makes, typed, behind one object.

The app receives a ``StoreView`` and never a connection: screens ask it for an instruction's
texts and constraints, a constraint's verdicts and flags, the runs, what a step wrote, and the
per-text totals the store keeps. ``StoreView.open`` connects read-only (under WAL a reader never
blocks a writer); the app writes people's labels and marks through the store's narrow writer
(pipeline.store.app_writer) and runs stages through pipeline.stages, which open their own Store.

pipeline.analysis's reading functions take a ``StoreReader``: the Store a command opened, or a view.
The app hands them its view whole; only pipeline code turns a view into a Store (``store_of``), so
the app never holds one (tests/test_layers.py).

A response is named by its writer, (model under test, response mode): one model answers an
instruction directly and, in edit mode, by editing a draft, and the two are different texts with
different verdicts. Every verdict shown is picked by pipeline.store.scores' rules
(pipeline.store.verdicts).

May import: pipeline.core, pipeline.store.
"""

from __future__ import annotations

import importlib
import sqlite3
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, Self, TypeAlias

from pipeline.core.definitions import same_ratio
from pipeline.store.database import Store, open_store, table_columns
from pipeline.store.imports import RUN_KIND as IMPORT_RUN_KIND
from pipeline.store.scores import current_text_scores, drop_temp_scores


class _Deferred:
    """A module imported at its first use. The app's first screen reads none of these tables, and
    their modules (a dozen dataclasses) took some 20 ms of every start to import."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        module: ModuleType = importlib.import_module(self._name)
        return getattr(module, attribute)


if TYPE_CHECKING:
    from pipeline.store import annotations as annotations_table
    from pipeline.store import validation as validation_tables
    from pipeline.store import verdicts as verdicts_table
    from pipeline.store.verdicts import Verdict
else:
    annotations_table = _Deferred("pipeline.store.annotations")
    validation_tables = _Deferred("pipeline.store.validation")
    verdicts_table = _Deferred("pipeline.store.verdicts")


class Writer(NamedTuple):
    """Who wrote a response: the model under test and the response mode (direct | edit)."""

    model: str
    mode: str

    @property
    def label(self) -> str:
        """Plain text ("m1 [edit]"); escape ``[`` before putting it in Rich markup."""
        return f"{self.model} [{self.mode}]" if self.mode else self.model


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
    # The response refuses the task (pipeline.core.text.is_refusal, flagged as it is stored): the
    # model's answer, scored as such, and marked wherever a screen shows it.
    refusal: bool = False


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
    # The constraint gate's ledgers by stage (synthesis, revision, import), as stored (JSON decoded).
    gate: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def writers(self) -> list[Writer]:
        return sorted(self.responses)

    @property
    def ratios(self) -> list[float]:
        return sorted({r for _, r in self.summaries}, reverse=True)

    def summary(self, writer: Writer, ratio: float) -> Generation | None:
        """The writer's summary at ``ratio`` (compared by same_ratio, never float equality)."""
        found = self.summaries.get((writer, ratio))
        if found is None:
            found = next((g for (w, r), g in self.summaries.items() if w == writer
                          and same_ratio(r, ratio)), None)
        return found


@dataclass(frozen=True)
class RunRow:
    id: str
    kind: str
    status: str
    started_at: str | None
    calls: int | None
    cache_hits: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None
    error: str | None


@dataclass(frozen=True)
class TextTotals:
    """A response's or summary's stored per-text totals (pipeline.store.scores ``text_items``);
    None where the text has no totals (nothing judged)."""

    id: int
    kind: str  # response | summary
    instruction_id: int
    model: str | None
    ratio: float | None
    parent_id: int | None
    judged: int | None
    passed: int | None
    score_sum: float | None
    disagree: int | None
    missing: int | None
    flipped: int | None
    mode: str
    # A response that refuses the task (Generation.refusal); keyword-only: the query's row fills the rest.
    refusal: bool = field(default=False, kw_only=True)


# The tables a step may add rows to, by name: only these are ever put into SQL text.
WRITTEN_TABLES = ("articles", "pairs", "instructions", "constraints", "generations", "verdicts")

# How many units of each Build stage the store holds for a run (parameter: the run id; NULL: the
# whole store, what Build shows when no build run holds instructions).
_RUN = "SELECT id FROM instructions WHERE :run IS NULL OR run_id = :run"
STAGE_UNITS = {
    "corpus": "SELECT count(*) FROM articles WHERE status = 'kept'",
    "pair": "SELECT count(*) FROM pairs",
    "synthesize": "SELECT count(*) FROM instructions WHERE (:run IS NULL OR run_id = :run)"
                  " AND status NOT IN ('pending', 'failed')",
    "base": f"SELECT count(*) FROM generations WHERE kind = 'base' AND instruction_id IN ({_RUN})",
    "revise": f"SELECT count(*) FROM constraints WHERE origin = 'revised' AND instruction_id IN ({_RUN})",
    "respond": f"SELECT count(*) FROM generations WHERE kind = 'response' AND instruction_id IN ({_RUN})",
    "summarize": f"SELECT count(*) FROM generations WHERE kind = 'summary' AND instruction_id IN ({_RUN})",
    "judge": "SELECT count(*) FROM verdicts WHERE generation_id IN (SELECT id FROM generations WHERE"
             f" kind IN ('response', 'summary') AND instruction_id IN ({_RUN}))",
}


# How far each Build stage has come, as (units done, units it has to do), where the store knows the
# second: a stage is finished when they are equal (the Build screen's bars). Revision is counted by
# instruction (how many constraints it replaces, no count says in advance).
_TEXTS = f"kind IN ('response', 'summary') AND instruction_id IN ({_RUN})"
STAGE_COVERAGE = {
    "corpus": "SELECT count(*), count(*) FROM articles WHERE status = 'kept'",
    "pair": "SELECT count(*), count(*) FROM pairs",
    "synthesize": "SELECT coalesce(sum(status NOT IN ('pending', 'failed')), 0), count(*)"
                  " FROM instructions WHERE :run IS NULL OR run_id = :run",
    # One base article per pair of the eval condition (the common conditions share it).
    "base": "SELECT count(DISTINCT CASE WHEN EXISTS (SELECT 1 FROM generations g WHERE g.kind = 'base'"
            " AND g.instruction_id = i.id) THEN i.pair_id END), count(DISTINCT i.pair_id)"
            " FROM instructions i WHERE i.condition = 'eval' AND (:run IS NULL OR i.run_id = :run)",
    # Revised: the eval and direct instructions past their revision (the others are never revised).
    "revise": "SELECT coalesce(sum(status IN ('revised', 'done')), 0), count(*) FROM instructions"
              " WHERE condition IN ('eval', 'direct') AND (:run IS NULL OR run_id = :run)",
    # Answered: of the instructions a model is asked (a common condition's source list is not).
    "respond": "SELECT count(DISTINCT g.instruction_id), (SELECT count(*) FROM instructions WHERE"
               " (:run IS NULL OR run_id = :run) AND status NOT IN ('pending', 'failed', 'source'))"
               f" FROM generations g WHERE g.kind = 'response' AND g.instruction_id IN ({_RUN})",
    "summarize": "SELECT count(DISTINCT s.parent_id), (SELECT count(*) FROM generations WHERE"
                 f" kind = 'response' AND instruction_id IN ({_RUN})) FROM generations s"
                 f" WHERE s.kind = 'summary' AND s.instruction_id IN ({_RUN})",
    "judge": "SELECT count(DISTINCT v.generation_id), (SELECT count(*) FROM generations WHERE " + _TEXTS + ")"
             " FROM verdicts v WHERE v.generation_id IN (SELECT id FROM generations WHERE " + _TEXTS + ")",
}


def _table(name: str) -> str:
    if name not in WRITTEN_TABLES:
        raise ValueError(f"not a table a step writes: {name!r}")
    return name


def _read_only_connection(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 10000")
    return conn


def prepare_store(path: str | Path, *, readonly: bool = False) -> None:
    """Create the store's schema, or check (and migrate) an existing one, then let go: for the app,
    which opens no Store of its own. Raises StoreError saying why a file is not a usable store."""
    open_store(path, readonly=readonly).close()


class StoreView:
    """Read access for the app: indexed lookups, each instruction's texts cached.

    Built on a Store the caller opened (``StoreView(store)``) or, for the app, read-only on a path
    (``StoreView.open``). There is no connection or Store to take: pipeline.analysis functions take
    the view itself (a ``StoreReader``)."""

    def __init__(self, store: Store, *, cache_size: int = 64) -> None:
        self._store = store
        self._instructions: OrderedDict[int, InstructionData] = OrderedDict()
        self._cache_size = cache_size
        self._order: list[tuple[int, int]] | None = None
        self._refusal_sql: str | None = None
        self._closed = False

    @classmethod
    def open(cls, path: str | Path, *, cache_size: int = 64) -> Self:
        """A view on its own read-only connection (a worker thread opens its own)."""
        path = Path(path)
        return cls(Store(path=path, conn=_read_only_connection(path)), cache_size=cache_size)

    @classmethod
    def open_if_store(cls, path: str | Path, *, cache_size: int = 64) -> Self | None:
        """``open``, or None when the file is not an unspecific store yet (schema 0, or not SQLite)."""
        path = Path(path)
        try:
            conn = _read_only_connection(path)
        except sqlite3.DatabaseError:
            return None
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        except sqlite3.DatabaseError:
            version = 0
        if version == 0:
            conn.close()
            return None
        return cls(Store(path=path, conn=conn), cache_size=cache_size)

    @property
    def path(self) -> Path:
        return self._store.path

    def close(self) -> None:
        self._closed = True
        self._store.close()

    @property
    def closed(self) -> bool:
        """Closed: nothing may be read from it again (the app quit; a worker's late message is dropped)."""
        return self._closed

    def forget(self) -> None:
        """Drop the caches: the store changed under us (a stage wrote)."""
        self._instructions.clear()
        self._order = None

    def _rows(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        cur = self._store.conn.execute(sql, params)
        cur.row_factory = sqlite3.Row
        return cur.fetchall()

    def _one(self, sql: str, params: tuple | dict[str, object] = ()) -> tuple | None:
        return self._store.conn.execute(sql, params).fetchone()

    def _refusal(self, alias: str = "") -> str:
        """The SQL of a generation's refusal flag: the column, or 0 on a store from before it (the app
        paints its first screen before the store is migrated: asked again until the column is there)."""
        if self._refusal_sql is None:
            if "refusal" not in table_columns(self._store.conn, "generations"):
                return "0"
            self._refusal_sql = "coalesce({}refusal, 0)"
        return self._refusal_sql.format(f"{alias}." if alias else "")

    # -- runs and instructions -----------------------------------------------------------
    def latest_build_run_id(self) -> str | None:
        """The newest run that builds instructions (a build or an import), not an evaluate run:
        None when there is none (Build then shows the store's totals)."""
        row = self._one("SELECT id FROM runs WHERE kind IN ('build', ?) ORDER BY started_at DESC, id LIMIT 1",
                        (IMPORT_RUN_KIND,))
        return row[0] if row else None

    def runs(self) -> list[RunRow]:
        """Every run, newest first."""
        return [RunRow(*row) for row in self._store.conn.execute(
            "SELECT id, kind, status, started_at, calls, cache_hits, prompt_tokens, "
            "completion_tokens, cost, error FROM runs ORDER BY started_at DESC, id")]

    def instructions_per_run(self) -> dict[str, int]:
        return dict(self._store.conn.execute("SELECT run_id, count(*) FROM instructions GROUP BY "
                                             "run_id").fetchall())

    def instruction_ids(self) -> list[int]:
        return [row[0] for row in self._store.conn.execute("SELECT id FROM instructions ORDER BY id")]

    def summary_ratios(self, run_id: str | None = None) -> list[float]:
        """The ratios the store's summaries are at, largest first
        (pipeline.store.generations.summary_ratios)."""
        from pipeline.store.generations import summary_ratios

        return summary_ratios(self._store, run_id)

    def stage_units(self, stage: str, run_id: str | None) -> int:
        """How many units of a Build stage (``STAGE_UNITS``) the store holds for ``run_id``."""
        row = self._one(STAGE_UNITS[stage], {"run": run_id})
        return int(row[0]) if row else 0

    def stage_coverage(self, stage: str, run_id: str | None) -> tuple[int, int] | None:
        """(units done, units to do) of a Build stage (``STAGE_COVERAGE``) for ``run_id``; None where
        the store cannot say how many it has to do."""
        sql = STAGE_COVERAGE.get(stage)
        row = self._one(sql, {"run": run_id}) if sql else None
        return (int(row[0] or 0), int(row[1] or 0)) if row else None

    # -- ordering ------------------------------------------------------------------------
    def constraint_order(self, run_id: str | None = None) -> list[tuple[int, int]]:
        """Active constraints as (constraint id, instruction id), in instruction then list order."""
        if self._order is None:
            sql = ("SELECT c.id, c.instruction_id FROM constraints c JOIN instructions i ON "
                   "i.id = c.instruction_id WHERE c.active = 1" + (" AND i.run_id = ?" if run_id else "") +
                   " ORDER BY c.instruction_id, c.position")
            self._order = self._store.conn.execute(sql, (run_id,) if run_id
                                                   else ()).fetchall()  # (id, instruction) rows
        return self._order

    def flagged_ids(self) -> dict[int, set[str]]:
        out: dict[int, set[str]] = {}
        for cid, flag in self._store.conn.execute("SELECT constraint_id, flag FROM constraint_flags"):
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

    def text(self, h: str | None) -> str:
        """A stored text by hash; "" for none or a hash the store lacks."""
        if not h:
            return ""
        row = self._one("SELECT body FROM texts WHERE hash = ?", (h,))
        return row[0] if row else ""

    def _load_instruction(self, iid: int) -> InstructionData:
        row = self._one(
            "SELECT i.id, i.run_id, i.domain, i.condition, i.main_task, a.text_hash, b.text_hash"
            " FROM instructions i LEFT JOIN articles a ON a.id = i.article_a LEFT JOIN articles b "
            "ON b.id = i.article_b WHERE i.id = ?", (iid,))
        if row is None:
            raise KeyError(iid)
        gens = [Generation(r["id"], r["kind"], r["model"] or "", r["mode"] or "", r["ratio"], r["parent_id"],
                           r["text_hash"], self.text(r["text_hash"]), r["words"], bool(r["refusal"]))
                for r in self._rows("SELECT id, kind, model, mode, ratio, parent_id, text_hash, words,"
                                    f" {self._refusal()} AS refusal FROM generations"
                                    " WHERE instruction_id = ? ORDER BY id", (iid,))]
        by_id = {g.id: g for g in gens}
        responses = {Writer(g.model, g.mode): g for g in gens if g.kind == "response"}
        summaries: dict[tuple[Writer, float], Generation] = {}
        for g in gens:
            parent = by_id.get(g.parent_id) if g.kind == "summary" and g.parent_id is not None else None
            if parent is not None:
                # The first summary at a ratio, as the app's per-response outcomes keep.
                summaries.setdefault((Writer(parent.model, parent.mode), g.ratio or 0.0), g)
        base = next((g for g in gens if g.kind == "base"), None)
        constraints = {
            r["id"]: Constraint(r["id"], iid, r["position"], r["text"], r["origin"] or "", bool(r["active"]),
                                r["replaces_id"], r["replaced_reason"], r["base_verdict"], r["base_quote"])
            for r in self._rows("SELECT * FROM constraints WHERE instruction_id = ?", (iid,))
        }
        from pipeline.store.ledgers import ledgers_of

        return InstructionData(row[0], row[1] or "", row[2] or "", row[3] or "", row[4] or "",
                               self.text(row[5]),
                               self.text(row[6]), base, responses, summaries, constraints, by_id,
                               ledgers_of(self._store, [iid]).get(iid, {}))

    # -- verdicts, flags, embeddings, labels ----------------------------------------------
    def verdicts(self, cid: int) -> list[Verdict]:
        """What a screen lists for each rater on a constraint, on every text (SHOWN_VERDICT)."""
        return verdicts_table.shown_verdicts_on_constraint(self._store, cid)

    def latest_verdicts(self, generation_ids: Sequence[int]) -> list[Verdict]:
        """Each rater's latest Yes/No on every constraint of the given texts (LATEST_VERDICT)."""
        return verdicts_table.latest_verdicts(self._store, generation_ids)

    def flags(self, cid: int) -> dict[str, str]:
        return {r[0]: r[1] or "" for r in self._store.conn.execute(
            "SELECT flag, detail FROM constraint_flags WHERE constraint_id = ?", (cid,))}

    def shown_verdicts(self, generation_ids: Sequence[int]) -> list[Verdict]:
        """SHOWN_VERDICT rows of every constraint on the given texts (Audit's list: one query per
        response)."""
        return verdicts_table.shown_verdicts(self._store, generation_ids)

    def instruction_flags(self, iid: int) -> dict[int, dict[str, str]]:
        """Constraint -> flag -> detail (JSON text) for every constraint of one instruction."""
        out: dict[int, dict[str, str]] = {}
        for cid, flag, detail in self._store.conn.execute(
                "SELECT f.constraint_id, f.flag, f.detail FROM constraint_flags f JOIN constraints c"
                " ON c.id = f.constraint_id WHERE c.instruction_id = ?", (iid,)):
            out.setdefault(cid, {})[flag] = detail or ""
        return out

    def embedding(self, h: str, model: str | None = None) -> tuple[str, list[float]] | None:
        """A text's stored embedding (of ``model``, or any) as (model, vector)."""
        sql = "SELECT model, vector FROM embeddings WHERE text_hash = ?" + (" AND model = ?" if model else "")
        row = self._one(sql, (h, model) if model else (h,))
        if row is None:
            return None
        import numpy as np

        return row[0], np.frombuffer(row[1], dtype=np.float32).tolist()

    def labels(self) -> dict[tuple[int, int], dict[str, annotations_table.Label]]:
        """(constraint, response) -> annotator -> label and note."""
        return annotations_table.labels_with_notes(self._store)

    def suspicion_marks(self) -> dict[tuple[int, int], Any]:
        """The auditor's marks on suspects, by (response id, constraint id) (pipeline.store.marks.Mark)."""
        from pipeline.store.marks import marks

        return marks(self._store)

    def judge_thresholds(self) -> dict[tuple[str, str], float]:
        """(judge, judging mode) -> the threshold its P(Yes) verdicts are read at, where calibrated."""
        from pipeline.store.judge_checks import calibrations

        return {key: c.threshold for key, c in calibrations(self._store).items()}

    def text_labels(self) -> dict[tuple[int, int], dict[str, int]]:
        """People's answers to the judge's question: (constraint, text) -> annotator -> 1 (yes) / 0 (no)."""
        return validation_tables.text_labels(self._store)

    # -- the store-wide pass ---------------------------------------------------------------
    def text_totals(self, run_id: str | None = None) -> list[TextTotals]:
        """Every response's and summary's stored totals (fresh ones for texts changed since the
        last refresh, computed on the side: the view never writes the store)."""
        run_sql, run_args = (" AND i.run_id = ?", (run_id,)) if run_id else ("", ())
        conn = self._store.conn
        current_text_scores(conn)
        try:
            rows = conn.execute(
                "SELECT g.id, g.kind, g.instruction_id, g.model, g.ratio, g.parent_id, t.judged, t.passed,"
                " t.score_sum, t.disagree, t.missing, t.flipped, coalesce(g.mode, ''),"
                f" {self._refusal('g')} FROM generations g"
                " JOIN instructions i ON i.id = g.instruction_id LEFT JOIN text_items t ON t.gid = g.id"
                " WHERE g.kind IN ('response', 'summary')" + run_sql, run_args).fetchall()
        finally:
            drop_temp_scores(conn)
        return [TextTotals(*row[:-1], refusal=bool(row[-1])) for row in rows]

    def active_counts(self, run_id: str | None = None) -> dict[int, int]:
        """Instruction -> how many active constraints it has."""
        run_sql, run_args = (" AND i.run_id = ?", (run_id,)) if run_id else ("", ())
        return dict(self._store.conn.execute(
            "SELECT c.instruction_id, count(*) FROM constraints c JOIN instructions i ON "
            "i.id = c.instruction_id"
            " WHERE c.active = 1" + run_sql + " GROUP BY c.instruction_id", run_args).fetchall())

    def flag_counts(self, run_id: str | None = None) -> dict[int, dict[str, int]]:
        """Instruction -> flag -> how many of its active constraints carry it."""
        run_sql, run_args = (" AND i.run_id = ?", (run_id,)) if run_id else ("", ())
        out: dict[int, dict[str, int]] = {}
        for iid, flag, count in self._store.conn.execute(
                "SELECT c.instruction_id, f.flag, count(DISTINCT c.id) FROM constraint_flags f"
                " JOIN constraints c ON c.id = f.constraint_id JOIN instructions i ON i.id = c.instruction_id"
                " WHERE c.active = 1" + run_sql + " GROUP BY c.instruction_id, f.flag", run_args):
            out.setdefault(iid, {})[flag] = count
        return out

    def instruction_meta(self, run_id: str
                         | None = None) -> dict[int, tuple[str | None, str | None, str | None]]:
        """Instruction -> (run, domain, condition)."""
        return {r[0]: r[1:] for r in self._store.conn.execute(
            "SELECT id, run_id, domain, condition FROM instructions"
            + (" WHERE run_id = ?" if run_id else ""),
            (run_id,) if run_id else ())}

    # -- what a step wrote (the Build screen) ----------------------------------------------
    def high_water(self, tables: Sequence[str] = WRITTEN_TABLES) -> dict[str, int]:
        """The highest rowid of each table: rows above it were written later."""
        return {t: self._store.conn.execute(f"SELECT coalesce(max(rowid), 0) FROM {_table(t)}").fetchone()[0]
                for t in tables}

    def newest_rows(self, table: str, after: int, limit: int = 3) -> list[dict[str, object]]:
        """The newest rows of ``table`` written after rowid ``after``, newest first."""
        cur = self._store.conn.execute(f"SELECT * FROM {_table(table)} WHERE rowid > ? ORDER "
                                       "BY rowid DESC LIMIT ?",
                                       (after, limit))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, values)) for values in cur.fetchall()]

    def instruction_written(self, before: dict[str, int]) -> int | None:
        """The instruction of the newest instruction, constraint or generation written since ``before``."""
        for table, column in (("instructions", "id"), ("constraints", "instruction_id"),
                              ("generations", "instruction_id")):
            row = self._one(f"SELECT {column} FROM {_table(table)} WHERE rowid > ? ORDER "
                            "BY rowid DESC LIMIT 1",
                            (before.get(table, 0),))
            if row and row[0] is not None:
                return int(row[0])
        return None


# What pipeline.analysis's reading functions take: the Store a command opened, or the app's view.
StoreReader: TypeAlias = Store | StoreView


def store_of(reader: StoreReader) -> Store:
    """The Store a reader reads through, for pipeline code to hand the store's query functions.
    The app never calls this (tests/test_layers.py): it passes its view to pipeline.analysis whole."""
    return reader._store if isinstance(reader, StoreView) else reader
