"""The app's event vocabulary: every custom message workers and screens exchange.

Workers run stages and store-wide analyses off the UI thread and report back only through
these messages, so a reader finds every way state changes in the app in this one file.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message


class StageStarted(Message):
    """A stage began in a worker (``step`` means one unit only)."""

    def __init__(self, stage: str, run_id: str, step: bool) -> None:
        super().__init__()
        self.stage, self.run_id, self.step = stage, run_id, step


class StageProgress(Message):
    """A ProgressEvent from a running stage, forwarded from the worker thread."""

    def __init__(self, stage: str, done: int, total: int, message: str, kind: str) -> None:
        super().__init__()
        self.stage, self.done, self.total, self.message, self.kind = stage, done, total, message, kind


class StageFinished(Message):
    """A stage returned (completed, paused or one step done); ``summary`` is its result."""

    def __init__(self, stage: str, run_id: str, summary: Any, paused: bool, step: bool) -> None:
        super().__init__()
        self.stage, self.run_id, self.summary, self.paused, self.step = stage, run_id, summary, paused, step


class StageFailed(Message):
    """A stage raised; ``title``/``msg`` come from UnspecificError (or the exception's type)."""

    def __init__(self, stage: str, run_id: str, title: str, msg: str, bug: bool) -> None:
        super().__init__()
        self.stage, self.run_id, self.title, self.msg, self.bug = stage, run_id, title, msg, bug


class StoreChanged(Message):
    """Something wrote to the store (a stage unit, an annotation): caches are stale."""


class AnalysisReady(Message):
    """The store-wide analysis finished in its worker."""

    def __init__(self, analysis: Any) -> None:
        super().__init__()
        self.analysis = analysis


class MetricsReady(Message):
    """pipeline.analysis.metrics finished; ``analysis`` now carries its Org/Core/superficial values."""

    def __init__(self, analysis: Any) -> None:
        super().__init__()
        self.analysis = analysis


class ModelsCompared(Message):
    """The models compared on the report's paired tests (pipeline.analysis.report_model.compare_models)
    of ``metrics``: ``duel`` is its ModelDuel, what `report`'s "Models compared" concludes from."""

    def __init__(self, metrics: Any, duel: Any) -> None:
        super().__init__()
        self.metrics, self.duel = metrics, duel


class RunSelected(Message):
    """The user picked (or created) the current run on the Build screen."""

    def __init__(self, run_id: str | None) -> None:
        super().__init__()
        self.run_id = run_id


class AnnotationSaved(Message):
    def __init__(self, constraint_id: int, generation_id: int, annotator: str, label: str) -> None:
        super().__init__()
        self.constraint_id, self.generation_id, self.annotator, self.label = (
            constraint_id, generation_id, annotator, label)


class InstructionAuditable(Message):
    """The demo judged an instruction's response and its summary: the Audit has all it shows."""

    def __init__(self, instruction_id: int) -> None:
        super().__init__()
        self.instruction_id = instruction_id


class DemoFinished(Message):
    """The demo's child process ended; ``code`` is its exit code, ``summary`` its last report
    (None when it ended without one), ``log`` the file holding its error output."""

    def __init__(self, code: int, summary: dict[str, Any] | None, log: str, tail: str) -> None:
        super().__init__()
        self.code, self.summary, self.log, self.tail = code, summary, log, tail
