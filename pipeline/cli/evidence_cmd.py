"""`unspecific evidence` (alias `similarity`): compute the stored copy-paste evidence a store lacks.

The suspicion ranking (pipeline.analysis.suspicion) reads evidence that no LLM call makes: each
constraint's similarity to its references (pipeline.stages.similarity) and, per
response, the constraint's phrases found in a reference and in the response
(pipeline.stages.copy_evidence), and the constraint's echo on each response and summary
(pipeline.stages.echo: its highest cosine with a sentence of the text). Build and evaluate store
them as they go; this fills in a store made before they did, or one whose similarity used another
embedder. Only what is missing is computed, so it resumes where a stopped run left off."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evidence", aliases=["similarity"],
        help="compute the copy-paste evidence a store lacks: constraint-reference similarity, copied phrases",
        description="Embeds every active constraint and its references (vectors cached in "
                    "the store) and stores "
        "the cosine to reference A and to B, which the app, the report and the HTML show; "
        "then finds, for each "
        "response, the constraint's phrases that occur in a reference and in the response, "
        "and each constraint's "
        "echo (its highest cosine with a sentence of each response and summary). Only what is missing "
        "is computed. The embedder: --embedder, else [build] embedder, else mpnet (the "
        "paper's model); lexical "
        "(or none) stores word overlap instead, without a model.",
    )
    p.add_argument("--embedder", default=None,
                   help="mpnet (default) | minilm | hash | lexical | a sentence-transformers model folder")
    p.add_argument("--run", default=None, help="only this run's instructions (default: every instruction)")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from pipeline.cli.common import console, open_store_from
    from pipeline.cli.corpus_cmd import rich_progress
    from pipeline.core.config import load_config
    from pipeline.stages.copy_evidence import compute_copy_evidence
    from pipeline.stages.echo import compute_echo
    from pipeline.stages.settings import section
    from pipeline.stages.similarity import compute_for_run, resolve_embedder, similarity_method

    config = load_config(args.config, need_keys=False)  # calls no endpoint: no key needed
    name = args.embedder or section(config, "build").embedder
    where = "--embedder" if args.embedder else f"{config.path or 'config'} [build] embedder"
    embedder = resolve_embedder(name, where)
    store = open_store_from(args, create=False)
    out = console()
    try:
        with rich_progress(out) as hook:
            stored = compute_for_run(store, embedder, run_id=args.run, progress=hook)
            copied = compute_copy_evidence(store, run_id=args.run, progress=hook)
            echoed = compute_echo(store, embedder, run_id=args.run,
                                  progress=hook) if embedder is not None else 0
    finally:
        store.close()
    method = similarity_method(embedder)
    if args.json:
        print(json.dumps({"method": method, "stored": stored, "copy_evidence": copied, "echo": echoed,
                          "run": args.run}))
        return 0
    scope = f"run {args.run}" if args.run else "the store"
    out.print(f"similarity by [bold]{method}[/]: {stored} constraints of {scope} computed and stored"
              + ("" if stored else " (every constraint already had one)"))
    out.print(f"copy evidence: {copied} (response, constraint) pairs computed"
              + ("" if copied else " (every pair already had it)"))
    out.print(f"the constraint's echo: {echoed} (text, constraint) pairs computed"
              + (" (every pair already had it)" if embedder is not None and not echoed
                 else " (needs an embedder: not with lexical)" if embedder is None else ""))
    return 0
