"""Logs of another harness run on an exported benchmark (pipeline.outputs.harness_export), brought
back as responses, and, where the log holds this project's scorer's scores, as verdicts:

- ``inspect``: an inspect_ai log (``.eval`` or ``.json``), read with inspect_ai's own
  ``read_eval_log``. Each sample's output is a response of the log's model, mapped to the instruction
  by the sample id. The ``core_satisfaction`` score's metadata brings the summary (by the summarizer
  role's model, at its ratio) and each constraint's verdicts on both texts, judged by the grader role's
  model, in the judging mode and with the prompt the scorer used: Audit, Compare and the report read
  them without a call.
- ``lm-eval``: lm-evaluation-harness's ``--log_samples`` file (``samples_unspecific_<date>.jsonl``);
  each line's ``doc`` is the exported document (its ``id`` the instruction's), ``filtered_resps`` the
  response. The model is ``--model``, else the ``model_name`` of the results file lm-eval wrote
  beside it.

A log of another task, samples whose ids match no instruction, or an instruction whose constraints
changed since the export: one line, nothing written (the import is one transaction)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.analysis.harness import EXPORT_VERSION, HARNESS_KEY, LM_EVAL_TASK, SCORER_NAME, require_inspect
from pipeline.importing.common import ImportFailed, ImportOptions
from pipeline.importing.reading import read_jsonl
from pipeline.importing.writer import ImportWriter
from pipeline.store.constraints import active_constraints_of
from pipeline.store.instructions import instruction_exists

SHOWN_IDS = 5


@dataclass
class LoggedSample:
    """One sample of a log: its id (the instruction's), the response, the constraint ids the export
    gave it, and the scorer's score metadata when there is one."""

    id: Any
    text: str | None
    constraint_ids: list[int] | None
    score: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _instruction_id(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    return int(text) if text.isdigit() else None


def match_instructions(writer: ImportWriter, path: Path, samples: Sequence[LoggedSample]) -> dict[int, int]:
    """Sample index -> instruction id; ImportFailed (one line) when a sample matches no instruction of
    the store, or an instruction's active constraints are not those the export gave the sample."""
    ids = {i: _instruction_id(s.id) for i, s in enumerate(samples)}
    unknown = [str(samples[i].id) for i, iid in ids.items()
               if iid is None or not instruction_exists(writer.store, iid)]
    if unknown:
        shown = ", ".join(unknown[:SHOWN_IDS]) + (f" and {len(unknown) - SHOWN_IDS} more"
                                                  if len(unknown) > SHOWN_IDS else "")
        raise ImportFailed(f"{path}: {len(unknown)} of {len(samples)} samples match no instruction in "
                           f"{writer.store.path} (ids {shown}): export from this store and run again; "
                           "nothing was imported")
    active = active_constraints_of(writer.store, [iid for iid in ids.values() if iid is not None])
    for i, iid in ids.items():
        expected = samples[i].constraint_ids
        have = [c.id for c in active.get(iid or 0, [])]
        if expected is not None and [int(c) for c in expected] != have:
            raise ImportFailed(f"{path}: instruction {iid}'s constraints in {writer.store.path} are not "
                               "those the export gave its sample (revised since?): export again; "
                               "nothing was imported")
    return {i: iid for i, iid in ids.items() if iid is not None}


def _add_samples(writer: ImportWriter, path: Path, samples: list[LoggedSample], model: str,
                 roles: dict[str, str]) -> None:
    matched = match_instructions(writer, path, samples)
    seen: set[int] = set()
    for index, sample in enumerate(samples):
        iid = matched[index]
        if not sample.text or not sample.text.strip():
            writer.summary.skipped["samples without output"] += 1
            continue
        if iid in seen:  # a later epoch: one response a model and instruction
            writer.summary.skipped["later epochs of a sample"] += 1
            continue
        seen.add(iid)
        text = sample.text.replace("\r\n", "\n")
        try:
            gid = writer.generation("response", iid, text, model=model, mode="direct")
            if sample.score is not None:
                _add_score(writer, iid, gid, sample.score, roles)
        except ValueError as exc:  # stored before with other content: never overwritten
            raise ImportFailed(f"{path}: sample {sample.id}: {exc}; nothing was imported") from None


def _items(constraints: list[dict[str, Any]], text: str) -> dict[int, dict[str, Any]]:
    out = {}
    for position, c in enumerate(constraints, 1):
        v = c.get(text) or {}
        if v.get("verdict") in ("yes", "no"):
            out[position] = {"verdict": v["verdict"] == "yes", "quote": v.get("quote") or "",
                             "reason": v.get("reason") or "", "quote_found": v.get("quote_found"),
                             "p_yes": v.get("p_yes")}
    return out


def _add_score(writer: ImportWriter, iid: int, gid: int, score: dict[str, Any],
               roles: dict[str, str]) -> None:
    """The scorer's summary and verdicts: the judge and summarizer are the log's roles' models (the
    model under evaluation where a role was not given, as the scorer said)."""
    judge = roles["grader"]
    constraints = score.get("constraints") or []
    ids = [int(c["id"]) for c in constraints]
    mode, prompt = str(score.get("judging_mode") or "batched"), score.get("prompt_hash")
    missing = "no usable verdict in the inspect log"
    writer.verdict_items(gid, judge, ids, _items(constraints, "response"), mode=mode, prompt=prompt,
                         missing=missing)
    summary = score.get("summary")
    if isinstance(summary, str) and summary.strip():
        sid = writer.generation("summary", iid, summary, model=roles["summarizer"], mode="direct",
                                ratio=float(score["ratio"]), parent_id=gid)
        writer.verdict_items(sid, judge, ids, _items(constraints, "summary"), mode=mode, prompt=prompt,
                             missing=missing)


# -- inspect_ai ----------------------------------------------------------------------------------


def _read_eval_log(path: Path) -> Any:
    require_inspect()
    from inspect_ai.log import read_eval_log

    try:
        return read_eval_log(str(path))
    except Exception as exc:  # inspect raises its own errors (and pydantic's, zip's) on a bad file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ImportFailed(f"{path}: not an inspect_ai log that inspect_ai can read ({first})") from None


def _role_model(log: Any, role: str) -> str:
    bound = (log.eval.model_roles or {}).get(role)
    if isinstance(bound, list):
        bound = bound[0] if bound else None
    return str(bound.model) if bound is not None else str(log.eval.model)


def _score_of(sample: Any) -> dict[str, Any] | None:
    for name, score in (sample.scores or {}).items():
        if name.split("/")[-1] == SCORER_NAME and isinstance(score.metadata, dict) \
                and score.metadata.get(SCORER_NAME) == SCORER_NAME:
            return score.metadata
    return None


def import_inspect(writer: ImportWriter, options: ImportOptions, name: str) -> None:
    log = _read_eval_log(options.path)
    spec = (log.eval.metadata or {}).get(HARNESS_KEY)
    if not isinstance(spec, dict):
        raise ImportFailed(f"{options.path}: a log of task {log.eval.task!r}, not of a benchmark exported by "
                           "`unspecific export --format inspect`; nothing was imported")
    if spec.get("format") != EXPORT_VERSION:
        raise ImportFailed(f"{options.path}: written by an export of layout {spec.get('format')!r}; this "
                           f"version reads layout {EXPORT_VERSION}: export again; nothing was imported")
    if not log.samples:
        raise ImportFailed(f"{options.path}: the log holds no samples (written with --no-log-samples, or "
                           "stopped before the first); nothing was imported")
    model = options.model or str(log.eval.model)
    roles = {"grader": _role_model(log, "grader"), "summarizer": _role_model(log, "summarizer")}
    samples = []
    for s in log.samples:
        if s.error:
            text = None
        else:
            text = s.output.completion if s.output else None
        constraints = (s.metadata or {}).get("constraints")
        ids = [c["id"] for c in constraints] if isinstance(constraints, list) else None
        samples.append(LoggedSample(s.id, text, ids, _score_of(s) if text else None))
    writer.summary.rows = len(samples)
    _add_samples(writer, options.path, samples, model, roles)


# -- lm-evaluation-harness --------------------------------------------------------------------------


def _lm_eval_model(path: Path) -> str | None:
    """The ``model_name`` of the results file lm-eval wrote beside a samples file (same date)."""
    date = path.stem.rsplit("_", 1)[-1]
    for results in sorted(path.parent.glob(f"results_{date}*.json")):
        try:
            data = json.loads(results.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        name = data.get("model_name") or (data.get("config") or {}).get("model")
        if isinstance(name, str) and name.strip():
            return name.strip()
    return None


def _results_file(path: Path) -> bool:
    """Whether ``path`` is lm-eval's results file (one JSON object with ``results`` and ``config``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "results" in data and "config" in data


def import_lm_eval(writer: ImportWriter, options: ImportOptions, name: str) -> None:
    if _results_file(options.path):
        raise ImportFailed(f"{options.path}: lm-eval's results file, not its samples: import the "
                           f"samples_{LM_EVAL_TASK}_*.jsonl that --log_samples wrote beside it")
    rows = read_jsonl(options.path)
    writer.summary.rows = len(rows)
    samples = []
    for row in rows:
        doc = row.values.get("doc")
        if not isinstance(doc, dict) or "id" not in doc or "constraint_ids" not in doc:
            raise ImportFailed(f"{options.path}:{row.line}: not a sample of the {LM_EVAL_TASK!r} task "
                               "`unspecific export --format lm-eval` writes (its doc has no id and "
                               "constraint_ids); nothing was imported")
        resps = row.values.get("filtered_resps") or row.values.get("resps") or []
        while isinstance(resps, list) and resps:
            resps = resps[0]
        # lm-eval keeps a completion's leading newlines (the prompt's end); the text starts after them.
        samples.append(LoggedSample(doc["id"], resps.strip() if isinstance(resps, str) else None,
                                    list(doc["constraint_ids"])))
    model = options.model or _lm_eval_model(options.path)
    if model is None:
        raise ImportFailed(f"{options.path}: no results_*.json beside it names the model; give --model NAME")
    _add_samples(writer, options.path, samples, model, {})
