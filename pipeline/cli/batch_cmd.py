"""`unspecific batch status|submit|collect|export|ingest`: calls sent through batch APIs.

A stage run with ``--batch`` leaves the calls nobody has answered yet to a batch and sends
them; these commands follow them up. Thin layer over pipeline.llm.batch.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "batch",
        help="provider batch APIs and vLLM's offline run_batch: status, submit, collect, export, ingest",
        description="A stage run with --batch (evaluate) records the calls it needs and sends "
                    "them as OpenAI-format "
        "batches. `status` shows each batch's state and counts and what was paid, online "
        "and batch; `collect` "
        "downloads finished batches' results (then run the stage again: it goes on from "
        "them); `submit` sends "
        "what is still pending; `export` writes pending calls as JSONL for vLLM's run_batch "
        "and `ingest` reads its output back.",
    )
    p.add_argument("action", choices=["status", "submit", "collect", "export", "ingest"])
    p.add_argument("files", nargs="*", metavar="FILE", help="ingest: run_batch output files")
    p.add_argument("--failed", choices=["keep", "rebatch", "online"], default="keep",
                   help="collect: items that failed or expired: keep them waiting "
                        "(default), send them in a new "
                   "batch, or let the stage's next run send them online")
    p.add_argument("--endpoint", action="append", default=None, metavar="NAME",
                   help="submit, export: only this endpoint's calls (repeatable)")
    p.add_argument("--out", default="batches", metavar="DIR",
                   help="export: folder for the input files (default batches/)")
    p.add_argument("--close", action="store_true",
                   help="ingest: the exported batches are finished: calls with no result in "
                        "the files are failed")
    p.add_argument("--no-refresh", action="store_true", help="status: do not ask the providers (offline)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import json

    from pipeline.cli.common import console, load_config_from, open_store_from
    from pipeline.llm import batch

    config = load_config_from(args)
    store = open_store_from(args)
    out = console()

    def say(message: str) -> None:
        out.print(f"[dim]{message}[/]", highlight=False)

    try:
        if args.action == "status":
            if not args.no_refresh:
                asyncio.run(batch.refresh(store, config))
            info = batch.status(store)
            if args.json:
                print(json.dumps(info, indent=1, default=str))
            else:
                _print_status(out, info)
        elif args.action == "submit":
            sent = asyncio.run(batch.submit_pending(store, config, endpoints=args.endpoint, on_event=say))
            out.print(f"{len(sent)} batch(es) sent, {sum(s.requests for s in sent):,} requests")
        elif args.action == "collect":
            got = asyncio.run(batch.collect(store, config, failed=args.failed, on_event=say))
            _print_collected(out, got)
        elif args.action == "export":
            written = batch.export(store, config, args.out, endpoints=args.endpoint)
            for path, n in written:
                out.print(f"{path}: {n:,} requests", highlight=False)
            if not written:
                out.print("nothing pending to export (run a stage with --batch first)")
        else:  # ingest
            if not args.files:
                out.print("[red]ingest: name the run_batch output file(s)[/]")
                return 2
            ingested = batch.ingest(store, config, args.files)
            closed = batch.close_exported(store) if args.close else 0
            _print_ingested(out, ingested)
            if closed:
                out.print(f"{closed:,} exported call(s) had no result and are failed (see "
                          "`batch collect --failed`)")
    finally:
        store.close()
    return 0


def _print_status(out: Any, info: dict[str, Any]) -> None:
    from pipeline.outputs.tables import Block, Sheet, render_sheet

    # Fitted to the terminal (pipeline.outputs.tables): split by concern when it does not fit whole.
    sheet = Sheet("batches", ("batch",), (Block("where", ("kind", "endpoint", "remote id", "state")),
                                          Block("counts", ("requests", "completed", "failed", "collected"))))
    for b in info["batches"]:
        sheet.add(b["id"], b["kind"], b["endpoint"], b["remote_id"] or b["path"] or "", b["state"],
                  str(b["requests"] or 0), str(b["completed"] or 0), str(b["failed"] or 0),
                  "yes" if b["collected_at"] else "no")
    render_sheet(out, sheet)
    req = info["requests"]
    out.print("calls: " + ", ".join(f"{k} {v:,}" for k, v in sorted(req.items())) if req
              else "calls: none deferred")
    for via in ("online", "batch"):
        p = info["paid"].get(via)
        if p:
            out.print(f"paid {via}: {p['calls']:,} cached calls, {p['prompt_tokens']:,} in / "
                      f"{p['completion_tokens']:,} "
                      f"out tokens, ${p['cost']:.4f}")
    waiting = info["collected_not_used"]
    if waiting["calls"]:
        out.print(f"collected, not yet taken by a stage: {waiting['calls']:,} calls, ${waiting['cost']:.4f} "
                  "(run the stage again)")
    if req.get("failed"):
        out.print(f"[yellow]{req['failed']:,} call(s) failed in batch[/]: `unspecific batch "
                  "collect --failed rebatch` "
                  "sends them in a new batch, `--failed online` lets the stage's next run send them online")


def _print_ingested(out: Any, got: Any) -> None:
    out.print(f"results: {got.done:,} answered, {got.failed:,} failed, {got.duplicates:,} "
              "duplicate lines ignored, "
              f"{got.malformed:,} malformed lines, {got.unknown:,} lines of no request here, {got.missing:,} "
              "requests with no line")


def _print_collected(out: Any, got: Any) -> None:
    for batch_id, state in got.batches.items():
        out.print(f"{batch_id}: {state}", highlight=False)
    _print_ingested(out, got.ingested)
    if got.rebatched:
        out.print(f"{got.rebatched:,} failed call(s) sent in a new batch")
    if got.online:
        out.print(f"{got.online:,} failed call(s) will be sent online by the stage's next run")
    if got.ingested.done:
        out.print("run the stage again to go on from these results")
