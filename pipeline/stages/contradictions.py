"""Joint satisfiability (docs/method.md): the optional build step that asks the generator which
pairs of an instruction's active constraints no single text could satisfy, stores them in
``contradictions`` and flags both sides (``contradiction``). A stage: it calls a model and writes;
reading the reply is pipeline.analysis.flags.parse_contradictions."""

from __future__ import annotations

from typing import Any

from pipeline.analysis.flags import parse_contradictions
from pipeline.store.constraints import active_constraints
from pipeline.store.database import Store
from pipeline.store.flags import CONTRADICTION, ConstraintFlag, Contradiction, replace_contradictions
from pipeline.store.instructions import get_instruction

CONTRADICTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "contradictions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                               "reason": {"type": "string"}},
                "required": ["a", "b"],
            },
        }
    },
    "required": ["contradictions"],
}


async def check_contradictions(store: Store, client: Any, endpoint: str, instruction_id: int) -> int:
    """Ask the LLM which pairs of the active constraints contradict; store them and flag both
    sides. Returns the number of pairs. A repeat costs nothing: the call is cached."""
    from pipeline.llm.client import Params
    from pipeline.llm.prompts import defuse, load_template, numbered

    inst = get_instruction(store, instruction_id)
    rows = active_constraints(store, instruction_id)
    if inst is None or len(rows) < 2:
        return 0
    template = load_template("contradictions")
    messages = template.render(main_task=defuse(inst.main_task or ""),
                               constraints=numbered([r.text for r in rows]),
                               n=len(rows))
    pairs, _ = await client.chat_json(
        endpoint, messages, schema=CONTRADICTIONS_SCHEMA,
        validate=lambda d: parse_contradictions(d, len(rows)),
        template=template, params=Params(max_tokens=800),
    )
    found: list[Contradiction] = []
    by_constraint: dict[int, list[dict[str, Any]]] = {}
    for a, b, reason in pairs:
        ca, cb = rows[a - 1].id, rows[b - 1].id
        found.append(Contradiction(ca, cb, reason))
        by_constraint.setdefault(ca, []).append({"constraint_id": cb, "reason": reason})
        by_constraint.setdefault(cb, []).append({"constraint_id": ca, "reason": reason})
    replace_contradictions(store, instruction_id, found,
                           [ConstraintFlag(cid, CONTRADICTION, {"with": others})
                            for cid, others in by_constraint.items()])
    return len(pairs)
