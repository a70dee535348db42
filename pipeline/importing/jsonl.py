"""Plain JSONL instructions, one a line: ``id``, ``instruction`` (or ``main_task``), ``constraints``
(a list of strings or of {"text": ...}, or numbered lines), optional ``condition`` (a public
name), ``domain``, ``reference`` and ``reference_b`` (texts). The lines ``unspecific export
--with-references`` writes import as they are."""

from __future__ import annotations

from functools import partial
from typing import Any

from pipeline.importing.common import ImportOptions, condition_name, guard
from pipeline.importing.reading import parse_numbered, read_jsonl
from pipeline.importing.writer import ImportWriter


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


def import_jsonl(writer: ImportWriter, options: ImportOptions, name: str) -> None:
    rows = read_jsonl(options.path)
    writer.summary.rows = len(rows)
    writer.summary.condition = condition_name(options.condition, "single")
    seen: dict[str, int] = {}
    for row in rows:
        v = row.values
        source_id = v.get("id")
        if isinstance(source_id, bool) or not isinstance(source_id,
                                                         (str, int)) or str(source_id).strip() == "":
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
            condition = condition_name(v.get("condition"), options.condition or "single")
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
            refs[key] = guard(writer.problems, row, key, partial(
                writer.article, name, f"{source_id}/{suffix}", domain, text))
        if bad:
            continue
        guard(writer.problems, row, "id", lambda: writer.instruction(
            source_id, domain=domain, condition=condition, task=" ".join(task.split()),
            constraints=constraints,
            article_a=refs["reference"], article_b=refs["reference_b"]))
