"""The constraint gate's scripted world on the fake server (tests/test_gate.py, tests/test_gate_build.py):
a generator and judge whose lists, rounds, verdicts and replacements a test sets."""

from __future__ import annotations

import json
from typing import Any

from pipeline.analysis.gate import Ledger
from pipeline.llm.client import LLMClient
from pipeline.llm.placeholders import block, numbered_items, user_messages
from pipeline.llm.placeholders import prompt_kind as kind_of
from pipeline.stages.gate import ConstraintGate, Judge
from tests.fakes.fake_server import Reply
from tests.fakes.responders import ARTICLE_A, ARTICLE_B

GOOD = ["Describe how residents reacted to the closure of a public service.",
        "Explain what caused the gap in the budget.",
        "Describe the options the elected body is weighing."]
DUPLICATES = ["Describe how the residents reacted to the closure of the public service.",
              "Explain what caused the gap in the budget.", "Explain what caused the gap in the budget"]


class Writer:
    """A generator and judge on the fake server: the first list is ``first``, every ask for more gets
    ``more``; the judge says Yes unless a constraint names ``not_on_b`` and the text is reference B
    (Riverton's), and on any other text (a base article) Yes only to constraints in ``easy``."""

    def __init__(self, first: list[str], more: list[str], *, not_on_b: str = "\x00",
                 easy: tuple[str, ...] = (), replacements: dict[int, str] | None = None,
                 missing: dict[int, str] | None = None) -> None:
        self.first, self.more, self.not_on_b, self.easy = first, more, not_on_b, easy
        self.replacements, self.missing = replacements or {}, missing or {}
        self.asks: list[str] = []
        self.judged: list[tuple[str, str]] = []

    def __call__(self, request: dict[str, Any]) -> Reply:
        kind = kind_of(request)
        users = user_messages(request)
        if kind in ("synthesize_common", "synthesize_single"):
            return Reply(text=json.dumps({"main_task": "Write a news article about a local budget gap.",
                                          "constraints": self.first}))
        if kind == "constraints_more":
            self.asks.append(users[-1])
            return Reply(text=json.dumps({"constraints": self.more}))
        if kind == "judge_batched":
            text = block(users[0], "TEXT")
            verdicts = []
            for i, c in numbered_items(block(users[0], "CONSTRAINTS")):
                self.judged.append((text[:10], c))
                if "Smithfield" in text or "Riverton" in text:
                    yes = not (self.not_on_b in c and "Riverton" in text)
                else:
                    yes = c in self.easy
                verdicts.append({"id": i, "verdict": "yes" if yes else "no",
                                 "quote": text.split(".")[0] if yes else ""})
            return Reply(text=json.dumps({"verdicts": verdicts}))
        if kind == "base_article":
            body = "The council met and argued about money while residents waited."
            return Reply(text=" ".join([body] * 8))
        if kind in ("revise_eval", "revise_direct"):
            fence = "TOO_EASY" if kind == "revise_eval" else "CONSTRAINTS"
            listed = dict(numbered_items(block(users[0], fence)))
            # "{orig}": the listed original's words, padded (the appended clause a 1.5B model writes)
            return Reply(text=json.dumps({"replacements": [
                {"id": i, "constraint": t.replace("{orig}", listed.get(i, "").rstrip("."))}
                for i, t in self.replacements.items()]}))
        if kind == "revise_missing":
            self.asks.append(users[-1])
            ids = [i for i, _ in numbered_items(block(users[-1], "MISSING"))]
            return Reply(text=json.dumps({"replacements": [{"id": i, "constraint": self.missing[i]}
                                                           for i in ids if i in self.missing]}))
        return Reply(text="unknown prompt")


def gate_for(client: LLMClient, n: int, *, common: bool = True, judged: bool = True,
          stage: str = "synthesis") -> ConstraintGate:
    return ConstraintGate(Ledger(stage, n), references=(ARTICLE_A, ARTICLE_B) if common else None,
                          judge=Judge(client, "fake", "batched") if judged else None)


