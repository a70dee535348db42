"""The report as text: every table as a Sheet (pipeline.outputs.tables), every line as a Note and the
top of the suspicion ranking as Suspects, in the order `report` prints them. ``render`` prints them
fitted to the console's width (a terminal's; piped, COLUMNS or 100: no line wider); ``write_format``
writes the same report as markdown (tables no wider than 100 characters, split by concern as a
terminal splits them), CSV (one rectangular table: a ``table`` column first) or JSON (numbers as
numbers, an interval as [low, high], missing as null), and ``write_csv_tables`` one CSV a table.
Every interval is written as pipeline.core.intervals writes it. A line sends the reader to a file
("see comparisons.csv") only when that file was written. Nothing is computed here: the numbers are
pipeline.analysis.report_model's.
"""

from __future__ import annotations

import csv
import json
import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pipeline.analysis.gate import CHECKS, PAPER_REPLACED, GateSummary
from pipeline.analysis.judge_validation import describe as describe_judge
from pipeline.analysis.metrics import Comparison, Filters, Group, runs_covered
from pipeline.analysis.model_duel import COPY_PASTE
from pipeline.analysis.report_model import (
    Report,
    any_corrected,
    condition_order,
    corrected_group,
    main_groups,
    pct,
    ranking_changes,
)
from pipeline.analysis.suspicion import Queue
from pipeline.core.definitions import SIGNIFICANCE, same_ratio
from pipeline.core.intervals import ci
from pipeline.outputs.copy_report import copying_document
from pipeline.outputs.suspicion import (
    MISSING_COPY,
    reasons_legend,
    report_heading,
    report_items,
    report_lines,
    wrap_report_lines,
)
from pipeline.outputs.tables import Block, Cell, Sheet, Value, figure, markdown, records, render_sheet, slug

if TYPE_CHECKING:
    from rich.console import Console

FORMATS = ("text", "markdown", "csv", "json")


@dataclass(frozen=True)
class Note:
    """A line of the report between its tables; ``style``: how a terminal shows it (rich style)."""

    text: str
    style: str = ""


@dataclass(frozen=True)
class Suspects:
    """The "Most suspicious" section: the top of the suspicion ranking (pipeline.outputs.suspicion)."""

    queue: Queue


Item = Sheet | Note | Suspects


def writer_label(model: str, mode: str, modes: set[str]) -> str:
    """The model and its response mode, always: a table of direct responses says so too."""
    return f"{model}/{mode}" if mode else model


def _writer(model: str, mode: str, modes: set[str]) -> Value:
    """A row's writer: its label, and as data its model and mode apart (machine names WRITER)."""
    return Value(writer_label(model, mode, modes), (model, mode))


# The machine names of a writer's column ("model"): its model and its mode.
WRITER: dict[str, str | tuple[str, ...]] = {"model": ("model", "mode")}


def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def empty_message(filters: Filters) -> str:
    active = {k: v for k, v in vars(filters).items() if v}
    where = f" matching {active}" if active else ""
    return (f"Nothing to report: no judged responses{where} in this store. Run `unspecific build` and "
            "`unspecific evaluate` first (or check --run / --domain).")


def validation_caption(report: Report) -> tuple[str, bool]:
    """Under each table: which validation corrected the rates, or why they are raw (and the one
    command that validates an unvalidated judge); True when the rates are raw."""
    c = report.correction
    if c is None or not c.judges:
        return "", False
    reasons = {g.reason for g in c.groups.values() if g.reason}
    if reasons:
        return "raw rates, not corrected for the judges' error: " + "; ".join(sorted(reasons)), True
    from pipeline.analysis.correction import CONSTRUCTED, source_name

    used = "; ".join(f"{s.judge}: {source_name(s.check.source) if s.check else 'none'}" for s in c.judges)
    out = ("corr.: corrected for each judge's measured sensitivity and specificity "
           "(Rogan-Gladen, judge by judge; "
           f"95% CI over the instructions and the check's items); validation used: {used}")
    if c.constructed_only:
        out += (f"; {', '.join(c.constructed_only)}: {CONSTRUCTED}, so these corrected rates assume the "
                "judge errs on these texts as on the constructed ones (label a real-text check: "
                "`unspecific validate judge-plan --by-verdict`, then Annotate)")
    return out, False


# -- the document --------------------------------------------------------------------------------


def document(report: Report, written: Sequence[Path] = ()) -> list[Item]:
    """Every table and line of the report, in order; ``written``: the files the report wrote, which its
    lines may send the reader to."""
    m = report.metrics
    if report.empty:  # nothing evaluated yet; what the build's gate did is known already
        return [Note(empty_message(report.options.filters)), *gate_document(report.gate)]
    out: list[Item] = []
    ratio = report.ratio
    if ratio is not None and not same_ratio(ratio, report.options.ratio):
        out.append(Note(f"no summaries at ratio {report.options.ratio:g}; showing ratio {ratio:g}", "yellow"))
    runs = runs_covered(m)
    if runs:
        out.append(Note(f"runs: {', '.join(runs)} (each pair of references counts once per "
                        "condition, model and mode: see README, 'Counting')"))
    groups = main_groups(report)
    modes = {g.mode for g in groups}
    for domain in sorted({g.domain for g in groups}):
        out.append(_main_sheet(report, [g for g in groups if g.domain == domain], domain, modes))
    if report.warnings:
        out.append(Note(f"! {len(report.warnings)} warning(s): figures not to trust as they stand",
                        "bold red"))
        out += [Note(f"  ! {w.message}") for w in report.warnings]
    out += copying_document(report.copying, lambda model, mode: _writer(model, mode, modes))
    out += gate_document(report.gate)
    out += _families(report)
    out += _models_compared(report)
    if len(m.ratios) > 1:
        out += _depth(report)
    if m.agreement:
        sheet = Sheet("Judge agreement", ("judge", "judge"),
                      (Block("", ("texts", "κ", "agree %", "items")),), name="judge_agreement")
        for a in m.agreement:
            sheet.add(a.rater_a, a.rater_b, a.kind, _num(a.kappa), pct(a.percent), str(a.n))
        out.append(sheet)
    elif len(m.raters) == 1:
        out.append(Note(f"one judge ({m.raters[0]}): no judge agreement to report; the paper averages two"))
    out += _judges(report)
    out += _comparisons(report, written)
    if report.naturalness:
        sheet = Sheet("Naturalness (pairwise preference in both orders; ties count half)",
                      ("condition", "vs"),
                      (Block("", ("n", "win rate % [CI]", "W/T/L", "first shown wins % [CI]",
                                  "orders agree % [CI]",
                                  "pairs")),), name="win_rates", names={"W/T/L": ("wins", "ties", "losses")})
        for w in report.naturalness:
            sheet.add(w.condition, w.opponent, str(w.n), figure(w.rate),
                      Value(f"{w.wins}/{w.ties}/{w.losses}", (w.wins, w.ties, w.losses)),
                      figure(w.first_shown), figure(w.order_agreement), str(w.both_orders))
        out.append(sheet)
    if report.validation is not None:
        v = report.validation
        where = f"plan {v.plan.name}, " if v.plan else ""
        out.append(Note(
            f"Human validation ({where}ratio {v.ratio:g}; label superficial = positive, "
            "weighted by stratum as"
            f" `validate report`; ambiguous left out: {v.ambiguous}; ties: {v.ties}; "
            "outside the metric's scope:"
            f" {v.out_of_scope}): precision {ci(v.precision)}, recall {ci(v.recall)} (%), n = {v.n}"))
        out += [Note(f"  annotators {pair.annotator_a} / {pair.annotator_b}: κ {_num(pair.kappa.value)}, "
                     f"agree {pct(pair.percent)}%, n = {pair.kappa.n}") for pair in report.annotators]
    if report.suspicious is not None:
        out.append(Suspects(report.suspicious))
    return out


def _written(written: Sequence[Path], name: str) -> Path | None:
    """The file of that name the report wrote, if it wrote one."""
    return next((path for path in written if path.name == name), None)


def _main_sheet(report: Report, groups: Sequence[Group], domain: str, modes: set[str]) -> Sheet:
    """Org and Core per condition x model: rates; corrected rates (where a judge's error is measured);
    judges and coverage; copying (where computed)."""
    ratio = report.ratio
    core = f"Core@{ratio:g}" if ratio is not None else "Core"
    extra = {name for g in groups for name in g.extra}
    blocks = [Block("rates", ("Org", core, "superficial"))]
    corrected = any_corrected(report)
    if corrected:
        blocks.append(Block("corrected rates", ("Org corr.", f"{core} corr.", "superficial corr.")))
    blocks.append(Block("judges and coverage", ("judge κ", "n", "coverage %")))
    copy_heads: tuple[str, ...] = ()
    if "copy_a_ngrams" in extra:
        copy_heads += ("copied 5-grams A/B", "copied words A/B %")
    if "sim_ref_a" in extra:
        copy_heads += ("c-ref cos A/B", "c-ref lex A/B", "c-resp cos")
    if copy_heads:
        blocks.append(Block("copying", copy_heads))
    caption, _ = validation_caption(report)
    sheet = Sheet(f"{domain}: Org and Core (% of constraints, bootstrap 95% CI over instructions)",
                  ("condition", "model"), tuple(blocks), caption=caption, name=f"org_core_{slug(domain)}",
                  names={**WRITER, "copied 5-grams A/B": ("copied_5_grams_a", "copied_5_grams_b"),
                         "copied words A/B %": ("copied_words_a_pct", "copied_words_b_pct"),
                         "c-ref cos A/B": ("c_ref_cos_a", "c_ref_cos_b"),
                         "c-ref lex A/B": ("c_ref_lex_a_pct", "c_ref_lex_b_pct")})
    for g in sorted(groups, key=lambda g: (condition_order(g.condition), g.model, g.mode)):
        cells: list[Cell] = [g.condition, _writer(g.model, g.mode, modes), figure(g.org), figure(g.core),
                             figure(g.superficial)]
        if corrected:
            r = corrected_group(report, g.key).rates
            cells += [figure(r.org), figure(r.core), figure(r.superficial)] if r else ["-", "-", "-"]
        cells += [_num(g.kappa), str(g.n), _pair((g.coverage,), 100, 1, " !" if report.warned(g) else "")]
        e = g.extra
        if "copy_a_ngrams" in extra:
            cells.append(_pair((e.get("copy_a_ngrams"), e.get("copy_b_ngrams")), 1, 1))
            cells.append(_pair((e.get("copy_a_share"), e.get("copy_b_share")), 100, 1))
        if "sim_ref_a" in extra:
            cells.append(_pair((e.get("sim_ref_a"), e.get("sim_ref_b")), 1, 2))
            cells.append(_pair((e.get("lex_ref_a"), e.get("lex_ref_b")), 100, 1))
            cells.append(_num(e.get("sim_response")))
        sheet.add(*cells)
    return sheet


def _pair(values: tuple[float | None, ...], scale: float, digits: int, mark: str = "") -> Value:
    """Numbers shown side by side ("3.1 / 2.0"), each times ``scale`` ('-' for none), and ``mark`` after."""
    shown = [None if x is None or math.isnan(x) else round(scale * x, digits) for x in values]
    return Value(" / ".join("-" if x is None else f"{x:.{digits}f}" for x in shown) + mark, tuple(shown))


def _depth(report: Report) -> list[Item]:
    m = report.metrics
    ratios = sorted(m.ratios, reverse=True)
    sheet = Sheet("Depth profile: Core across summary ratios (%)", ("domain", "condition", "model"),
                  (Block("", ("Org", *[f"Core@{r:g}" for r in ratios])),), name="depth_profile", names=WRITER)
    keys = sorted({g.key[:4] for g in m.groups if g.ratio is not None},
                  key=lambda k: (k[0], condition_order(k[1]), k[2], k[3]))
    modes = {k[3] for k in keys}
    for domain, condition, model, mode in keys:
        org = m.group(domain, condition, model, mode, None)
        cells = [pct(g.core.value) if (g := m.group(domain, condition, model, mode, r)) else "-"
                 for r in ratios]
        sheet.add(domain, condition, _writer(model, mode, modes), pct(org.org.value) if org else "-", *cells)
    changed = ranking_changes(m)
    return [sheet, Note("model ranking by Core changes with the ratio in: " + "; ".join(changed), "bold")
            if changed else Note("model ranking by Core is the same at every ratio")]


def _judges(report: Report) -> list[Item]:
    m = report.metrics
    out: list[Item] = []
    if report.judging:
        out.append(Note("How each judge judged:"))
        out += [Note(f"  {note.line()}") for note in report.judging]
    if m.raters:
        out.append(Note("Judges against people (every number above rests on them):"))
        out += [Note(f"  {describe_judge(rater, report.judges_validated)}") for rater in m.raters]
    if report.correction is not None and report.correction.judges:
        out.append(Note("Judges' measured error (the corrected rates, 'corr.', use it):"))
        out += [Note(f"  {status.line()}") for status in report.correction.judges]
        out += [Note(f"  {line}", "yellow") for line in report.correction.standing]
    return out


def _comparisons(report: Report, written: Sequence[Path]) -> list[Item]:
    out: list[Item] = []
    tested = [c for c in report.comparisons if not math.isnan(c.test.p_value)]
    file = _written(written, "comparisons.csv")
    if tested:
        significant = [c for c in tested if c.p_holm < SIGNIFICANCE]
        listed = significant and len(significant) <= 12
        where = (f"; every test is in {file}" if file
                 else "; `report --out DIR` writes every test to comparisons.csv")
        out.append(Note(f"{len(significant)} of {len(tested)} paired comparisons (model pairs "
                        "within a condition, "
                        f"condition pairs within a model, response modes) differ at p < "
                        f"{SIGNIFICANCE:g} after Holm"
                        " correction" + (":" if listed else where)))
        if significant and len(significant) <= 12:
            out += [Note(f"  {c.domain} {c.within}: {_difference(c)}, p_holm {c.p_holm:.3f})")
                    for c in significant]
    if report.requested:
        out += _requested(report.requested, file)
    elif report.options.compare:
        first, second = report.options.compare
        out.append(Note(f"--compare {first},{second}: no instructions where both were judged", "yellow"))
    return out


def _difference(c: Comparison) -> str:
    """'core m1 61.2 vs m2 40.3 (+20.9 points'; the copy-paste score is a cosine: '0.77 vs 0.75 (+0.02'."""
    t = c.test
    if c.metric == COPY_PASTE:
        return f"{c.metric} {c.a} {t.mean_a:.2f} vs {c.b} {t.mean_b:.2f} ({t.diff:+.2f}"
    return f"{c.metric} {c.a} {pct(t.mean_a)} vs {c.b} {pct(t.mean_b)} ({100 * t.diff:+.1f} points"


def _requested(comparisons: list[Comparison], file: Path | None) -> list[Item]:
    first = comparisons[0]
    by = "reference article" if first.by == "condition" else "instruction"
    sheet = Sheet(f"{first.a} vs {first.b} (paired by {by}; sign-flip permutation test)",
                  ("domain", "within", "metric"),
                  (Block("", (first.a, first.b, "difference [95% CI]", "p", "p Holm")),), name="compare",
                  names={first.a: "mean_a", first.b: "mean_b"})
    for c in comparisons:
        t = c.test
        diff = figure((t.diff, t.low, t.high), signed=True)
        p = "-" if math.isnan(t.p_value) else _marked(round(t.p_value, 3), t.significant())
        holm_p = "-" if math.isnan(c.p_holm) else _marked(round(c.p_holm, 3), c.p_holm < SIGNIFICANCE)
        sheet.add(c.domain, c.within, c.metric, pct(t.mean_a), pct(t.mean_b), diff, p, holm_p)
    return [sheet, Note(f"* p < {SIGNIFICANCE:g}; p Holm corrects for every comparison the report made"
                        + (f" (every one is in {file})" if file else ""))]


def _marked(p: float, significant: bool) -> Value:
    """A p-value, starred when significant."""
    return Value(f"{p:.3f}" + (" *" if significant else ""), (p,))


def gate_document(rows: Sequence[GateSummary]) -> list[Item]:
    """The constraint gate per condition and stage: candidates written, the share each check rejected,
    kept of wanted; revision's replaced share beside the paper's; an import's share that would pass."""
    if not rows:
        return []
    checks = [c for c in CHECKS if any(r.rejected.get(c) for r in rows)]
    sheet = Sheet("Constraint gate: candidates the generator wrote, the share each check rejected (%), "
                  "kept of wanted (imports: checked, not changed)", ("condition", "stage"),
                  (Block("", ("instructions", "written", *(f"{c} %" for c in checks), "kept", "short",
                              "replaced %")),), name="constraint_gate")
    for r in rows:
        shares = [f"{100 * s:.0f}" if (s := r.share(c)) is not None else "-" for c in checks]
        replaced = f"{100 * r.replaced_share:.0f}" if r.replaced_share is not None else "-"
        sheet.add(r.condition, r.stage, str(r.instructions), str(r.written), *shares,
                  f"{r.kept} of {r.wanted}", str(r.short), replaced)
    low, high = PAPER_REPLACED
    out: list[Item] = [sheet]
    if any(r.stage == "revision" and r.condition == "eval" for r in rows):
        out.append(Note(f"  replaced %: of the revised instructions' constraints; the paper's eval revision "
                        f"replaced {100 * low:.0f}-{100 * high:.0f}% of common constraints"))
    return out


def _families(report: Report) -> list[Item]:
    """Per import run with families: level x model, Org (and Core where summaries exist)."""
    out: list[Item] = []
    for run_id in sorted({f.run_id for f in report.families}):
        rows = [f for f in report.families if f.run_id == run_id]
        modes = {f.mode for f in rows}
        writers = sorted({(f.model, f.mode) for f in rows})
        with_core = {(f.model, f.mode) for f in rows if f.ratio is not None}
        core_label = f"Core@{report.ratio:g}" if report.ratio is not None else "Core"
        blocks = []
        for model, mode in writers:
            label = writer_label(model, mode, modes)
            blocks.append(Block(label,
                                (f"{label} Org", *([f"{label} {core_label}"] if (model, mode) in with_core
                                                         else []))))
        blocks.append(Block("instructions", ("n",)))
        sheet = Sheet(f"{run_id}: satisfaction by number of constraints (% of constraints, "
                      "bootstrap 95% CI over"
                      " instructions; one family per task)", ("constraints",), tuple(blocks),
                      name=f"families_{slug(run_id)}")
        by_cell = {(f.level, f.model, f.mode): f for f in rows}
        for level in sorted({f.level for f in rows}):
            cells: list[Cell] = [str(level)]
            n = 0
            for model, mode in writers:
                f = by_cell.get((level, model, mode))
                cells.append(figure(f.org) if f else "-")
                if (model, mode) in with_core:
                    cells.append(figure(f.core) if f else "-")
                n = max(n, f.n if f else 0)
            sheet.add(*cells, str(n))
        out.append(sheet)
    return out


def _models_compared(report: Report) -> list[Item]:
    """Every model pair on the same instructions, each model's refusals (pipeline.outputs.models_report)."""
    from pipeline.outputs.models_report import models_document

    return models_document(report)


# -- output ----------------------------------------------------------------------------------------


def render(report: Report, console: Console, written: Sequence[Path] = ()) -> None:
    """The report on a console: each table in the layout that fits its width (pipeline.outputs.tables),
    each line wrapped between words under its own indent, no line wider than the console."""
    from rich.text import Text

    for item in document(report, written):
        if isinstance(item, Sheet):
            render_sheet(console, item)
        elif isinstance(item, Suspects):
            lines = report_lines(item.queue)
            console.print()
            for line in _wrap(lines[0], console.width):
                console.print(Text(line, style="bold"), crop=False)
            # Each item's first line starts with its rank (grep finds it), the rest indented under it.
            for line in wrap_report_lines(lines[1:], console.width):
                console.print(Text(line), crop=False)
        else:
            for line in _wrap(item.text, console.width):
                console.print(Text(line, style=item.style), crop=False)


def _wrap(line: str, width: int) -> list[str]:
    """A line wrapped between words at ``width``, its continuation two columns past its indent."""
    lead = len(line) - len(line.lstrip(" "))
    return textwrap.wrap(line, max(width, lead + 22), subsequent_indent=" " * (lead + 2),
                         break_on_hyphens=False) or [""]


def _markdown_blocks(items: Sequence[Item]) -> list[str]:
    """Each table, each run of lines as one paragraph (an indented line as a list item), and the
    suspicion list as a numbered list."""
    blocks: list[str] = []
    lines: list[str] = []
    for item in [*items, None]:
        if isinstance(item, Note):
            lines.append(f"- {item.text.strip()}" if item.text.startswith(" ") else item.text)
            continue
        if lines:
            blocks.append("\n".join(lines))
            lines = []
        if isinstance(item, Sheet) and item.rows:
            blocks.append(markdown(item))
        elif isinstance(item, Suspects):
            blocks.append(_markdown_suspects(item.queue))
    return blocks


def _markdown_suspects(queue: Queue) -> str:
    """"Most suspicious" in markdown: a numbered list, each item's reasons under it."""
    out = [f"**{report_heading(queue)}**", ""]
    if queue.copy_evidence_missing:
        out += [f"({MISSING_COPY})", ""]
    for item in report_items(queue):
        writer = f"{item['model']}/{item['mode']}" if item["mode"] else item["model"]
        constraint = item["constraint"].replace("\n", " ")
        out.append(f"{item['rank']}. **{item['score']:.2f}** instruction {item['instruction_id']}"
                   f" #{item['position']} {writer}: {constraint}")
        indent = " " * len(f"{item['rank']}. ")  # the reasons nest under their item
        out += [f"{indent}- {reason}" for reason in item["reasons"]]
    if not queue:
        out.append("none")
    return "\n".join([*out, "", reasons_legend()])


def _suspects_records(queue: Queue) -> list[dict[str, Any]]:
    """The suspicion list as CSV rows: its reasons joined by '; '."""
    return [{**item, "reasons": "; ".join(item["reasons"])} for item in report_items(queue)]


def _tables(items: Sequence[Item], *, flat: bool) -> list[tuple[str, list[dict[str, Any]], Sheet | None]]:
    """Every table of the report as (name, rows as data, its sheet): the sheets', then the suspicion
    list's (named 'suspicious')."""
    out: list[tuple[str, list[dict[str, Any]], Sheet | None]] = []
    names: set[str] = set()
    for item in items:
        if isinstance(item, Sheet) and item.rows:
            name, rows, sheet = item.name or slug(item.title), records(item, flat=flat), item
        elif isinstance(item, Suspects):
            rows = _suspects_records(item.queue) if flat else report_items(item.queue)
            name, sheet = "suspicious", None
        else:
            continue
        unique, k = name, 1
        while unique in names:  # two tables of one name (two domains of one slug): the second numbered
            k += 1
            unique = f"{name}_{k}"
        names.add(unique)
        out.append((unique, rows, sheet))
    return out


def _columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(key for row in rows for key in row))


def _csv(rows: Sequence[dict[str, Any]], columns: Sequence[str], out: IO[str]) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([row.get(c) for c in columns] for row in rows)


def write_format(report: Report, fmt: str, out: IO[str], written: Sequence[Path] = ()) -> None:
    """The report as ``fmt``: markdown (every table, line and the suspicion list), csv (every table as
    one: its ``table`` column names the table) or json (tables, the suspicion list and the lines);
    ``written``: the files the report wrote (document)."""
    items = document(report, written)
    if fmt == "markdown":
        out.write("\n\n".join(_markdown_blocks(items)) + "\n")
    elif fmt == "csv":
        rows = [{"table": name, **row} for name, data, _ in _tables(items, flat=True) for row in data]
        _csv(rows, _columns(rows), out)
    elif fmt == "json":
        tables = [{"name": name, "title": sheet.title, "columns": _columns(data), "rows": data,
                   "caption": sheet.caption} for name, data, sheet in _tables(items, flat=False) if sheet]
        suspects = next((i.queue for i in items if isinstance(i, Suspects)), None)
        notes = [i.text for i in items if isinstance(i, Note)]
        listed = {"suspicious": None, "suspicious_total": None} if suspects is None else {
            "suspicious": report_items(suspects), "suspicious_total": max(suspects.total, len(suspects))}
        out.write(json.dumps({"ratio": report.ratio, "tables": tables, **listed, "notes": notes},
                             ensure_ascii=False, indent=2, allow_nan=False) + "\n")
    else:
        raise ValueError(f"unknown format {fmt!r}: choose from {', '.join(FORMATS)}")


def write_csv_tables(report: Report, out_dir: str | Path, written: Sequence[Path] = ()) -> list[Path]:
    """Every table of the report (the suspicion list as ``suspicious``) as a CSV file of its own in
    ``out_dir``, named by the table; return the files written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data, _ in _tables(document(report, written), flat=True):
        path = out / f"{name}.csv"
        with path.open("w", newline="", encoding="utf-8") as fh:
            _csv(data, _columns(data), fh)
        paths.append(path)
    return paths

