"""The UNSPECIFIC research code's writers (JeetDSharma/UNSPECIFIC, cs4/core/, at 093fce5) re-created
for tests: the same rows, the same merges, written as pandas ``to_csv(index=False)`` writes them
(pandas is not installed here): a header of the frame's columns, QUOTE_MINIMAL, "\\n" line ends,
NaN as an empty cell, merge clashes suffixed _x/_y. A scripted model stands in for the LLM calls.
Only the behaviour that shapes the files is re-created, in our own code."""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

Frame = list[dict[str, Any]]
Model = Callable[[str], str]  # the prompt's content -> the reply
STAMP = "2025-01-01T00:00:00"


def to_csv(frame: Frame, path: Path) -> Path:
    """DataFrame.to_csv(path, index=False, encoding="utf-8")."""
    columns: list[str] = []
    for row in frame:
        columns += [c for c in row if c not in columns]
    with path.open("w", encoding="utf-8", newline="") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(columns)
        for row in frame:
            out.writerow(["" if row.get(c) is None else row[c] for c in columns])
    return path


def merge(left: Frame, right: Frame, on: str, how: str = "inner",
          suffixes: tuple[str, str] = ("_x", "_y")) -> Frame:
    """pd.merge: the left columns, then the right's; a name in both (other than ``on``) gets the suffixes."""
    left_cols = list(dict.fromkeys(c for r in left for c in r))
    right_cols = list(dict.fromkeys(c for r in right for c in r))
    clash = (set(left_cols) & set(right_cols)) - {on}
    out = []
    for lrow in left:
        matches = [r for r in right if r.get(on) == lrow.get(on)]
        if not matches and how == "left":
            matches = [{}]
        for rrow in matches:
            row = {(c + suffixes[0] if c in clash else c): lrow.get(c) for c in left_cols}
            row.update({(c + suffixes[1] if c in clash else c): rrow.get(c) for c in right_cols if c != on})
            out.append(row)
    return out


def select(frame: Frame, columns: list[str]) -> Frame:
    return [{c: row.get(c) for c in columns} for row in frame]


def _count(constraints: str) -> int:
    return len(re.findall(r"^\d+\.", constraints, re.MULTILINE))


def _parse_task(reply: str, headers: tuple[str, ...]) -> tuple[str, str]:
    """ConstraintGenerator / ConstraintReplacer ._parse_response."""
    main_task, lines, inside = "", [], False
    for line in reply.strip().split("\n"):
        line = line.strip()
        if line.startswith("Main Task:"):
            main_task = line.replace("Main Task:", "").strip()
        elif line.startswith(headers):
            inside = True
        elif inside and line:
            lines.append(line)
    return main_task, "\n".join(lines)


def constraints_single(df: Frame, model: Model, name: str, content_column: str = "Merged Blog") -> Frame:
    """constraint_generator.py:151-171."""
    out = []
    for idx, row in enumerate(df):
        main_task, constraints = _parse_task(model(row[content_column]), ("Constraints:",))
        out.append({"instruction_number": idx + 1, "instruction": row[content_column], "main_task": main_task,
                    "constraints": constraints, "model_used": name, "tokens_used": 100, "timestamp": STAMP})
    return out


def constraints_common(df: Frame, model: Model, name: str, blog1: str = "Blog A",
                       blog2: str = "Blog B") -> Frame:
    """common_constraint_generator.py:178-198 (its parser: lines stripped of '*', 'main task' anywhere)."""
    out = []
    for idx, row in enumerate(df):
        reply = model(f"{row[blog1]}\n{row[blog2]}")
        main_task, lines, inside = "", [], False
        for line in reply.strip().split("\n"):
            clean = line.strip().strip("*").strip()
            if "main task" in clean.lower():
                main_task = clean.split(":", 1)[1].strip()
            elif "constraints" in clean.lower():
                inside = True
            elif inside and clean:
                lines.append(clean)
        out.append({"instruction_number": row.get("instruction_number", idx + 1), "blog1": row[blog1],
                    "blog2": row[blog2], "main_task": main_task, "constraints": "\n".join(lines),
                    "model_used": name,
                    "tokens_used": 100, "timestamp": STAMP})
    return out


def base_parallel(df: Frame, model: Model, name: str) -> Frame:
    """base_generator.py:366-436 (no duplicate numbers): the input merged with the base rows; the
    input's model_used/tokens_used/timestamp clash and become _x, the base's _y."""
    rows = [{"instruction_number": r["instruction_number"], "base_content": model(r["main_task"]),
             "model_used": name, "tokens_used": 50, "timestamp": STAMP} for r in df]
    for r in rows:
        r["content_length"] = len(r["base_content"])
    rows.sort(key=lambda r: r["instruction_number"])
    return merge(df, select(rows, ["instruction_number", "base_content", "content_length",
                                   "model_used", "tokens_used",
                                   "timestamp"]), on="instruction_number", how="left")


def revise(constraints_df: Frame, base_df: Frame, model: Model, name: str, eval_df: Frame
           | None = None) -> Frame:
    """constraint_replacer.py:140-175 and constraint_replacer_with_eval.py:165-221."""
    merged = merge(constraints_df, select(base_df, ["instruction_number", "base_content"]),
                   on="instruction_number",
                   how="left")
    if eval_df is not None:
        merged = merge(merged, select(eval_df, ["instruction_number", "satisfaction_results"]),
                       on="instruction_number", how="left")
    out = []
    for row in merged:
        prompt = f"Main Task: {row['main_task']}\n\nOriginal Constraints:\n{row['constraints']}"
        task, revised = _parse_task(model(prompt), ("Constraints:", "Revised Constraints:"))
        out.append({"instruction_number": row["instruction_number"], "main_task": task,
                    "original_constraints": row["constraints"], "revised_constraints": revised,
                    "base_content": row["base_content"], "model_used": name, "tokens_used": 80,
                    "timestamp": STAMP})
    return sorted(out, key=lambda r: r["instruction_number"])


def fit(constraints_df: Frame, base_df: Frame, model: Model, name: str,
        constraint_column: str = "constraints") -> Frame:
    """constraint_fitter.py:145-210: an inner merge suffixed _constraint/_base."""
    merged = merge(constraints_df, base_df, on="instruction_number", suffixes=("_constraint", "_base"))
    out = []
    for row in merged:
        task = row.get("main_task_constraint", row.get("main_task", ""))
        constraints = next(row[c]
                           for c in (constraint_column, f"{constraint_column}_constraint", "constraints",
                                             "constraints_constraint") if c in row)
        base = next(row[c] for c in ("base_content", "base_content_base") if c in row)
        fitted = model(base)
        out.append({"instruction_number": row["instruction_number"], "main_task": task,
                    "constraints": constraints,
                    "base_content": base, "fitted_content": fitted, "fitted_length": len(fitted),
                    "num_constraints": _count(constraints), "model_used": name, "tokens_used": 90,
                    "timestamp": STAMP})
    return out


def direct(df: Frame, model: Model, name: str, constraint_column: str = "constraints") -> Frame:
    """direct_generator.py:145-172."""
    out = []
    for row in df:
        text = model(row["main_task"])
        out.append({"instruction_number": row["instruction_number"], "main_task": row["main_task"],
                    "constraints": row[constraint_column], "direct_content": text,
                    "content_length": len(text),
                    "num_constraints": _count(row[constraint_column]), "model_used": name, "tokens_used": 90,
                    "timestamp": STAMP})
    return out


def summarize(df: Frame, model: Model, name: str, content_column: str = "fitted_content",
              fail: set[int] = frozenset()) -> Frame:  # type: ignore[assignment]
    """content_summarizer.py:138-170: the row copied, model_used overwritten; a failed row keeps the
    original text and an error."""
    out = []
    for row in df:
        content = row[content_column]
        result = dict(row)
        if row["instruction_number"] in fail:
            result.update({"summarized_content": content, "summarized_length": len(content),
                           "original_length": len(content), "compression_ratio": 1.0, "error": "Timeout"})
        else:
            summary = model(content)
            result.update({"summarized_content": summary, "summarized_length": len(summary),
                           "original_length": len(content), "compression_ratio": len(summary) / len(content),
                           "model_used": name, "tokens_used": 40, "timestamp": STAMP})
        out.append(result)
    # DataFrame(results): a column some rows lack is NaN (an empty cell) in the others.
    return out


def evaluate(df: Frame, judge: Callable[[str, str], str], name: str, content_column: str = "fitted_content",
             constraints_column: str = "constraints") -> Frame:
    """evaluator.py:217-277: the input copied, the evaluation columns added."""
    out = []
    for row in df:
        reply = judge(row[content_column], row[constraints_column])
        yes = len(re.findall(r"^\d+\.\s+Yes", reply, re.MULTILINE))
        if not yes:
            m = re.search(r"Number of constraints satisfied:\s*(\d+)", reply)
            yes = int(m.group(1)) if m else 0
        total = _count(row[constraints_column])
        out.append({**row, "satisfaction_results": reply, "num_satisfied": yes, "total_constraints": total,
                    "satisfaction_rate": yes / total if total else 0.0, "eval_model": name, "eval_tokens": 70,
                    "eval_timestamp": STAMP})
    return out
