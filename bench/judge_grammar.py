"""The lines judge with and without its GBNF grammar, on the real local model (issue 11).

Starts the embedded llama.cpp server (or borrows the one of `unspecific local serve`), then
judges one fixed response of about 250 words against 20 fixed constraints through the real
path (``judge_text`` -> ``_judge_batched`` -> ``LLMClient``) on two endpoints that differ only in
``gbnf``: "free" (free-text lines) and "grammar" (``lines_grammar``: quotes capped at
QUOTE_CAP characters, a No without a reason). For each it prints the calls, prompt and completion
tokens, seconds, lines parsed, Yes count, and how many Yes quotes are found verbatim in the text
(exact), fuzzily, or not at all, and how many quotes were written at the cap or beyond; then
the agreement between the two.

Before each measured judging the same prompt is sent once with max_tokens=1 (``--cold`` skips
it): llama.cpp reuses the longest cached prefix of the previous prompt, so without it the second
condition would read its prompt for free and look faster than it is. The order alternates over
``--repeats``. Each judging gets a fresh store, so nothing comes from the cache.

    .venv/bin/python -m bench.judge_grammar                 # one repeat, free then grammar
    .venv/bin/python -m bench.judge_grammar --repeats 2 --show
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# About 250 words: a local news report. Constraints 1-10 hold in it, 11-20 do not.
RESPONSE = (
    "The Harwick town council met on Thursday evening to decide how to close a budget gap of "
    "four hundred thousand pounds, and the public gallery was full long before the meeting began. "
    "Treasurer Alan Birch opened by explaining that the shortfall came mostly from rising energy "
    "bills at the leisure centre and from a fall in parking income since the new bypass opened. "
    "He warned that the council's reserves would run out by next spring if nothing changed. "
    "Several residents spoke against a plan to shorten the library's opening hours. Maria Lopez, "
    "a mother of three, said her children had nowhere else to do their homework after school. "
    "An older resident, Peter Shaw, asked why the council had spent money on new signs for the "
    "high street while the swimming pool roof still leaked. Councillor Ruth Adeyemi proposed "
    "raising parking charges by twenty pence an hour instead, arguing that visitors rather than "
    "residents would carry most of the cost. Local shop owners objected, saying fewer visitors "
    "would mean fewer customers and more empty units on Market Street. After two hours of debate, "
    "the council voted seven to four to keep the library open and to ask officers to draft a "
    "detailed parking plan. A final decision on the budget is expected at the meeting on the "
    "fourteenth of next month. Birch said he would publish the full figures online a week before "
    "that meeting so that anyone could check them. Many residents left the hall saying they felt "
    "heard, though few believed the money problems were over."
)

CONSTRAINTS = [
    "Describe a public meeting about a budget shortfall.",
    "Include the view of the council's treasurer or finance officer.",
    "State the size of the budget gap in money.",
    "Quote or report the concern of a parent.",
    "Mention the library.",
    "Mention a proposal to raise a charge or fee.",
    "Include the objection of local business owners.",
    "Report the result of a vote, with its numbers.",
    "Say when a final decision is expected.",
    "Name at least two residents who spoke.",
    "Mention a dragon or another mythical creature.",
    "Include a direct quotation from the mayor.",
    "Describe the weather on the day of the meeting.",
    "Mention the police or a crime.",
    "Give the population of the town.",
    "Compare the town with a neighbouring town's budget.",
    "Include a list of bullet points.",
    "End with a question addressed to the reader.",
    "Mention a school being closed.",
    "Report that the meeting was broadcast online.",
]


@dataclass
class Outcome:
    label: str  # "free" or "grammar"
    repeat: int
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    lines_parsed: int = 0  # constraints with a verdict
    yes: int = 0
    quotes_exact: int = 0  # Yes quotes found verbatim in the text (after normalising)
    quotes_fuzzy: int = 0
    quotes_missing: int = 0
    quotes_at_cap: int = 0  # Yes quotes the reply wrote at QUOTE_CAP characters or more (free: would be cut)
    verdicts: list[bool | None] = field(default_factory=list)
    quotes: list[str] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)


def make_config() -> Any:
    from pipeline.core.config import parse_config

    # Both on the embedded model, in lines: they differ only in gbnf.
    return parse_config({
        "endpoints": {
            "free": {"base_url": "local", "judge_format": "lines", "gbnf": False},
            "grammar": {"base_url": "local", "judge_format": "lines", "gbnf": True},
        },
        "roles": {"judges": ["free", "grammar"]},
    })


async def warm(config: Any, store: Any, base_url: str, text: str, constraints: list[str]) -> None:
    """The judge prompt once, with max_tokens=1, so the measured call finds it in the server's
    cache whichever condition runs first."""
    from pipeline.llm.client import LLMClient, Params
    from pipeline.llm.prompts import defuse, load_template, numbered

    template = load_template("judge_lines")
    messages = template.render(text=defuse(text), constraints=numbered(constraints), n=len(constraints))
    client = LLMClient(config, store, local_base_url=base_url, use_cache=False)
    try:
        await client.chat("free", messages, template=template, params=Params(max_tokens=1))
    finally:
        await client.aclose()


async def judge_once(label: str, repeat: int, base_url: str, workdir: Path, *, text: str,
                     constraints: list[str], cold: bool, death: Any = None) -> Outcome:
    from pipeline.llm.client import LLMClient
    from pipeline.stages.judging import QUOTE_CAP, judge_text, parse_batched_reply
    from pipeline.store.database import open_store

    config = make_config()
    store = open_store(workdir / f"{label}-{repeat}.sqlite")  # fresh: nothing from the cache
    try:
        if not cold:
            await warm(config, store, base_url, text, constraints)
        client = LLMClient(config, store, local_base_url=base_url, local_death=death)
        started = time.monotonic()
        try:
            judgements = await judge_text(client, label, text, constraints)
        finally:
            await client.aclose()
        out = Outcome(label, repeat, seconds=round(time.monotonic() - started, 1))
        usage = client.usage_by_endpoint.get(label)
        if usage is not None:
            out.calls, out.prompt_tokens, out.completion_tokens = (usage.calls, usage.prompt_tokens,
                                                                   usage.completion_tokens)
        out.verdicts = [j.verdict for j in judgements]
        out.quotes = [j.quote for j in judgements]
        out.lines_parsed = sum(j.verdict is not None for j in judgements)
        out.yes = sum(j.verdict is True for j in judgements)
        out.quotes_exact = sum(j.verdict is True and j.quote_found == "exact" for j in judgements)
        out.quotes_fuzzy = sum(j.verdict is True and j.quote_found == "fuzzy" for j in judgements)
        out.quotes_missing = sum(j.verdict is True and j.quote_found in ("missing", None) for j in judgements)
        out.replies = [r[0] for r in store.conn.execute("SELECT response FROM llm_calls ORDER BY id")]
        for reply in out.replies:
            try:
                raw = parse_batched_reply(reply, len(constraints))  # as written: no cap applied
            except ValueError:
                continue
            out.quotes_at_cap += sum(len(item["quote"]) >= QUOTE_CAP for item in raw.values()
                                     if item["verdict"])
        return out
    finally:
        store.close()


def agreement(a: Outcome, b: Outcome) -> tuple[int, int, list[int]]:
    """(same verdict, both answered, 1-based constraints where they differ)."""
    both = [(i, x, y) for i, (x, y) in enumerate(zip(a.verdicts, b.verdicts, strict=True), 1)
            if x is not None and y is not None]
    differ = [i for i, x, y in both if x != y]
    return len(both) - len(differ), len(both), differ


def print_outcome(o: Outcome, n: int) -> None:
    rate = o.completion_tokens / o.seconds if o.seconds else 0.0
    print(f"  {o.label:8s} repeat {o.repeat}: {o.calls} call(s), {o.prompt_tokens} prompt + "
          f"{o.completion_tokens} "
          f"completion tokens, {o.seconds:.1f} s ({rate:.1f} tok/s); lines parsed "
          f"{o.lines_parsed}/{n}, Yes {o.yes}; "
          f"Yes quotes exact {o.quotes_exact}, fuzzy {o.quotes_fuzzy}, missing {o.quotes_missing}; "
          f"at or over the cap {o.quotes_at_cap}")


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    from pipeline.llm import local_model as lm
    text, constraints = RESPONSE, CONSTRAINTS[: args.constraints]
    results: list[dict[str, Any]] = []
    print(f"response {len(text.split())} words, {len(constraints)} constraints")
    if args.base_url:
        lease = lm.Lease(base_url=args.base_url)  # a server already running: not ours to stop
        print(f"using the server at {args.base_url}")
    else:
        t0 = time.monotonic()
        lease = await asyncio.to_thread(lm.acquire_server, timeout_s=600)
        print(f"server {'started' if lease.owned else 'borrowed'} at {lease.base_url} in "
              f"{time.monotonic() - t0:.1f} s")
    try:
        with tempfile.TemporaryDirectory(prefix="judge-grammar-") as tmp:
            for repeat in range(1, args.repeats + 1):
                order = ["free", "grammar"] if repeat % 2 else ["grammar", "free"]
                if args.grammar_first:
                    order.reverse()
                got = {}
                for label in order:
                    got[label] = await judge_once(label, repeat, lease.base_url, Path(tmp), text=text,
                                                  constraints=constraints, cold=args.cold, death=lease.death)
                    print_outcome(got[label], len(constraints))
                    if args.show:
                        for reply in got[label].replies:
                            print("    | " + reply.strip().replace("\n", "\n    | "))
                same, both, differ = agreement(got["free"], got["grammar"])
                free, capped = got["free"], got["grammar"]
                print(f"  repeat {repeat}: agreement {same}/{both} answered by both"
                      + (f" (differ on {', '.join(map(str, differ))})" if differ else "")
                      + f"; completion tokens free {free.completion_tokens} -> grammar "
                        f"{capped.completion_tokens} "
                      f"({capped.completion_tokens - free.completion_tokens:+d}), seconds "
                      f"{free.seconds:.1f} -> {capped.seconds:.1f} ({capped.seconds - free.seconds:+.1f})")
                results.append({"repeat": repeat, "order": order, "agreement": [same, both], "differ": differ,
                                **{label: asdict(o) for label, o in got.items()}})
    finally:
        lease.release()
    if len(results) > 1:
        for label in ("free", "grammar"):
            runs = [r[label] for r in results]
            mean = {k: sum(r[k] for r in runs) / len(runs)
                    for k in ("completion_tokens", "seconds", "yes", "quotes_exact")}
            print(f"  {label:8s} mean of {len(runs)}: {mean['completion_tokens']:.0f} completion tokens, "
                  f"{mean['seconds']:.1f} s, Yes {mean['yes']:.1f}, exact quotes {mean['quotes_exact']:.1f}")
    return results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--repeats", type=int, default=1,
                        help="judgings per condition; the order alternates (default 1)")
    parser.add_argument("--constraints", type=int, default=len(CONSTRAINTS),
                        help=f"how many of the {len(CONSTRAINTS)} fixed constraints (default all)")
    parser.add_argument("--grammar-first", action="store_true", help="start with the grammar condition")
    parser.add_argument("--cold", action="store_true",
                        help="no warm-up call: the second condition then reads its prompt "
                             "from the server's cache")
    parser.add_argument("--base-url", help="an OpenAI-compatible llama.cpp server already running (…/v1); "
                                           "default: start the embedded one")
    parser.add_argument("--show", action="store_true", help="print each raw reply")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.repeats < 1 or not 1 <= args.constraints <= len(CONSTRAINTS):
        parser.error(f"--repeats >= 1 and --constraints in 1..{len(CONSTRAINTS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = asyncio.run(run(args))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
        print(f"written {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
