"""The UNSPECIFIC research code's CSV outputs, read as its writers write them (the layouts, quoted
from the writers, are in ``research_layouts``). The files of one run, given together in any
order, become one benchmark (one import, ``--name``): each file is recognised by its columns and
imported after the files it refers to.

- constraints (single article) and common constraints: instructions (conditions single and
  none), with the article or ``blog1``/``blog2`` as references;
- hardened constraints: the revision of the instruction its original list came from, condition
  direct or eval (the two revision scripts write the same file: ``--condition`` says which;
  without it, eval when the base article's evaluation is among the files): the revised list
  active, the original kept as lineage, in one instruction, as a build keeps it. A response written
  to the original list (a direct generation from the common constraints) is an instruction of its
  own (condition none, source id ``N/none``); a hardened file without its constraints file
  brings its own instruction (``N/eval``);
- base, fitted, direct generation: the base article; responses by ``model_used``, mode edit
  (fitted: the base article edited) or direct;
- summaries: attached to the response they summarise, found by instruction and text (the
  summariser overwrote ``model_used``: it is the summary's writer, never a response's);
- evaluations of any of these: the judge ``eval_model``'s verdicts on the text it judged, on the
  list the row names (the base article's evaluation: on the original list, as a build judges it).

A row is joined to its instruction by ``instruction_number`` and its constraint list, so the
lists of every condition of one source row live side by side. Rows the research run itself
failed (empty outputs, a summariser ``error``) are skipped and counted, not errors."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path

from pipeline.importing.common import (
    ImportFailed,
    ImportOptions,
    ImportSummary,
    Problems,
    ResearchColumns,
    Row,
    condition_name,
    guard,
    import_run_id,
)
from pipeline.importing.reading import find_column, parse_numbered, read_csv
from pipeline.importing.research_layouts import (
    BASE,
    DIRECT,
    EVALUATION,
    FITTED,
    HARDENED,
    SUMMARIES,
    Detected,
    describe_layouts,
    detect,
)
from pipeline.importing.writer import ImportWriter, write_import
from pipeline.store import imports
from pipeline.store.constraints import active_constraints, constraint_records_of
from pipeline.store.database import Store

# The writer of an imported base article: the research files do not reliably say which model
# wrote it (base_generator's merge keeps the constraint generator's model_used, or suffixes both).
IMPORTED_WRITER = "imported"
JUDGED_TEXTS = ("summary", "response", "base")
_BASE_CONDITIONS = ("single", "none")
_REVISED_CONDITIONS = ("direct", "eval")
_RESPONSES = (FITTED, DIRECT, SUMMARIES)  # layouts whose rows carry a response to their list


@dataclass(frozen=True)
class _Revision:
    """A hardened row, read ahead: the list an instruction had and the one it was revised to."""

    original: list[str]
    revised: list[str]
    task: str


@dataclass(frozen=True)
class _Target:
    """The instruction a row belongs to, and the constraints its list names in order (None: the
    instruction's active list; else the original list of a revised one)."""

    iid: int
    constraint_ids: list[int] | None = None


@dataclass
class ResearchFile:
    path: Path
    detected: Detected
    found: dict[str, str | None]  # role -> the file's column
    rows: list[Row]


def read_research_file(path: Path, columns: ResearchColumns) -> ResearchFile:
    names, rows = read_csv(path)
    found = {f.name: find_column(names, getattr(columns, f.name)) for f in fields(columns)}
    detected = detect(lambda role: found.get(role) is not None)
    if detected is None:
        raise ImportFailed(
            f"{path}:1: not a file the research code writes. Its layouts, by writer: {describe_layouts()}. "
            f"This file's columns: {', '.join(map(repr, names)) or 'none'}. A renamed "
            "column is named with its --<role>-column option")
    if found["id"] is None:
        raise ImportFailed(f"{path}:1: no {columns.id!r} column, which joins the research files "
                           f"(its columns: {', '.join(map(repr, names))}); name it with --id-column")
    return ResearchFile(path, detected, found, rows)


def import_research(writer: ImportWriter, options: ImportOptions, name: str) -> None:
    """One research file (``import_file``'s entry); ``import_research_run`` takes a run's files."""
    _RunImport(writer, options, name, [read_research_file(options.path, options.columns)]).run()


def import_research_run(store: Store, options: ImportOptions, paths: list[Path],
                        found_in_folder: frozenset[Path] = frozenset()) -> ImportSummary:
    """The files of one research run, in any order, as one import in one transaction: everything
    or, on any bad row of any file, nothing. With ``dry_run`` everything is checked, then rolled back.
    A file ``found_in_folder`` (not named by the person) that is no research output, such as the
    run's input, is left out with a warning."""
    if not paths:
        raise ImportFailed("no files to import")
    for path in paths:
        if not path.is_file():
            raise ImportFailed(f"{path}: no such file")
    try:
        condition_name(options.condition, "none")
    except ValueError as exc:
        raise ImportFailed(f"--condition: {exc}") from None
    if options.judged is not None and options.judged not in JUDGED_TEXTS:
        raise ImportFailed(f"--evaluated: one of {', '.join(JUDGED_TEXTS)}, got {options.judged!r}")
    files, left_out = [], []
    for path in paths:
        try:
            files.append(read_research_file(path, options.columns))
        except ImportFailed as exc:
            if path not in found_in_folder or not str(exc).startswith(f"{path}:1: not a file"):
                raise
            left_out.append(f"{path}: left out, not a file the research code writes")
    if not files:
        raise ImportFailed(f"{paths[0].parent}: none of its .csv files is one the research code writes")
    name = options.name or run_name(paths)
    where = paths[0] if len(paths) == 1 else paths[0].parent
    summary = ImportSummary(import_run_id(name), where, options.domain, None, dry_run=options.dry_run)
    summary.warnings += left_out
    problems = Problems(where)
    def fill(writer: ImportWriter) -> None:
        _RunImport(writer, options, name, files).run()
        problems.path = where  # each file's rows named their own file; the whole names the run

    return write_import(store, summary, problems, options, name,
                        {"domain": options.domain, "condition": options.condition,
                         "files": [str(p) for p in paths]}, fill)


def run_name(paths: list[Path]) -> str:
    """The default import name: the file's stem, or the folder of a run's files."""
    if len(paths) == 1:
        return paths[0].stem
    return paths[0].resolve().parent.name or "research"


def _task(value: str) -> str:
    """A main task as the research parsers leave it: common_constraint_generator.py:137-139 keeps the
    markdown of "**Main Task:** ..." ("** Write ..."), so emphasis marks around it go."""
    return " ".join(value.split()).strip("* ").strip()


def _number(value: str) -> str:
    """instruction_number as written: pandas writes an int column as 7, or as 7.0 once a merge left
    a gap in it."""
    return value[:-2] if re.fullmatch(r"\d+\.0", value) else value


@dataclass
class _RunImport:
    writer: ImportWriter
    options: ImportOptions
    name: str
    files: list[ResearchFile]
    _texts: dict[int, list[str]] = field(default_factory=dict)  # instruction -> its active constraints
    _conditions: set[str] = field(default_factory=set)
    _revisions: dict[str, _Revision] = field(default_factory=dict)  # number -> its hardened row

    def run(self) -> None:
        summary = self.writer.summary
        summary.domain = self.domain
        has_hardened = any(f.detected.rows_layout is HARDENED for f in self.files)
        judged_base = any(f.detected.layout is EVALUATION and f.detected.inner is BASE for f in self.files)
        given = condition_name(self.options.condition, "none") if self.options.condition else None
        self.revised_condition = given if given in _REVISED_CONDITIONS else ("eval"
                                                                             if judged_base else "direct")
        # A list found in no constraints file: the condition the person gave, unless it names the
        # revision of a hardened file that is here (then the list is an original one).
        self.given_condition = given if given and not (has_hardened
                                                       and given in _REVISED_CONDITIONS) else None
        self._revisions = _read_revisions(self.files)
        for f in sorted(self.files, key=lambda f: f.detected.rank):  # what a file refers to comes first
            self.writer.problems.path = f.path
            summary.files.append(f"{f.path}: {f.detected.name}, {len(f.rows)} row(s)")
            summary.rows += len(f.rows)
            for row in f.rows:
                self._row(f, row)
        summary.condition = ", ".join(sorted(self._conditions)) or None

    @property
    def domain(self) -> str:
        return self.options.domain or "news"

    # -- one row -------------------------------------------------------------------------------

    def _row(self, f: ResearchFile, row: Row) -> None:
        cell = _Cells(f, row)
        layout, skipped = f.detected.rows_layout, self.writer.summary.skipped
        number = _number(cell("id"))
        if not number:
            self.writer.problems.add(row, "empty", f.found["id"])
            return
        if layout is SUMMARIES and cell("error"):
            skipped["summaries the research run failed (its 'error' column: the text is not a summary)"] += 1
            return
        if f.detected.layout is EVALUATION and not cell("results"):
            skipped["evaluations the research run failed (empty satisfaction_results)"] += 1
            return
        target = self._instruction(f, row, cell, number)
        if target is None:
            return
        iid = target.iid
        texts: dict[str, int | None] = {}
        if cell("base"):
            texts["base"] = guard(self.writer.problems, row, f.found["base"], lambda: self.writer.generation(
                "base", iid, cell("base"), model=IMPORTED_WRITER))
        response_role = "content" if cell("content") else "direct" if cell("direct") else None
        if layout in (FITTED, DIRECT, SUMMARIES):
            if response_role is None:
                skipped["responses the research run left empty"] += 1
                return
            texts["response"] = self._response(f, row, cell, iid, response_role)
            if texts["response"] is None:
                return
        if layout is SUMMARIES:
            texts["summary"] = self._summary(f, row, cell, iid, texts["response"])
        if f.detected.layout is EVALUATION:
            self._verdicts(f, row, cell, target, texts)

    def _response(self, f: ResearchFile, row: Row, cell: _Cells, iid: int, role: str) -> int | None:
        text = cell(role)
        if f.detected.rows_layout is SUMMARIES:
            # model_used names the summariser here: the response is the one with this text.
            found = self.writer.response_with_text(iid, text)
            if found is None:
                self.writer.problems.add(row,
                                         f"the response this row summarises is not imported for instruction "
                                         f"{cell('id')}: give the fitted or direct generation file with it",
                                         f.found[role])
            return found
        model = cell("model")
        if not model:
            self.writer.problems.add(row, "empty (a response is credited to the model that wrote it)",
                                     f.found["model"] or self.options.columns.model)
            return None
        mode = "edit" if role == "content" else "direct"
        return guard(self.writer.problems, row, f.found[role], lambda: self.writer.generation(
            "response", iid, text, model=model, mode=mode))

    def _summary(self, f: ResearchFile, row: Row, cell: _Cells, iid: int, response: int | None) -> int | None:
        ratio = self.options.ratio
        if cell("summary_ratio"):
            try:
                ratio = float(cell("summary_ratio"))
            except ValueError:
                ratio = -1.0
            if not 0 < ratio < 1:
                self.writer.problems.add(row,
                                         f"a number between 0 and 1 is expected, got "
                                         f"{cell('summary_ratio')!r}",
                                         f.found["summary_ratio"])
                return None
        summariser = cell("model") or IMPORTED_WRITER
        return guard(self.writer.problems, row, f.found["summary"], lambda: self.writer.generation(
            "summary", iid, cell("summary"), model=summariser, ratio=ratio, parent_id=response))

    def _verdicts(self, f: ResearchFile, row: Row, cell: _Cells, into: _Target,
                  texts: dict[str, int | None]) -> None:
        judge = cell("eval_model")
        if not judge:
            self.writer.problems.add(row, "empty (verdicts are credited to the judge model that gave them)",
                                     f.found["eval_model"])
            return
        target = self.options.judged or next((t for t in JUDGED_TEXTS if texts.get(t)), None)
        gid = texts.get(target) if target else None
        if gid is None:
            self.writer.problems.add(row, f"the results judge the {target or 'text'}, and this row has none",
                                     f.found["results"])
            return
        reply = guard(self.writer.problems, row, f.found["results"],
                      lambda: self.writer.verdicts(gid, into.iid, judge, cell("results"),
                                                   constraint_ids=into.constraint_ids))
        if reply is None:
            return
        warnings = list(reply.warnings)
        yes = sum(1 for item in reply.items.values() if item["verdict"])
        if _number(cell("num_satisfied")) not in ("", str(yes)):
            warnings.append(f"{yes} Yes read where the file's {f.found['num_satisfied']!r} says "
                            f"{cell('num_satisfied')}")
        for warning in warnings:
            self.writer.summary.warnings.append(f"{f.path}:{row.line}, column "
                                                f"{row.columns.get(f.found['results'] or '')}"
                                                f" ({f.found['results']!r}): {warning}")

    # -- the instruction a row belongs to ------------------------------------------------------

    def _instruction(self, f: ResearchFile, row: Row, cell: _Cells, number: str) -> _Target | None:
        if f.detected.rows_layout is HARDENED:
            iid = self._revised(f, row, cell, number)
            return None if iid is None else _Target(iid)
        if not cell("constraints"):
            self.writer.summary.skipped["rows without constraints (the research run failed on them)"] += 1
            return None
        texts = self._parse(f, row, "constraints", cell("constraints"))
        if texts is None:
            return None
        revision = self._revisions.get(number)
        if revision is not None and texts == revision.original and f.detected.rows_layout not in _RESPONSES:
            # The constraints file's list, its base article or that article's evaluation: the
            # instruction the revision joins, not a second one. (A response written to the list
            # before its revision answers another instruction: found or made below.)
            return self._joined(f, row, cell, number, revision)
        found = self._find(number, texts)
        if found is not None:
            return _Target(found)
        condition = self.given_condition or ("single" if f.found["article"] is not None else "none")
        plain = condition in _BASE_CONDITIONS and revision is None
        source_id = number if plain else f"{number}/{condition}"
        if imports.imported_instruction(self.writer.store, self.writer.summary.run_id, source_id) is not None:
            self.writer.problems.add(row,
                                     f"none of the lists given for instruction {number}: "
                                     "give the file this list "
                                     "comes from (the hardened constraints?) with it, or import it "
                                     "under another --name",
                                     f.found["constraints"])
            return None
        self._conditions.add(condition)
        iid = self._plain(f, row, cell, source_id, condition, texts)
        return None if iid is None else _Target(iid)

    def _joined(self, f: ResearchFile, row: Row, cell: _Cells, number: str,
                revision: _Revision) -> _Target | None:
        """The instruction a hardened row revises, from the row of its original list: the revised
        list active, the original as lineage; the row's list named by the original's constraints."""
        found = self._find(number, revision.revised)
        if found is None:
            task = revision.task or _task(cell("instruction"))
            if not task:
                self.writer.problems.add(row, "empty (an instruction needs its main task)",
                                         f.found["instruction"] or self.options.columns.instruction)
                return None
            refs = self._references(f, row, cell, number)
            found = guard(self.writer.problems, row, f.found["constraints"], lambda: self._write_revision(
                number, task, revision.original, revision.revised, refs))
            if found is None:
                return None
        ids = self._original_ids(found, revision.original)
        if ids is None:  # imported before from the revised list alone: it holds no lineage to judge on
            self.writer.problems.add(row,
                                     f"instruction {number} was imported before without this list as its "
                                     "lineage; import the run's files together under another --name",
                                     f.found["constraints"])
            return None
        return _Target(found, ids)

    def _write_revision(self, source_id: str, task: str, original: list[str], revised: list[str],
                        refs: list[int | None]) -> int:
        condition = self.revised_condition
        self._conditions.add(condition)
        how = "with the base article's evaluation" if condition == "eval" else "from the base article alone"
        iid = self.writer.revised_instruction(
            source_id, domain=self.domain, condition=condition, task=task, original=original, revised=revised,
            reason=f"replaced by the research code's revision ({how}); paired in list order",
            article_a=refs[0], article_b=refs[1])
        self._texts[iid] = revised
        return iid

    def _original_ids(self, iid: int, original: list[str]) -> list[int] | None:
        """The constraints of a revised instruction that make up its original list, in its order:
        the kept ones and the retired ones (a revised constraint is never one of them); None when
        the instruction does not hold that list."""
        pool = [c for c in constraint_records_of(self.writer.store, [iid]).get(iid, [])
                if c.origin != "revised"]
        ids = []
        for text in original:
            match = next((c for c in pool if c.text == text), None)
            if match is None:
                return None
            pool.remove(match)
            ids.append(match.id)
        return ids

    def _plain(self, f: ResearchFile, row: Row, cell: _Cells, source_id: str, condition: str,
               texts: list[str]) -> int | None:
        number = _number(cell("id"))
        task = self._task_of(f, row, cell, number)
        if task is None:
            return None
        refs = self._references(f, row, cell, number)
        iid = guard(self.writer.problems, row, f.found["id"], lambda: self.writer.instruction(
            source_id, domain=self.domain, condition=condition, task=task, constraints=texts,
            article_a=refs[0], article_b=refs[1]))
        if iid is not None:
            self._texts[iid] = texts
        return iid

    def _revised(self, f: ResearchFile, row: Row, cell: _Cells, number: str) -> int | None:
        if not cell("revised"):
            self.writer.summary.skipped["revisions the research run failed (empty revised_constraints)"] += 1
            return None
        original = self._parse(f, row, "original", cell("original"))
        revised = self._parse(f, row, "revised", cell("revised"))
        if original is None or revised is None:
            return None
        joined = self._find(number, revised)  # the instruction of its constraints file, revised already
        if joined is not None:
            return joined
        # The reviser answers with its own "Main Task:" line, empty when it left it out.
        task = self._task_of(f, row, cell, number)
        if task is None:
            return None
        refs = self._references(f, row, cell, number)
        return guard(self.writer.problems, row, f.found["revised"], lambda: self._write_revision(
            f"{number}/{self.revised_condition}", task, original, revised, refs))

    def _task_of(self, f: ResearchFile, row: Row, cell: _Cells, number: str) -> str | None:
        """The row's main task, else the one this import holds for the number; None, a problem noted
        on the row, when neither gives one."""
        task = _task(cell("instruction")) or self._stored_task(number)
        if not task:
            column = f.found["instruction"] or self.options.columns.instruction
            self.writer.problems.add(row, "empty (an instruction needs its main task), and no file among "
                                     f"these gives instruction {number}'s", column)
            return None
        return task

    def _stored_task(self, number: str) -> str:
        """The main task this import holds for the number (its constraints file's), or ''."""
        stored = imports.imported_instruction(self.writer.store, self.writer.summary.run_id, number)
        return (stored.main_task or "") if stored else ""

    def _parse(self, f: ResearchFile, row: Row, role: str, text: str) -> list[str] | None:
        try:
            texts = parse_numbered(text)
        except ValueError as exc:
            self.writer.problems.add(row, str(exc), f.found[role])
            return None
        if not texts:
            self.writer.problems.add(row, "no numbered constraints", f.found[role])
            return None
        return texts

    def _find(self, number: str, texts: list[str]) -> int | None:
        """The instruction of this import with this number and exactly this list, any condition."""
        store, run_id = self.writer.store, self.writer.summary.run_id
        for source_id in (number, *(f"{number}/{c}" for c in (*_BASE_CONDITIONS, *_REVISED_CONDITIONS))):
            stored = imports.imported_instruction(store, run_id, source_id)
            if stored is None:
                continue
            if stored.id not in self._texts:
                self._texts[stored.id] = [c.text for c in active_constraints(store, stored.id)]
            if self._texts[stored.id] == texts:
                self._conditions.add(stored.condition)
                return stored.id
        return None

    def _references(self, f: ResearchFile, row: Row, cell: _Cells, number: str) -> list[int | None]:
        """Reference A and B: the row's own article or blogs, else those imported with this number."""
        refs: list[int | None] = []
        for suffix, roles in (("a", ("article", "reference")), ("b", ("reference_b",))):
            role = next((r for r in roles if cell(r)), None)
            source_id = f"{number}/{suffix}"
            if role is not None:
                refs.append(guard(self.writer.problems, row, f.found[role], lambda: self.writer.article(
                    self.name, source_id, self.domain, cell(role))))  # noqa: B023  # called at once
            else:
                stored = imports.imported_article(self.writer.store, f"import:{self.name}", source_id)
                refs.append(stored.id if stored else None)
        return refs


def _read_revisions(files: list[ResearchFile]) -> dict[str, _Revision]:
    """Each hardened row's lists by instruction number, read before any row is imported, so the
    row of the original list can become the revised instruction (a bad row is reported when it is
    imported, not here)."""
    out: dict[str, _Revision] = {}
    for f in files:
        if f.detected.layout is not HARDENED:
            continue
        for row in f.rows:
            cell = _Cells(f, row)
            try:
                original, revised = parse_numbered(cell("original")), parse_numbered(cell("revised"))
            except ValueError:
                continue
            if original and revised:
                out.setdefault(_number(cell("id")), _Revision(original, revised, _task(cell("instruction"))))
    return out


class _Cells:
    """A row's cells by role, stripped; an absent column reads as empty."""

    def __init__(self, f: ResearchFile, row: Row) -> None:
        self.found, self.row = f.found, row

    def __call__(self, role: str) -> str:
        column = self.found.get(role)
        return str(self.row.values.get(column, "")).strip() if column else ""
