"""What the Audit screen's parts exchange: ``Shown`` (what the screen shows now, the record tests read
instead of the SVG; the screen makes one per refresh and the detail fills in what its panes found),
``Rows`` (one instruction's list and the verdicts behind it, read by the list), the panes' names
and the width below which the screen is narrow. Plain values: no part holds another's state."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.analysis.copy_count import CopyCount
from pipeline.core.definitions import Outcome
from pipeline.store.verdicts import Verdict
from pipeline.store.view import Constraint, InstructionData, Writer
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
    state: Outcome | None = None  # pipeline.core.definitions.item_outcome
    copies: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    # References mode: the response's and summary's copied spans by source ("A", "B").
    sources: dict[str, dict[str, tuple[tuple[int, int], ...]]] = field(default_factory=dict)
    quotes: dict[str, list[tuple[str, tuple[int, int] | None]]] = field(default_factory=dict)
    similarities: dict[str,
                       tuple[str, float | None]] = field(default_factory=dict)  # ref pane -> (method, value)
    row: ListRow | None = None
    counts: dict[str,
                 CopyCount] = field(default_factory=dict)  # response / summary -> copied words and source
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


@dataclass(eq=False)
class Item:
    """One constraint on one response at one ratio, read by the screen and handed to its parts to draw:
    the instruction, the constraint, the four texts (``texts``: pane -> text), the constraint's row
    of the list, the judges' verdicts on the response and summary, and its flags."""

    data: InstructionData
    con: Constraint
    writer: Writer | None
    ratio: float
    texts: dict[str, str]
    row: ListRow | None
    verdicts: list[Verdict]
    flags: dict[str, str]
