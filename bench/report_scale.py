"""How long do metrics and the report take on a store of benchmark scale?

Builds a synthetic store (default: 10,000 instructions x 39 constraints, 2 models under test,
one summary ratio, 2 judges: 390k constraints, 40k generations, 3.1M verdicts; ``--judges 1``
gives the 1.5M of a single judge) with executemany inserts of numpy-drawn verdicts, then times:

- scoring every text once (pipeline.store.scores): what a bulk import or a migrated store pays on its
  first report (before the totals were kept, every report merged all verdicts: about 8 s here);
- each step of `unspecific report --out` on the kept totals (compute_metrics, copied n-grams
  first and again, the paired tests, the files, the charts), side by side with the first;
- keeping the totals current after one more instruction is judged (what evaluate does);
- `unspecific report` and `unspecific report --out` as a user runs them, in fresh processes.

    .venv/bin/python -m bench.report_scale [--instructions 10000] [--judges 2] [--no-copy]
        [--keep PATH [--reuse]]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pipeline.store.database import open_store, text_hash

DOMAINS = ("news", "story", "blog")
CONDITIONS = ("single", "none", "direct", "eval")
WORDS = ("council budget shortfall residents mayor plan flood road school funding vote "
         "meeting officials report "
         "police hospital housing tax rates library park bridge transport jobs factory "
         "workers union strike").split()
STAMP = "2026-01-01T00:00:00+00:00"


def _text(rng: np.random.Generator, words: int) -> str:
    picks = rng.choice(WORDS, size=words)
    sentences = [" ".join(picks[i : i + 12]).capitalize() + "." for i in range(0, words, 12)]
    return " ".join(sentences)


def build_scale_store(path: Path, *, instructions: int = 10_000, constraints: int = 39,
                      models: tuple[str, ...] = ("model-a", "model-b"),
                      judges: tuple[str, ...] = ("judge-a", "judge-b"),
                      ratios: tuple[float, ...] = (0.25,), seed: int = 0,
                      text_pool: int = 300) -> dict[str, int]:
    rng = np.random.default_rng(seed)
    store = open_store(path)
    conn = store.conn
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    # A pool of texts: generations share bodies so the file stays small; copying still has work.
    pool = [_text(rng, 500) for _ in range(text_pool)]
    summaries = [_text(rng, 125) for _ in range(text_pool)]
    hashes = [text_hash(t) for t in pool]
    s_hashes = [text_hash(t) for t in summaries]
    conn.executemany("INSERT OR IGNORE INTO texts(hash, body) VALUES (?, ?)",
                     list(zip(hashes + s_hashes, pool + summaries)))
    n_pairs = -(-instructions // len(CONDITIONS))
    conn.executemany(
        "INSERT INTO articles(id, corpus, domain, source_id, title, text_hash, words, status, imported_at)"
        " VALUES (?, 'scale', ?, ?, '', ?, 500, 'kept', ?)",
        [(a, DOMAINS[(a - 1) // 2 % 3], str(a), hashes[a % text_pool], STAMP)
         for a in range(1, 2 * n_pairs + 1)],
    )
    conn.execute("INSERT INTO runs(id, kind, name, config, status, started_at) VALUES ('scale', 'build', "
                 "'scale', '{}', 'done', ?)",
                 (STAMP,))
    inst_rows, cons_rows, gen_rows = [], [], []
    verdict_batches: list[np.ndarray] = []
    cid = gid = 0
    skill = {m: (0.9 - 0.08 * k, 0.55 - 0.1 * k) for k, m in enumerate(models)}
    for i in range(1, instructions + 1):
        p = (i - 1) // len(CONDITIONS)
        condition = CONDITIONS[(i - 1) % len(CONDITIONS)]
        domain = DOMAINS[p % 3]
        inst_rows.append((i, "scale", domain, condition, p + 1, 2 * p + 1, None
                          if condition == "single" else 2 * p + 2,
                          f"Write a {domain} piece.", constraints, "done", STAMP))
        first = cid + 1
        for pos in range(1, constraints + 1):
            cid += 1
            cons_rows.append((cid, i, pos, f"Constraint {pos} of instruction {i}.", "synthesized", 1, STAMP))
        cids = np.arange(first, cid + 1)
        for model in models:
            p_full, p_keep = skill[model]
            gid += 1
            rid = gid
            gen_rows.append((rid, "response", i, model, "direct", None, None, hashes[rng.integers(text_pool)],
                             500, None, STAMP))
            truth = rng.random(constraints) < p_full
            for j, _ in enumerate(judges):
                seen = truth ^ (rng.random(constraints) < 0.08)
                verdict_batches.append(np.column_stack([np.full(constraints, rid), cids,
                                                        np.full(constraints, j), seen]))
            for ratio in ratios:
                gid += 1
                gen_rows.append((gid, "summary", i, "summarizer", "", ratio, rid,
                                 s_hashes[rng.integers(text_pool)], 125,
                                 round(ratio + rng.normal(0, 0.02), 3), STAMP))
                kept = truth & (rng.random(constraints) < p_keep)
                for j, _ in enumerate(judges):
                    seen = kept ^ (rng.random(constraints) < 0.05)
                    verdict_batches.append(np.column_stack([np.full(constraints, gid), cids,
                                                            np.full(constraints, j), seen]))
    conn.executemany(
        "INSERT INTO instructions(id, run_id, domain, condition, pair_id, article_a, article_b, "
        "main_task, n_constraints, status, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)", inst_rows)
    conn.executemany(
        "INSERT INTO constraints(id, instruction_id, position, text, origin, active, created_at) "
        "VALUES (?,?,?,?,?,?,?)",
        cons_rows)
    conn.executemany(
        "INSERT INTO generations(id, kind, instruction_id, model, mode, ratio, parent_id, text_hash, words,"
        " achieved_ratio, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)", gen_rows)
    allv = np.concatenate(verdict_batches).astype(np.int64)
    names = list(judges)
    conn.executemany(
        "INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, prompt_hash, "
        "verdict, created_at) VALUES (?, ?, ?, 'batched', 'p1', ?, ?)",
        ((int(g), int(c), names[j], int(y), STAMP) for g, c, j, y in allv.tolist()),
    )
    conn.commit()
    store.close()
    return {"instructions": instructions, "constraints": len(cons_rows), "generations": len(gen_rows),
            "verdicts": int(len(allv))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instructions", type=int, default=10_000)
    parser.add_argument("--judges", type=int, default=2)
    parser.add_argument("--keep", help="write the store here and keep it")
    parser.add_argument("--reuse", action="store_true",
                        help="with --keep: reuse the store there if it exists")
    parser.add_argument("--no-copy", dest="copy", action="store_false",
                        help="leave out the copied n-gram metrics (read every text), as `report --no-copy`")
    args = parser.parse_args()

    tmp = tempfile.TemporaryDirectory()
    path = Path(args.keep) if args.keep else Path(tmp.name) / "scale.sqlite"
    if args.reuse and path.exists():
        print(f"reusing {path} ({path.stat().st_size / 1e6:.0f} MB)")
    else:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        t = time.perf_counter()
        sizes = build_scale_store(path, instructions=args.instructions,
                                  judges=tuple(f"judge-{chr(97 + k)}" for k in range(args.judges)))
        print(f"built store: {sizes} in {time.perf_counter() - t:.1f}s ({path.stat().st_size / 1e6:.0f} MB)")

    # Wall time depends on what else the machine runs; process CPU time much less so.
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    from pipeline.analysis.metrics import _add_copying, compute_metrics
    from pipeline.outputs.report import Report, ReportOptions, all_comparisons, charts, write_tables
    from pipeline.store.scores import refresh_text_scores
    from tests.support.store_probes import stale_count

    def step(label: str, fn, *fn_args, **fn_kwargs):
        t, c = time.perf_counter(), time.process_time()
        result = fn(*fn_args, **fn_kwargs)
        wall = time.perf_counter() - t
        print(f"  {label:<62} wall {wall:6.2f}s  cpu {time.process_time() - c:6.2f}s")
        return result, wall

    store = open_store(path)
    with store.conn:  # a reused store starts from scratch too: nothing scored, no copy counts
        for table in ("text_scores", "text_agreement", "copy_stats"):
            store.conn.execute(f"DELETE FROM {table}")
        store.conn.execute("INSERT OR IGNORE INTO text_scores_stale SELECT generation_id FROM verdicts")
    print(f"per-text totals: {stale_count(store.conn)} texts to score")
    _, scoring = step("score every text (once: a bulk import or a migrated store)",
                      refresh_text_scores, store.conn)

    print("the steps of `unspecific report --out`, on the kept totals (in one process, in order):")
    metrics, reading = step("compute_metrics (kept totals, per-text rows, group CIs)", compute_metrics, store)
    if args.copy:
        step("copied 5-grams, every response x reference (first: computed, stored)", _add_copying, store,
             metrics.rows, 5)
        for row in metrics.rows:
            row.extra.clear()
        step("copied 5-grams again (read from copy_stats)", _add_copying, store, metrics.rows, 5)
    options = ReportOptions(copy=args.copy)
    report = Report(options, metrics, [], [], [], [], None)
    report.comparisons, _ = step("paired tests (model/condition pairs x metrics)", all_comparisons,
                                 metrics, options,
                                 report.ratio)
    out = Path(tmp.name) / "steps"
    step("CSV and JSON files", write_tables, report, out)
    step("PNG charts (matplotlib import included)", charts, report, out)
    print(f"  ({len(metrics.rows)} rows, {len(metrics.groups)} groups, "
          f"{len(report.comparisons)} paired tests,"
          " 1000 resamples each)")
    print(f"metrics: the first report on an unscored store {scoring + reading:.2f}s vs every later one"
          f" {reading:.2f}s = {(scoring + reading) / reading:.1f}x")

    # One more instruction judged: its texts' verdicts change, the triggers mark them stale.
    last = store.conn.execute("SELECT max(instruction_id) FROM generations").fetchone()[0]
    with store.conn:
        store.conn.execute("UPDATE verdicts SET verdict = 1 - verdict WHERE generation_id IN"
                           " (SELECT id FROM generations WHERE instruction_id = ?)", (last,))
    stale = stale_count(store.conn)
    step(f"keep the totals current after one instruction is re-judged ({stale} texts)",
         refresh_text_scores, store.conn)
    store.close()

    # The commands as a user runs them: fresh processes, start-up included.
    for extra in ([], ["--out", str(Path(tmp.name) / "report")]):
        command = ["--store", str(path), "report", *extra] + ([] if args.copy else ["--no-copy"])
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c",
                        "import sys; from pipeline.cli import main; sys.exit(main(sys.argv[1:]))",
                        *command], check=True, stdout=subprocess.DEVNULL,
                       cwd=Path(__file__).resolve().parents[1])
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        shown = "report" + (" --out <dir>" if extra else "") + ("" if args.copy else " --no-copy")
        print(f"unspecific {shown} (fresh process): wall {time.perf_counter() - t:.2f}s, cpu {cpu:.2f}s")
    print(f"load average {os.getloadavg()[0]:.1f}")
    tmp.cleanup()


if __name__ == "__main__":
    main()
