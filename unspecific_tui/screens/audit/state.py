"""What the Audit screen shows and holds, shared by its parts: ``Shown`` (what tests read instead of
the SVG), ``Rows`` (one instruction's list and the verdicts behind it), the panes' names, and
``AuditBase``: the screen as each part sees it, one real class every part builds on."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from pipeline.analysis.copy_count import CopyCount
from pipeline.store.verdicts import Verdict
from pipeline.store.view import InstructionData, Writer
from unspecific_tui.screens.base import AppScreen
from unspecific_tui.widgets.constraint_list import ListRow
from unspecific_tui.widgets.highlight import Span

PANES = ("ref-a", "ref-b", "response", "summary")
PANE_TITLES = {"ref-a": "Reference A", "ref-b": "Reference B", "response": "Response", "summary": "Summary"}
SOURCE_PANE = "source"  # the source view's right pane: the copied words' source
NARROW = 120  # below this width (the -narrow breakpoint) the head shows the constraint on one line


@dataclass
class Shown:
    """What the screen shows now: tests read it instead of parsing the SVG."""

    constraint_id: int | None = None
    instruction_id: int | None = None
    writer: Writer | None = None
    response_id: int | None = None  # the texts in the panes, by id
    summary_id: int | None = None
    refusal: bool = False  # the response refuses the task (marked in the head and the pane's title)
    state: str = ""  # FLIPPED | pass both | fails full | not judged (pipeline.analysis.metrics.Item)
    copies: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    # References mode: the response's and summary's copied spans by source ("A", "B").
    sources: dict[str, dict[str, tuple[tuple[int, int], ...]]] = field(default_factory=dict)
    quotes: dict[str, list[tuple[str, tuple[int, int] | None]]] = field(default_factory=dict)
    similarities: dict[str, tuple[str, float | None]] = field(default_factory=dict)  # ref pane -> (method, value)
    row: ListRow | None = None
    counts: dict[str, CopyCount] = field(default_factory=dict)  # response / summary -> copied words and source
    # The source view: (source, spans in the response, the same words' spans in the source).
    source: tuple[str, tuple[Span, ...], tuple[Span, ...]] | None = None
    # The response's copied words as the list counts them (row.copy's phrases), in text order: the
    # response pane opens on the first, and `g` steps from one to the next (``copy_step``).
    copied_in_response: tuple[Span, ...] = ()
    copy_step: int = 0


@dataclass
class Rows:
    """One instruction's list on one response at one ratio, and the verdicts behind it."""

    rows: list[ListRow]
    verdicts: dict[int, list[Verdict]]  # constraint -> the shown verdicts on the response and summary
    flags: dict[int, dict[str, str]]  # constraint -> flag -> detail


class AuditBase(AppScreen):
    """The Audit screen as each part (listing, panes, head, following) sees it: the state
    AuditScreen sets (declared here, given in AuditScreen.__init__), and the methods one part calls on
    another, each defined once where the comment says (a part or the screen comes before this class
    in the screen's MRO, so these never run)."""

    order: list[tuple[int, int]]
    _pos: dict[int, int]
    index: int
    copy_mode: str
    pane: int
    sort: str
    filter: str
    ratio: float | None
    writer: Writer | None
    shown: Shown
    _flagged: dict[int, set[str]] | None
    _judge_thresholds: dict[tuple[str, str], float] | None
    _rows: OrderedDict[tuple[int, Writer | None, float], Rows]
    _verdict_lines: int
    _last: dict[str, Any]
    source_view: bool
    _rows_shown: list[ListRow]
    _list_key: object

    # screen.py
    def refresh_constraint(self) -> None:
        raise NotImplementedError("refresh_constraint: defined in a part of the Audit screen")

    def action_move(self, step: int) -> None:
        raise NotImplementedError("action_move: defined in a part of the Audit screen")

    def _narrow(self) -> bool:
        raise NotImplementedError("_narrow: defined in a part of the Audit screen")

    def _ratio(self, data: InstructionData | None) -> float:
        raise NotImplementedError("_ratio: defined in a part of the Audit screen")

    def _writer_of(self, data: InstructionData, preferred: Writer | None = None) -> Writer | None:
        raise NotImplementedError("_writer_of: defined in a part of the Audit screen")

    # listing.py
    def _to_text(self) -> None:
        raise NotImplementedError("_to_text: defined in a part of the Audit screen")

    # head.py
    def _put(self, widget_id: str, content: Any, *, layout: bool = False) -> None:
        raise NotImplementedError("_put: defined in a part of the Audit screen")

    def _say(self, message: str) -> None:
        raise NotImplementedError("_say: defined in a part of the Audit screen")

    def _render_titles(self) -> None:
        raise NotImplementedError("_render_titles: defined in a part of the Audit screen")

    def _open_on_copy(self, arrived: bool, row: ListRow | None) -> None:
        raise NotImplementedError("_open_on_copy: defined in a part of the Audit screen")

    def _render_head_only(self) -> None:
        raise NotImplementedError("_render_head_only: defined in a part of the Audit screen")

    # following.py
    def action_stop_following(self) -> None:
        raise NotImplementedError("action_stop_following: defined in a part of the Audit screen")

    def _done(self) -> str:
        raise NotImplementedError("_done: defined in a part of the Audit screen")
