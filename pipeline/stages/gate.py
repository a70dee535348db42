"""The constraint gate: every candidate constraint the generator writes is checked before it is kept
(pipeline.analysis.gate has the text checks; docs/method.md "The gate").

- synthesis, every condition: atomic and distinct; the common conditions also unspecific (no name,
  number or date that only one reference holds, or neither) and common: the judge says it holds on
  reference A and on reference B, judged the way responses are (pipeline.stages.judging: the embedded
  judge scores every candidate of a reference in one request, the reference's prefix shared);
- revision: a replacement is atomic, distinct, unspecific, not its original with words appended, and
  (eval) not satisfied by the base article, judged.

A candidate's rejection and its reason go into the instruction's Ledger and back to the generator in
the next round's ask; the rounds are bounded (pipeline.stages.synthesis, .revision).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline.analysis.gate import Distinct, Ledger, atomic_problem, candidates_summary, unspecific_problem
from pipeline.core.definitions import DEFAULT_YES_THRESHOLD
from pipeline.llm.client import LLMClient

Vectors = Callable[[list[str]], np.ndarray]
# At most this many rejected candidates are named back to the generator in one ask (a long list of
# its own mistakes, the 1.5B model copies back).
NAMED_BACK = 8


@dataclass
class Judge:
    """How the gate asks the judge: the endpoint, its mode and its Yes threshold (its calibration)."""

    client: LLMClient
    endpoint: str
    mode: str
    threshold: float = DEFAULT_YES_THRESHOLD

    async def holds(self, text: str, constraints: Sequence[str]) -> list[bool | None]:
        """Per constraint, the judge's verdict on ``text`` (None: it gave none)."""
        from pipeline.stages.judging import judge_text

        found = await judge_text(self.client, self.endpoint, text, list(constraints), mode=self.mode,
                                 threshold=self.threshold)
        return [j.verdict for j in found]


@dataclass
class ConstraintGate:
    """The checks one instruction's candidates meet, the state they are checked against (the kept
    constraints) and its ledger. ``references``: (A, B) for a common condition, None for single.
    ``judge`` None: no ``common`` check (the text checks alone). ``vectors``: embeds constraints for the
    distinct check (None: token-set similarity alone)."""

    ledger: Ledger
    references: tuple[str, str] | None = None
    judge: Judge | None = None
    vectors: Vectors | None = None
    distinct: Distinct = field(default_factory=Distinct)
    last_rejected: list[tuple[str, str, str]] = field(default_factory=list)
    # A dry run (the client prices calls instead of making them): the judge's calls are asked, so they
    # are priced, but nothing is refused: placeholder replies say nothing of what a model would write.
    priced_only: bool = False

    def _embed(self, texts: list[str]) -> list[np.ndarray | None]:
        if self.vectors is None or not texts:
            return [None] * len(texts)
        return list(self.vectors(texts))

    def text_problem(self, text: str) -> tuple[str, str] | None:
        """(check, reason) of the first text check ``text`` fails (atomic, unspecific), or None."""
        problem = atomic_problem(text)
        if problem:
            return "atomic", problem
        if self.references is not None:
            problem = unspecific_problem(text, *self.references)
            if problem:
                return "unspecific", problem
        return None

    def reject(self, text: str, check: str, reason: str) -> None:
        self.ledger.reject(text, check, reason)
        self.last_rejected.append((text, check, reason))

    async def screen(self, candidates: Sequence[str], limit: int) -> list[str]:
        """The candidates that pass every check, at most ``limit``, in order; each kept one joins the
        distinct state and each rejected one the ledger (with its reason)."""
        self.ledger.written += len(candidates)
        vectors = self._embed(list(candidates))
        batch = Distinct(token_threshold=self.distinct.token_threshold,
                         cosine_threshold=self.distinct.cosine_threshold)
        survivors: list[tuple[str, np.ndarray | None]] = []
        for text, vector in zip(candidates, vectors, strict=True):
            found = None if self.priced_only else self.text_problem(text)
            if found is None:
                repeat = None if self.priced_only else (self.distinct.problem(text, vector)
                                                        or batch.problem(text, vector))
                found = ("distinct", repeat) if repeat else None
            if found is not None:
                self.reject(text, *found)
                continue
            batch.add(text, vector)
            survivors.append((text, vector))
        # Judged: as many as the list needs and half the rest again as spares (some fail the judge); the
        # others are surplus, never judged.
        cut = max(0, limit) + len(survivors) // 2
        spare, survivors = survivors[cut:], survivors[:cut]
        if survivors and self.judge is not None and self.references is not None:
            texts = [t for t, _ in survivors]
            on_a = await self.judge.holds(self.references[0], texts)
            on_b = await self.judge.holds(self.references[1], texts)
            held = []
            for (text, vector), a, b in zip(survivors, on_a, on_b, strict=True):
                if (a and b) or self.priced_only:
                    held.append((text, vector))
                elif a is None or b is None:
                    self.reject(text, "common", "the judge gave no verdict on reference "
                                                f"{'A' if a is None else 'B'}")
                else:
                    missing = [label for label, v in (("A", a), ("B", b)) if not v]
                    self.reject(text, "common", f"the judge found it does not hold on reference "
                                                f"{' or '.join(missing)}")
            survivors = held
        kept = survivors[: max(0, limit)]
        self.ledger.surplus += len(spare) + len(survivors) - len(kept)
        for text, vector in kept:
            self.distinct.add(text, vector)
        return [t for t, _ in kept]

    def replacement_problem(self, new: str, original: str, others: Sequence[str]) -> tuple[str, str] | None:
        """(check, reason) of the first check a revision's replacement fails, or None: atomic,
        unspecific, not its original with words appended, and not a near-copy of ``others`` (the
        constraints that stay and the replacements chosen so far)."""
        from pipeline.analysis.gate import appended_problem

        if self.priced_only:
            return None
        found = self.text_problem(new)
        if found is not None:
            return found
        problem = appended_problem(original, new)
        if problem:
            return "appended", problem
        state = Distinct(token_threshold=self.distinct.token_threshold,
                         cosine_threshold=self.distinct.cosine_threshold)
        vectors = self._embed([*others, new])
        for text, vector in zip(others, vectors, strict=False):
            state.add(text, vector)
        problem = state.problem(new, vectors[-1])
        return ("distinct", problem) if problem else None

    async def satisfied_by(self, text: str, constraints: Sequence[str]) -> list[bool | None]:
        """The judge's verdict of ``text`` (the base article) on each constraint; all None without a judge."""
        if self.judge is None or not constraints:
            return [None] * len(constraints)
        found = await self.judge.holds(text, constraints)
        return [False] * len(found) if self.priced_only else found

    def notes(self) -> str:
        """What the last screens rejected and why, for the next ask ('' when nothing was)."""
        if not self.last_rejected:
            return ""
        shown = self.last_rejected[-NAMED_BACK:]
        self.last_rejected = []
        return ("These were not kept (write none like them):\n" + candidates_summary(shown) + "\n")


class GateFactory:
    """A build's gates, one per instruction: the base judge in the build's judging mode at its calibrated
    threshold, and the build's embedder (loaded on first use) for the distinct check."""

    def __init__(self, store: Any, config: Any, client: LLMClient, options: Any) -> None:
        from pipeline.stages.judging import judging_mode_of

        self.store, self.client = store, client
        self.judge_name = options.judge_name(config)
        self.mode = judging_mode_of(config, self.judge_name, options.judging_mode)
        self.n = options.n_constraints
        self.embedder_name = options.embedder
        self.priced_only = client.pricing is not None  # a dry run
        self.where = f"{config.path or 'config'} [build] embedder / --embedder"
        self._embedder: Any = None

    def _vectors(self, texts: list[str]) -> np.ndarray:
        from pipeline.analysis.embeddings import embed_texts, normalize_rows

        return normalize_rows(embed_texts(self.store, self._embedder, texts))

    def vectors(self) -> Vectors | None:
        """The embedding function, or None when the build embeds nothing (lexical) or only hashes."""
        from pipeline.stages.similarity import resolve_embedder

        if self._embedder is None:
            self._embedder = resolve_embedder(self.embedder_name, self.where)
        if self._embedder is None or self._embedder.name.startswith("hash"):
            return None  # a hash embedder's cosine says nothing about paraphrase
        return self._vectors

    def judge(self) -> Judge:
        from pipeline.store.judge_checks import judge_threshold

        threshold = judge_threshold(self.store, self.judge_name, self.mode) if self.mode == "yes_no" \
            else DEFAULT_YES_THRESHOLD
        return Judge(self.client, self.judge_name, self.mode, threshold)

    def revision(self, text_a: str, text_b: str, wanted: int, active: int, *,
                 judged: bool) -> ConstraintGate:
        """A revision's gate: ``judged`` (eval) asks the judge whether the base article satisfies each
        replacement."""
        ledger = Ledger("revision", wanted, active=active)
        return ConstraintGate(ledger, references=(text_a, text_b), judge=self.judge() if judged else None,
                              vectors=self.vectors(), distinct=self.distinct(),
                              priced_only=self.priced_only)

    def distinct(self) -> Distinct:
        """The distinct check at the build embedder's measured cosine (token-set alone without one)."""
        from pipeline.core.definitions import DISTINCT_COSINE, DISTINCT_COSINES

        vectors = self.vectors()
        cosine = DISTINCT_COSINES.get(self._embedder.name, DISTINCT_COSINE) if vectors is not None else None
        return Distinct(cosine_threshold=cosine)

    def single(self) -> ConstraintGate:
        """The single baseline's gate: atomic and distinct (its specifics are what it is)."""
        return ConstraintGate(Ledger("synthesis", self.n), vectors=self.vectors(), distinct=self.distinct(),
                              priced_only=self.priced_only)

    def common(self, text_a: str, text_b: str) -> ConstraintGate:
        return ConstraintGate(Ledger("synthesis", self.n), references=(text_a, text_b), judge=self.judge(),
                              vectors=self.vectors(), distinct=self.distinct(),
                              priced_only=self.priced_only)


# Refused candidates logged per instruction and stage as it runs (the ledger keeps up to Ledger.EXAMPLES).
LOGGED = 10


def log_gate(progress: Any, stage: str, instruction_id: int, ledger: Ledger) -> None:
    """The ledger's line and its first refused candidates, each with why, as log events (Build's log,
    the CLI's dim lines)."""
    from pipeline.core.progress import ProgressEvent

    progress(ProgressEvent(stage, 0, 0, f"instruction {instruction_id}: gate {ledger.line()}", kind="log"))
    for e in ledger.examples[:LOGGED]:
        progress(ProgressEvent(stage, 0, 0, f"  refused ({e['check']}): {e['text']} - {e['reason']}",
                               kind="log"))
    more = sum(ledger.rejected.values()) - min(LOGGED, len(ledger.examples))
    if more > 0:
        progress(ProgressEvent(stage, 0, 0, f"  ... and {more} more refused (build --step lists them)",
                               kind="log"))
