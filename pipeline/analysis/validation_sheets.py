"""People's sheets for validating the Core metric: the CSV each annotator fills in, reading answered
sheets back (every row checked first, errors naming sheet and row), and the adjudicator's sheet of
disagreements. The rule that scores the labels lives in pipeline.analysis.validation; this module
only moves labels between people and the store.

The judge check's sheets (pipeline.analysis.judge_validation) read through the same row checks."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pipeline.analysis.metrics.base import LABELS
from pipeline.analysis.validation import ADJUDICATOR, read_labels
from pipeline.analysis.validation_plan import DEFAULT_PLAN, Plan, ValidationError, load_plan
from pipeline.store.annotations import AnnotationRow, annotator_labels, save_annotations
from pipeline.store.database import now
from pipeline.store.validation import PlanItem, item_texts

if TYPE_CHECKING:
    from pipeline.store.database import Store

SHEET_COLUMNS = ("plan", "item", "constraint_id", "response_id", "domain", "main_task",
                 "constraint", "response",
                 "summary", "annotator", "label", "note")
# What a sheet's label column may hold: the labels, or their first letters.
LABEL_ALIASES = {**{label: label for label in LABELS}, "i": "integrated", "s": "superficial",
                 "a": "ambiguous"}


# -- sheets ------------------------------------------------------------------------------------


def sheet_rows(store: Store, plan: Plan, *, annotator: str = "") -> list[dict[str, Any]]:
    """One row per plan item, in the plan's order: the texts a labeller needs and nothing a judge
    said (no verdict, no quote, no stratum, no score). ``label`` and ``note`` are pre-filled
    with ``annotator``'s own labels, so a sheet can be handed back and forth."""
    mine = annotator_labels(store, annotator)
    rows = []
    for p in plan.items:
        texts = item_texts(store, p.constraint_id, p.response_id, p.summary_id)
        if texts is None:
            raise ValidationError(f"plan {plan.name!r} item {p.position}: constraint "
                                  f"{p.constraint_id} or response "
                                  f"{p.response_id} is no longer in the store; draw the "
                                  "plan again (--replace)")
        given = mine.get((p.constraint_id, p.response_id))
        label, note = (given.label, given.note) if given else ("", "")
        rows.append({"plan": plan.name, "item": p.position, "constraint_id": p.constraint_id,
                     "response_id": p.response_id, "domain": p.domain, "main_task": texts.main_task,
                     "constraint": texts.constraint, "response": texts.response, "summary": texts.summary,
                     "annotator": annotator, "label": label, "note": note})
    return rows


def write_sheet(rows: Sequence[dict[str, Any]], out: Any, extra: Sequence[str] = (),
                columns: Sequence[str] | None = None) -> None:
    """CSV with a header (``columns``, the label sheet's by default, then ``extra``); ``out`` is a
    path or an open text file."""
    if isinstance(out, (str, Path)):
        with open(out, "w", newline="", encoding="utf-8") as fh:
            write_sheet(rows, fh, extra, columns)
        return
    columns = [*(columns or SHEET_COLUMNS), *extra]
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)


@dataclass(frozen=True)
class RowError:
    sheet: str
    line: int  # the row as a spreadsheet numbers it (the header is row 1; a text's newlines do not count)
    message: str

    def __str__(self) -> str:
        return f"{self.sheet}:{self.line}: {self.message}"


@dataclass
class ImportResult:
    saved: int = 0
    blank: int = 0  # rows with no label yet: skipped, not an error
    errors: list[RowError] = field(default_factory=list)
    annotators: set[str] = field(default_factory=set)

    def fail(self, at: RowError, message: str) -> None:
        """An error on the row ``at`` names."""
        self.errors.append(RowError(at.sheet, at.line, message))

    def unless_failed(self, save: Callable[[], object], count: int) -> ImportResult:
        """``save`` the ``count`` answers read, unless a row was wrong: then nothing, so a fixed sheet
        can simply be imported again."""
        if not self.errors:
            save()
            self.saved = count
        return self


def read_sheets(paths: Sequence[str | Path], columns: set[str], kind: str,
                command: str) -> Iterator[tuple[str, int, dict[str, str]]]:
    """(sheet name, line, row) of every row of every sheet, in order. ValidationError names the
    file when it cannot be read or lacks one of ``columns`` (and the ``command`` that writes one)."""
    for path in paths:
        try:
            fh = open(path, newline="", encoding="utf-8-sig")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise ValidationError(f"{path}: cannot read the sheet ({exc})") from exc
        with fh:
            reader = csv.DictReader(fh)
            missing = columns - set(reader.fieldnames or ())
            if missing:
                raise ValidationError(f"{path}: not a {kind} (no column {', '.join(sorted(missing))}); "
                                      f"write one with {command}")
            for line, row in enumerate(reader, start=2):
                yield Path(path).name, line, row


def answered_rows(paths: Sequence[str | Path], columns: set[str], kind: str, command: str, answer: str,
                  result: ImportResult) -> Iterator[tuple[str, dict[str, str], RowError]]:
    """(the answer, lower-cased; the row; where it is, with no message) of each row of the sheets
    (read_sheets) whose ``answer`` column is filled in; the others are counted in ``result.blank``."""
    for sheet, line, row in read_sheets(paths, columns, kind, command):
        raw = (row.get(answer) or "").strip().lower()
        if raw:
            yield raw, row, RowError(sheet, line, "")
        else:
            result.blank += 1


class SheetRowError(ValueError):
    """One row of an answered sheet is wrong; the message says what (its sheet and line are added)."""


def row_ids(row: dict[str, str], text_column: str) -> tuple[int, int, int]:
    """The row's item position, constraint id and text id (in ``text_column``); SheetRowError when
    one is not a whole number."""
    try:
        return int(row["item"]), int(row["constraint_id"]), int(row[text_column])
    except (TypeError, ValueError):
        raise SheetRowError(f"item, constraint_id and {text_column} must be whole numbers") from None


P = TypeVar("P")


def row_owner(row: dict[str, str], annotator: str | None, plan: P | None, plans: dict[str, P],
              load: Callable[[str], P | None], default_plan: str, what: str) -> tuple[str, P]:
    """Who answered a sheet row and the plan it belongs to: the annotator and plan given on the
    command line, else the row's own columns (a blank plan is ``default_plan``). Each named plan
    is loaded once into ``plans``. SheetRowError when there is no annotator or no such plan."""
    who = annotator or (row.get("annotator") or "").strip()
    if not who:
        raise SheetRowError("no annotator: fill the annotator column or pass --annotator")
    if plan is not None:
        return who, plan
    name = (row.get("plan") or "").strip() or default_plan
    if name not in plans:
        found = load(name)
        if found is None:
            raise SheetRowError(f"no {what} named {name!r} in this store")
        plans[name] = found
    return who, plans[name]


# (constraint id, text id, annotator): one answer each.
AnswerKey = tuple[int, int, str]
V = TypeVar("V")


@dataclass(frozen=True)
class SheetKind:
    """What tells one check's answered sheets apart: the Core metric's labels, the judge check's answers."""

    name: str  # what an error calls a file that is not one
    command: str  # the command that writes one
    answer: str  # the column a person fills in
    text: str  # the column of the text's id
    text_noun: str  # the text, in an error
    plan_noun: str  # the plan, in an error
    item_text: str  # a plan item's attribute holding the text's id


LABEL_SHEET = SheetKind("validation sheet", "`unspecific validate export`", "label", "response_id",
                        "response", "plan", "response_id")


def read_answers(paths: Sequence[str | Path], kind: SheetKind, result: ImportResult,
                 owner: Callable[[dict[str, str]], tuple[str, Any]],
                 value: Callable[[str, dict[str, str]], V],
                 clash: Callable[[str, int, V, V, RowError], str]) -> dict[AnswerKey, tuple[V, str]]:
    """The answered rows of the sheets, each checked first: ``value`` reads the answer, ``owner`` who
    gave it and the plan (as row_owner), and the item must be the plan's at its position (a
    SheetRowError otherwise); one annotator answering an item twice differently is an error worded by
    ``clash`` (who, the item, this answer, the first one and where it is). Errors go to ``result``;
    key -> (answer, note) is returned."""
    pending: dict[AnswerKey, tuple[V, str, RowError]] = {}
    columns = {"item", "constraint_id", kind.text, kind.answer}
    for raw, row, at in answered_rows(paths, columns, kind.name, kind.command, kind.answer, result):
        try:
            answer = value(raw, row)
            who, target = owner(row)
            position, cid, tid = row_ids(row, kind.text)
            item = next((i for i in target.items if i.position == position), None)
            if item is None or (item.constraint_id, getattr(item, kind.item_text)) != (cid, tid):
                raise SheetRowError(f"item {position} (constraint {cid}, {kind.text_noun} {tid}) is not in "
                                    f"{kind.plan_noun} {target.name!r}")
        except SheetRowError as exc:
            result.fail(at, str(exc))
            continue
        first = pending.get((cid, tid, who))
        if first is not None and first[0] != answer:
            result.fail(at, clash(who, position, answer, first[0], first[2]))
            continue
        pending[(cid, tid, who)] = (answer, (row.get("note") or "").strip(), at)
        result.annotators.add(who)
    return {key: (answer, note) for key, (answer, note, _) in pending.items()}


def _label(raw: str, row: dict[str, str]) -> str:
    label = LABEL_ALIASES.get(raw)
    if label is None:
        raise SheetRowError(f"label {row.get('label')!r} is not one of integrated, superficial, ambiguous "
                            "(or i, s, a)")
    return label


def _labelled_twice(who: str, position: int, label: str, first: str, where: RowError) -> str:
    return f"{who} labels item {position} {label}, but {where} says {first}"


def import_sheets(store: Store, paths: Sequence[str | Path], *, annotator: str | None = None,
                  plan: Plan | None = None) -> ImportResult:
    """Read labelled sheets back. Every row is checked first: an unknown label, an item that is
    not in the plan, ids that do not match the plan's item, no annotator, or one annotator
    labelling an item twice differently is an error naming its sheet and line. Rows without a
    label are skipped. When any row is wrong nothing is saved, so a fixed sheet can simply be
    imported again (an import replaces the same annotator's earlier label of an item)."""

    owner = partial(row_owner, annotator=annotator, plan=plan, plans={plan.name: plan} if plan else {},
                    load=lambda name: load_plan(store, name), default_plan=DEFAULT_PLAN, what="plan")
    result = ImportResult()
    labels = read_answers(paths, LABEL_SHEET, result, owner, _label, _labelled_twice)
    rows = [AnnotationRow(cid, rid, who, label, note) for (cid, rid, who), (label, note) in labels.items()]
    return result.unless_failed(lambda: save_annotations(store, rows, now()), len(rows))


@dataclass(frozen=True)
class Disagreement:
    item: PlanItem
    labels: dict[str, str]  # annotator -> label (the adjudicator left out)


def disagreements(store: Store, plan: Plan) -> list[Disagreement]:
    """Plan items two or more annotators labelled differently and no adjudicator has settled."""
    labels = read_labels(store)
    out = []
    for p in plan.items:
        by = labels.get((p.constraint_id, p.response_id), {})
        if ADJUDICATOR in by:
            continue
        people = {who: label for who, label in by.items() if who != ADJUDICATOR}
        if len(set(people.values())) > 1:
            out.append(Disagreement(p, people))
    return out


def adjudication_rows(store: Store, plan: Plan) -> tuple[list[dict[str, Any]], list[str]]:
    """A sheet of the disagreements for the adjudicator: the usual columns (annotator
    ``adjudicator``, label blank) plus one ``label_<annotator>`` column per annotator. Returns
    the rows and the extra column names."""
    found = disagreements(store, plan)
    people = sorted({who for d in found for who in d.labels})
    wanted = {(d.item.constraint_id, d.item.response_id): d for d in found}
    rows = []
    for row in sheet_rows(store, plan, annotator=ADJUDICATOR):
        d = wanted.get((row["constraint_id"], row["response_id"]))
        if d is not None:
            rows.append({**row, **{f"label_{who}": d.labels.get(who, "") for who in people}})
    return rows, [f"label_{who}" for who in people]
