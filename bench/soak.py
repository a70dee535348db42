"""Soak: a full build + evaluate against the fake server with a share of faults.

25 pairs x 4 conditions (100 instructions) x 39 constraints, 2 models under test, 2 judges,
one summary ratio, with 15% of requests answered by a fault (429, 500, a hang past the
client's timeout, a truncated body, prose instead of the contract, an empty reply, and with
200 OK: junk text (symbols, words wrapped in symbols, one word over and over, lorem ipsum),
truncated JSON, a refusal, an error message echoing the key sent). Run first
fault-free (what the work needs: calls and wall time), then with faults, each resumed the
documented way (the same command again) while anything failed. Prints:

- completed results / expected: every result row present exactly once (must be 1.0);
- coverage: verdicts given / expected, as the report computes it (target 1.0);
- junk accepted: results taken from a junk reply (target 0), and refusals of models under test
  kept and flagged (their answers: not junk);
- keys leaked: the key sent, found in the store's files (target 0);
- calls made / calls needed (needed = the fault-free run's requests);
- wall time / ideal (ideal = the fault-free run's wall time);
- how many results differ from the fault-free run, and why.

    .venv/bin/python -m bench.soak [--pairs 25] [--constraints 39] [--fault-rate 0.15] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.fakes.fake_server import (
    ALL_FAULT_KINDS,
    ECHO_KEY_TEXT,
    FAULT_KINDS,
    JUNK_TEXTS,
    REFUSAL_TEXT,
    TRUNCATED_JSON,
    FakeOpenAIServer,
)
from tests.fakes.responders import ScriptedModel, Workload, make_store, result_fingerprint

CONDITIONS = ("single", "none", "direct", "eval")
KEY_ENV = "UNSPECIFIC_SOAK_KEY"
KEY = "sk-soak-0123456789abcdefSECRET"  # sent with every request; the echo_key fault sends it back


def run(args: argparse.Namespace, folder: Path, name: str, fault_rate: float) -> dict:
    kinds = ALL_FAULT_KINDS if args.junk else FAULT_KINDS
    work = Workload(pairs=args.pairs, constraints=args.constraints, models=args.models, judges=args.judges,
                    conditions=CONDITIONS)
    server = FakeOpenAIServer(ScriptedModel(answer_repairs=True), fault_rate=fault_rate, seed=args.seed,
                              hang_s=args.timeout * 2, latency_s=args.latency, fault_kinds=kinds)
    with server:
        store = make_store(folder / f"{name}.sqlite", args.pairs)
        config = work.config(server.base_url, concurrency=args.concurrency, max_retries=args.retries,
                             timeout_s=args.timeout, evaluate={"response_words": args.words}, key_env=KEY_ENV)
        started, cpu = time.perf_counter(), time.process_time()
        passes = asyncio.run(work.run(store, config, words=args.words, passes=args.passes,
                                      backoff_base_s=args.backoff, backoff_cap_s=args.backoff * 10))
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        calls, faults = server.calls, dict(server.faults_served)
    return {"store": store, "wall": wall, "cpu": cpu, "calls": calls, "faults": faults,
            "rows": work.rows(store), "passes": passes}


def _junk_match() -> tuple[str, list[str]]:
    """The SQL condition on ``body`` a result taken from junk meets, and its parameters: it holds
    a junk reply's opening (a summary, the first words of its response); the truncated JSON only
    whole, as it opens every good reply too. instr, not LIKE: the junk's "%" are LIKE's wildcards."""
    markers = [text[:24] for text in JUNK_TEXTS.values()] + [ECHO_KEY_TEXT.split("{key}")[0]]
    return " OR ".join(["instr(body, ?) > 0"] * len(markers)) + " OR body = ?", [*markers, TRUNCATED_JSON]


def junk_examples(store, limit: int = 3) -> list[str]:  # noqa: ANN001
    """The first results taken from junk, as stored, to see what passed."""
    like, params = _junk_match()
    rows = store.query(f"SELECT g.kind || ' ' || g.model AS what, t.body FROM generations g JOIN texts t"
                       f" ON t.hash = g.text_hash WHERE {like} LIMIT {limit}", params)
    return [f"{r['what']}: {r['body'][:160]!r}" for r in rows]


def junk_accepted(store) -> dict[str, int]:  # noqa: ANN001
    """Results taken from a junk reply, by where they sit; and the refusals kept as answers."""
    from pipeline.llm.contract import is_refusal

    like, params = _junk_match()
    out = {
        "texts holding junk": store.scalar(
            f"SELECT count(*) FROM generations g JOIN texts t ON t.hash = g.text_hash WHERE {like}", params),
        "cached junk replies (a result was made of each)": store.scalar(
            f"SELECT count(*) FROM llm_calls WHERE {like.replace('body', 'response')}", params),
    }
    refused = {"base or summary refusing": 0, "response refusing, not flagged": 0}
    kept = 0
    rows = store.query("SELECT g.kind, g.refusal, t.body, p.body AS source FROM generations g JOIN texts t"
                       " ON t.hash = g.text_hash LEFT JOIN generations r ON r.id = g.parent_id"
                       " LEFT JOIN texts p ON p.hash = r.text_hash")
    for r in rows:
        if not is_refusal(r["body"]):
            continue
        if r["kind"] == "response":
            kept += r["refusal"] == 1
            refused["response refusing, not flagged"] += r["refusal"] != 1
        elif not (r["kind"] == "summary" and r["source"] and is_refusal(r["source"])):
            refused["base or summary refusing"] += 1
    out.update(refused)
    out["_refusals kept and flagged"] = kept
    return out


def keys_leaked(store) -> list[str]:  # noqa: ANN001
    """Where the key sent sits in the store: table.column of every text column holding it, and
    the store's files (freed pages keep deleted rows' bytes)."""
    found = []
    for (table,) in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        for column in [c[1] for c in store.conn.execute(f"PRAGMA table_info({table})")
                       if c[2] in ("TEXT", "")]:
            if store.scalar(f"SELECT count(*) FROM [{table}] WHERE CAST([{column}] AS TEXT) LIKE ?",
                            [f"%{KEY}%"]):
                found.append(f"{table}.{column}")
    path = Path(store.path)
    found += [f.name for f in (path, Path(f"{path}-wal")) if f.exists() and KEY.encode() in f.read_bytes()]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=25)
    parser.add_argument("--constraints", type=int, default=39)
    parser.add_argument("--models", type=int, default=2)
    parser.add_argument("--judges", type=int, default=2)
    parser.add_argument("--words", type=int, default=120, help="response and base article length asked for")
    parser.add_argument("--fault-rate", type=float, default=0.15)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=4, help="per endpoint")
    parser.add_argument("--retries", type=int, default=8, help="max_retries per endpoint")
    parser.add_argument("--timeout", type=float, default=1.0,
                        help="client timeout (s); a hang lasts twice that")
    parser.add_argument("--backoff", type=float, default=0.02, help="first retry delay (s); the cap is 10x")
    parser.add_argument("--latency", type=float, default=0.0, help="fake server latency per request (s)")
    parser.add_argument("--passes", type=int, default=4, help="resumes allowed per stage")
    parser.add_argument("--no-junk", dest="junk", action="store_false",
                        help="only the transport faults, no 200 OK junk, refusals or echoed keys")
    args = parser.parse_args(argv)
    os.environ[KEY_ENV] = KEY

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(f"soak: {args.pairs} pairs x {len(CONDITIONS)} conditions x {args.constraints} constraints, "
              f"{args.models} models, {args.judges} judges, faults {args.fault_rate:.0%}")
        run(argparse.Namespace(**{**vars(args), "pairs": 1, "constraints": 4}), folder, "warmup",
            0.0)  # imports, caches
        clean = run(args, folder, "clean", 0.0)
        print(f"fault-free run: {clean['calls']} calls, {clean['wall']:.1f} s, passes (build, "
              f"evaluate) {clean['passes']}")
        soak = run(args, folder, "soak", args.fault_rate)
        print(f"faulty run:     {soak['calls']} calls, {soak['wall']:.1f} s, passes (build, "
              f"evaluate) {soak['passes']}")
        # The CPU is shared with other work: a second fault-free run after the faulty one brackets the noise.
        again = run(args, folder, "clean2", 0.0)
        print(f"fault-free again: {again['calls']} calls, {again['wall']:.1f} s")
        ideal = (clean["wall"] + again["wall"]) / 2
        ideal_cpu = (clean["cpu"] + again["cpu"]) / 2
        again["store"].close()
        print(f"faults served:  {sum(soak['faults'].values())} "
              f"({', '.join(f'{k} {v}' for k, v in sorted(soak['faults'].items()))})")
        print(f"{'result rows':<20} {'expected':>9} {'present':>9} {'dupes':>6}")
        for r in soak["rows"]:
            print(f"{r.kind:<20} {r.expected:>9} {r.present:>9} {r.duplicates:>6}")
        expected = sum(r.expected for r in soak["rows"])
        present = sum(min(r.present, r.expected) for r in soak["rows"])
        dupes = sum(r.duplicates for r in soak["rows"])

        ref, got = result_fingerprint(clean["store"], "b1"), result_fingerprint(soak["store"], "b1")
        # Prose a model under test answered with in place of its response (the wrong_format and
        # refusal faults): kept as its answer, so its summaries and verdicts differ too.
        prose = {h for (h,) in soak["store"].conn.execute(
            "SELECT hash FROM texts WHERE body LIKE '%as a language model%' OR body = ?", [REFUSAL_TEXT])}
        diff_gen = [k for k in ref["generations"] if got["generations"].get(k) != ref["generations"][k]]
        prose_gen = [k for k in diff_gen if got["generations"].get(k) in prose]
        followers = [k for k in diff_gen if k not in prose_gen
                     and any(k.endswith("/" + p) for p in prose_gen)]
        # A summary whose first asks were junk twice (the ask and its repair round) goes down the
        # chain (shorten, then section by section): a good summary, written by another prompt.
        fallback = {h for (h,) in soak["store"].conn.execute(
            "SELECT g.text_hash FROM generations g JOIN llm_calls c ON c.id = g.call_id JOIN texts t"
            " ON t.hash = g.text_hash WHERE g.kind = 'summary' AND (c.template != 'summarize' OR "
            "c.response != t.body)")}
        by_chain = [k for k in diff_gen if k not in prose_gen and k not in followers
                    and got["generations"].get(k) in fallback]
        unexplained = len(diff_gen) - len(prose_gen) - len(followers) - len(by_chain)
        tainted = set(prose_gen) | set(followers) | set(by_chain)
        diff_other = sum(1 for k, v in ref["verdicts"].items() if got["verdicts"].get(k) != v
                         and k.split("|")[0] not in tainted)
        diff_verdicts = sum(1 for k, v in ref["verdicts"].items() if got["verdicts"].get(k) != v)
        same_build = got["instructions"] == ref["instructions"] and got["constraints"] == ref["constraints"]

        from pipeline.analysis.coverage import Coverage
        from pipeline.analysis.metrics import compute_metrics

        groups = compute_metrics(soak["store"], n_resamples=1).groups
        coverage = sum((Coverage(g.judged_items, g.expected_items) for g in groups), Coverage())
        junk = junk_accepted(soak["store"])
        accepted = sum(v for k, v in junk.items() if not k.startswith("_"))
        leaked = keys_leaked(soak["store"])

        print()
        print(f"completed results / expected: {present}/{expected} = {present / expected:.4f}  "
              f"(duplicates {dupes})")
        print(f"coverage (report):            {coverage.judged}/{coverage.expected} = {coverage.rate:.4f}")
        print(f"junk accepted:                {accepted}  (target 0: "
              + ", ".join(f"{k} {v}" for k, v in junk.items() if not k.startswith("_")) + ")")
        for example in junk_examples(soak["store"]) if accepted else []:
            print(f"  junk taken: {example}")
        print(f"refusals of models under test kept and flagged: {junk['_refusals kept and flagged']}")
        print(f"keys leaked into the store:   {len(leaked)}  (target "
              f"0{': ' + ', '.join(leaked) if leaked else ''})")
        print(f"calls made / calls needed:    {soak['calls']}/{clean['calls']} = "
              f"{soak['calls'] / clean['calls']:.3f}")
        print(f"wall time / ideal:            {soak['wall']:.1f}/{ideal:.1f} s = {soak['wall'] / ideal:.2f}  "
              f"(ideal: the mean of two fault-free runs, {clean['wall']:.1f} and {again['wall']:.1f} s)")
        print(f"CPU time / ideal:             {soak['cpu']:.1f}/{ideal_cpu:.1f} s = "
              f"{soak['cpu'] / ideal_cpu:.2f}  "
              f"(this process, fake server included: less sensitive to other load)")
        print(f"build identical to fault-free: {same_build}")
        print(f"generations differing from fault-free: {len(diff_gen)} = {len(prose_gen)} prose "
              "or refusals a model "
              f"under test answered with (its answer, kept) + {len(followers)} summaries of "
              f"those + {len(by_chain)} "
              f"summaries written down the chain after junk twice + {unexplained} unexplained")
        print(f"verdicts differing: {diff_verdicts} of {len(ref['verdicts'])}, {diff_other} of them on "
              "texts that do not differ")
        clean["store"].close()
        soak["store"].close()
    ok = present == expected and not dupes and same_build and not unexplained and not diff_other
    return 0 if ok and not accepted and not leaked and coverage.rate == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
