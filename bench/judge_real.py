"""The embedded judge on real demo text (issue 61): kappa, Yes precision and Yes rate against hand labels,
on the development and the held-out split.

The items (pipeline/analysis/judge_real_data/items.jsonl, or --items) are (constraint, text) pairs drawn
from a demo store's verdicts, stratified by text kind x model x the embedded judge's verdict, each with
its stratum's population, so every figure is weighted to stand for the store's verdicts (the plain,
unweighted kappa beside it). The split is by instruction: the judge is tuned on dev, measured on held_out.

  draw   --store S.sqlite --out items.jsonl [--per-stratum 25]: draw the items (no verdict in them);
         the store's own verdicts (P(Yes), the located sentence's similarity) go to --verdicts FILE.
  score  --labels labels.jsonl [--verdicts FILE | --run]: the judge against the labels. --verdicts reads
         a store's or an earlier run's P(Yes); --run judges the items now through the production path
         (run_judge_check on the embedded llama.cpp server, a fresh store: no cache), --prompt NAME for
         another yes_no prompt; --dump FILE keeps the run's P(Yes).
         Verdicts are read at --threshold (default: the judge's as calibrated on the built-in check,
         0.548), or at --thresholds response=T,summary=T; --tune picks each kind's threshold on dev
         (max kappa) and reports held_out at it.
  --write (with score): ship the labelled items and the held-out figures into
         pipeline/analysis/judge_real_data (items.jsonl, figures.json).

Run: python -m bench.judge_real score --labels L.jsonl --verdicts V.jsonl [--tune]
(UNSPECIFIC_LOCAL_URL=http://127.0.0.1:PORT reuses a running server; else --run starts one.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import tempfile
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from pipeline.analysis.judge_real import SPLITS, Figures, RealItem, figures, grouped_lines, read_items

DATA = Path(__file__).resolve().parent.parent / "pipeline" / "analysis" / "judge_real_data"
KINDS = ("response", "summary")
BUILTIN_THRESHOLD = 0.548  # the embedded judge's threshold as the built-in check calibrates it (issue 61)


# -- draw ------------------------------------------------------------------------------------------


def draw(store_path: str, per_stratum: int, seed: int, judge: str, mode: str,
         ratio: float) -> tuple[list[dict], list[dict]]:
    from pipeline.analysis.judge_validation import verdict_stratum
    from pipeline.store.database import open_store
    from pipeline.store.generations import generation_text
    from pipeline.store.validation import constraint_text, judge_verdict_texts

    store = open_store(store_path, create=False, readonly=True)
    try:
        population = judge_verdict_texts(store, ratio, None, judge, mode)
        by: dict[str, list] = defaultdict(list)
        for row in population:
            by[verdict_stratum(row.text_kind, row.model, row.verdict)].append(row)
        instructions = sorted({row.instruction_id for row in population})
        rng = random.Random(seed)
        # The later half of the instructions is held out (decided before any label was seen).
        held = set(instructions[len(instructions) // 2:])
        items, verdicts = [], []
        for stratum in sorted(by):
            for row in rng.sample(by[stratum], min(per_stratum, len(by[stratum]))):
                texts = constraint_text(store, row.constraint_id, row.generation_id)
                text = generation_text(store, row.generation_id) or ""
                key = f"g{row.generation_id}.c{row.constraint_id}"
                items.append({"id": key, "constraint": texts.constraint if texts else "", "text": text,
                              "text_kind": row.text_kind, "model": row.model,
                              "instruction_id": row.instruction_id, "constraint_id": row.constraint_id,
                              "generation_id": row.generation_id, "stratum": stratum,
                              "population": len(by[stratum]),
                              "split": "held_out" if row.instruction_id in held else "dev"})
                p = store.conn.execute(
                    "SELECT p_yes, quote_score FROM verdicts WHERE generation_id = ? AND constraint_id = ?"
                    " AND judge = ? AND judging_mode = ? AND verdict IS NOT NULL ORDER BY id DESC LIMIT 1",
                    (row.generation_id, row.constraint_id, judge, mode)).fetchone()
                verdicts.append({"id": key, "verdict": row.verdict, "p_yes": p[0], "similarity": p[1]})
    finally:
        store.close()
    rng.shuffle(items)  # one order: a labeller cannot tell the strata apart
    return items, verdicts


# -- judging the items now -------------------------------------------------------------------------------


async def run_judge(items: list[RealItem], prompt: str | None) -> dict[str, float]:
    """P(Yes) of each item, judged now by the embedded model through the production path."""
    from pipeline.analysis.judge_check import CheckEntry, CheckText
    from pipeline.core.config import parse_config
    from pipeline.stages.judge_check import run_judge_check
    from pipeline.stages.runs import open_client
    from pipeline.store.database import open_store
    from pipeline.store.judge_checks import all_checks

    by_text: dict[int, list[RealItem]] = defaultdict(list)
    for i in items:
        by_text[i.generation_id].append(i)
    texts = tuple(CheckText(f"g{gid}", "own", mine[0].text, False,
                            tuple(CheckEntry(i.id, i.constraint, bool(i.label), "real") for i in mine))
                  for gid, mine in sorted(by_text.items()))
    local: dict = {"base_url": "local", **({"judge_prompt": prompt} if prompt else {})}
    spec: dict = {"endpoints": {"local": local}}
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "bench.sqlite")
        config = parse_config(spec)
        async with open_client(config, store, endpoints=["local"]) as client:
            await run_judge_check(store, client, ["local"], mode="yes_no", texts=texts, source="own")
        (check,) = [c for c in all_checks(store) if c.judge == "local"]
        store.close()
    return {i.item_key: i.p_yes for i in check.items if i.p_yes is not None}


# -- scoring -------------------------------------------------------------------------------------------


def read_jsonl(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def labelled(items: list[RealItem], labels_path: str) -> list[RealItem]:
    labels = {str(r["id"]): int(r["label"]) for r in read_jsonl(labels_path)}
    return [replace(i, label=labels[i.id]) for i in items if i.id in labels]


def verdicts_at(p_yes: dict[str, float], items: list[RealItem],
                thresholds: dict[str, float]) -> dict[str, bool]:
    kinds = {i.id: i.text_kind for i in items}
    return {k: p >= thresholds[kinds[k]] for k, p in p_yes.items() if k in kinds}


def table(items: list[RealItem], verdicts: dict[str, bool]) -> dict[str, dict[str, Figures]]:
    out: dict[str, dict[str, Figures]] = {}
    for split in SPLITS:
        mine = [i for i in items if i.split == split]
        out[split] = {"all": figures(mine, verdicts)}
        for kind in KINDS:
            out[split][kind] = figures([i for i in mine if i.text_kind == kind], verdicts)
    return out


MIN_PRECISION = 0.7  # the target for the judge's Yes


def tune(items: list[RealItem], p_yes: dict[str, float], *, per_kind: bool) -> dict[str, float]:
    """The threshold chosen on dev (one for both kinds, or each kind's): the best weighted kappa among the
    cuts whose Yes are right at least MIN_PRECISION of the time, midway between neighbouring P(Yes)."""
    groups = [[k] for k in KINDS] if per_kind else [list(KINDS)]
    out = {}
    for kinds in groups:
        dev = [i for i in items if i.split == "dev" and i.text_kind in kinds and i.id in p_yes]
        values = sorted({p_yes[i.id] for i in dev})
        cuts = [round((a + b) / 2, 4) for a, b in zip(values, values[1:])]
        best, best_k = BUILTIN_THRESHOLD, -math.inf
        for c in cuts:
            f = figures(dev, {i.id: p_yes[i.id] >= c for i in dev})
            if math.isnan(f.kappa) or not f.precision >= MIN_PRECISION:
                continue
            if f.kappa > best_k + 1e-9:
                best, best_k = c, f.kappa
        out.update(dict.fromkeys(kinds, best))
    return out


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{100 * x:.0f}%"


def show(result: dict[str, dict[str, Figures]], title: str) -> None:
    print(title)
    print(f"  {'split':<9}{'texts':<10}{'n':>5}{'kappa':>8}{'plain κ':>9}{'Yes prec.':>11}{'Yes rate':>10}"
          f"{'labels':>8}")
    for split, rows in result.items():
        for group, f in rows.items():
            kappa = "-" if math.isnan(f.kappa) else f"{f.kappa:.2f}"
            plain = "-" if math.isnan(f.plain_kappa) else f"{f.plain_kappa:.2f}"
            print(f"  {split:<9}{group:<10}{f.n:>5}{kappa:>8}{plain:>9}{_pct(f.precision):>11}"
                  f"{_pct(f.yes_rate):>10}{_pct(f.label_rate):>8}")


def agreement(items: list[RealItem], other: str) -> None:
    from pipeline.analysis.stats import cohen_kappa

    b = {str(r["id"]): int(r["label"]) for r in read_jsonl(other)}
    pairs = [(int(i.label or 0), b[i.id]) for i in items if i.id in b]
    if pairs:
        k = cohen_kappa([x for x, _ in pairs], [y for _, y in pairs])
        print(f"two labellings: {len(pairs)} items, agree {100 * k.percent:.1f}%, kappa {k.kappa:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    d = sub.add_parser("draw")
    d.add_argument("--store", required=True)
    d.add_argument("--out", required=True)
    d.add_argument("--verdicts", required=True)
    d.add_argument("--per-stratum", type=int, default=25)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--judge", default="local")
    d.add_argument("--mode", default="yes_no")
    d.add_argument("--ratio", type=float, default=0.25)
    s = sub.add_parser("score")
    s.add_argument("--items", default=str(DATA / "items.jsonl"))
    s.add_argument("--labels", help="labels (default: the items' own)")
    s.add_argument("--second", help="a second labelling of the same items: their agreement")
    s.add_argument("--verdicts", help="P(Yes) per item id (from draw, or an earlier --dump)")
    s.add_argument("--run", action="store_true", help="judge the items now with the embedded model")
    s.add_argument("--prompt", help="with --run: prompts/NAME.md instead of judge_yes_no")
    s.add_argument("--dump", help="with --run: write the P(Yes) here")
    s.add_argument("--threshold", type=float, default=BUILTIN_THRESHOLD)
    s.add_argument("--thresholds", help="response=T,summary=T")
    s.add_argument("--tune", choices=("one", "per-kind"),
                   help="the threshold chosen on dev: one for both kinds, or each kind's")
    s.add_argument("--write", action="store_true", help="ship the items and the held-out figures")
    args = parser.parse_args()
    if args.action == "draw":
        drawn, verdicts = draw(args.store, args.per_stratum, args.seed, args.judge, args.mode, args.ratio)
        Path(args.out).write_text("".join(json.dumps(i) + "\n" for i in drawn), encoding="utf-8")
        Path(args.verdicts).write_text("".join(json.dumps(v) + "\n" for v in verdicts), encoding="utf-8")
        print(f"{len(drawn)} items to {args.out}; the judge's verdicts to {args.verdicts}")
        return 0
    items = read_items(Path(args.items).read_text(encoding="utf-8").splitlines())
    if args.labels:
        items = labelled(items, args.labels)
    items = [i for i in items if i.label is not None]
    if args.second:
        agreement(items, args.second)
    if args.run:
        p_yes = asyncio.run(run_judge(items, args.prompt))
        if args.dump:
            Path(args.dump).write_text("".join(json.dumps({"id": k, "p_yes": v}) + "\n"
                                               for k, v in p_yes.items()))
    else:
        p_yes = {str(r["id"]): float(r["p_yes"]) for r in read_jsonl(args.verdicts)
                 if r.get("p_yes") is not None}
    thresholds = dict.fromkeys(KINDS, args.threshold)
    if args.thresholds:
        thresholds.update({k: float(v) for k, v in (p.split("=") for p in args.thresholds.split(","))})
    if args.tune:
        thresholds = tune(items, p_yes, per_kind=args.tune == "per-kind")
    result = table(items, verdicts_at(p_yes, items, thresholds))
    at = ", ".join(f"{k} {v:.3f}" for k, v in thresholds.items())
    show(result, f"{len(items)} labelled items; Yes when P(Yes) >= {at}")
    if args.write:
        DATA.mkdir(exist_ok=True)
        (DATA / "items.jsonl").write_text("".join(line + "\n" for line in grouped_lines(items)),
                                          encoding="utf-8")
        payload = {split: {g: f.as_dict() for g, f in rows.items()} for split, rows in result.items()}
        payload["thresholds"] = thresholds
        (DATA / "figures.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {DATA / 'items.jsonl'} and figures.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
