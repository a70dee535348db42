"""Random small stores that mix everything consumers of an outcome used to disagree on, and the flipped items
counted by hand."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from pipeline.store.database import Store, open_store

RATIOS = (0.5, 0.25)

MODELS = ("m1", "m2")

MODES = ("direct", "edit")

RATERS = (("J1", "batched"), ("J2", "batched"), ("J1", "per_constraint"))


def random_store(path: Path, seed: int, *, raters: tuple[tuple[str, str], ...] = RATERS) -> Store:
    rng = random.Random(seed)
    store = open_store(path)
    c = store.conn
    a, b = store.put_text("Reference A."), store.put_text("Reference B.")
    c.execute("INSERT INTO articles(id, corpus, domain, source_id, title, text_hash, words, status) VALUES"
              " (1, 't', 'news', 'a', 'A', ?, 2, 'kept'), (2, 't', 'news', 'b', 'B', ?, 2, 'kept')", (a, b))
    gid = cid = 0
    verdicts: list[tuple] = []
    for run in range(rng.randint(1, 2)):
        # One instruction per condition and run; the runs share the pair (1, 2).
        for k, condition in enumerate(rng.sample(("single", "none", "direct", "eval"), rng.randint(1, 3))):
            iid = 10 * run + k + 1
            c.execute("INSERT INTO instructions(id, run_id, domain, condition, article_a, "
                      "article_b, main_task,"
                      " n_constraints, status) VALUES (?, ?, 'news', ?, 1, 2, 'Write.', 4, 'done')",
                      (iid, f"r{run}", condition))
            constraints = []
            for position in range(1, rng.randint(2, 5)):
                cid += 1
                replaced = rng.random() < 0.3
                if replaced:  # the old one keeps its verdicts: they must never count
                    c.execute("INSERT INTO constraints(id, instruction_id, position, text, origin, active)"
                              " VALUES (?, ?, NULL, 'old', 'synthesized', 0)", (cid, iid))
                    constraints.append((cid, False))
                    cid += 1
                c.execute("INSERT INTO constraints(id, instruction_id, position, text, origin, "
                          "active, replaces_id) VALUES (?, ?, ?, 'C', ?, 1, ?)",
                          (cid, iid, position, "revised" if replaced else "synthesized", cid - 1
                           if replaced else None))
                constraints.append((cid, True))
            for model in MODELS:
                for mode in MODES:
                    if rng.random() < 0.2:
                        continue
                    gid += 1
                    response = gid
                    h = store.put_text(f"response {response}")
                    c.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, text_hash)"
                              " VALUES (?, 'response', ?, ?, ?, ?)", (response, iid, model, mode, h))
                    texts = [response]
                    for ratio in RATIOS:
                        if rng.random() < 0.85:
                            gid += 1
                            c.execute("INSERT INTO generations(id, kind, instruction_id, model, "
                                      "mode, ratio, parent_id,"
                                      " text_hash) VALUES (?, 'summary', ?, 'summ', '', ?, ?, ?)",
                                      (gid, iid, ratio, response, store.put_text(f"summary {gid}")))
                            texts.append(gid)
                    for text in texts:
                        for con, _ in constraints:
                            for judge, judging_mode in raters:
                                if rng.random() < 0.15:
                                    continue  # this rater has not judged it
                                verdicts.append((text, con, judge, judging_mode, "p1", rng.random() < 0.6))
                                # re-judged under a new prompt, or left without a Yes/No
                                if rng.random() < 0.2:
                                    again = None if rng.random() < 0.2 else rng.random() < 0.5
                                    verdicts.append((text, con, judge, judging_mode, "p2", again))
    rng.shuffle(verdicts)  # ids in any order across texts, but a re-judge always after its first
    verdicts.sort(key=lambda v: v[4])
    c.executemany("INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, "
                  "prompt_hash, verdict) VALUES (?, ?, ?, ?, ?, ?)",
                  [(*v[:5], None if v[5] is None else int(v[5])) for v in verdicts])
    store.commit()
    return store


def _latest_by_hand(conn: sqlite3.Connection) -> dict[tuple[int, int, str, str], int]:
    """The rule written out in Python: per (text, active constraint, judge, mode), the newest
    verdict that holds a Yes/No."""
    out = {}
    for gid, cid, judge, mode, verdict in conn.execute(
            "SELECT v.generation_id, v.constraint_id, v.judge, v.judging_mode, v.verdict FROM verdicts v"
            " JOIN constraints c ON c.id = v.constraint_id WHERE c.active = 1 ORDER BY v.id"):
        if verdict is not None:
            out[(gid, cid, judge, mode)] = verdict
    return out


def flipped_by_hand(conn: sqlite3.Connection, ratio: float) -> set[tuple[int, int]]:
    """(constraint, response) flipped at ``ratio``: over the raters who judged both texts, the
    mean verdict >= 0.5 on the response and < 0.5 on the summary."""
    latest = _latest_by_hand(conn)
    flipped = set()
    for summary, response in conn.execute(
            "SELECT id, parent_id FROM generations WHERE kind = 'summary' AND abs(ratio - ?) < 1e-9",
            (ratio,)):
        for cid in {k[1] for k in latest if k[0] == summary}:
            pairs = [(latest[(response, cid, j, m)], latest[(summary, cid, j, m)]) for j, m in RATERS
                     if (response, cid, j, m) in latest and (summary, cid, j, m) in latest]
            if pairs and 2 * sum(f
                                 for f, _ in pairs) >= len(pairs) and 2 * sum(s
                                                                              for _, s in pairs) < len(pairs):
                flipped.add((cid, response))
    return flipped
