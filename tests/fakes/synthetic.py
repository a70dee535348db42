"""Deterministic synthetic stores: realistic shape, made-up words, no LLM.

Used by the app's tests, its snapshot tests, ``bench/app_latency.py`` and scale tests. A
store holds N instructions spread over domains and conditions, each with its constraints
(39 by default, with revision lineage for ``direct``/``eval``), a pair of articles that
share some sentences, one response per model, summaries at each ratio, verdicts of every
judge on responses and summaries (quotes found or missing), quality flags and an optional
few annotations. The same arguments always give the same store, byte for byte in content.

Inserts go through ``executemany`` on the raw connection so 2,000 instructions build in
seconds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.store.database import Store, open_store, text_hash
from pipeline.store.scores import refresh_text_scores

STAMP = "2026-01-01T00:00:00+00:00"  # fixed, so snapshots and tests never see the clock

CONDITIONS = ("single", "none", "direct", "eval")
DOMAINS = ("news", "story", "blog")

_WORDS = {
    "news": "council budget shortfall residents mayor plan flood road school funding vote meeting "
    "officials report police hospital housing tax rates library park bridge transport jobs "
    "factory workers union strike election campaign court ruling appeal community".split(),
    "story": "dragon forest village girl boy storm castle secret door letter journey river mountain "
    "stranger lantern map night winter wolf ship island king sister brother promise dream "
    "shadow garden clock mirror key song".split(),
    "blog": "recipe garden morning coffee travel budget tips weekend kitchen workout routine habit "
    "book review family trip city market bread photos notes week year lessons mistakes "
    "favourite tools desk plants sleep walk".split(),
}
_VERBS = "describes explains argues shows reveals questions follows compares remembers announces " \
    "promises considers rejects welcomes criticises supports delays changes".split()
_GLUE = "the a their its this that every another one local new old small large early late".split()
_PROPER = ["Harrowgate", "Mrs Alder", "Kestrel Bay", "Dr Vance", "Northfield", "Brindle Street"]
_TEMPLATES = [
    "Describe how the {a} affects the {b} over several paragraphs.",
    "Explain why the {a} matters to the {b}, with at least one concrete example.",
    "Include a scene in which the {a} {v} the {b}.",
    "Mention the reaction of the {a} to the {b} in the closing section.",
    "Contrast the {a} with the {b} in a dedicated paragraph.",
    "Use a quotation from someone affected by the {a}.",
    "Open with the {a} before introducing the {b}.",
    "Keep the tone measured when discussing the {a} and the {b}.",
]


@dataclass
class SyntheticSpec:
    n_instructions: int = 40
    domains: tuple[str, ...] = DOMAINS
    conditions: tuple[str, ...] = CONDITIONS
    models: tuple[str, ...] = ("model-a", "model-b")
    judges: tuple[str, ...] = ("judge-a", "judge-b")
    ratios: tuple[float, ...] = (0.25,)
    n_constraints: int = 39
    seed: int = 0
    run_id: str = "synthetic"
    annotators: tuple[str, ...] = ()  # label a few flipped constraints per annotator
    # Chance that a model satisfies a constraint on its full response / keeps it in the summary.
    model_skill: dict[str, tuple[float, float]] = field(default_factory=dict)


@dataclass
class SyntheticSummary:
    path: Path
    instructions: int
    constraints: int
    generations: int
    verdicts: int


def _sentence(rng: random.Random, words: list[str], n: int | None = None) -> str:
    n = n or 9 + int(rng.random() * 10)
    r = rng.random
    pools = (_GLUE, words, _VERBS + words)
    out = [pool[int(r() * len(pool))] for pool in (pools[i % 3] for i in range(n))]
    return out[0].capitalize() + " " + " ".join(out[1:]) + "."


def _article(rng: random.Random, words: list[str], shared: list[str], n: int) -> list[str]:
    own = [_sentence(rng, words) for _ in range(n)]
    for s in shared:  # shared sentences land in different places in each article
        own.insert(rng.randrange(len(own) + 1), s)
    return own


def build_synthetic_store(path: str | Path, spec: SyntheticSpec | None = None) -> SyntheticSummary:
    """Create (or overwrite) a store at ``path`` filled per ``spec``."""
    spec = spec or SyntheticSpec()
    path = Path(path)
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(path) + suffix)
        if p.exists():
            p.unlink()
    store = open_store(path)
    try:
        counts = _fill(store, spec)
        refresh_text_scores(store.conn)  # as the evaluate stage leaves a store: totals current
    finally:
        store.close()
    return SyntheticSummary(path, *counts)


def _fill(store: Store, spec: SyntheticSpec) -> tuple[int, int, int, int]:
    rng = random.Random(spec.seed)
    conn = store.conn
    texts: dict[str, str] = {}

    def put(body: str) -> str:
        h = text_hash(body)
        texts[h] = body
        return h

    articles: list[tuple] = []
    pairs: list[tuple] = []
    instructions: list[tuple] = []
    constraints: list[tuple] = []
    flags: list[tuple] = []
    generations: list[tuple] = []
    verdicts: list[tuple] = []
    annotations: list[tuple] = []
    skill = {m: spec.model_skill.get(m, (0.9 - 0.08 * i, 0.55 - 0.1 * i)) for i, m in enumerate(spec.models)}

    n_pairs = max(1, -(-spec.n_instructions // len(spec.conditions)))
    next_article = next_constraint = next_gen = next_verdict = 1
    made = 0
    for p in range(n_pairs):
        domain = spec.domains[p % len(spec.domains)]
        words = _WORDS.get(domain, _WORDS["news"])
        shared = [_sentence(rng, words) for _ in range(rng.randint(2, 4))]
        a_sents = _article(rng, words, shared, rng.randint(14, 22))
        b_sents = _article(rng, words, shared, rng.randint(14, 22))
        ids = []
        for label, sents in (("a", a_sents), ("b", b_sents)):
            body = " ".join(sents)
            articles.append((next_article, "synthetic", domain, f"{p}-{label}",
                             f"Article {p}{label}", put(body),
                             len(body.split()), "kept", None, STAMP))
            ids.append(next_article)
            next_article += 1
        pair_id = p + 1
        pairs.append((pair_id, domain, "paper", "{}", ids[0], ids[1], round(rng.uniform(0.7, 0.85), 4),
                      1, "[]", STAMP))
        for condition in spec.conditions:
            if made >= spec.n_instructions:
                break
            made += 1
            iid = made
            a, b = rng.sample(words, 2)
            task = f"Write a {domain} piece about the {a} and the {b}."
            base_id = None
            if condition in ("direct", "eval"):
                base_id = next_gen
                base_body = " ".join(_sentence(rng, words) for _ in range(20))
                generations.append((next_gen, "base", iid, spec.models[0], "", None, None, put(base_body),
                                    len(base_body.split()), None, None, STAMP))
                next_gen += 1
            instructions.append((iid, spec.run_id, domain, condition, pair_id, ids[0],
                                 ids[1] if condition != "single" else None, task,
                                 spec.n_constraints, "done", None,
                                 base_id, STAMP))
            active: list[tuple[int, str]] = []
            for pos in range(1, spec.n_constraints + 1):
                x, y = rng.sample(words, 2)
                text = rng.choice(_TEMPLATES).format(a=x, b=y, v=rng.choice(_VERBS))
                roll = rng.random()
                flag_rows: list[tuple[str, str]] = []
                if roll < 0.08:  # copies a 4-word run of article A: the leak the method avoids
                    sent = rng.choice(a_sents).rstrip(".").split()
                    start = rng.randrange(max(1, len(sent) - 4))
                    chunk = " ".join(sent[start:start + 4]).lower()
                    text = f"Write about how {chunk} shapes the ending."
                    flag_rows.append(("copied_ngram", chunk))
                    if condition == "single":
                        flag_rows.append(("specificity_leak", "only in article A"))
                elif roll < 0.12:
                    name = rng.choice(_PROPER)
                    text = text.rstrip(".") + f", naming {name}."
                    flag_rows.append(("proper_noun", name))
                replaced = condition == "eval" and rng.random() < 0.55 or condition == "direct"
                if replaced:
                    old_text = rng.choice(_TEMPLATES).format(a=y, b=x, v=rng.choice(_VERBS))
                    reason = ("too easy: base article satisfied it" if condition == "eval"
                              else "direct: every constraint hardened")
                    # As pipeline.stages.revision writes lineage: the reason on the new row, the base
                    # article's Yes on the old one, no base verdict on the new one.
                    constraints.append((next_constraint, iid, None, old_text, "synthesized", 0, None, None,
                                        1 if condition == "eval" else None, None, STAMP))
                    old_id = next_constraint
                    next_constraint += 1
                    constraints.append((next_constraint, iid, pos, text, "revised", 1, old_id,
                                        reason, None, None,
                                        STAMP))
                else:
                    constraints.append((next_constraint, iid, pos, text, "synthesized", 1, None, None,
                                        0 if base_id else None, None, STAMP))
                for flag, detail in flag_rows:
                    flags.append((next_constraint, flag, detail))
                active.append((next_constraint, text))
                next_constraint += 1
            for model in spec.models:
                p_full, p_keep = skill[model]
                sents = [_sentence(rng, words) for _ in range(rng.randint(22, 30))]
                # A response echoes some constraints' wording and some article sentences.
                for cid, ctext in rng.sample(active, 4):
                    sents.insert(rng.randrange(len(sents) + 1),
                                 ctext.rstrip(".").replace("Describe how", "Here") + ".")
                sents.insert(rng.randrange(len(sents) + 1), rng.choice(a_sents))
                body = " ".join(sents)
                resp_id = next_gen
                generations.append((resp_id, "response", iid, model, "direct", None, None, put(body),
                                    len(body.split()), None, None, STAMP))
                next_gen += 1
                sent_words = [x.rstrip(".").split() for x in sents]
                full_pass: dict[int, int] = {}
                for cid, _ in active:
                    yes = rng.random() < p_full
                    full_pass[cid] = int(yes)
                    for judge in spec.judges:
                        v = yes if rng.random() > 0.08 else not yes  # judges disagree now and then
                        verdicts.append(_verdict(rng, next_verdict, resp_id, cid, judge, v, sent_words))
                        next_verdict += 1
                for ratio in spec.ratios:
                    keep = max(2, int(len(sents) * ratio))
                    summ_sents = [sents[i] for i in sorted(rng.sample(range(len(sents)), keep))]
                    summ = " ".join(summ_sents)
                    sid = next_gen
                    generations.append((sid, "summary", iid, model, "", ratio, resp_id, put(summ),
                                        len(summ.split()),
                                        round(len(summ.split()) / len(body.split()), 3), None,
                                        STAMP))
                    next_gen += 1
                    keep_p = min(1.0, p_keep / max(ratio / 0.25, 0.4))
                    summ_words = [x.rstrip(".").split() for x in summ_sents]
                    for cid, _ in active:
                        yes = full_pass[cid] and rng.random() < keep_p
                        for judge in spec.judges:
                            v = yes if rng.random() > 0.05 else not yes
                            verdicts.append(_verdict(rng, next_verdict, sid, cid, judge, v, summ_words))
                            next_verdict += 1
                        if yes is False and full_pass[cid] and spec.annotators and rng.random() < 0.3:
                            for a_name in spec.annotators:
                                label = rng.choice(("superficial", "superficial", "integrated", "ambiguous"))
                                annotations.append((cid, resp_id, a_name, label, "", STAMP))

    # A fresh file nobody else reads yet: skip per-row FK checks and the WAL for the bulk load.
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("PRAGMA journal_mode = MEMORY")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -200000")
    conn.executemany("INSERT OR IGNORE INTO texts(hash, body) VALUES (?, ?)", list(texts.items()))
    conn.executemany("INSERT INTO articles(id, corpus, domain, source_id, title, text_hash, words, "
                     "status, duplicate_of, imported_at) VALUES (?,?,?,?,?,?,?,?,?,?)", articles)
    conn.executemany("INSERT INTO pairs(id, domain, rule, params, article_a, article_b, cosine, rank, "
                     "candidates, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)", pairs)
    conn.execute(
        "INSERT INTO runs(id, kind, name, config, status, started_at, finished_at, calls, "
        "cache_hits, prompt_tokens,"
        " completion_tokens, cost, error) VALUES (?, 'build', ?, '{}', 'done', ?, ?, ?, ?, ?, ?, ?, NULL)",
        (spec.run_id, spec.run_id, STAMP, STAMP, len(generations) + made, made // 3, 1000 * made, 400 * made,
         round(0.002 * made, 4)),
    )
    conn.executemany("INSERT INTO instructions(id, run_id, domain, condition, pair_id, article_a, "
                     "article_b, main_task,"
                     " n_constraints, status, error, base_generation_id, created_at) VALUES "
                     "(?,?,?,?,?,?,?,?,?,?,?,?,?)", instructions)
    conn.executemany("INSERT INTO constraints(id, instruction_id, position, text, origin, active, "
                     "replaces_id, replaced_reason,"
                     " base_verdict, base_quote, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)", constraints)
    conn.executemany("INSERT INTO constraint_flags(constraint_id, flag, detail) VALUES (?,?,?)", flags)
    conn.executemany("INSERT INTO generations(id, kind, instruction_id, model, mode, ratio, "
                     "parent_id, text_hash, words,"
                     " achieved_ratio, call_id, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", generations)
    conn.executemany("INSERT INTO verdicts(id, generation_id, constraint_id, judge, judging_mode, "
                     "prompt_hash, verdict, quote,"
                     " reason, quote_found, quote_score, call_id, created_at) VALUES "
                     "(?,?,?,?,?,?,?,?,?,?,?,?,?)", verdicts)
    conn.executemany(
        "INSERT OR IGNORE INTO annotations(constraint_id, generation_id, annotator, label, note, created_at)"
        " VALUES (?,?,?,?,?,?)", annotations)
    conn.commit()
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return made, len(constraints), len(generations), len(verdicts)


def _verdict(rng: random.Random, vid: int, gen_id: int, cid: int, judge: str, yes: bool,
             words_of: list[list[str]]) -> tuple:
    if not yes:
        return (vid, gen_id, cid, judge, "batched", "synthetic", 0, "", "not addressed", None,
                None, None, STAMP)
    r = rng.random
    words = words_of[int(r() * len(words_of))]
    if r() < 0.06:  # a hallucinated quote: words that are nowhere in the text
        return (vid, gen_id, cid, judge, "batched", "synthetic", 1, "the committee later confirmed it", "",
                "missing", 40.0, None, STAMP)
    start = int(r() * max(1, len(words) - 5))
    quote = " ".join(words[start:start + 6])
    return (vid, gen_id, cid, judge, "batched", "synthetic", 1, quote, "", "exact", 100.0, None, STAMP)


def main() -> None:  # pragma: no cover - a convenience: python -m tests.fakes.synthetic out.sqlite 2000
    import sys
    import time

    t = time.perf_counter()
    out = build_synthetic_store(sys.argv[1],
                                SyntheticSpec(n_instructions=int(sys.argv[2]) if len(sys.argv) > 2 else 40))
    print(out, f"{time.perf_counter() - t:.2f}s")


if __name__ == "__main__":  # pragma: no cover
    main()
