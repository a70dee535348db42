"""Imported lists checked, not changed (issue 60): an import's constraints meet the gate's text checks
(pipeline.analysis.gate.check_list: atomic, distinct, and unspecific where both references are known),
each instruction's result stored as its ``import`` ledger, so `report` shows how many of a published
list (CS4's, the research code's) would pass each check. The judged ``common`` check costs a judge call
per constraint and reference, so an import is not judged."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.analysis.gate import CHECKS, GateSummary, check_list
from pipeline.store.articles import article_text_hash
from pipeline.store.constraints import active_constraints
from pipeline.store.database import Store, now
from pipeline.store.instructions import instructions_matching
from pipeline.store.ledgers import put_ledger

_CONDITIONS = ("single", "none", "direct", "eval")


@dataclass
class ImportCheck:
    instructions: int = 0
    with_references: int = 0  # instructions with both references (the unspecific check ran)
    summary: GateSummary = field(default_factory=lambda: GateSummary("import", "import"))

    def lines(self) -> list[str]:
        s = self.summary
        if not s.written:
            return []
        shares = ", ".join(f"{100 * (1 - (s.share(c) or 0)):.0f}% {c}" for c in CHECKS
                           if c in ("atomic", "distinct") or (c == "unspecific" and self.with_references))
        return [f"gate check (the lists are kept as they are): of {s.written} constraints in "
                f"{self.instructions} instructions, {shares}; {s.kept} ({100 * s.kept / s.written:.0f}%) "
                "pass every check" + ("" if self.with_references else
                                      " (no reference pair: unspecific not checked)")]


def check_import(store: Store, run_id: str) -> ImportCheck:
    """Check every instruction of an import run and store each ledger (committed)."""
    out = ImportCheck()

    def text(article_id: int | None) -> str | None:
        h = article_text_hash(store, article_id) if article_id is not None else None
        return store.get_text(h) if h else None

    for inst in instructions_matching(store, conditions=_CONDITIONS, run_id=run_id):
        texts = [c.text for c in active_constraints(store, inst.id)]
        if not texts:
            continue
        a, b = text(inst.article_a), text(inst.article_b)
        refs = (a, b) if a and b else None
        ledger = check_list(texts, refs)
        put_ledger(store, inst.id, "import", ledger.as_json(), now())
        out.instructions += 1
        out.with_references += refs is not None
        out.summary.add(ledger)
    store.commit()
    return out
