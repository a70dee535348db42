"""The benchmark as a task of another harness: an inspect_ai task folder (``export --format inspect``)
or an lm-evaluation-harness task folder (``export --format lm-eval``).

Both hold the instructions ``export`` writes (pipeline.outputs.export.iter_benchmark: the finished
ones, with their filters), each as a model under test sees it in ``evaluate``'s direct mode (the
``respond_direct`` prompt at ``words`` words). The sample or document id is the store's instruction
id: ``import inspect`` and ``import lm-eval`` map a log back to the instruction by it.

- inspect: ``task.py`` (the @task, which imports pipeline.outputs.inspect_task, so the scorer's
  prompts and rules are this project's, one definition), ``dataset.jsonl`` (one sample a line: id,
  input messages, metadata with the constraints), ``benchmark.json`` (what the export was made from,
  the task's metadata in the log) and a README with the commands.
- lm-eval: ``unspecific.yaml`` (a ``generate_until`` task reading ``unspecific.jsonl`` by its absolute
  path, as lm-eval's ``json`` loader wants it), the documents, and a README. lm-eval scores nothing
  here: its samples file (``--log_samples``) is imported as responses and ``evaluate`` judges them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.analysis.harness import (
    DATASET_FILE,
    EXPORT_VERSION,
    INSPECT_SPEC,
    LM_EVAL_DOCS,
    LM_EVAL_TASK,
    SCORER_NAME,
    TASK_NAME,
)
from pipeline.core.definitions import DEFAULT_RATIO, DEFAULT_YES_THRESHOLD
from pipeline.outputs.export import iter_benchmark
from pipeline.stages.generation import direct_messages, response_budget
from pipeline.stages.settings import DEFAULT_WORDS

if TYPE_CHECKING:
    from pipeline.store.database import Store

HARNESS_FORMATS = ("inspect", "lm-eval")



@dataclass(frozen=True)
class HarnessExport:
    folder: Path
    instructions: int
    files: list[str]


def _records(store: Store, filters: dict[str, Any], words: int) -> list[dict[str, Any]]:
    out = []
    for record in iter_benchmark(store, **filters):
        texts = [c["text"] for c in record["constraints"]]
        _, messages = direct_messages(record["main_task"], texts, words)
        out.append({**record, "messages": messages})
    return out


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _jsonl(rows: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _spec(store: Store, records: list[dict[str, Any]], words: int, ratio: float) -> dict[str, Any]:
    return {"format": EXPORT_VERSION, "name": f"{TASK_NAME}-{Path(str(store.path)).stem}",
            "store": str(store.path), "instructions": len(records), "words": words, "ratio": ratio,
            "task": TASK_NAME, "scorer": SCORER_NAME}


_TASK_PY = '''"""An UNSPECIFIC benchmark as an inspect_ai task (`unspecific export --format inspect`).

    inspect eval task.py --model MODEL --model-role grader=JUDGE --model-role summarizer=SUMMARIZER

Task options (-T): judging_mode (batched | per_constraint | yes_no), judge_format (lines | json),
ratio (the summary ratio of Core), threshold (yes_no: P(Yes) for a Yes). The scorer is the
unspecific package's own (pipeline.outputs.inspect_task): it must be importable here.
"""

from pathlib import Path

from inspect_ai import Task, task

from pipeline.analysis.harness import require_inspect

require_inspect()  # an unsupported inspect_ai gets one line naming it

from pipeline.outputs.inspect_task import unspecific_task  # noqa: E402


@task
def {name}(judging_mode: str = "batched", judge_format: str = "lines", ratio: float = {ratio!r},
           threshold: float = {threshold!r}) -> Task:
    return unspecific_task(Path(__file__).parent, judging_mode=judging_mode, judge_format=judge_format,
                           ratio=ratio, threshold=threshold)
'''

_INSPECT_README = """# {name}: an UNSPECIFIC benchmark for inspect_ai

{n} instructions from `{store}` ({spec}; the `unspecific` package importable).

    inspect eval {folder}/task.py --model MODEL --model-role grader=JUDGE --model-role summarizer=SUMMARIZER
    unspecific import inspect logs/<the .eval file it wrote>

Each sample is one instruction as `unspecific evaluate` sends it; its id is the instruction's id.
The scorer summarises the response to {ratio:g} of its words and judges every constraint on the
response and on the summary (this project's prompts and pass rule): Org, Core and superficial per
sample, mean and stderr over samples, each constraint's two verdicts in the score's metadata. Without
`--model-role grader=...` the model judges itself (a warning says so).
"""

_LM_EVAL_YAML = """# An UNSPECIFIC benchmark for lm-evaluation-harness: unspecific export --format lm-eval.
# lm-eval writes the responses (--log_samples); `unspecific import lm-eval` brings them in and
# `unspecific evaluate` judges them (Org, Core): lm-eval scores nothing here.
task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {docs}
test_split: test
output_type: generate_until
doc_to_text: "{{{{prompt}}}}"
doc_to_target: ""
generation_kwargs:
  until: []
  do_sample: false
  temperature: 0.0
  max_gen_toks: {max_tokens}
metric_list:
  - metric: bypass
metadata:
  version: {version}
"""

_LM_EVAL_README = """# {task}: an UNSPECIFIC benchmark for lm-evaluation-harness

{n} instructions from `{store}`. Each document's `prompt` is the instruction as `unspecific evaluate`
sends it (its system and user messages, one after the other); `id` is the instruction's id.

    lm_eval --model MODEL --model_args ... --include_path {folder} --tasks {task} \\
        --log_samples --output_path out
    unspecific import lm-eval out/<model>/samples_{task}_<date>.jsonl
    unspecific evaluate --models <model>

The YAML names the documents by their absolute path ({docs}): export again after moving the folder.
"""


def _prepare(folder: str | Path) -> Path:
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"{path}: a file, not a folder; --format inspect and lm-eval write a folder")
    path.mkdir(parents=True, exist_ok=True)
    return path


def export_inspect(store: Store, folder: str | Path, *, words: int = DEFAULT_WORDS,
                   ratio: float = DEFAULT_RATIO, **filters: Any) -> HarnessExport:
    """Write the inspect_ai task folder; nothing when no instruction matches (0 instructions)."""
    records = _records(store, filters, words)
    if not records:
        return HarnessExport(Path(folder), 0, [])
    path = _prepare(folder)
    spec = _spec(store, records, words, ratio)
    samples = [{"id": r["id"], "input": r["messages"],
                "metadata": {"instruction_id": r["id"], "run_id": r["run_id"], "domain": r["domain"],
                             "condition": r["condition"], "main_task": r["main_task"],
                             "constraints": [{"id": c["id"], "position": c["position"], "text": c["text"]}
                                             for c in r["constraints"]]}}
               for r in records]
    _write(path / DATASET_FILE, _jsonl(samples))
    _write(path / "benchmark.json", json.dumps(spec, indent=2) + "\n")
    _write(path / "task.py", _TASK_PY.format(name=TASK_NAME, ratio=ratio, threshold=DEFAULT_YES_THRESHOLD))
    _write(path / "README.md", _INSPECT_README.format(name=spec["name"], n=len(records), store=store.path,
                                                      spec=INSPECT_SPEC, folder=path, ratio=ratio))
    return HarnessExport(path, len(records), [DATASET_FILE, "benchmark.json", "task.py", "README.md"])


def lm_eval_prompt(messages: list[dict[str, str]]) -> str:
    """The instruction as one text (lm-eval sends a document's text whole): system, then user."""
    return "\n\n".join(m["content"] for m in messages)


def export_lm_eval(store: Store, folder: str | Path, *, words: int = DEFAULT_WORDS,
                   **filters: Any) -> HarnessExport:
    """Write the lm-evaluation-harness task folder; nothing when no instruction matches."""
    records = _records(store, filters, words)
    if not records:
        return HarnessExport(Path(folder), 0, [])
    path = _prepare(folder).resolve()
    docs = [{"id": r["id"], "prompt": lm_eval_prompt(r["messages"]), "main_task": r["main_task"],
             "constraints": [c["text"] for c in r["constraints"]],
             "constraint_ids": [c["id"] for c in r["constraints"]], "condition": r["condition"],
             "domain": r["domain"]} for r in records]
    _write(path / LM_EVAL_DOCS, _jsonl(docs))
    yaml = _LM_EVAL_YAML.format(task=LM_EVAL_TASK, docs=json.dumps(str(path / LM_EVAL_DOCS)),
                                max_tokens=response_budget(words), version=EXPORT_VERSION)
    _write(path / f"{LM_EVAL_TASK}.yaml", yaml)
    _write(path / "README.md", _LM_EVAL_README.format(task=LM_EVAL_TASK, n=len(records), store=store.path,
                                                      folder=path, docs=path / LM_EVAL_DOCS))
    return HarnessExport(path, len(records), [LM_EVAL_DOCS, f"{LM_EVAL_TASK}.yaml", "README.md"])
