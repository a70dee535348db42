"""`unspecific import`: bring in other benchmarks' constraint lists, the research code's CSV
outputs, a plain JSONL form, or responses written by another harness (pipeline.importing)."""

from __future__ import annotations

import argparse

from pipeline.core.definitions import DEFAULT_RATIO

# --<name>-column option for each configurable research-code column (pipeline.importing.common.ResearchColumns).
_COLUMN_HELP = {
    "id": "the row id that joins the stage files", "instruction": "the main task", "constraints": "numbered constraints",
    "reference": "reference article A", "reference_b": "reference article B", "base": "the constraint-blind base article",
    "content": "the response (fitted content)", "model": "the model that wrote the response",
    "mode": "direct | edit", "summary": "the response's summary", "summary_ratio": "the summary's target ratio",
    "results": "the judge's numbered Yes/No lines", "eval_model": "the judge model",
    "evaluated": "which text the results judge: response | summary | base",
}


def register(sub: argparse._SubParsersAction) -> None:
    from pipeline.importing.common import FORMATS, ResearchColumns

    defaults = ResearchColumns()
    p = sub.add_parser(
        "import", help="import constraint lists, research-code CSVs, JSONL instructions or responses",
        description="Formats: cs4 (CS4's released CSVs), research (the UNSPECIFIC research code's CSV outputs; "
        "import its stage files one by one under the same --name), jsonl (one instruction a line: id, instruction, "
        "constraints, optional condition, domain, reference, reference_b), responses (one response a line: "
        "instruction, model, mode, text). An import is one transaction: a bad row rolls it all back; importing the "
        "same file again adds nothing.",
    )
    p.add_argument("format", choices=FORMATS, help="what the file holds")
    p.add_argument("file", help="the file to import")
    p.add_argument("--name", help="the import's name (default: the file's stem); its run id is import-NAME")
    p.add_argument("--domain", help="domain of the instructions (default: story for cs4, news for research, "
                                    "the line's own or 'imported' for jsonl)")
    p.add_argument("--condition", help="single | common+none | common+direct | common+eval (default: single; "
                                       "research: common+none)")
    p.add_argument("--run", help="responses: the import name or run id whose instruction ids the file uses "
                                 "(default: store instruction ids)")
    p.add_argument("--ratio", type=float, default=DEFAULT_RATIO,
                   help=f"research: summary ratio when no column says (default {DEFAULT_RATIO})")
    p.add_argument("--evaluated", choices=("response", "summary", "base"), default="response",
                   help="research: the text an evaluation file's results judge, when no column says (default response)")
    p.add_argument("--dry-run", action="store_true", help="check and count everything, write nothing")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    columns = p.add_argument_group("research-code column names")
    for name, text in _COLUMN_HELP.items():
        columns.add_argument(f"--{name.replace('_', '-')}-column", dest=f"column_{name}", default=getattr(defaults, name),
                             metavar="NAME", help=f"{text} (default {getattr(defaults, name)!r})")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from pipeline.cli.common import console, open_store_from
    from pipeline.importing.common import ImportOptions, ResearchColumns
    from pipeline.importing.importer import describe, import_file

    columns = ResearchColumns(**{name: getattr(args, f"column_{name}") for name in _COLUMN_HELP})
    options = ImportOptions(format=args.format, path=Path(args.file), name=args.name, domain=args.domain,
                            condition=args.condition, run=args.run, ratio=args.ratio, evaluated=args.evaluated, columns=columns,
                            dry_run=args.dry_run)
    store = open_store_from(args)
    try:
        summary = import_file(store, options)
    finally:
        store.close()
    if args.json:
        print(json.dumps({"run_id": summary.run_id, "file": str(summary.path), "rows": summary.rows,
                          "domain": summary.domain, "condition": summary.condition, "added": dict(summary.added),
                          "skipped": dict(summary.skipped), "dry_run": summary.dry_run}))
        return 0
    out = console()
    for line in describe(summary):
        out.print(line, markup=False, highlight=False)
    return 0
