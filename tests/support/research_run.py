"""One research run's files, stage by stage, as its scripts chain the writers
(tests/support/research_writers.py)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import research_writers as rw

ORIGINAL = ["Mention the harbour master by role.", "Describe the storm's arrival over several sentences.",
            "Include a quote from a ferry passenger.", "State the wind speed in knots.",
            "End with the reopening of the port."]

REVISED = ["Describe the storm's arrival over several sentences.",
           "Name the lighthouse keeper who raised the alarm.",
           "Include a quote from a ferry passenger.", "Give the exact time the port closed.",
           "End with the reopening of the port."]

# What the scripted judge looks for in a text, per constraint.
KEYS = {ORIGINAL[0]: "harbour master", ORIGINAL[1]: "storm", ORIGINAL[2]: "We are not asking",
        ORIGINAL[3]: "knots", ORIGINAL[4]: "reopened", REVISED[1]: "Keeper", REVISED[3]: "o'clock"}

BLOGS = [("The storm hit the harbour at night.\nFerries stayed in port.",
          "A gale closed the port.\nWind reached 60 knots."),
         ("Fishermen waited out the gale.\nThe harbour master spoke.",
          "Boats were lost in the storm.\nThe port reopened.")]

BASE = ("The storm came in from the west before dawn.\nThe harbour master closed the quay.\n"
        "Winds reached 55 knots by noon.")

FITTED = ("The storm came in from the west before dawn.\nKeeper Ana Ruiz raised the alarm.\n"
          '"We are not asking for much," said a ferry passenger.\nThe port closed at six o\'clock.\n'
          "The port reopened the next morning.")

DIRECT = ("The harbour master watched the storm arrive.\n"
          '"We are not asking for much," said a ferry passenger.\nThe port reopened on Monday.')


def _numbered(items: list[str]) -> str:
    return "\n".join(f"{i}. {t}" for i, t in enumerate(items, 1))


def common_model(prompt: str) -> str:
    n = 1 if "The storm hit" in prompt else 2
    return (f"**Main Task:** Write a news article about harbour storm "
            f"{n}.\n**Constraints:**\n{_numbered(ORIGINAL)}")


def revise_model(prompt: str) -> str:
    # Instruction 2's reply leaves out its Main Task line, as a model may: the file's main_task is empty.
    head = "Main Task: Write a news article about harbour storm 1.\n\n" if "storm 1" in prompt else ""
    return f"{head}Revised Constraints:\n{_numbered(REVISED)}"


def judge(content: str, constraints: str, *, terse: bool = False, note: bool = False) -> str:
    lines, yes = [], 0
    for m in re.finditer(r"^(\d+)\.\s*(.*)$", constraints, re.MULTILINE):
        key = KEYS[m.group(2).strip()]
        hit = next((line for line in content.split("\n") if key in line), None)
        yes += hit is not None
        if terse:
            lines.append(f"{m.group(1)}. {'Yes' if hit else 'No'}")
        else:
            lines.append(f'{m.group(1)}. Yes - "{hit}"' if hit
                         else f"{m.group(1)}. No - nothing on it (see [2]).")
    lines.append(f"Number of constraints satisfied: {yes}")
    if note:
        lines.append("\nNote: the article is short, so several constraints could not fit.")
    return "\n".join(lines)


def write_run(folder: Path, *, with_eval: bool = True) -> dict[str, Path]:
    """One research run, stage by stage, as its scripts chain the writers."""
    folder.mkdir(parents=True, exist_ok=True)
    merged = [{"Blog A": a, "Blog B": b} for a, b in BLOGS]
    common = rw.constraints_common(merged, common_model, "gen-model")
    base = rw.base_parallel(common, lambda task: BASE, "base-model")
    base_eval = rw.evaluate(base, lambda c, k: judge(c, k), "judge-model", content_column="base_content")
    hardened = rw.revise(common, base, revise_model, "gen-model", eval_df=base_eval if with_eval else None)
    fitted = rw.fit(hardened, base, lambda b: FITTED, "fit-model", constraint_column="revised_constraints")
    direct = rw.direct(common, lambda task: DIRECT, "direct-model")
    fitted_summaries = rw.summarize(fitted, lambda t: "The storm came.\nThe port reopened.", "summ-model")
    direct_summaries = rw.summarize(direct, lambda t: "The port reopened.", "summ-model",
                                    content_column="direct_content",
                                    fail={2})
    files = {
        "common": rw.to_csv(common, folder / "common_constraints.csv"),
        "base": rw.to_csv(base, folder / "base_generated.csv"),
        "hardened": rw.to_csv(hardened, folder / "hardened_constraints.csv"),
        "fitted": rw.to_csv(fitted, folder / "fitted_content.csv"),
        "direct": rw.to_csv(direct, folder / "direct_content.csv"),
        "fitted_summaries": rw.to_csv(fitted_summaries, folder / "fitted_summaries.csv"),
        "direct_summaries": rw.to_csv(direct_summaries, folder / "direct_summaries.csv"),
        "fitted_eval": rw.to_csv(rw.evaluate(fitted, lambda c, k: judge(c, k, note=True), "judge-model"),
                                 folder / "fitted_evaluated.csv"),
        "summary_eval": rw.to_csv(rw.evaluate(fitted_summaries, judge, "judge-model",
                                              content_column="summarized_content"), folder
                                  / "summary_evaluated.csv"),
        "direct_eval": rw.to_csv(rw.evaluate(direct, lambda c, k: judge(c, k, terse=True), "judge-model",
                                             content_column="direct_content"), folder
                                 / "direct_evaluated.csv"),
    }
    if with_eval:
        files["base_eval"] = rw.to_csv(base_eval, folder / "base_evaluated.csv")
    return files
