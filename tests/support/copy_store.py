"""A handmade store for copy evidence: copying told from the topic, one phrase across many
constraints, a constraint pasted from a reference (tests/test_copy_specificity.py, and the
suspicion queue's groups in tests/test_app_queue.py).

The handmade store (domain news, six corpus articles):

  instruction 1 (eval) and 2 (single) on article A (1); B (2) for the common one. The main task is
  about "the US trade deficit", which A and B both hold and every response repeats; A alone holds
  "probe by the Securities and Exchange Commission into 12 firms". The 12 constraints of each:
    c1..c5  "The text should discuss the US trade deficit and <something>": the topic, repeated
    c6      quotes A's probe: pasted into the response
    c7      "...the rest of the year": a phrase every corpus article holds, in A and the response
    c8      "...discuss the harvest festival traditions": in no reference; the response repeats it
    c9..c12 other constraints, copying nothing
"""

from __future__ import annotations

from pathlib import Path

from pipeline.store.database import Store, open_store
from pipeline.store.view import Writer

PROBE = "probe by the Securities and Exchange Commission into 12 firms"
REF_A = ("Officials said the US trade deficit widened again in March. A probe by the Securities and Exchange "
         "Commission into 12 firms began on Monday. Traders expect more volatility for the rest of the year.")
REF_B = ("The US trade deficit narrowed slightly, figures showed. Exporters hope the weaker "
         "dollar will help for the rest of the year.")
OTHERS = [f"Article {k} on other news. Sales were flat for the rest of the year, the company said."
          for k in range(4)]
TASK = "Write a news article about the US trade deficit."
TOPIC = ["The text should discuss the US trade deficit and its effect on jobs.",
         "The text should discuss the US trade deficit and what it means for prices.",
         "The text should discuss the US trade deficit and the reaction of investors.",
         "The text should discuss the US trade deficit and the outlook for exports.",
         "The text should discuss the US trade deficit and its political cost."]
CONSTRAINTS = [*TOPIC, f"The text should mention a {PROBE}.",
               "The text should say markets stay volatile for the rest of the year.",
               "The text should discuss the harvest festival traditions of the town.",
               "The text should end with a question.", "The text should quote one official.",
               "The text should stay under six paragraphs.", "The text should open with a date."]
RESPONSE = ("Economists worry about the US trade deficit and its effect on jobs. Prices may "
            "rise as the US trade "
            "deficit grows. Investors shrugged at the US trade deficit and moved on. Exports "
            "slowed while the US "
            f"trade deficit widened. Analysts say the political cost is high. Separately, "
            f"a {PROBE} unsettled "
            "traders. Markets will stay volatile for the rest of the year. The harvest "
            "festival traditions of the town drew crowds.")
SUMMARY = "The US trade deficit widened and the harvest festival traditions of the town drew crowds."
WRITER = Writer("m1", "direct")


def build_copy_store(path: Path) -> Store:
    """The handmade store at ``path``, its copy evidence not yet computed."""
    store = open_store(path)
    c = store.conn
    for i, body in enumerate([REF_A, REF_B, *OTHERS], 1):
        c.execute("INSERT INTO articles(id, corpus, domain, source_id, title, text_hash, "
                  "words, status) VALUES"
                  " (?, 't', 'news', ?, 't', ?, 40, 'kept')", (i, f"s{i}", store.put_text(body)))
    for iid, condition, b in ((1, "eval", 2), (2, "single", None)):
        c.execute("INSERT INTO instructions(id, run_id, domain, condition, article_a, article_b, main_task,"
                  " n_constraints, status) VALUES (?, 'r', 'news', ?, 1, ?, ?, 8, 'done')",
                  (iid, condition, b, TASK))
        for position, text in enumerate(CONSTRAINTS, 1):
            c.execute("INSERT INTO constraints(instruction_id, position, text, origin, "
                      "active) VALUES (?, ?, ?, 'synthesized', 1)", (iid, position, text))
        rid = c.execute("INSERT INTO generations(kind, instruction_id, model, mode, text_hash) VALUES"
                        " ('response', ?, 'm1', 'direct', ?)", (iid, store.put_text(RESPONSE))).lastrowid
        sid = c.execute("INSERT INTO generations(kind, instruction_id, model, mode, ratio, "
                        "parent_id, text_hash)"
                        " VALUES ('summary', ?, 's', '', 0.25, ?, ?)",
                        (iid, rid, store.put_text(SUMMARY))).lastrowid
        # One judge says Yes everywhere but on the summary's probe: the report has rates to show.
        c.execute("INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, "
                  "prompt_hash, verdict,"
                  " quote_found) SELECT g.id, k.id, 'J1', 'batched', 'p', CASE WHEN g.kind = "
                  "'summary' AND k.position"
                  " = 6 THEN 0 ELSE 1 END, 'exact' FROM generations g JOIN constraints k "
                  "ON k.instruction_id = g.instruction_id WHERE g.id IN (?, ?)", (rid, sid))
    store.commit()
    return store
