"""How a stage reports progress and is asked to stop, without knowing who listens.

The CLI turns events into rich progress bars; the app turns them into Textual messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProgressEvent:
    stage: str  # corpus | embed | pair | synthesize | base | revise | respond | summarize | judge | ...
    done: int  # units finished so far (this stage)
    total: int  # units this stage will do (0 when unknown)
    message: str = ""  # one line for a live log ("instruction 12: 3 constraints replaced")
    kind: str = "progress"  # progress | log | error

    def __post_init__(self) -> None:
        if self.kind == "error":  # error lines quote endpoints' replies, which may echo a key
            from pipeline.core.redact import redact

            object.__setattr__(self, "message", redact(self.message) or self.message)


ProgressHook = Callable[[ProgressEvent], None]


def no_progress(event: ProgressEvent) -> None:
    return None


@dataclass
class StopFlag:
    """Set by the caller (pause button, Ctrl-C); stages check it between units of work."""

    stopped: bool = False
    reasons: list[str] = field(default_factory=list)

    def stop(self, reason: str = "") -> None:
        self.stopped = True
        if reason:
            self.reasons.append(reason)

    def __bool__(self) -> bool:
        return self.stopped
