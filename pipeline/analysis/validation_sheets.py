"""People's sheets for validating the Core metric: the CSV each annotator fills in, reading answered
sheets back (every row checked first, errors naming sheet and row), and the adjudicator's sheet of
disagreements. The rule that scores the labels lives in pipeline.analysis.validation; this module
only moves labels between people and the store.

The judge check's sheets (pipeline.analysis.judge_validation) read through the same row checks."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
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

SHEET_COLUMNS = ("plan", "item", "constraint_id", "response_id", "domain", "main_task", "constraint", "response",
                 "summary", "annotator", "label", "note")
# What a sheet's label column may hold: the labels, or their first letters.
LABEL_ALIASES = {**{label: label for label in LABELS}, "i": "integrated", "s": "superficial", "a": "ambiguous"}


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
            raise ValidationError(f"plan {plan.name!r} item {p.position}: constraint {p.constraint_id} or response "
                                  f"{p.response_id} is no longer in the store; draw the plan again (--replace)")
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


def import_sheets(store: Store, paths: Sequence[str | Path], *, annotator: str | None = None,
                  plan: Plan | None = None) -> ImportResult:
    """Read labelled sheets back. Every row is checked first: an unknown label, an item that is
    not in the plan, ids that do not match the plan's item, no annotator, or one annotator
    labelling an item twice differently is an error naming its sheet and line. Rows without a
    label are skipped. When any row is wrong nothing is saved, so a fixed sheet can simply be
    imported again (an import replaces the same annotator's earlier label of an item)."""

    by_position = {p.position: p for p in plan.items} if plan else {}
    plans: dict[str, Plan] = {plan.name: plan} if plan else {}
    result = ImportResult()
    pending: dict[tuple[int, int, str], tuple[str, str, RowError]] = {}
    columns = {"item", "constraint_id", "response_id", "label"}
    command = "`unspecific validate export`"
    for raw, row, at in answered_rows(paths, columns, "validation sheet", command, "label", result):
        label = LABEL_ALIASES.get(raw)
        if label is None:
            result.fail(at, f"label {row.get('label')!r} is not one of integrated, superficial, ambiguous "
                            "(or i, s, a)")
            continue
        try:
            who, target = row_owner(row, annotator, plan, plans, lambda name: load_plan(store, name), DEFAULT_PLAN,
                                    "plan")
            position, cid, rid = row_ids(row, "response_id")
        except SheetRowError as exc:
            result.fail(at, str(exc))
            continue
        item = (by_position if plan else {p.position: p for p in target.items}).get(position)
        if item is None or (item.constraint_id, item.response_id) != (cid, rid):
            result.fail(at, f"item {position} (constraint {cid}, response {rid}) is not in plan "
                            f"{target.name!r}")
            continue
        key = (cid, rid, who)
        note = (row.get("note") or "").strip()
        if key in pending and pending[key][0] != label:
            result.fail(at, f"{who} labels item {position} {label}, but {pending[key][2]} says "
                            f"{pending[key][0]}")
            continue
        pending[key] = (label, note, at)
        result.annotators.add(who)
    if result.errors:
        return result
    save_annotations(store, [AnnotationRow(cid, rid, who, label, note)
                             for (cid, rid, who), (label, note, _) in pending.items()], now())
    result.saved = len(pending)
    return result


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
