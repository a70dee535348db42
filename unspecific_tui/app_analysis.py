"""The app's store-wide analysis: per-instruction counts first (the tables, navigation), then the
report's numbers (pipeline.analysis.metrics, the judges' validation, the corrected rates), in a
worker on a view of its own; a store change (a build writing, ctrl+r) runs it again. And, when a
screen asks, the models compared on the report's paired tests. A part the app composes
(``app.analyses``): it runs the workers and reports by the typed messages of messages.py, which the
app hands back to it (``ready``, ``metrics``, ``compared``)."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

from pipeline.store.view import StoreView
from unspecific_tui.data import compute_analysis, merge_metrics
from unspecific_tui.messages import AnalysisReady, MetricsReady, ModelsCompared

if TYPE_CHECKING:
    from unspecific_tui.app import UnspecificApp


class Analyses:
    """The store-wide pass and the models' comparison, each in a worker of the app's."""

    def __init__(self, app: UnspecificApp) -> None:
        self.app = app

    def refresh(self) -> None:
        self.app.run_worker(self._pass, thread=True, exclusive=True, group="analysis", exit_on_error=False)

    def _pass(self) -> None:
        """Per-instruction counts first (the tables, navigation), then pipeline.analysis.metrics' numbers."""
        app = self.app
        if not app.readonly:
            # Texts judged since the last refresh are scored once, into the store, for this pass
            # and every later one, through the app's one writer (in short transactions: a build
            # writing beside us, or a mark given meanwhile, barely waits).
            app.store_writer.refresh_scores()
        view = StoreView.open(app.store_path)
        try:
            analysis = compute_analysis(view)
        finally:
            view.close()
        app.post_message(AnalysisReady(analysis))
        if not analysis.rows:
            return
        from pipeline.analysis.correction import corrected_metrics
        from pipeline.analysis.families import family_levels
        from pipeline.analysis.judge_validation import judge_scores, judge_validation_by_name
        from pipeline.analysis.metrics import compute_metrics

        view = StoreView.open(app.store_path)  # this thread's own read-only view
        try:
            metrics = compute_metrics(view, seed=app.sample_seed)
            judges = judge_validation_by_name(judge_scores(view, seed=app.sample_seed))
            families = family_levels(view, metrics, analysis.ratio, seed=app.sample_seed)
            # The rates corrected for each judge's measured error: the function `report` calls.
            correction = corrected_metrics(view, metrics, seed=app.sample_seed)
        finally:
            view.close()
        merged = merge_metrics(analysis, metrics)
        merged.judges_validated = judges
        merged.families = families
        merged.correction = correction
        app.post_message(MetricsReady(merged))
        # A store whose copy evidence is missing or stale: Audit computes it as it opens an
        # instruction, and the first would pay for reading the articles it is counted against.
        from pipeline.analysis.copy_evidence import warm_for_missing

        view = StoreView.open(app.store_path)
        try:
            warm_for_missing(view)
        finally:
            view.close()

    def ready(self, message: AnalysisReady) -> None:
        # A worker's message queued as the app shuts down is handled after the app's view closed
        # (Textual reads its queue to the end): dropped unread, here and below.
        app = self.app
        if app.view.closed:
            return
        if app.writer is None and message.analysis.writers:
            app.writer = message.analysis.writers[0]
        app.analysis = message.analysis
        gc.freeze()

    def metrics(self, message: MetricsReady) -> None:
        if self.app.view.closed:
            return
        self.app.models_compared = None  # compared on the metrics before: asked again (compare_models)
        self.app.analysis = message.analysis
        # The analysis, the store's caches and the imported libraries live as long as the app:
        # out of the collector's sight, a full collection no longer stalls a keypress (~100 ms).
        gc.freeze()

    # -- the models compared -----------------------------------------------------------------
    def compare_models(self) -> None:
        """What `report` concludes, the models compared on its paired tests, computed once per metrics
        when a screen asks (the Report screen: the tests cost seconds on a large store)."""
        analysis = self.app.analysis
        if analysis is None or analysis.metrics is None or self.app.models_compared is not None:
            return
        metrics = analysis.metrics
        self.app.run_worker(lambda: self._compare(metrics), thread=True, exclusive=True, group="models",
                            exit_on_error=False)

    def _compare(self, metrics: Any) -> None:
        from pipeline.analysis.report_model import ReportOptions, compare_models
        from pipeline.core.definitions import shown_ratio

        options = ReportOptions(seed=self.app.sample_seed)  # `report`'s defaults: the same tests and p
        view = StoreView.open(self.app.store_path)
        try:
            _, duel = compare_models(view, metrics, options, shown_ratio(metrics.ratios, options.ratio))
        finally:
            view.close()
        self.app.post_message(ModelsCompared(metrics, duel))

    def compared(self, message: ModelsCompared) -> None:
        if self.app.view.closed:
            return
        analysis = self.app.analysis
        if analysis is not None and analysis.metrics is message.metrics:  # else new metrics came since
            self.app.models_compared = message.duel
