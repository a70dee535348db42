"""Import work done elsewhere: other benchmarks' constraint lists, the UNSPECIFIC research
code's CSV outputs, a plain JSONL form, and responses from another harness.

Once imported, an instruction is a finished instruction like a built one (status ``done``,
its constraints active and numbered, flags computed), so ``evaluate``, ``report``, ``export``
and every screen work on it; imported responses, summaries and base articles are generations
(``generations.import_run`` names the import), and imported verdicts are a judge's verdicts,
so the Audit screen opens on someone else's results without a single LLM call.

Formats (``FORMATS``):
- ``cs4``: CS4's released CSVs (``Instruction-based Constraints.csv``, ``Story-based
  Constraints.csv``): ``Instruction Number``, ``Instruction``, ``Number of Constraints``,
  ``Constraints`` (numbered lines "1. ..."; the count must match). Condition ``single`` (CS4
  back-translates one story), domain ``story`` unless told.
- ``research``: the research code's CSVs. Each of its stage files (constraints, hardened
  constraints, base, fitted content, summary, evaluation) carries the row id and the columns of
  its stage; every column present is imported, each under a configurable name
  (``ResearchColumns``, as the research code lets its column names be set). Rows are joined on
  the id within one import (``--name``), so the stage files go into the same name one by one.
- ``jsonl``: one instruction a line: ``id``, ``instruction`` (or ``main_task``),
  ``constraints`` (a list of strings or of {"text": ...}, or numbered lines), optional
  ``condition`` (a public name), ``domain``, ``reference`` and ``reference_b`` (texts). The
  lines ``unspecific export --with-references`` writes import as they are.
- ``responses``: one response a line: ``instruction`` (an id of the import named by ``--run``,
  or a store instruction id), ``model``, ``mode`` (direct | edit, default direct), ``text``.

Every import is one transaction: rows are checked first and all problems are collected with
file, line and column; if any row is bad nothing is written (the whole import is rolled back).
Importing the same file again adds nothing: each row is found by its id within its import run
(``instructions.source_id``) and reported as skipped, with why. A row whose id was imported
before with different content is an error, never a silent overwrite.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pipeline.core.errors import UnspecificError
from pipeline.store.database import Store, now

FORMATS = ("cs4", "research", "jsonl", "responses")
# Public condition names (export.PUBLIC_CONDITIONS) and the store's own names both work.
CONDITION_NAMES = {"single": "single", "common+none": "none", "common+direct": "direct", "common+eval": "eval",
                   "none": "none", "direct": "direct", "eval": "eval"}
RESPONSE_MODES = ("direct", "edit")
REFERENCE_STATUS = "reference"  # an imported reference article: shown and flagged against, never paired
IMPORT_JUDGING_MODE = "batched"  # the research code judges all constraints of a text in one call
MAX_ERRORS_SHOWN = 30
DEFAULT_RATIO = 0.25
# The writer of an imported base article or summary: the research code's files do not say which
# model wrote those (a response names its model: that is what is compared).
IMPORTED_WRITER = "imported"


class ImportFailed(UnspecificError):
    title = "Import failed"


@dataclass
class ResearchColumns:
    """Column names of the research code's CSVs (each configurable there, so here too)."""

    id: str = "id"
    instruction: str = "instruction"
    constraints: str = "constraints"
    reference: str = "reference"
    reference_b: str = "reference_b"
    base: str = "base"
    content: str = "fitted_content"
    model: str = "model"
    mode: str = "mode"
    summary: str = "summary"
    summary_ratio: str = "summary_ratio"
    results: str = "satisfaction_results"
    eval_model: str = "eval_model"
    evaluated: str = "evaluated"  # which text the results judge: response (default) | summary | base


@dataclass
class ImportOptions:
    format: str
    path: Path
    name: str | None = None  # the import's name (default: the file's stem); its run id is import-<name>
    domain: str | None = None
    condition: str | None = None  # default per format: single (cs4, jsonl), none (research)
    run: str | None = None  # responses: the run (import name or run id) whose instruction ids the file uses
    ratio: float = DEFAULT_RATIO  # research summaries without a ratio column
    evaluated: str = "response"  # research: the text results judge when no column says (response | summary | base)
    columns: ResearchColumns = field(default_factory=ResearchColumns)
    dry_run: bool = False


@dataclass
class ImportSummary:
    run_id: str
    path: Path
    domain: str | None
    condition: str | None
    rows: int = 0
    added: Counter[str] = field(default_factory=Counter)  # instructions, constraints, responses ...
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> rows
    dry_run: bool = False


@dataclass(frozen=True)
class Row:
    line: int  # where the row starts in the file (1-based)
    values: dict[str, Any]
    columns: dict[str, int]  # column name -> 1-based column number (CSV); empty for JSONL


class _Problems:
    """Every bad row of a file, each named by file, line and column."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[str] = []

    def add(self, row: Row | int, message: str, column: str | None = None) -> None:
        line = row.line if isinstance(row, Row) else row
        where = f"{self.path}:{line}"
        if column is not None:
            number = row.columns.get(column) if isinstance(row, Row) else None
            where += f", column {number} ({column!r})" if number else f", field {column!r}"
        self.items.append(f"{where}: {message}")

    def raise_if_any(self, rows: int) -> None:
        if not self.items:
            return
        shown = self.items[:MAX_ERRORS_SHOWN]
        more = len(self.items) - len(shown)
        raise ImportFailed(
            f"{self.path}: {len(self.items)} problem(s) in {rows} row(s); nothing was imported (the whole import is "
            "rolled back). Fix them and run the same command again:\n" + "\n".join(shown)
            + (f"\n... and {more} more" if more > 0 else ""))


# -- reading files ------------------------------------------------------------------------------


def _decode(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ImportFailed(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    try:
        # utf-8-sig: CS4's files (and Excel's CSVs) start with a byte-order mark, which would
        # otherwise stick to the first column's name.
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ImportFailed(f"{path}:{line}: not UTF-8 text (byte {exc.start}: {exc.reason}); save the file as UTF-8") from exc


def _key(name: str) -> str:
    """Column names compare without case, surrounding spaces (CS4's ``Instruction `` has one) or
    inner runs of spaces and underscores."""
    return re.sub(r"[\s_]+", " ", name.strip().casefold())


def read_csv(path: Path) -> tuple[list[str], list[Row]]:
    """The header (names stripped) and the rows with the line each starts on. Quoted cells may
    span lines; Windows line endings are read as plain newlines inside cells."""
    text = _decode(path)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    problems = _Problems(path)
    try:
        header = next(reader)
    except StopIteration:
        raise ImportFailed(f"{path}: the file is empty (a CSV needs a header line)") from None
    except csv.Error as exc:
        raise ImportFailed(f"{path}:1: the header line is not valid CSV ({exc})") from exc
    names = [h.strip() for h in header]
    seen: dict[str, int] = {}
    for number, name in enumerate(names, 1):
        if _key(name) in seen and name:
            problems.add(1, f"column {number} repeats the name {name!r} (column {seen[_key(name)]})")
        seen.setdefault(_key(name), number)
    columns = {name: number for number, name in enumerate(names, 1) if name}
    rows: list[Row] = []
    start = reader.line_num + 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.add(start, f"not valid CSV ({exc}); a quote opened here may never close")
            break
        if not any(c.strip() for c in cells):
            start = reader.line_num + 1
            continue  # a blank line (many editors end a file with one)
        if len(cells) > len(names) and any(c.strip() for c in cells[len(names):]):
            problems.add(start, f"{len(cells)} cells, but the header names {len(names)} columns")
        values = {name: cells[i].replace("\r\n", "\n").replace("\r", "\n") if i < len(cells) else ""
                  for i, name in enumerate(names) if name}
        rows.append(Row(start, values, columns))
        start = reader.line_num + 1
    problems.raise_if_any(len(rows))
    return names, rows


def read_jsonl(path: Path) -> list[Row]:
    """One JSON object a line; blank lines are skipped."""
    problems = _Problems(path)
    rows = []
    # Split on newlines only: str.splitlines would also split on U+2028 and friends, which a JSON
    # string may hold raw.
    for number, line in enumerate(_decode(path).split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            problems.add(number, f"not JSON ({exc.msg} at column {getattr(exc, 'colno', '?')})")
            continue
        if not isinstance(value, dict):
            problems.add(number, f"a JSON object is expected, got {type(value).__name__}")
            continue
        rows.append(Row(number, value, {}))
    problems.raise_if_any(len(rows))
    if not rows:
        raise ImportFailed(f"{path}: no lines to import (the file is empty)")
    return rows


def _find_column(names: Sequence[str], wanted: str) -> str | None:
    for name in names:
        if _key(name) == _key(wanted):
            return name
    return None


_NUMBERED = re.compile(r"^\s*(\d{1,3})\s*[.)]\s*(.*)$")


def parse_numbered(text: str) -> list[str]:
    """Constraints from numbered lines ("1. ...", "2) ..."); a line without a number continues
    the one before (a wrapped constraint). Raises ValueError when the numbers do not run 1, 2, 3..."""
    items: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _NUMBERED.match(line)
        if m:
            number = int(m.group(1))
            if number != len(items) + 1:
                raise ValueError(f"constraint number {number} where {len(items) + 1} was expected")
            items.append(m.group(2).strip())
        elif items:
            items[-1] = f"{items[-1]} {line}"
        else:
            raise ValueError(f"text before constraint 1: {line[:60]!r}")
    return [" ".join(i.split()) for i in items]


# -- the store side -------------------------------------------------------------------------------


def import_run_id(name: str) -> str:
    return f"import-{name}"


def _condition(value: str | None, default: str) -> str:
    name = (value or default).strip().lower()
    if name not in CONDITION_NAMES:
        raise ValueError(f"unknown condition {value!r}: one of single, common+none, common+direct, common+eval")
    return CONDITION_NAMES[name]


class _Writer:
    """Writes one import inside the caller's transaction, counting what it adds and skips."""

    def __init__(self, store: Store, summary: ImportSummary, problems: _Problems) -> None:
        self.store, self.summary, self.problems = store, summary, problems
        self.conn = store.conn
        self.stamp = now()
        self.new_instructions: list[int] = []

    def run(self, options: ImportOptions, name: str, extra: dict[str, Any]) -> None:
        run_id = self.summary.run_id
        config = json.dumps({"options": {"format": options.format, "file": str(options.path), "name": name,
                                         **extra}}, default=str)
        if self.conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            self.conn.execute(
                "INSERT INTO runs (id, kind, name, config, status, started_at, finished_at, calls, cache_hits,"
                " prompt_tokens, completion_tokens, cost) VALUES (?, 'import', ?, ?, 'done', ?, ?, 0, 0, 0, 0, 0)",
                (run_id, name, config, self.stamp, self.stamp))
        else:
            kind = self.conn.execute("SELECT kind FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
            if kind != "import":
                raise ImportFailed(f"{self.store.path}: a {kind} run is named {run_id}; choose another --name")
            self.conn.execute("UPDATE runs SET finished_at = ? WHERE id = ?", (self.stamp, run_id))

    def article(self, name: str, source_id: str, domain: str, text: str) -> int:
        corpus = f"import:{name}"
        row = self.conn.execute("SELECT id, text_hash FROM articles WHERE corpus = ? AND source_id = ?",
                                (corpus, source_id)).fetchone()
        h = self.store.put_text(text)
        if row is not None:
            if row[1] != h:
                raise ValueError(f"reference {source_id} was imported before with another text")
            self.summary.skipped["reference already imported"] += 1
            return int(row[0])
        from pipeline.core.text import count_words

        cur = self.conn.execute(
            "INSERT INTO articles(corpus, domain, source_id, title, text_hash, words, status, duplicate_of, imported_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?)",
            (corpus, domain, source_id, "", h, count_words(text), REFERENCE_STATUS, self.stamp))
        self.summary.added["references"] += 1
        return int(cur.lastrowid)

    def instruction(self, source_id: str, *, domain: str, condition: str, task: str, constraints: list[str],
                    article_a: int | None, article_b: int | None) -> int:
        run_id = self.summary.run_id
        row = self.conn.execute("SELECT id, main_task, condition FROM instructions WHERE run_id = ? AND source_id = ?",
                                (run_id, source_id)).fetchone()
        if row is not None:
            stored = [r[0] for r in self.conn.execute(
                "SELECT text FROM constraints WHERE instruction_id = ? AND active = 1 ORDER BY position", (row[0],))]
            if (row[1] or "") != task or stored != constraints or row[2] != condition:
                raise ValueError(f"instruction {source_id} was imported into {run_id} before with another task, "
                                 "constraints or condition; import the new version under another --name")
            self.summary.skipped["instruction already imported"] += 1
            return int(row[0])
        cur = self.conn.execute(
            "INSERT INTO instructions (run_id, domain, condition, pair_id, article_a, article_b, main_task, n_constraints,"
            " status, error, base_generation_id, created_at, source_id) VALUES (?, ?, ?, NULL, ?, ?, ?, ?, 'done', NULL,"
            " NULL, ?, ?)",
            (run_id, domain, condition, article_a, article_b, task, len(constraints), self.stamp, source_id))
        iid = int(cur.lastrowid)
        self.conn.executemany(
            "INSERT INTO constraints (instruction_id, position, text, origin, active, created_at)"
            " VALUES (?, ?, ?, 'synthesized', 1, ?)",
            [(iid, i, text, self.stamp) for i, text in enumerate(constraints, 1)])
        self.summary.added["instructions"] += 1
        self.summary.added["constraints"] += len(constraints)
        self.new_instructions.append(iid)
        return iid

    def generation(self, kind: str, instruction_id: int, text: str, *, model: str, mode: str = "",
                   ratio: float | None = None, parent_id: int | None = None) -> int:
        """A text written elsewhere: found again by what it is (kind, instruction, model, mode,
        ratio, parent); the same text again is skipped, another text is an error."""
        from pipeline.core.text import count_words, is_refusal

        row = self.conn.execute(
            "SELECT id, text_hash FROM generations WHERE kind = ? AND instruction_id = ? AND model = ? AND mode = ?"
            " AND parent_id IS ? AND (ratio IS ? OR abs(ratio - ?) < 1e-9)",
            (kind, instruction_id, model, mode, parent_id, ratio, ratio if ratio is not None else 0.0)).fetchone()
        h = self.store.put_text(text)
        label = {"base": "base article", "response": "response", "summary": "summary"}[kind]
        if row is not None:
            if row[1] != h:
                raise ValueError(f"another {label} by {model!r} is stored for this instruction; import the new one "
                                 "under another model name")
            self.summary.skipped[f"{label} already stored"] += 1
            return int(row[0])
        words = count_words(text)
        achieved = None
        if kind == "summary" and parent_id is not None:
            parent_words = self.conn.execute("SELECT words FROM generations WHERE id = ?", (parent_id,)).fetchone()[0]
            achieved = words / parent_words if parent_words else None
        cur = self.conn.execute(
            "INSERT INTO generations (kind, instruction_id, model, mode, ratio, parent_id, text_hash, words,"
            " achieved_ratio, call_id, refusal, created_at, import_run) VALUES (?,?,?,?,?,?,?,?,?,NULL,?,?,?)",
            (kind, instruction_id, model, mode, ratio, parent_id, h, words, achieved,
             int(is_refusal(text)) if kind == "response" else None, self.stamp, self.summary.run_id))
        self.summary.added[{"base": "base articles", "response": "responses", "summary": "summaries"}[kind]] += 1
        gid = int(cur.lastrowid)
        if kind == "base":
            self.conn.execute("UPDATE instructions SET base_generation_id = ? WHERE id = ?", (gid, instruction_id))
        return gid

    def verdicts(self, generation_id: int, instruction_id: int, judge: str, results: str) -> None:
        """A judge's "N. Yes - quote" / "N. No - reason" lines as verdicts. A constraint the lines
        do not mention is stored as missing (NULL), never as No, so coverage shows the gap."""
        from pipeline.llm.client import ReplyError
        from pipeline.stages.judging import find_quote, parse_batched_reply

        constraints = [r[0] for r in self.conn.execute(
            "SELECT id FROM constraints WHERE instruction_id = ? AND active = 1 ORDER BY position", (instruction_id,))]
        try:
            items = parse_batched_reply(results, len(constraints))
        except ReplyError as exc:
            raise ValueError(f"no verdicts could be read ({exc})") from None
        text = self.conn.execute("SELECT t.body FROM generations g JOIN texts t ON t.hash = g.text_hash"
                                 " WHERE g.id = ?", (generation_id,)).fetchone()[0]
        prompt = f"import:{self.summary.run_id}"
        existing = {r[0]: r[1] for r in self.conn.execute(
            "SELECT constraint_id, verdict FROM verdicts WHERE generation_id = ? AND judge = ? AND judging_mode = ?"
            " AND prompt_hash = ?", (generation_id, judge, IMPORT_JUDGING_MODE, prompt))}
        for position, cid in enumerate(constraints, 1):
            item = items.get(position)
            verdict = None if item is None else int(item["verdict"])
            if cid in existing:
                if existing[cid] != verdict:
                    raise ValueError(f"judge {judge!r}'s verdict on constraint {position} differs from the one "
                                     "imported before; import the new results under another --name")
                self.summary.skipped["verdict already imported"] += 1
                continue
            quote = (item or {}).get("quote") or None
            match = find_quote(quote, text) if quote and verdict else None
            self.conn.execute(
                "INSERT INTO verdicts (generation_id, constraint_id, judge, judging_mode, prompt_hash, verdict, quote,"
                " reason, quote_found, quote_score, call_id, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,NULL,?)",
                (generation_id, cid, judge, IMPORT_JUDGING_MODE, prompt, verdict, quote,
                 (item or {}).get("reason") or ("not in the imported results" if item is None else None),
                 match.found if match else None, match.score if match else None, self.stamp))
            self.summary.added["verdicts" if verdict is not None else "missing verdicts"] += 1


# -- the formats ------------------------------------------------------------------------------------

CS4_COLUMNS = ("Instruction Number", "Instruction", "Number of Constraints", "Constraints")


def _import_cs4(writer: _Writer, options: ImportOptions, name: str) -> None:
    names, rows = read_csv(options.path)
    columns = {c: _find_column(names, c) for c in CS4_COLUMNS}
    missing = [c for c, found in columns.items() if found is None]
    if missing:
        raise ImportFailed(f"{options.path}:1: not a CS4 constraints file: no column {', '.join(map(repr, missing))} "
                           f"(its columns: {', '.join(map(repr, names))})")
    domain = options.domain or "story"
    condition = _condition(options.condition, "single")
    writer.summary.domain, writer.summary.condition = domain, condition
    writer.summary.rows = len(rows)
    seen: dict[str, int] = {}
    for row in rows:
        number, task = row.values[columns["Instruction Number"]].strip(), row.values[columns["Instruction"]].strip()
        count, text = row.values[columns["Number of Constraints"]].strip(), row.values[columns["Constraints"]]
        ok = True
        if not number:
            writer.problems.add(row, "empty", columns["Instruction Number"])
            ok = False
        elif number in seen:
            writer.problems.add(row, f"instruction number {number} repeats line {seen[number]}", columns["Instruction Number"])
            ok = False
        seen.setdefault(number, row.line)
        if not task:
            writer.problems.add(row, "empty", columns["Instruction"])
            ok = False
        try:
            constraints = parse_numbered(text)
        except ValueError as exc:
            writer.problems.add(row, str(exc), columns["Constraints"])
            continue
        if not constraints:
            writer.problems.add(row, "no numbered constraints", columns["Constraints"])
            continue
        try:
            expected = int(count)
        except ValueError:
            writer.problems.add(row, f"a whole number is expected, got {count!r}", columns["Number of Constraints"])
            continue
        if expected != len(constraints):
            writer.problems.add(row, f"{len(constraints)} numbered constraints, but 'Number of Constraints' says "
                                f"{expected}", columns["Constraints"])
            continue
        if ok:
            _guard(writer, row, None, lambda: writer.instruction(number, domain=domain, condition=condition, task=task,
                                                                 constraints=constraints, article_a=None, article_b=None))


def _guard(writer: _Writer, row: Row, column: str | None, action: Any) -> Any:
    """Run one store action for a row; a ValueError becomes that row's problem."""
    try:
        return action()
    except ValueError as exc:
        writer.problems.add(row, str(exc), column)
        return None


def _constraint_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return parse_numbered(value)
    if isinstance(value, list):
        out = []
        for i, item in enumerate(value, 1):
            text = item.get("text") if isinstance(item, dict) else item
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"constraint {i} is not a non-empty string (or an object with a \"text\")")
            out.append(" ".join(text.split()))
        return out
    raise ValueError("a list of constraints, or numbered lines in one string, is expected")


def _reference_text(values: dict[str, Any], key: str) -> Any:
    if key in values:
        return values[key]
    refs = values.get("references")
    if isinstance(refs, dict):
        ref = refs.get("a" if key == "reference" else "b")
        return ref.get("text") if isinstance(ref, dict) else ref
    return None


def _import_jsonl(writer: _Writer, options: ImportOptions, name: str) -> None:
    rows = read_jsonl(options.path)
    writer.summary.rows = len(rows)
    writer.summary.condition = _condition(options.condition, "single")
    seen: dict[str, int] = {}
    for row in rows:
        v = row.values
        source_id = v.get("id")
        if isinstance(source_id, bool) or not isinstance(source_id, (str, int)) or str(source_id).strip() == "":
            writer.problems.add(row, "each line needs an \"id\" (a string or a number)", "id")
            continue
        source_id = str(source_id).strip()
        if source_id in seen:
            writer.problems.add(row, f"id {source_id} repeats line {seen[source_id]}", "id")
            continue
        seen[source_id] = row.line
        task = v.get("instruction", v.get("main_task"))
        if not isinstance(task, str) or not task.strip():
            writer.problems.add(row, "a non-empty string is expected", "instruction")
            continue
        try:
            constraints = _constraint_list(v.get("constraints"))
            condition = _condition(v.get("condition"), options.condition or "single")
        except ValueError as exc:
            writer.problems.add(row, str(exc), "condition" if "condition" in str(exc) else "constraints")
            continue
        if not constraints:
            writer.problems.add(row, "the list is empty", "constraints")
            continue
        domain = v.get("domain") or options.domain or "imported"
        if not isinstance(domain, str):
            writer.problems.add(row, "a string is expected", "domain")
            continue
        refs: dict[str, int | None] = {"reference": None, "reference_b": None}
        bad = False
        for key, suffix in (("reference", "a"), ("reference_b", "b")):
            text = _reference_text(v, key)
            if text is None:
                continue
            if not isinstance(text, str) or not text.strip():
                writer.problems.add(row, "a non-empty text is expected", key)
                bad = True
                continue
            refs[key] = _guard(writer, row, key, lambda t=text, s=suffix: writer.article(
                name, f"{source_id}/{s}", domain, t))
        if bad:
            continue
        _guard(writer, row, "id", lambda: writer.instruction(
            source_id, domain=domain, condition=condition, task=" ".join(task.split()), constraints=constraints,
            article_a=refs["reference"], article_b=refs["reference_b"]))


def _import_research(writer: _Writer, options: ImportOptions, name: str) -> None:
    names, rows = read_csv(options.path)
    cols = options.columns
    found = {f.name: _find_column(names, getattr(cols, f.name)) for f in fields(cols)}
    if found["id"] is None:
        raise ImportFailed(f"{options.path}:1: no id column {cols.id!r} (its columns: {', '.join(map(repr, names))}); "
                           "name it with --id-column")
    useful = [k for k in ("constraints", "base", "content", "summary", "results") if found[k]]
    if not useful:
        raise ImportFailed(
            f"{options.path}:1: none of the research code's columns is here ({cols.constraints!r}, {cols.base!r}, "
            f"{cols.content!r}, {cols.summary!r}, {cols.results!r}; its columns: {', '.join(map(repr, names))}); "
            "name them with --constraints-column, --base-column, --content-column, --summary-column, --results-column")
    domain = options.domain or "news"
    condition = _condition(options.condition, "none")
    writer.summary.domain, writer.summary.condition = domain, condition
    writer.summary.rows = len(rows)
    run_id = writer.summary.run_id
    seen: dict[str, int] = {}

    def cell(row: Row, key: str) -> str:
        column = found[key]
        return row.values.get(column, "").strip() if column else ""

    for row in rows:
        source_id = cell(row, "id")
        if not source_id:
            writer.problems.add(row, "empty", found["id"])
            continue
        if source_id in seen:
            writer.problems.add(row, f"id {source_id} repeats line {seen[source_id]}", found["id"])
            continue
        seen[source_id] = row.line
        iid: int | None = None
        if found["constraints"]:
            task = cell(row, "instruction")
            if not task:
                writer.problems.add(row, "empty (an instruction needs its main task)", found["instruction"] or cols.instruction)
                continue
            try:
                constraints = parse_numbered(cell(row, "constraints"))
            except ValueError as exc:
                writer.problems.add(row, str(exc), found["constraints"])
                continue
            if not constraints:
                writer.problems.add(row, "no numbered constraints", found["constraints"])
                continue
            refs: list[int | None] = []
            for key, suffix in (("reference", "a"), ("reference_b", "b")):
                text = cell(row, key)
                refs.append(_guard(writer, row, found[key], lambda t=text, s=suffix: writer.article(
                    name, f"{source_id}/{s}", domain, t)) if text else None)
            iid = _guard(writer, row, found["id"], lambda: writer.instruction(
                source_id, domain=domain, condition=condition, task=" ".join(task.split()), constraints=constraints,
                article_a=refs[0], article_b=refs[1]))
            if iid is None:
                continue
        else:
            stored = writer.conn.execute("SELECT id FROM instructions WHERE run_id = ? AND source_id = ?",
                                         (run_id, source_id)).fetchone()
            if stored is None:
                writer.problems.add(row, f"no instruction {source_id} in import {name!r}: import the constraints file "
                                    f"under the same --name first", found["id"])
                continue
            iid = int(stored[0])
        _research_texts(writer, options, row, iid, found, cell)


def _research_texts(writer: _Writer, options: ImportOptions, row: Row, iid: int, found: dict[str, str | None],
                    cell: Any) -> None:
    """The base article, the response (fitted content), its summary and the judge's results of one row."""
    cols = options.columns
    generated: dict[str, int | None] = {"base": None, "response": None, "summary": None}
    if cell(row, "base"):
        generated["base"] = _guard(writer, row, found["base"], lambda: writer.generation(
            "base", iid, cell(row, "base"), model=IMPORTED_WRITER))
    model = cell(row, "model")
    mode = (cell(row, "mode") or "direct").lower()
    needs_response = bool(cell(row, "content") or cell(row, "summary")
                          or (cell(row, "results") and (cell(row, "evaluated") or options.evaluated).lower() != "base"))
    if needs_response:
        if not model:
            writer.problems.add(row, "empty (responses are named by the model that wrote them)", found["model"] or cols.model)
            return
        if mode not in RESPONSE_MODES:
            writer.problems.add(row, f"one of {', '.join(RESPONSE_MODES)} is expected, got {mode!r}", found["mode"])
            return
    if cell(row, "content"):
        generated["response"] = _guard(writer, row, found["content"], lambda: writer.generation(
            "response", iid, cell(row, "content"), model=model, mode=mode))
    elif needs_response:
        generated["response"] = writer.conn.execute(
            "SELECT id FROM generations WHERE kind = 'response' AND instruction_id = ? AND model = ? AND mode = ?"
            " ORDER BY id LIMIT 1", (iid, model, mode)).fetchone()
        generated["response"] = generated["response"][0] if generated["response"] else None
        if generated["response"] is None:
            writer.problems.add(row, f"no response by {model!r} ({mode}) for this instruction: import the fitted "
                                "content file first", found["id"])
            return
    ratio = options.ratio
    if cell(row, "summary_ratio"):
        try:
            ratio = float(cell(row, "summary_ratio"))
        except ValueError:
            ratio = -1.0
        if not 0 < ratio < 1:
            writer.problems.add(row, f"a number between 0 and 1 is expected, got {cell(row, 'summary_ratio')!r}",
                                found["summary_ratio"])
            return
    if cell(row, "summary"):
        generated["summary"] = _guard(writer, row, found["summary"], lambda: writer.generation(
            "summary", iid, cell(row, "summary"), model=IMPORTED_WRITER, ratio=ratio, parent_id=generated["response"]))
    elif cell(row, "results") and (cell(row, "evaluated") or options.evaluated).lower() == "summary":
        stored = writer.conn.execute(
            "SELECT id FROM generations WHERE kind = 'summary' AND parent_id = ? AND abs(ratio - ?) < 1e-9"
            " ORDER BY id LIMIT 1", (generated["response"], ratio)).fetchone()
        generated["summary"] = stored[0] if stored else None
    if cell(row, "results"):
        judge = cell(row, "eval_model")
        target = (cell(row, "evaluated") or options.evaluated).lower()
        if not judge:
            writer.problems.add(row, "empty (verdicts are named by the judge model that gave them)",
                                found["eval_model"] or cols.eval_model)
            return
        if target not in generated:
            writer.problems.add(row, f"one of response, summary, base is expected, got {target!r}", found["evaluated"])
            return
        gid = generated[target]
        if gid is None:
            writer.problems.add(row, f"the results judge the {target}, and there is none for this row", found["results"])
            return
        _guard(writer, row, found["results"], lambda: writer.verdicts(gid, iid, judge, cell(row, "results")))


def _resolve_instruction(writer: _Writer, run: str | None, value: Any) -> int:
    if run is not None:
        run_id = run if writer.conn.execute("SELECT 1 FROM runs WHERE id = ?", (run,)).fetchone() else import_run_id(run)
        found = writer.conn.execute("SELECT id FROM instructions WHERE run_id = ? AND source_id = ?",
                                    (run_id, str(value).strip())).fetchone()
        if found is None and not isinstance(value, bool) and str(value).strip().isdigit():
            found = writer.conn.execute("SELECT id FROM instructions WHERE run_id = ? AND id = ?",
                                        (run_id, int(str(value).strip()))).fetchone()
        if found is None:
            raise ValueError(f"no instruction {value!r} in run {run_id}")
        return int(found[0])
    if isinstance(value, bool) or not str(value).strip().isdigit():
        raise ValueError(f"{value!r} is not a store instruction id; pass --run NAME to use the ids of an import")
    found = writer.conn.execute("SELECT id FROM instructions WHERE id = ?", (int(str(value).strip()),)).fetchone()
    if found is None:
        raise ValueError(f"no instruction {value} in {writer.store.path}")
    return int(found[0])


def _import_responses(writer: _Writer, options: ImportOptions, name: str) -> None:
    rows = read_jsonl(options.path)
    writer.summary.rows = len(rows)
    if options.run is not None and writer.conn.execute(
            "SELECT 1 FROM runs WHERE id IN (?, ?)", (options.run, import_run_id(options.run))).fetchone() is None:
        raise ImportFailed(f"--run {options.run}: no such run or import in {writer.store.path}")
    for row in rows:
        v = row.values
        key = "instruction" if "instruction" in v else "instruction_id"
        if v.get(key) in (None, ""):
            writer.problems.add(row, "each line names its instruction", "instruction")
            continue
        try:
            iid = _resolve_instruction(writer, options.run, v[key])
        except ValueError as exc:
            writer.problems.add(row, str(exc), key)
            continue
        model, mode, text = v.get("model"), v.get("mode") or "direct", v.get("text")
        if not isinstance(model, str) or not model.strip():
            writer.problems.add(row, "a non-empty model name is expected", "model")
            continue
        if mode not in RESPONSE_MODES:
            writer.problems.add(row, f"one of {', '.join(RESPONSE_MODES)} is expected, got {mode!r}", "mode")
            continue
        if not isinstance(text, str) or not text.strip():
            writer.problems.add(row, "a non-empty response text is expected", "text")
            continue
        _guard(writer, row, "text", lambda: writer.generation("response", iid, text.replace("\r\n", "\n"),
                                                               model=model.strip(), mode=mode))


_IMPORTERS = {"cs4": _import_cs4, "research": _import_research, "jsonl": _import_jsonl, "responses": _import_responses}


def import_file(store: Store, options: ImportOptions) -> ImportSummary:
    """Import one file in one transaction: everything or (on any bad row) nothing. With
    ``dry_run`` everything is checked and counted, then rolled back."""
    if options.format not in FORMATS:
        raise ImportFailed(f"unknown format {options.format!r}: one of {', '.join(FORMATS)}")
    if not options.path.is_file():
        raise ImportFailed(f"{options.path}: no such file")
    try:
        _condition(options.condition, "single")
    except ValueError as exc:
        raise ImportFailed(f"--condition: {exc}") from None
    if options.evaluated not in ("response", "summary", "base"):
        raise ImportFailed(f"--evaluated: one of response, summary, base, got {options.evaluated!r}")
    name = options.name or options.path.stem
    if options.format == "responses":
        name = options.name or f"responses-{options.path.stem}"
    summary = ImportSummary(import_run_id(name), options.path, options.domain, None, dry_run=options.dry_run)
    problems = _Problems(options.path)
    writer = _Writer(store, summary, problems)
    conn = store.conn
    if conn.in_transaction:
        conn.commit()
    try:
        conn.execute("BEGIN IMMEDIATE")  # one writer: the checks below see what this import will change
        writer.run(options, name, {"domain": options.domain, "condition": options.condition, "run": options.run})
        _IMPORTERS[options.format](writer, options, name)
        problems.raise_if_any(summary.rows)
    except BaseException:
        conn.rollback()
        raise
    if options.dry_run:
        conn.rollback()
        return summary
    conn.commit()
    _flag(store, writer.new_instructions)
    return summary


def _flag(store: Store, instruction_ids: Sequence[int]) -> None:
    """The lexical quality flags (proper nouns, copied n-grams against a reference ...), as a
    build computes them; derived data, so after the import's own transaction."""
    from pipeline.analysis.flags import flag_instruction

    for iid in instruction_ids:
        flag_instruction(store, iid)


def imported_models(store: Store) -> list[str]:
    """Models whose responses were imported (written elsewhere: no endpoint writes them)."""
    return [r[0] for r in store.conn.execute(
        "SELECT DISTINCT model FROM generations WHERE kind = 'response' AND import_run IS NOT NULL ORDER BY model")]


def describe(summary: ImportSummary) -> Iterator[str]:
    """The lines a person reads after an import."""
    verb = "would add" if summary.dry_run else "added"
    added = ", ".join(f"{n} {what}" for what, n in summary.added.items() if n) or "nothing"
    where = f" (domain {summary.domain}, condition {summary.condition})" if summary.domain and summary.condition else ""
    yield f"{summary.path}: {summary.rows} row(s) read into run {summary.run_id}{where}; {verb} {added}"
    for reason, n in summary.skipped.items():
        yield f"  skipped {n}: {reason}"
    if summary.dry_run:
        yield "  dry run: nothing was written"
