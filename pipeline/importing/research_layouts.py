"""The files the UNSPECIFIC research code writes (JeetDSharma/UNSPECIFIC at 093fce5, ``cs4/core/``),
one layout per writer: every one is a pandas ``DataFrame.to_csv(index=False)``, so the columns are
the keys of the dict each writer appends per row, in that order, or the input file's columns
followed by the ones the writer adds. ``LAYOUTS`` quotes them with the writer's file:line.

A file is recognised by the columns only its layout has (``marks``, named by their role in
``ResearchColumns``, so a renamed column still counts); an evaluation or a summary keeps every
column of the file it was run on, so the layout of that inner file is recognised too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    name: str
    writer: str  # where the research code builds the row (file:lines)
    columns: tuple[str, ...]  # the writer's own columns, as it names them
    marks: tuple[str, ...]  # roles (ResearchColumns fields) whose columns identify the layout
    rank: int  # import order: what a layout refers to is imported before it


# The writers' columns, quoted. "+ input" marks writers that copy the input file's columns first.
CONSTRAINTS = Layout(
    "constraints (single article)", "cs4/core/constraint_generator.py:163-171 (to_csv :190)",
    ("instruction_number", "instruction", "main_task", "constraints", "model_used",
     "tokens_used", "timestamp"),
    ("article", "constraints"), 0)
COMMON = Layout(
    "common constraints", "cs4/core/common_constraint_generator.py:190-198, :275-283 (to_csv :219, :308)",
    ("instruction_number", "blog1", "blog2", "main_task", "constraints", "model_used",
     "tokens_used", "timestamp"),
    ("reference", "reference_b", "constraints"), 0)
# base_generator merges its rows into the input (:189-194, :238-242, :358-362, :423-428): the
# constraints file's columns, then these; a clash of model_used/tokens_used/timestamp gets pandas'
# _x/_y suffixes.
BASE = Layout(
    "base", "cs4/core/base_generator.py:162-170, :212-219, :327-335, :393-400 (to_csv :250, :439)",
    ("+ input", "base_content", "content_length", "model_used", "tokens_used", "timestamp"),
    ("base", "constraints"), 1)
# Both revision scripts write the same row: scripts/constraints/revise_constraints.py (no
# evaluation: condition direct) and revise_constraints_with_eval.py (condition eval).
HARDENED = Layout(
    "hardened constraints", "cs4/core/constraint_replacer.py:166-175, :254-263 (to_csv :193, :287); "
    "cs4/core/constraint_replacer_with_eval.py:212-221 (to_csv :245)",
    ("instruction_number", "main_task", "original_constraints", "revised_constraints",
     "base_content", "model_used",
     "tokens_used", "timestamp"),
    ("original", "revised"), 2)
FITTED = Layout(
    "fitted", "cs4/core/constraint_fitter.py:199-210, :216-227 (to_csv :232)",
    ("instruction_number", "main_task", "constraints", "base_content", "fitted_content", "fitted_length",
     "num_constraints", "model_used", "tokens_used", "timestamp"),
    ("content", "constraints"), 3)
DIRECT = Layout(
    "direct generation", "cs4/core/direct_generator.py:162-172, :253-263 (to_csv :193, :287)",
    ("instruction_number", "main_task", "constraints", "direct_content", "content_length", "num_constraints",
     "model_used", "tokens_used", "timestamp"),
    ("direct", "constraints"), 3)
# The summariser copies its input row (:150, :164) and overwrites model_used with its own model
# (:155): a summary file names the summariser, never the model under test. A failed row keeps
# the original text as its "summary" and says so in "error" (:165-169).
SUMMARIES = Layout(
    "summaries", "cs4/core/content_summarizer.py:150-157, :164-169 (to_csv :175)",
    ("+ input", "summarized_content", "summarized_length", "original_length",
     "compression_ratio", "model_used",
     "tokens_used", "timestamp", "error"),
    ("summary",), 4)
# The evaluator copies its input (:220, :317, :480) and adds these; it judged one text column
# (scripts/evaluation/evaluate.py --content-column, default fitted_content) that the file does
# not name: the most derived text of the row (summary, then response, then base) unless
# --evaluated says otherwise.
EVALUATION = Layout(
    "evaluation", "cs4/core/evaluator.py:223-229, :318-324, :481-487 (to_csv :281, :402, :515)",
    ("+ input", "satisfaction_results", "num_satisfied", "total_constraints",
     "satisfaction_rate", "eval_model",
     "eval_tokens", "eval_timestamp"),
    ("results", "eval_model"), 5)

# Most specific first: a summary file also holds fitted_content, a fitted file base_content ...
INNER_LAYOUTS = (SUMMARIES, HARDENED, FITTED, DIRECT, BASE, COMMON, CONSTRAINTS)
LAYOUTS = (EVALUATION, *INNER_LAYOUTS)


@dataclass(frozen=True)
class Detected:
    layout: Layout  # what the file is
    inner: Layout | None  # an evaluation: the layout of the file it judged

    @property
    def name(self) -> str:
        return f"{self.layout.name} of {self.inner.name}" if self.inner else self.layout.name

    @property
    def rank(self) -> int:
        return self.layout.rank

    @property
    def rows_layout(self) -> Layout:
        """The layout whose columns carry the row's instruction and texts."""
        return self.inner or self.layout


def detect(has: Callable[[str], bool]) -> Detected | None:
    """The layout of a file, from which roles have a column (``has(role)``)."""
    inner = next((layout for layout in INNER_LAYOUTS if all(has(role) for role in layout.marks)), None)
    if all(has(role) for role in EVALUATION.marks):
        return Detected(EVALUATION, inner) if inner else None
    return Detected(inner, None) if inner else None


def describe_layouts() -> str:
    """Every known layout with the columns that identify it, for a file that matches none."""
    return "; ".join(f"{layout.name} ({', '.join(c for c in layout.columns if c != '+ input')})"
                     for layout in (CONSTRAINTS, COMMON, BASE, HARDENED, FITTED, DIRECT,
                                    SUMMARIES, EVALUATION))
