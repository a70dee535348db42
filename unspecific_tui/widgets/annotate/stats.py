"""Annotate's side panel: in labelling, the metric against people (precision and recall per
annotator, by pipeline.analysis.validation.annotate_scores: the rule of `validate report` and the
report, weighted by stratum) and Cohen's kappa between annotators; in the judge check, each judge
against this store's answers. It owns the scores it last showed."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from unspecific_tui.widgets.annotate.items import Given, Keyed, waiting_for

if TYPE_CHECKING:
    from pipeline.analysis.validation import Basis, ValidationReport
    from unspecific_tui.app import UnspecificApp

class AnnotateStats(Static):
    """The scores beside the head, and this annotator's count of items done."""

    if TYPE_CHECKING:  # at run time Textual's own ``app``: the one running, an UnspecificApp
        app: UnspecificApp

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.scores: dict[str, ValidationReport] = {}
        self.kappas: dict[tuple[str, str], tuple[float, int]] = {}

    def show_labels(self, basis: Basis | None, items: Sequence[Keyed], labels: Given) -> None:
        """The metric against each annotator's labels of ``items`` (none before the basis is read)."""
        from pipeline.analysis.validation import annotate_scores

        if basis is None:
            self.scores, self.kappas = {}, {}
        else:
            scores = annotate_scores(self.app.view, basis=basis)
            self.scores = scores.by_annotator
            self.kappas = {(a.annotator_a, a.annotator_b): (a.kappa.value, a.kappa.n) for a in scores.kappas
                           if a.kappa.n}
        table = _table("metric vs people", ("annotator", "n", "prec.", "recall"))
        for who, sc in self.scores.items():
            table.add_row(who, str(sc.n), _f(sc.precision.value), _f(sc.recall.value))
        kappas = Text.assemble(("κ ", "bold"), *(f"{x}/{y} {_f(k)} (n={n})  "
                                                 for (x, y), (k, n) in self.kappas.items()))
        stats = Table.grid()
        stats.add_row(table)
        stats.add_row(kappas if self.kappas else Text("κ needs two annotators", style="dim"))
        stats.add_row(self._done(items, labels, "labelled"))
        self.update(stats)

    def show_judges(self, items: Sequence[Keyed], answers: Given) -> None:
        """Each judge against this store's answers on the judge plan (all annotators' consensus)."""
        from pipeline.analysis.judge_validation import judge_scores

        scores = [s for s in judge_scores(self.app.view, n_resamples=200) if s.by == "all"]
        table = _table("judges vs people", ("judge", "n", "acc.", "κ", "Yes bias"))
        for sc in scores:
            table.add_row(sc.judge, str(sc.n), _f(sc.accuracy.value), _f(sc.kappa.value), _f(sc.yes_bias))
        stats = Table.grid()
        stats.add_row(table)
        stats.add_row(self._done(items, answers, "answered"))
        self.update(stats)

    def _done(self, items: Sequence[Keyed], given: Given, what: str) -> Text:
        """This annotator's count of ``items`` with a label (an answer) of theirs."""
        me = self.app.annotator
        waiting = waiting_for(me, given)
        mine = sum(1 for it in items if not waiting(it))
        return Text(f"{me}: {mine}/{len(items)} {what}", style="dim")


def _table(title: str, columns: tuple[str, ...]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", title=title, title_justify="left")
    for col in columns:
        table.add_column(col, no_wrap=True)
    return table


def _f(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"
