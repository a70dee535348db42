"""Stores whose numbers are known by hand (the metrics' worked example) and larger synthetic ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.store.database import Store, open_store

ARTICLE_A = ("The council met on Monday to discuss the budget shortfall. Residents asked why the library "
             "would close early. The mayor said the flood plan will cost the town a great deal of money.")

ARTICLE_B = ("A town council in the north argued over a budget gap. The mayor defended cuts to the bus "
             "service while residents protested outside the hall.")

RESPONSE = ("The council met on Monday to discuss the budget shortfall. Many residents were angry. "
            "The mayor said the flood plan will cost the town a great deal of money. "
            "Officials promised a vote.")

SUMMARY = "The council discussed the budget shortfall and the cost of the flood plan."

R_VERDICTS = {"J1": [1, 1, 1, 0], "J2": [1, 1, 0, 0]}

S_VERDICTS = {"J1": [1, 0, 0, 0], "J2": [1, 1, 0, 1]}


def build_hand_store(path: Path) -> Store:
    store = open_store(path)
    c = store.conn
    a, b = store.put_text(ARTICLE_A), store.put_text(ARTICLE_B)
    c.execute("INSERT INTO articles(id, corpus, domain, source_id, title, text_hash, words, status) VALUES"
              " (1, 'hand', 'news', 'a1', 'Council', ?, 30, 'kept'), (2, 'hand', 'news', 'b1', "
              "'Gap', ?, 25, 'kept')",
              (a, b))
    c.execute("INSERT INTO instructions(id, run_id, domain, condition, article_a, article_b, "
              "main_task, n_constraints,"
              " status) VALUES (1, 'r1', 'news', 'eval', 1, 2, 'Write a news article about a council "
              "budget.', 4, 'done')")
    # A second instruction of the same reference for the naturalness comparison; no responses.
    c.execute("INSERT INTO instructions(id, run_id, domain, condition, article_a, article_b, "
              "main_task, n_constraints,"
              " status) VALUES (2, 'r1', 'news', 'none', 1, 2, 'Write a news article about a "
              "council.', 0, 'done')")
    c.execute("INSERT INTO constraints(id, instruction_id, position, text, origin, active, "
              "replaces_id, replaced_reason)"
              " VALUES (10, 1, NULL, 'Mention the council.', 'synthesized', 0, NULL, NULL)")
    texts = ["Explain why the budget shortfall matters to residents.", "Describe the mayor's flood plan.",
             "Include a vote by officials.", "Close with a quote from a protester."]
    for k, text in enumerate(texts, 1):
        c.execute("INSERT INTO constraints(id, instruction_id, position, text, origin, active, "
                  "replaces_id, replaced_reason) VALUES (?, 1, ?, ?, ?, 1, ?, ?)",
                  (k, k, text, "revised" if k == 1 else "synthesized", 10 if k == 1 else None,
                   "too easy: base article satisfied it" if k == 1 else None))
    r, s = store.put_text(RESPONSE), store.put_text(SUMMARY)
    c.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, text_hash, words) VALUES"
              " (100, 'response', 1, 'm1', 'direct', ?, 40)", (r,))
    c.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, ratio, "
              "parent_id, text_hash, words,"
              " achieved_ratio) VALUES (101, 'summary', 1, 'summ', '', 0.25, 100, ?, 13, 0.3)", (s,))
    rows = [(100, 4, "J1", "old", 1)]  # the stale verdict under an earlier judge prompt: inserted first
    for gid, table in ((100, R_VERDICTS), (101, S_VERDICTS)):
        for judge, verdicts in table.items():
            rows += [(gid, cid, judge, "new", y) for cid, y in enumerate(verdicts, 1)]
            rows.append((gid, 10, judge, "new", 1))  # the inactive constraint
    c.executemany("INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, "
                  "prompt_hash, verdict) VALUES (?, ?, ?, 'batched', ?, ?)", rows)
    # Annotations (worked out in test_human_validation).
    labels = {"A1": {3: "superficial", 1: "integrated", 2: "superficial", 4: "ambiguous"},
              "A2": {3: "superficial", 1: "integrated", 2: "integrated", 4: "superficial"}}
    for annotator, by in labels.items():
        for cid, label in by.items():
            c.execute("INSERT INTO annotations(constraint_id, generation_id, annotator, label) "
                      "VALUES (?, 100, ?, ?)",
                      (cid, annotator, label))
    # Naturalness: eval (1) vs none (2): a win, a loss and a tie for eval; the first shown wins once of twice.
    c.executemany("INSERT INTO naturalness(judge, instruction_a, instruction_b, shown_first, winner) "
                  "VALUES (?, 1, 2, ?, ?)",
                  [("N1", 1, 1), ("N2", 1, 2), ("N3", 2, None)])
    store.commit()
    return store


def report_store(path: Path) -> Path:
    """A synthetic store at ``path`` for the report's tables: two models, two judges, four conditions,
    three ratios, one domain, its similarity and copy evidence computed (suspicion has copy reasons)."""
    from pipeline.stages.copy_evidence import compute_copy_evidence
    from pipeline.stages.similarity import compute_similarities
    from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store

    build_synthetic_store(path, SyntheticSpec(n_instructions=24, n_constraints=8, ratios=(0.5, 0.25, 0.1),
                                              domains=("news",)))
    store = open_store(path)
    try:
        compute_similarities(store, None)
        compute_copy_evidence(store)
    finally:
        store.close()
    return path


def many_store(tmp_path: Path, skill: dict[str, float], n: int = 40, seed: int = 0) -> Store:
    """n instructions, one response per model, verdicts drawn with the model's skill."""
    rng = np.random.default_rng(seed)
    store = open_store(tmp_path / "many.sqlite")
    c = store.conn
    h = store.put_text("text")
    gid = 0
    for i in range(1, n + 1):
        c.execute("INSERT INTO instructions(id, run_id, domain, condition, article_a, main_task) "
                  "VALUES (?, 'r', 'news',"
                  " 'eval', ?, 'task')", (i, i))
        for k in range(1, 11):
            c.execute("INSERT INTO constraints(id, instruction_id, position, text, active) "
                      "VALUES (?, ?, ?, 'c', 1)",
                      (i * 100 + k, i, k))
        for model, p in skill.items():
            gid += 1
            c.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, text_hash) VALUES"
                      " (?, 'response', ?, ?, 'direct', ?)", (gid, i, model, h))
            ys = rng.random(10) < p
            c.executemany("INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, "
                          "prompt_hash, verdict)"
                          " VALUES (?, ?, 'J', 'batched', 'p', ?)",
                          [(gid, i * 100 + k, int(y)) for k, y in enumerate(ys, 1)])
    store.commit()
    return store
