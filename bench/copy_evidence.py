"""Copy evidence on real text: does the suspicion queue's head hold copy-paste, or the topic?

Two stores, each ranked by the queue as it is now and by the ranking before specificity (copied
phrases scored flat: 3, +0.5 a further phrase, +1 from both references; template words counted),
side by side in one run:

1. A demo store built with the embedded model (``make demo``'s store.sqlite, or --demo PATH), copied
   first and its evidence computed again (copy evidence, echo by --embedder): the top 20's make-up,
   specific (a copied phrase at SPECIFIC_ENOUGH, not the topic) / topic only (every copied phrase the
   main task's words or both references') / other (no copied phrase: an echo, similarity, the verdicts).
2. A store with pastes planted into responses, on real BBC News text (every article of the corpus
   imported, so a phrase's document frequency is real): per instruction, two similar business articles A
   and B, a main task naming a phrase both hold (the topic), 39 constraints of which 12 repeat the topic,
   4 quote a specific phrase of A only (a name or a number, in no other article), 4 quote a phrase frequent
   in the corpus, and the rest are template; a response that repeats the topic, pastes the specific
   phrases, uses the frequent ones, around sentences of an unrelated article. The precision of the top 20
   for the planted pastes (target >= 0.9).

Usage: python -m bench.copy_evidence [--demo store.sqlite] [--instructions 10] [--embedder minilm]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pipeline.analysis.copy_evidence import copied_phrases, word_ngrams
from pipeline.analysis.copying import STOPWORDS, WORD
from pipeline.analysis.suspicion import Evidence, instruction_evidence, suspicion_queue
from pipeline.core.definitions import SPECIFIC_ENOUGH
from pipeline.store.database import Store, open_store
from pipeline.store.view import Writer

TOP = 20
TARGET = 0.9
WRITER = Writer("planted", "direct")
GENERIC = ["consumers", "investors", "jobs", "prices", "exports", "the markets", "small firms",
           "borrowing costs",
           "the budget", "regulators", "shareholders", "growth"]
TOPIC_TEMPLATES = ["The text should discuss {t} and what it means for {g}.",
                   "The text should explain how {t} affects {g}.",
                   "The text should describe the reaction of {g} to {t}."]
TEMPLATE = "The text should discuss the outlook for {g} over the coming year."


# -- the ranking before specificity, for the side-by-side ------------------------------------------


def old_score(e: Evidence, refs: dict[str, str], response: str) -> float:
    """The suspicion score as it was: copied phrases (template words counted) scored flat."""
    copied, sources = copied_phrases(e.text, refs, response)
    score = 0.0
    sim = e.similarity
    if sim is not None and sim.highest >= (0.5 if sim.method == "lexical" else 0.6):
        score += 2 * sim.highest
    if copied:
        score += 3 + 0.5 * min(len(copied) - 1, 3) + (1.0 if len(sources) > 1 else 0.0)
    for reason in e.reasons():
        score += {"lost": 0.5, "unquoted": 0.25, "split": 0.15, "uncertain": 0.05}.get(reason, 0.0)
    return score


def old_top(store: Store, n: int) -> list[Evidence]:
    """Every (constraint, response) scored the old way, highest first."""
    rows = store.conn.execute(
        "SELECT DISTINCT g.instruction_id, g.model, g.mode, g.text_hash, ta.body, tb.body FROM generations g"
        " JOIN instructions i ON i.id = g.instruction_id LEFT JOIN articles a ON a.id = i.article_a"
        " LEFT JOIN texts ta ON ta.hash = a.text_hash LEFT JOIN articles b ON b.id = i.article_b"
        " LEFT JOIN texts tb ON tb.hash = b.text_hash WHERE g.kind = 'response'").fetchall()
    scored = []
    for iid, model, mode, text_hash, ref_a, ref_b in rows:
        response = store.get_text(text_hash)
        refs = {k: v for k, v in (("A", ref_a or ""), ("B", ref_b or "")) if v}
        for e in instruction_evidence(store, iid, Writer(model or "", mode or ""), 0.25).values():
            s = old_score(e, refs, response)
            if s > 0:
                scored.append((-s, e.instruction_id, e.position, e))
    return [e for *_, e in sorted(scored, key=lambda t: t[:3])][:n]


def kind(e: Evidence) -> str:
    """specific / topic only / other (module docstring)."""
    if not e.copied:
        return "other"
    lead = e.lead
    if lead is None:
        return "other"
    if all(f.topic for f in e.facts):
        return "topic only"
    return "specific" if lead.specificity >= SPECIFIC_ENOUGH and not lead.topic else "other"


def make_up(items: list[Evidence]) -> Counter[str]:
    return Counter(kind(e) for e in items)


# -- the demo store ---------------------------------------------------------------------------------


def demo_part(path: Path, embedder_name: str) -> None:
    from pipeline.stages.copy_evidence import compute_copy_evidence
    from pipeline.stages.echo import compute_echo
    from pipeline.stages.similarity import resolve_embedder
    from tests.support.store_probes import clear_copy_evidence

    if not path.exists():
        print(f"demo store: {path} is missing (make demo builds it; --demo PATH names another): skipped")
        return
    work = Path(tempfile.mkdtemp()) / "demo.sqlite"
    shutil.copy(path, work)
    for suffix in ("-wal", "-shm"):
        if Path(f"{path}{suffix}").exists():
            shutil.copy(f"{path}{suffix}", f"{work}{suffix}")
    store = open_store(work, create=False)
    clear_copy_evidence(store)  # computed again by this code, whatever wrote the store
    t = time.perf_counter()
    compute_copy_evidence(store)
    embedder = resolve_embedder(embedder_name, "--embedder")
    if embedder is not None:
        compute_echo(store, embedder)
    seconds = time.perf_counter() - t
    items = store.conn.execute("SELECT count(*) FROM copy_evidence").fetchone()[0]
    queue = suspicion_queue(store, limit=500)
    head = list(queue[:TOP])
    old = old_top(store, TOP)
    print(f"demo store {path}: {items} (response, constraint) items, evidence computed in {seconds:.1f} s")
    print(f"  top {TOP} now:    {dict(make_up(head))}")
    print(f"  top {TOP} before: {dict(make_up(old))}")
    grouped = sum(len(e.same_phrase) for e in head)
    print(f"  {grouped} more items filed under the top {TOP} (the same phrase of the same instruction)")
    for i, e in enumerate(head[:10], 1):
        lead = e.lead
        what = f"“{lead.text}” {lead.specificity:.2f}" if lead else ", ".join(e.reasons())
        print(f"  {i:>2}. {e.score():5.2f} #{e.instruction_id}.{e.position} {kind(e):<10} {what}")
    store.close()


# -- the planted store ------------------------------------------------------------------------------


def _content(gram: tuple[str, ...]) -> int:
    return sum(1 for w in gram if w not in STOPWORDS)


def _sentences(text: str) -> list[str]:
    from pipeline.analysis.support import sentence_spans

    return [text[a:b] for a, b in sentence_spans(text)]


def planted_store(path: Path, n: int, seed: int = 7) -> tuple[Store, set[int], dict[str, int]]:
    """The planted store, the constraint ids of the planted pastes, and the count of each kind."""
    from pipeline.analysis.specificity import CorpusFrequency
    from pipeline.stages.corpus import ImportOptions, import_corpus
    from pipeline.store.articles import domain_article_bodies

    rng = random.Random(seed)
    store = open_store(path)
    import_corpus(store, ImportOptions(fmt="bbc-news", domain="news", near_dup=None))
    corpus = CorpusFrequency(domain_article_bodies(store, "news"))
    rows = store.conn.execute("SELECT a.id, a.source_id, t.body FROM articles a JOIN texts t ON "
                              "t.hash = a.text_hash WHERE a.status = 'kept' ORDER BY a.id").fetchall()
    business = [(i, body) for i, sid, body in rows if sid.lower().startswith("business/")][:160]
    sport = [body for _, sid, body in rows if sid.lower().startswith("sport")]
    grams = {i: {g for g in word_ngrams(body) if _content(g) >= 2} for i, body in business}
    planted: set[int] = set()
    kinds: Counter[str] = Counter()
    used: set[int] = set()
    cid = 0
    for iid in range(1, n + 1):
        a_id, a_body = next((i, b) for i, b in business if i not in used)
        used.add(a_id)
        b_id = max((i for i, _ in business if i not in used), key=lambda i: len(grams[a_id] & grams[i]))
        used.add(b_id)
        b_body = dict(business)[b_id]
        shared = Counter(g for g in word_ngrams(a_body) if g in grams[b_id] and _content(g) >= 2)
        topic = " ".join(max(shared, key=lambda g: (shared[g], g)))
        b_grams = word_ngrams(b_body)
        specific: list[str] = []
        for sentence in _sentences(a_body)[1:]:
            words = WORD.findall(sentence)
            for start in range(1, max(1, len(words) - 7)):
                window = words[start:start + 7]
                low = tuple(w.lower() for w in window)
                marked = any(w[0].isupper() or any(ch.isdigit() for ch in w) for w in window)
                if (marked and not any(g in b_grams for g in zip(low, low[1:], low[2:]))
                    and corpus.df(low) == 1
                        and low[0] not in STOPWORDS and low[-1] not in STOPWORDS):
                    specific.append(" ".join(window))
                    break
            if len(specific) == 4:
                break
        frequent = [" ".join(g) for g in sorted({g for g in word_ngrams(a_body, 4) if _content(g) >= 1})
                    if corpus.df(g) >= 0.01 * corpus.articles and " ".join(g) not in topic][:4]
        filler = _sentences(rng.choice(sport))[:10]
        constraints: list[tuple[str, str, str]] = []  # (constraint, the response's sentence, kind)
        for k in range(12):
            g = GENERIC[k % len(GENERIC)]
            constraints.append((TOPIC_TEMPLATES[k % 3].format(t=topic, g=g),
                                f"Analysts said {topic} would weigh on {g} this year.", "topic"))
        for phrase in specific:
            constraints.append((f"The text should mention that {phrase}.",
                                f"Reports noted that {phrase}.", "planted"))
        for phrase in frequent:
            constraints.append((f"The text should note {phrase} in passing.",
                                f"Officials spoke of {phrase} again.",
                                "frequent"))
        while len(constraints) < 39:
            g = GENERIC[len(constraints) % len(GENERIC)]
            constraints.append((TEMPLATE.format(g=g), f"The outlook for {g} is unclear.", "template"))
        rng.shuffle(constraints)
        sentences = [s for _, s, _ in constraints]
        rng.shuffle(sentences)
        response = " ".join(filler[:5] + sentences + filler[5:])
        c = store.conn
        c.execute("INSERT INTO instructions(id, run_id, domain, condition, article_a, article_b, main_task,"
                  " n_constraints, status) VALUES (?, 'planted', 'news', 'none', ?, ?, ?, 39, 'done')",
                  (iid, a_id, b_id, f"Write a news article about {topic}."))
        for position, (text, _, what) in enumerate(constraints, 1):
            cid += 1
            c.execute("INSERT INTO constraints(id, instruction_id, position, text, origin, active) VALUES"
                      " (?, ?, ?, ?, 'synthesized', 1)", (cid, iid, position, text))
            kinds[what] += 1
            if what == "planted":
                planted.add(cid)
        c.execute("INSERT INTO generations(kind, instruction_id, model, mode, text_hash) "
                  "VALUES ('response', ?, ?,"
                  " ?, ?)", (iid, WRITER.model, WRITER.mode, store.put_text(response)))
        store.commit()
    return store, planted, dict(kinds)


def planted_part(n: int, embedder_name: str) -> float:
    from pipeline.stages.copy_evidence import compute_copy_evidence
    from pipeline.stages.echo import compute_echo
    from pipeline.stages.similarity import compute_similarities, resolve_embedder

    folder = Path(tempfile.mkdtemp())
    t = time.perf_counter()
    store, planted, kinds = planted_store(folder / "planted.sqlite", n)
    built = time.perf_counter() - t
    embedder = resolve_embedder(embedder_name, "--embedder")
    compute_similarities(store, embedder)
    t = time.perf_counter()
    compute_copy_evidence(store)
    copy_s = time.perf_counter() - t
    if embedder is not None:
        compute_echo(store, embedder)
    echo_s = time.perf_counter() - t - copy_s
    head = list(suspicion_queue(store, limit=1000)[:TOP])
    now = sum(e.constraint_id in planted for e in head) / TOP
    old = old_top(store, TOP)
    before = sum(e.constraint_id in planted for e in old) / TOP
    print(f"planted store: {n} instructions on real BBC News text "
          f"({store.conn.execute('SELECT count(*) FROM articles').fetchone()[0]:,}"
          f" articles), constraints by kind {kinds}; built in {built:.1f} s, copy evidence {copy_s:.1f} s,"
          f" echo ({embedder_name}) {echo_s:.1f} s")
    print(f"  precision of the top {TOP} for the planted pastes: now {now:.2f}, before {before:.2f}"
          f" (target >= {TARGET})")
    print(f"  top {TOP} now:    {dict(make_up(head))}")
    print(f"  top {TOP} before: {dict(make_up(old))}")
    store.close()
    return now


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo", type=Path, default=Path("store.sqlite"))
    parser.add_argument("--instructions", type=int, default=10)
    parser.add_argument("--embedder", default="minilm",
                        help="the echo's embedder (mpnet is the paper's; slower)")
    args = parser.parse_args()
    demo_part(args.demo, args.embedder)
    precision = planted_part(args.instructions, args.embedder)
    return 0 if precision >= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
