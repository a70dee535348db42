"""Export the benchmark as JSONL, one instruction per line, for other evaluation harnesses.

Each line:

    {"id": 12, "run_id": "build-1a2b", "status": "done", "domain": "news", "condition": "common+eval",
     "main_task": "Write a news article about ...",
     "constraints": [{"id": 301, "position": 1, "text": "...", "origin": "revised",
                      "replaced": [{"id": 290, "text": "...",
                                    "reason": "too easy: base article satisfied it"}],
                      "flags": [{"flag": "specificity_leak", "detail": {"closer_to": "a", ...}}]},
                     ...],
     "references": {"a": {"id": 5, "corpus": "bbc", "source_id": "...", "title": "..."}, "b": {...} | null},
     "instruction": "Write a news article about ...\\n\\n1. ...\\n2. ...",
     "gate": {"synthesis": {"wanted": 39, "written": 61, "rejected": {"distinct": 12, ...}, "kept": 39, ...}}}

By default only the finished benchmark is written: instructions whose build is ``done``
(``include_unfinished`` adds the pending, partly revised and failed ones, each line saying its
``status``). ``condition`` is one of the four public names (``single``, ``common+none``,
``common+direct``, ``common+eval``); the build's internal holder of a shared common synthesis
is never written. A flag's ``detail`` is the object the build stored, not a JSON string.

``constraints`` holds the active (final) list in order; ``replaced`` is the lineage, newest
first: the constraint this one replaced, what that one replaced, and so on, each with the
reason it went; ``flags`` are the quality flags the build raised (proper noun, copied n-gram...).
``instruction`` is the main task and the numbered constraints, ready to send to a model. Only benchmark
content is written: no config, endpoints or keys. Reference texts are included only on request
(``with_references``), since corpus licences vary.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pipeline.store.articles import article_source
from pipeline.store.constraints import active_constraints, constraint_record
from pipeline.store.flags import flags_of_active_constraints
from pipeline.store.instructions import instructions_matching
from pipeline.store.ledgers import ledgers_of

if TYPE_CHECKING:
    from pipeline.store.database import Store

MAX_LINEAGE = 20  # guards against a cycle in replaces_id
# Store condition -> the name a reader of the benchmark sees (docs/method.md's table).
PUBLIC_CONDITIONS = {"single": "single", "none": "common+none", "direct": "common+direct",
                     "eval": "common+eval"}
FINISHED = "done"


def _detail(raw: str | None) -> Any:
    """A flag's detail as stored (JSON, from pipeline.analysis.flags) decoded; plain text stays text."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, (dict, list)) else raw


def instruction_text(main_task: str, constraints: list[str]) -> str:
    numbered = "\n".join(f"{i}. {text.strip()}" for i, text in enumerate(constraints, 1))
    return f"{main_task.strip()}\n\n{numbered}"


def iter_benchmark(store: Store, *, run: str | None = None, domain: str | None = None,
                   condition: str | None = None,
                   with_references: bool = False,
                   include_unfinished: bool = False) -> Iterator[dict[str, Any]]:
    """The export records, one per finished instruction (every one with ``include_unfinished``)
    that has active constraints, in id order. ``condition`` takes a store or a public name."""
    internal = {public: name for name, public in PUBLIC_CONDITIONS.items()}
    instructions = instructions_matching(store, conditions=list(PUBLIC_CONDITIONS), run_id=run, domain=domain,
                                         condition=None if condition is None
                                         else internal.get(condition, condition),
                                         status=None if include_unfinished else FINISHED)
    articles: dict[int, dict[str, Any] | None] = {}

    def reference(article_id: int | None) -> dict[str, Any] | None:
        if article_id is None:
            return None
        if article_id not in articles:
            source = article_source(store, article_id)
            if source is None:
                articles[article_id] = {"id": article_id}
            else:
                ref = {"id": source.id, "corpus": source.corpus, "source_id": source.source_id,
                       "title": source.title}
                if with_references and source.text_hash:
                    ref["text"] = store.get_text(source.text_hash)
                articles[article_id] = ref
        return articles[article_id]

    for ins in instructions:
        active = active_constraints(store, ins.id)
        if not active:
            continue
        flags: dict[int, list[dict[str, str]]] = {}
        for f in flags_of_active_constraints(store, ins.id):
            flags.setdefault(f.constraint_id, []).append({"flag": f.flag, "detail": _detail(f.detail)})
        constraints: list[dict[str, Any]] = []
        for c in active:
            record = constraint_record(store, c.id)
            origin = record.origin if record else None
            replaces_id, reason = (record.replaces_id, record.replaced_reason) if record else (None, None)
            constraints.append({"id": c.id, "position": c.position, "text": c.text, "origin": origin,
                                "replaced": _lineage(store, replaces_id, reason),
                                "flags": flags.get(c.id, [])})
        yield {
            "id": ins.id, "run_id": ins.run_id, "status": ins.status or "", "domain": ins.domain,
            "condition": PUBLIC_CONDITIONS[ins.condition], "pair_id": ins.pair_id,
            "main_task": ins.main_task or "", "constraints": constraints,
            "references": {"a": reference(ins.article_a), "b": reference(ins.article_b)},
            "instruction": instruction_text(ins.main_task or "", [c["text"] for c in constraints]),
            # What the constraint gate rejected and kept, per stage (synthesis, revision; an import's check)
            "gate": ledgers_of(store, [ins.id]).get(ins.id, {}),
        }


def _lineage(store: Store, replaces_id: int | None, reason_on_new: str | None) -> list[dict[str, Any]]:
    """The chain of constraints this one replaced. The reason a constraint went may be stored on
    the replaced row or on its replacement; either is read."""
    chain: list[dict[str, Any]] = []
    seen: set[int] = set()
    reason_from_newer = reason_on_new
    while replaces_id is not None and replaces_id not in seen and len(chain) < MAX_LINEAGE:
        seen.add(replaces_id)
        old = constraint_record(store, replaces_id)
        if old is None:
            break
        chain.append({"id": old.id, "text": old.text, "reason": reason_from_newer or old.replaced_reason})
        replaces_id, reason_from_newer = old.replaces_id, old.replaced_reason
    return chain


def export_jsonl(store: Store, out: str | Path | IO[str], **filters: Any) -> int:
    """Write the benchmark to ``out`` (a path, written atomically, or an open text stream);
    return the number of instructions written."""
    if not isinstance(out, (str, Path)):
        n = 0
        for record in iter_benchmark(store, **filters):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            n += 1
        return n
    path = Path(out)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    n = 0
    with tmp.open("w", encoding="utf-8") as fh:
        for record in iter_benchmark(store, **filters):
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            n += 1
    os.replace(tmp, path)
    return n
