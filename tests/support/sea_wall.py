"""The harbour-and-valley instruction two handmade stores start from (tests/test_copy_sources.py,
tests/test_suspicion.py): references A and B, instruction 1 on them, its constraints and texts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pipeline.store.database import Store

REF_A = ("The harbour council approved a new sea wall after the spring floods."
         " Residents gathered at the old market.")
REF_B = "Farmers in the valley worried about the drought. The river ran low all summer."

# gid -> (kind, model, mode, ratio, parent_id, body)
Texts = Mapping[int, tuple[str, str, str, float | None, int | None, str]]


def put_instruction(store: Store, condition: str, task: str, constraints: Sequence[str]) -> None:
    """Articles 1 (A) and 2 (B), instruction 1 of run r1 on them, ``constraints`` active as ids 1, 2..."""
    c = store.conn
    a, b = store.put_text(REF_A), store.put_text(REF_B)
    c.execute("INSERT INTO articles(id, corpus, domain, source_id, title, text_hash, words, status) VALUES"
              " (1, 't', 'news', 'a', 'A', ?, 20, 'kept'), (2, 't', 'news', 'b', 'B', ?, 14, 'kept')", (a, b))
    c.execute("INSERT INTO instructions(id, run_id, domain, condition, article_a, article_b, main_task,"
              " n_constraints, status) VALUES (1, 'r1', 'news', ?, 1, 2, ?, ?, 'done')",
              (condition, task, len(constraints)))
    for position, text in enumerate(constraints, 1):
        c.execute("INSERT INTO constraints(id, instruction_id, position, text, origin, active)"
                  " VALUES (?, 1, ?, ?, 'synthesized', 1)", (position, position, text))


def put_texts(store: Store, texts: Texts) -> None:
    """Instruction 1's responses and summaries, by id."""
    for gid, (kind, model, mode, ratio, parent, body) in texts.items():
        store.conn.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, ratio, parent_id,"
                           " text_hash) VALUES (?, ?, 1, ?, ?, ?, ?, ?)",
                           (gid, kind, model, mode, ratio, parent, store.put_text(body)))
