"""`unspecific import`: bring in other benchmarks' constraint lists, the research code's CSV
outputs, a plain JSONL form, or responses written by another harness (pipeline.importing)."""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.core.definitions import DEFAULT_RATIO

# --<name>-column option for each configurable research-code column
# (pipeline.importing.common.ResearchColumns).
_COLUMN_HELP = {
    "id": "the row id that joins a run's files", "instruction": "the main task",
    "constraints": "numbered constraints",
    "original": "a revision's original constraints", "revised": "a revision's revised constraints",
    "article": "the source article of a single-article constraints file", "reference": "reference article A",
    "reference_b": "reference article B", "base": "the constraint-blind base article",
    "content": "a response edited from the base article (mode edit)", "direct": "a response written directly",
    "model": "the model that wrote the row (a summary file: the summariser)",
    "summary": "a response's summary",
    "summary_ratio": "the summary's target ratio", "error": "the summariser's failure note",
    "results": "the judge's numbered Yes/No lines", "num_satisfied": "the research count of Yes lines",
    "eval_model": "the judge model",
}


def register(sub: argparse._SubParsersAction) -> None:
    from pipeline.importing.common import FORMATS, ResearchColumns

    defaults = ResearchColumns()
    p = sub.add_parser(
        "import", help="import constraint lists, research-code CSVs, JSONL instructions or responses",
        description="Formats: cs4 (CS4's released CSVs), research (the UNSPECIFIC research "
                    "code's CSV outputs, read "
        "as its writers write them: give a run's files or its folder together, in any order), jsonl (one "
        "instruction a line: id, instruction, "
        "constraints, optional condition, domain, reference, reference_b), responses (one response a line: "
        "instruction, model, mode, text), inspect (an inspect_ai log, .eval or .json, of a benchmark "
        "`export --format inspect` wrote: its responses, summaries and verdicts), lm-eval "
        "(lm-evaluation-harness's --log_samples file of an `export --format lm-eval` task: its responses). "
        "An import is one transaction: a bad row rolls it all "
        "back; importing the same file again adds nothing.",
    )
    # Metavars, not the choices argparse would print in the usage and again in the list: each
    # set of values is named once in the help (the formats in the description).
    p.add_argument("format", choices=FORMATS, metavar="FORMAT",
                   help="what the file holds: one of the formats above")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="the file to import; research: a run's files, or a folder of them (its .csv files)")
    p.add_argument("--name",
                   help="the import's name (default: the file's stem; research: the folder of a run's "
                                  "files); its run id is import-NAME")
    p.add_argument("--domain", help="domain of the instructions (default: story for cs4, news for research, "
                                    "the line's own or 'imported' for jsonl)")
    p.add_argument("--condition", help="single | common+none | common+direct | common+eval (default: single; "
                                       "research: what the files say, a hardened file "
                                       "common+eval when the base "
                                       "article's evaluation is among them, else common+direct)")
    p.add_argument("--run", help="responses: the import name or run id whose instruction ids the file uses "
                                 "(default: store instruction ids)")
    p.add_argument("--ratio", type=float, default=DEFAULT_RATIO,
                   help=f"research: the summaries' target ratio, its --target-length-pct "
                        f"(default {DEFAULT_RATIO})")
    p.add_argument("--evaluated", choices=("response", "summary", "base"), default=None, metavar="TEXT",
                   help="research: the text an evaluation file judged (its --content-column): "
                        "response, summary or "
                   "base (default: the row's most derived text, in that order)")
    p.add_argument("--model", help="inspect, lm-eval: the name the responses' model is stored under "
                                   "(default: the log's model; lm-eval: the results file's model_name)")
    p.add_argument("--dry-run", action="store_true", help="check and count everything, write nothing")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    columns = p.add_argument_group("research-code column names")
    for name, text in _COLUMN_HELP.items():
        columns.add_argument(f"--{name.replace('_', '-')}-column", dest=f"column_{name}",
                             default=getattr(defaults, name),
                             metavar="NAME", help=f"{text} (default {getattr(defaults, name)!r})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from pipeline.cli.common import console, open_store_from
    from pipeline.importing.common import ImportOptions, ResearchColumns
    from pipeline.importing.importer import describe, import_file
    from pipeline.importing.research import import_research_run

    columns = ResearchColumns(**{name: getattr(args, f"column_{name}") for name in _COLUMN_HELP})
    paths, found_in_folder = _paths(args.format, args.files)
    options = ImportOptions(format=args.format, path=paths[0], name=args.name, domain=args.domain,
                            condition=args.condition, run=args.run, ratio=args.ratio, judged=args.evaluated,
                            columns=columns, dry_run=args.dry_run, model=args.model)
    from pipeline.importing.gate_check import ImportCheck, check_import

    store = open_store_from(args, create=True)
    try:
        summary = (import_research_run(store, options, paths, found_in_folder) if args.format == "research"
                   else import_file(store, options))
        checked = check_import(store, summary.run_id) if not summary.dry_run else ImportCheck()
    finally:
        store.close()
    if args.json:
        print(json.dumps({"run_id": summary.run_id, "file": str(summary.path), "rows": summary.rows,
                          "domain": summary.domain, "condition": summary.condition,
                          "added": dict(summary.added),
                          "skipped": dict(summary.skipped), "dry_run": summary.dry_run,
                          "files": summary.files,
                          "warnings": summary.warnings,
                          "gate": checked.summary.as_dict() if checked.instructions else None}))
        return 0
    out = console()
    for line in [*summary.files, *describe(summary), *(f"  warning: {w}" for w in summary.warnings),
                 *(f"  {line}" for line in checked.lines())]:
        out.print(line, markup=False, highlight=False, soft_wrap=True)  # paths stay whole, to copy
    return 0


def _paths(format: str, given: list[str]) -> tuple[list[Path], frozenset[Path]]:
    """The files to import, and those found in a folder: research takes a run's files and folders
    (their .csv files, by name); every other format one file."""
    from pipeline.importing.common import ImportFailed

    if format != "research":
        if len(given) > 1:
            raise ImportFailed(f"{format}: one file at a time (got {len(given)}); only "
                               "research takes a run's files")
        return [Path(given[0])], frozenset()
    paths: list[Path] = []
    in_folders: set[Path] = set()
    for name in given:
        path = Path(name)
        if path.is_dir():
            found = sorted(path.glob("*.csv"))
            if not found:
                raise ImportFailed(f"{path}: a folder with no .csv files")
            paths += found
            in_folders.update(found)
        else:
            paths.append(path)
    return list(dict.fromkeys(paths)), frozenset(in_folders - {Path(name) for name in given})
