"""The writer every format shares: it puts one import's rows into the store inside the caller's
transaction, finds each row again by what it is (so importing the same file twice adds nothing),
and counts what it adds and skips. A row stored before with other content is a ValueError (the
row's problem), never a silent overwrite."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pipeline.analysis.support import LOCATED
from pipeline.importing.common import ImportFailed, ImportOptions, ImportSummary, Problems
from pipeline.importing.replies import ParsedReply, parse_judge_reply
from pipeline.store import imports
from pipeline.store.articles import insert_article
from pipeline.store.constraints import active_constraints
from pipeline.store.database import Store, now, text_hash
from pipeline.store.generations import generation_text, stored_response
from pipeline.store.instructions import set_base_generation
from pipeline.store.verdicts import NewVerdict, put_verdicts, verdicts_by_constraint

IMPORT_JUDGING_MODE = "batched"  # the research code judges all constraints of a text in one call
_LABELS = {"base": "base article", "response": "response", "summary": "summary"}
_ADDED = {"base": "base articles", "response": "responses", "summary": "summaries"}


class ImportWriter:
    """Writes one import inside the caller's transaction, counting what it adds and skips."""

    def __init__(self, store: Store, summary: ImportSummary, problems: Problems) -> None:
        self.store, self.summary, self.problems = store, summary, problems
        self.stamp = now()
        self.new_instructions: list[int] = []

    def run(self, options: ImportOptions, name: str, extra: dict[str, Any]) -> None:
        run_id = self.summary.run_id
        config = json.dumps({"options": {"format": options.format, "file": str(options.path), "name": name,
                                         **extra}}, default=str)
        kind = imports.run_kind(self.store, run_id)
        if kind is None:
            imports.insert_import_run(self.store, run_id, name, config, self.stamp)
        elif kind != imports.RUN_KIND:
            raise ImportFailed(f"{self.store.path}: a {kind} run is named {run_id}; choose another --name")
        else:
            imports.touch_import_run(self.store, run_id, self.stamp)

    def article(self, name: str, source_id: str, domain: str, text: str) -> int:
        corpus = f"import:{name}"
        stored = imports.imported_article(self.store, corpus, source_id)
        h = self.store.put_text(text)
        if stored is not None:
            if stored.text_hash != h:
                raise ValueError(f"reference {source_id} was imported before with another text")
            self.summary.skipped["reference already imported"] += 1
            return stored.id
        from pipeline.core.text import count_words

        article_id = insert_article(self.store, corpus=corpus, domain=domain, source_id=source_id,
                                    title="", text_hash=h,
                                    words=count_words(text), status=imports.REFERENCE_STATUS,
                                    duplicate_of=None,
                                    imported_at=self.stamp)
        self.summary.added["references"] += 1
        return article_id

    def _imported_before(self, source_id: str, task: str, constraints: list[str], condition: str,
                         what: str) -> int | None:
        """The id of ``source_id`` when this import run holds it already, the same (importing a file
        again adds nothing); an error when it holds another version of it."""
        run_id = self.summary.run_id
        stored = imports.imported_instruction(self.store, run_id, source_id)
        if stored is None:
            return None
        texts = [c.text for c in active_constraints(self.store, stored.id)]
        if (stored.main_task or "") != task or texts != constraints or stored.condition != condition:
            raise ValueError(f"instruction {source_id} was imported into {run_id} before with another task, "
                             f"{what} or condition; import the new version under another --name")
        self.summary.skipped["instruction already imported"] += 1
        return stored.id

    def instruction(self, source_id: str, *, domain: str, condition: str, task: str, constraints: list[str],
                    article_a: int | None, article_b: int | None) -> int:
        def insert(run_id: str) -> int:
            return imports.insert_imported_instruction(
                self.store, run_id=run_id, source_id=source_id, domain=domain, condition=condition,
                main_task=task, constraints=constraints, article_a=article_a, article_b=article_b,
                stamp=self.stamp)

        return self._once(source_id, task, constraints, condition, "constraints", insert)

    def _once(self, source_id: str, task: str, active: list[str], condition: str, what: str,
              insert: Callable[[str], int]) -> int:
        """The instruction imported before as ``source_id`` (the same one: else a ValueError), or the
        one ``insert`` writes into this import's run, counted with its ``active`` constraints."""
        known = self._imported_before(source_id, task, active, condition, what)
        if known is not None:
            return known
        iid = insert(self.summary.run_id)
        self.summary.added["instructions"] += 1
        self.summary.added["constraints"] += len(active)
        self.new_instructions.append(iid)
        return iid

    def generation(self, kind: str, instruction_id: int, text: str, *, model: str, mode: str = "",
                   ratio: float | None = None, parent_id: int | None = None) -> int:
        """A text written elsewhere: found again by what it is (kind, instruction, model, mode,
        ratio, parent); the same text again is skipped, another text is an error."""
        from pipeline.core.text import count_words, is_refusal

        stored = imports.imported_generation(self.store, kind=kind,
                                             instruction_id=instruction_id, model=model,
                                             mode=mode, ratio=ratio, parent_id=parent_id)
        h = self.store.put_text(text)
        label = _LABELS[kind]
        if stored is not None:
            if stored.text_hash != h:
                raise ValueError(f"another {label} by {model!r} is stored for this "
                                 "instruction; import the new one under another model name")
            self.summary.skipped[f"{label} already stored"] += 1
            return stored.id
        words = count_words(text)
        achieved = None
        if kind == "summary" and parent_id is not None:
            parent = stored_response(self.store, parent_id)  # a summary's parent is a response
            achieved = words / parent.words if parent and parent.words else None
        gid = imports.insert_imported_generation(
            self.store, import_run=self.summary.run_id, kind=kind, instruction_id=instruction_id, model=model,
            mode=mode, ratio=ratio, parent_id=parent_id, text_hash=h, words=words, achieved_ratio=achieved,
            refusal=int(is_refusal(text)) if kind == "response" else None, stamp=self.stamp)
        self.summary.added[_ADDED[kind]] += 1
        if kind == "base":
            set_base_generation(self.store, instruction_id, gid)
        return gid

    def verdicts(self, generation_id: int, instruction_id: int, judge: str, results: str, *,
                 constraint_ids: list[int] | None = None) -> ParsedReply:
        """A research judge's reply (pipeline.importing.replies) as verdicts on ``constraint_ids`` in
        order (by default the instruction's active list); returns it as read. A constraint the reply
        does not mention is stored as missing (NULL), never as No, so coverage shows the gap."""
        constraints = constraint_ids or [c.id for c in active_constraints(self.store, instruction_id)]
        reply = parse_judge_reply(results, len(constraints))
        self.verdict_items(generation_id, judge, constraints, reply.items)
        return reply

    def verdict_items(self, generation_id: int, judge: str, constraints: list[int],
                      items: dict[int, dict[str, Any]], *, mode: str = IMPORT_JUDGING_MODE,
                      prompt: str | None = None, missing: str = "not in the imported results") -> None:
        """Verdicts given elsewhere on ``constraints`` (ids, in order): ``items`` maps a 1-based position
        to {verdict: bool, quote, reason}; a position without one is stored as missing (reason
        ``missing``). Judged by ``judge`` in ``mode`` with ``prompt`` (default: this import's)."""
        from pipeline.core.text import find_quote

        text = generation_text(self.store, generation_id) or ""
        prompt = prompt or f"import:{self.summary.run_id}"
        existing = verdicts_by_constraint(self.store, generation_id, judge, mode, prompt)
        new: list[NewVerdict] = []
        for position, cid in enumerate(constraints, 1):
            item = items.get(position)
            verdict = None if item is None else int(item["verdict"])
            if cid in existing:
                if existing[cid] != verdict:
                    raise ValueError(f"judge {judge!r}'s verdict on constraint {position} "
                                     "differs from the one "
                                     "imported before; import the new results under another --name")
                self.summary.skipped["verdict already imported"] += 1
                continue
            quote = (item or {}).get("quote") or None
            # A yes_no judge's quote is the sentence located for it (kept as such), not its own words.
            located = (item or {}).get("quote_found") == LOCATED
            match = find_quote(quote, text) if quote and verdict and not located else None
            new.append(NewVerdict(
                generation_id=generation_id, constraint_id=cid, judge=judge, judging_mode=mode,
                prompt_hash=prompt, verdict=verdict, quote=quote,
                reason=(item or {}).get("reason") or (missing if item is None else None),
                quote_found=LOCATED if located else match.found if match else None,
                quote_score=match.score if match else None, call_id=None,
                created_at=self.stamp, p_yes=(item or {}).get("p_yes")))
            self.summary.added["verdicts" if verdict is not None else "missing verdicts"] += 1
        # Every constraint stored before was skipped above, so nothing here replaces a verdict.
        put_verdicts(self.store, new)

    def revised_instruction(self, source_id: str, *, domain: str, condition: str, task: str,
                            original: list[str],
                            revised: list[str], reason: str, article_a: int | None,
                            article_b: int | None) -> int:
        """An instruction revised elsewhere: the revised list active, the original kept as its lineage."""
        def insert(run_id: str) -> int:
            self.summary.added["revised constraints"] += sum(1 for text in revised if text not in original)
            return imports.insert_imported_revision(
                self.store, run_id=run_id, source_id=source_id, domain=domain, condition=condition,
                main_task=task, original=original, revised=revised, reason=reason, article_a=article_a,
                article_b=article_b, stamp=self.stamp)

        return self._once(source_id, task, revised, condition, "revised constraints", insert)

    def response_with_text(self, instruction_id: int, text: str) -> int | None:
        """The stored response to the instruction with exactly this text, whoever wrote it."""
        return imports.imported_response_with_text(self.store, instruction_id, text_hash(text))


def write_import(store: Store, summary: ImportSummary, problems: Problems, options: ImportOptions, name: str,
                 config: dict[str, Any], fill: Callable[[ImportWriter], None]) -> ImportSummary:
    """One import, one transaction: ``fill`` writes the rows; any problem (or a dry run) rolls
    everything back, so a bad row leaves the store as it was. The lexical quality flags of the new
    instructions are derived data, computed after the import's own transaction, as a build does."""
    from pipeline.analysis.flags import flag_instruction

    writer = ImportWriter(store, summary, problems)
    try:
        imports.begin_immediate(store)
        writer.run(options, name, config)
        fill(writer)
        problems.raise_if_any(summary.rows)
    except BaseException:
        imports.rollback(store)
        raise
    if options.dry_run:
        imports.rollback(store)
        return summary
    store.commit()
    for iid in writer.new_instructions:
        flag_instruction(store, iid)
    return summary
