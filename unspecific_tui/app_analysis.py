"""The app's store-wide analysis: per-instruction counts first (the tables, navigation), then the
report's numbers (pipeline.analysis.metrics, the judges' validation, the corrected rates), in a
worker on a view of its own; a store change (a build writing, ctrl+r) runs it again."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

from textual import work
from textual.worker import Worker, WorkerState

from pipeline.store.view import StoreView
from unspecific_tui.data import compute_analysis, merge_metrics
from unspecific_tui.messages import AnalysisReady, MetricsReady, ModelsCompared, StoreChanged

if TYPE_CHECKING:
    pass

from unspecific_tui.app_state import AppState


class AnalysisPart(AppState):
    """The store-wide pass and its messages; a worker's failure shown as an error."""

    def refresh_analysis(self) -> None:
        self._analysis_worker()

    @work(thread=True, exclusive=True, group="analysis", exit_on_error=False)
    def _analysis_worker(self) -> None:
        """Per-instruction counts first (the tables, navigation), then pipeline.analysis.metrics' numbers."""
        if not self.readonly:
            # Texts judged since the last refresh are scored once, into the store, for this pass
            # and every later one, through the app's one writer (in short transactions: a build
            # writing beside us, or a mark given meanwhile, barely waits).
            self.store_writer.refresh_scores()
        view = StoreView.open(self.store_path)
        try:
            analysis = compute_analysis(view)
        finally:
            view.close()
        self.post_message(AnalysisReady(analysis))
        if not analysis.rows:
            return
        from pipeline.analysis.families import family_levels
        from pipeline.analysis.judge_validation import judge_scores, judge_validation_by_name
        from pipeline.analysis.metrics import compute_metrics

        view = StoreView.open(self.store_path)  # this thread's own read-only view
        try:
            metrics = compute_metrics(view, seed=self.sample_seed)
            judges = judge_validation_by_name(judge_scores(view, seed=self.sample_seed))
            families = family_levels(view, metrics, analysis.ratio, seed=self.sample_seed)
            # The rates corrected for each judge's measured error: the function `report` calls.
            from pipeline.analysis.correction import corrected_metrics

            correction = corrected_metrics(view, metrics, seed=self.sample_seed)
        finally:
            view.close()
        merged = merge_metrics(analysis, metrics)
        merged.judges_validated = judges
        merged.families = families
        merged.correction = correction
        self.post_message(MetricsReady(merged))
        # A store whose copy evidence is missing or stale: Audit computes it as it opens an
        # instruction, and the first would pay for reading the articles it is counted against.
        from pipeline.analysis.copy_evidence import warm_for_missing

        view = StoreView.open(self.store_path)
        try:
            warm_for_missing(view)
        finally:
            view.close()

    def on_analysis_ready(self, message: AnalysisReady) -> None:
        if self.writer is None and message.analysis.writers:
            self.writer = message.analysis.writers[0]
        self.analysis = message.analysis
        gc.freeze()

    def on_metrics_ready(self, message: MetricsReady) -> None:
        self.models_compared = None  # compared on the metrics before: asked again (compare_models)
        self.analysis = message.analysis
        # The analysis, the store's caches and the imported libraries live as long as the app:
        # out of the collector's sight, a full collection no longer stalls a keypress (~100 ms).
        gc.freeze()

    def compare_models(self) -> None:
        """What `report` concludes, the models compared on its paired tests, computed once per metrics
        when a screen asks (the Report screen: the tests cost seconds on a large store)."""
        analysis = self.analysis
        if analysis is None or analysis.metrics is None or self.models_compared is not None:
            return
        self._models_worker(analysis.metrics)

    @work(thread=True, exclusive=True, group="models", exit_on_error=False)
    def _models_worker(self, metrics: Any) -> None:
        from pipeline.analysis.report_model import ReportOptions, compare_models
        from pipeline.core.definitions import shown_ratio

        options = ReportOptions(seed=self.sample_seed)  # `report`'s defaults: the same tests, the same p
        view = StoreView.open(self.store_path)
        try:
            _, duel = compare_models(view, metrics, options, shown_ratio(metrics.ratios, options.ratio))
        finally:
            view.close()
        self.post_message(ModelsCompared(metrics, duel))

    def on_models_compared(self, message: ModelsCompared) -> None:
        analysis = self.analysis
        if analysis is not None and analysis.metrics is message.metrics:  # else new metrics came since
            self.models_compared = message.duel

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A background job that failed shows why; the app keeps running."""
        if event.state != WorkerState.ERROR:
            return
        from pipeline.core.errors import UnspecificError

        error = event.worker.error
        if isinstance(error, UnspecificError):
            self.show_error(error.title, error.msg)
        else:
            self.show_error(f"{event.worker.group or 'background'} failed ({type(error).__name__})",
                            str(error))

    def on_store_changed(self, message: StoreChanged) -> None:
        self.view.forget()
        self._marks = None
        self.refresh_analysis()

    def action_refresh_store(self) -> None:
        self.post_message(StoreChanged())
        self.notify("reloading the store")
