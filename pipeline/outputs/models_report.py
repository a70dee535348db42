"""The report's "Models compared" section (pipeline.analysis.model_duel's numbers): per model pair a
table (metric, each model's value with its interval, the difference with its interval, p, p Holm),
the one sentence saying which model follows more deeply and whether this benchmark can tell, what
the Holm family is, and each model's refusals. As text (Sheets and Notes of
pipeline.outputs.report_text), as the rows of model_comparisons.csv, and the words the HTML report
(pipeline.outputs.html_models) says too. Nothing is computed here.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pipeline.analysis.model_duel import COPY_PASTE, DuelRow, ModelDuel, ModelPair, RefusalCount
from pipeline.analysis.report_model import pct
from pipeline.core.definitions import SIGNIFICANCE
from pipeline.outputs.tables import Block, Cell, Sheet, Value, figure, slug

if TYPE_CHECKING:
    from pipeline.analysis.report_model import Report

HEADING = "Models compared"
DIFFERENCE = "difference [95% CI]"
# The depth metrics of the sentence, as it says a model is ahead on each.
_AHEAD = {"core": "higher Core", "superficial": "less superficial", COPY_PASTE: "less copy-paste"}


def metric_label(metric: str, ratio: float | None) -> str:
    core = f"Core@{ratio:g}" if ratio is not None else "Core"
    return {"org": "Org", "core": core, "superficial": "superficial", "gap": "Org-Core gap",
            COPY_PASTE: COPY_PASTE}.get(metric, metric)


def _scale(metric: str) -> dict[str, Any]:
    """Rates in %, the copy-paste score a cosine (as the copying section writes it)."""
    return {"scale": 1.0, "digits": 2} if metric == COPY_PASTE else {}


def value_cell(metric: str, iv: Any) -> Cell:
    """A side's value and its interval."""
    return figure(iv, **_scale(metric))


def diff_cell(row: DuelRow) -> Cell:
    """A - B with its paired interval: percentage points, or a cosine's difference."""
    t = row.comparison.test
    return figure((t.diff, t.low, t.high), signed=True, **_scale(row.comparison.metric))


def p_cell(p: float) -> Cell:
    """A p-value, starred when under SIGNIFICANCE."""
    return "-" if math.isnan(p) else Value(f"{p:.3f}" + (" *" if p < SIGNIFICANCE else ""), (round(p, 3),))


def _instructions(n: int) -> str:
    return f"{n} instruction{'' if n == 1 else 's'}"


def _claims(pair: ModelPair, model: str) -> str:
    """'higher Core in 4 of 4 tests and less superficial in 3 of 4': the depth tests significant after
    Holm in the model's favour."""
    said: list[str] = []
    for metric, k in pair.favours.get(model, {}).items():
        if k:
            tested = pair.tested[metric]
            unit = "" if said else " test" if tested == 1 else " tests"  # the first says what is counted
            said.append(f"{_AHEAD[metric]} in {k} of {tested}{unit}")
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]


def verdict_sentence(pair: ModelPair) -> str:
    """Which model follows more deeply (higher Core, less superficial, less copy-paste), and whether this
    benchmark's size can tell: one sentence."""
    a, b, n = pair.a, pair.b, pair.instructions
    if pair.verdict == "none":
        # Both may have answered: a pair needs each response's verdicts on it and on its summary.
        return (f"{a} and {b} have no instruction judged for both, on the response and its summary: "
                "this report cannot compare them yet.")
    fewest, most = pair.per_test
    each = f"{most} in each test" if fewest == most else f"{fewest} to {most} in a test"
    both = f"the {_instructions(n)} both answered ({each})"
    known = not (math.isnan(pair.core_a) or math.isnan(pair.core_b))
    if pair.verdict == "too_small":
        lead = ""
        if known and pair.core_a != pair.core_b:
            first, second = (a, b) if pair.core_a > pair.core_b else (b, a)
            high, low = max(pair.core_a, pair.core_b), min(pair.core_a, pair.core_b)
            lead = f" {first} has the higher Core ({pct(high)}% vs {pct(low)}% for {second}), but"
        return (f"On {both},{lead} no difference in Core, superficial share or copy-paste is significant"
                " after Holm: this benchmark is too small to tell which model follows more deeply.")
    if pair.verdict == "deeper":
        winner = pair.deeper or a
        loser = b if winner == a else a
        if known:
            mine, theirs = (pair.core_a, pair.core_b) if winner == a else (pair.core_b, pair.core_a)
            both = f"{both[:-1]}; Core {pct(mine)}% vs {pct(theirs)}%)"
        return (f"{winner} follows more deeply than {loser} on {both}: significant after Holm,"
                f" {_claims(pair, winner)}.")
    return (f"Neither model follows more deeply throughout on {both}: significant after Holm, {a} has"
            f" {_claims(pair, a)}, while {b} has {_claims(pair, b)}.")


def family_note(duel: ModelDuel) -> str:
    if not duel.family:
        return "p: no paired test yet: too few instructions both models answered in any condition"
    return (f"p Holm: adjusted over the report's whole family of {duel.family} paired tests (every model"
            " pair within a condition: Org, Core, superficial, gap, copy-paste; every condition pair within a"
            " model; direct vs edit); the copying section's single-vs-common tests are a family of their own."
            f" * p < {SIGNIFICANCE:g}")


def _refusal(r: RefusalCount) -> str:
    if r.flagged == r.responses:
        return f"{r.model} {r.refused} of {r.responses} responses"
    if not r.flagged:
        return f"{r.model} not checked ({r.responses} responses stored before the refusal flag)"
    return f"{r.model} {r.refused} of {r.flagged} checked ({r.responses - r.flagged} stored before the flag)"


def refusal_line(duel: ModelDuel) -> str:
    """'refusals: model-a 1 of 24 responses, model-b 0 of 24 responses'."""
    return ("refusals (responses that refuse the task, scored as the model's answers): "
            + ", ".join(_refusal(r) for r in duel.refusals))


def caption(pair: ModelPair) -> str:
    return ("each model's mean over the instructions both answered, bootstrap 95% CI (superficial: the mean"
            " of each response's share, where the main table pools); rates in %, copy-paste a cosine (each"
            f" constraint's highest with a response sentence, averaged); difference = {pair.a} - {pair.b},"
            " paired bootstrap CI; p: sign-flip permutation test")


def pair_sheet(pair: ModelPair, ratio: float | None) -> Sheet:
    sheet = Sheet(f"{HEADING}: {pair.a} vs {pair.b} (paired on the same instructions)",
                  ("domain", "condition", "metric"),
                  (Block("values", (pair.a, pair.b)), Block("difference", (DIFFERENCE, "p", "p Holm", "n"))),
                  caption=caption(pair), name=f"models_{slug(pair.a)}_vs_{slug(pair.b)}",
                  names={pair.a: "mean_a", pair.b: "mean_b"})
    for k, row in enumerate(pair.rows):
        c = row.comparison
        following = pair.rows[k + 1].comparison if k + 1 < len(pair.rows) else None
        last = following is not None and (following.domain, following.within) != (c.domain, c.within)
        sheet.add(c.domain, c.within, metric_label(c.metric, ratio), value_cell(c.metric, row.a),
                  value_cell(c.metric, row.b), diff_cell(row), p_cell(c.test.p_value), p_cell(c.p_holm),
                  str(c.test.n),
                  end_section=last)
    return sheet


def models_document(report: Report) -> list[Any]:
    """The section as the report prints it: per pair its table and sentence, the Holm family, the
    refusals (also with one model, where there is no pair)."""
    from pipeline.outputs.report_text import Note

    duel = report.models
    if duel is None or not duel.refusals:
        return []
    out: list[Any] = []
    for pair in duel.pairs:
        if pair.rows:
            out.append(pair_sheet(pair, report.ratio))
        out.append(Note(f"  {verdict_sentence(pair)}", "bold"))
    if any(p.rows for p in duel.pairs):
        out.append(Note(f"  {family_note(duel)}"))
    if duel.pairs and duel.copy_paste_missing:
        out.append(Note("  copy-paste: not compared, no copy-paste score is stored yet (`unspecific evidence`"
                        " computes it)"))
    out.append(Note(f"{'  ' if duel.pairs else ''}{refusal_line(duel)}"))
    return out


def models_rows(duel: ModelDuel | None) -> list[dict[str, Any]]:
    """model_comparisons.csv: one row per model pair, stratum and metric, with the pair's verdict."""
    if duel is None:
        return []
    return [{**row.as_dict(), "verdict": pair.verdict, "deeper": pair.deeper,
             "instructions_both": pair.instructions} for pair in duel.pairs for row in pair.rows]


def models_json(duel: ModelDuel | None) -> dict[str, Any] | None:
    """report.json's "models": the pairs (with their sentence), the refusals, the Holm family's size."""
    if duel is None:
        return None
    data = duel.as_dict()
    for entry, pair in zip(data["pairs"], duel.pairs, strict=True):
        entry["sentence"] = verdict_sentence(pair)
        entry["rows"] = [row.as_dict() for row in pair.rows]
    data["holm_family_note"] = family_note(duel)
    return data
