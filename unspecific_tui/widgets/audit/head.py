"""Audit's top lines: the task (``TaskLine``) and the head (``AuditHead``): where the auditor is, the
constraint, its outcome, lineage, duplicates and evidence in a fixed number of lines, under the line
of what is followed. They own only what they last showed; the screen hands them the item to draw.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from pipeline.analysis.similarity import LEXICAL
from pipeline.analysis.trust import Trust
from pipeline.core.definitions import Outcome
from pipeline.store.verdicts import Verdict
from pipeline.store.view import Constraint, InstructionData
from unspecific_tui.widgets.audit.state import NARROW, Item
from unspecific_tui.widgets.bar import bar
from unspecific_tui.widgets.constraint_list import ListRow, outcome_cell
from unspecific_tui.widgets.outcome import outcome_text
from unspecific_tui.widgets.refusal import refusal_mark
from unspecific_tui.widgets.text_pane import TextLines

if TYPE_CHECKING:
    from rich.console import Console

    from unspecific_tui.app import UnspecificApp

HEAD, NARROW_HEAD = 7, 4  # the head's lines (audit.tcss gives it this height; narrow, one more following)


class TaskLine(Static):
    """The shown instruction's task."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown_task: tuple[str, str] | None = None

    def show_task(self, task: str, gate: str = "") -> None:
        """Updated only when the task changed: an update repaints, and most moves stay in an instruction.
        ``gate``: what the constraint gate kept and refused for this instruction (gate_line)."""
        if (task, gate) == self._shown_task:
            return
        self._shown_task = (task, gate)
        self.update(Text.assemble(("task: ", "bold"), task.replace("\n", " ") or "(no task stored)",
                                  *((" · ", ("gate: ", "bold"), gate) if gate else ())))


def gate_line(ledgers: dict[str, dict]) -> str:
    """The instruction's ledgers in a few words: 'kept 37 of 39 after 4 rounds, refused 12 distinct, 6
    common; revision replaced 9 of 18'; '' when the instruction has none."""
    from pipeline.analysis.gate import Ledger

    parts = []
    for stage in ("synthesis", "import", "revision"):
        if stage not in ledgers:
            continue
        ledger = Ledger.from_json(ledgers[stage])
        counts = sorted(ledger.rejected.items(), key=lambda kv: -kv[1])
        refused = ", ".join(f"{n} {check}" for check, n in counts)
        if stage == "revision":
            parts.append(f"revision replaced {ledger.kept} of {ledger.wanted}"
                         + (f" (refused {refused})" if refused else ""))
        elif stage == "import":
            parts.append(f"imported, {ledger.kept} of {ledger.wanted} pass every text check")
        else:
            kept = ledger.shortfall or f"kept {ledger.kept} of {ledger.wanted}"
            parts.append(kept + (f", refused {refused}" if refused else ""))
    return "; ".join(parts)


class AuditHead(TextLines):
    """The head: a fixed number of lines (a move never lays the screen out again)."""

    if TYPE_CHECKING:  # at run time Textual's own ``app``: the one running, an UnspecificApp
        app: UnspecificApp

    def show_empty(self, message: str) -> None:
        width = max(20, self.app.size.width - 2)
        self.show(list(Text(message).wrap(self.app.console, width)))

    def draw(self, item: Item, *, refusal: bool, copy_mode: str, place: tuple[int, int], whole: bool,
             follow: Text | None) -> None:
        """``item`` at ``place`` (its index and the count of constraints); ``whole``: the constraint in
        full even where the head is narrow (over the list at 80 columns, whose column cuts it);
        ``follow``: the line of what n / p follow, on top."""
        data, con = item.data, item.con
        active = sum(1 for c in data.constraints.values() if c.active)
        narrow = self.app.size.width < NARROW  # the breakpoint class may not be set yet on the first show
        # Narrow, the outcome opens the where-line: the constraint's lines may take the outcome line's.
        outcome = (Text.assemble(outcome_cell(item.row), " · ") if item.row is not None
                   else Text("not judged · ", style="dim")) if narrow else Text()
        where = Text.assemble(
            outcome, (f"#{data.id}", "bold"),
            f" {data.domain} · {data.condition} · constraint {con.position}/{active} · ",
            (item.writer.label if item.writer else "-", "bold"),
            refusal_mark() if refusal else "",
            f" · summary {item.ratio:g} · copy: {copy_mode}",
            f" ({place[0] + 1}/{place[1]})", no_wrap=True, overflow="ellipsis")
        console, width = self.app.console, max(20, self.app.size.width - 2)
        # The head's height is fixed while nothing changes what is followed (a move never lays the
        # screen out again): narrow, NARROW_HEAD lines and one more for the line of what n/p follow.
        height = NARROW_HEAD + (follow is not None) if narrow else HEAD
        # The whole constraint, wrapped: narrow it has every line but the where-line's and the follow
        # line's (over the list, `l`, too, whose column cuts it); only a longer one ends in "…".
        text = _lines(Text(con.text, style="bold"), console, width,
                      height - 1 - (follow is not None) if narrow and not whole else height)
        # The lines left, by importance; the list shows each row's similarity and copies when the last go.
        budget = height - 1 - len(text) - (follow is not None)
        rest = [_outcome_line(item.row, item.verdicts), _lineage(data, con), _duplicates(data, item.flags),
                _evidence_line(item.row, item.flags)]
        lines = ([follow] if follow is not None else []) + [where, *text] + \
            [line for line in rest if line is not None][:max(0, budget)]
        # Wrapped here as a Static would wrap them, padded to the fixed height (never a layout).
        # A one-line no_wrap line is its own row: TextLines cuts it at the width as wrap would.
        rows = [piece for line in lines
                for piece in ([line] if _one_row(line) else line.wrap(console, width))][:height]
        self.show(rows + [Text()] * (height - len(rows)))


def _outcome_line(row: ListRow | None, verdicts: list[Verdict]) -> Text:
    """The outcome and how far it can be trusted: agreement and missing quotes on each text."""
    line = Text(no_wrap=True, overflow="ellipsis")
    if row is None:
        return line.append_text(outcome_text(Outcome.NOT_JUDGED))
    line.append_text(outcome_cell(row))
    for name, trust in (("response", row.response_trust), ("summary", row.summary_trust)):
        line.append(f" · {name}: ")
        line.append_text(_trust_phrase(trust, [v for v in verdicts if v.kind == name]))
    if row.outcome is Outcome.FLIPPED and row.response_trust is not None and row.response_trust.unquoted:
        line.append(" · rests on a Yes whose quote is MISSING", style="bold red")
    elif row.outcome in (Outcome.PASSED_BOTH, Outcome.FLIPPED) and row.split:
        line.append(" · the judges split: not a clear call", style="bold yellow")
    return line

def _evidence_line(row: ListRow | None, flags: dict[str, str]) -> Text:
    line = Text(no_wrap=True, overflow="ellipsis")
    if row is not None:
        sim = row.similarity
        method = sim.method if sim else LEXICAL
        line.append(f"similarity ({method}{'' if row.similarity_stored else ', none stored'}): ", style="dim")
        line.append("A ")
        line.append_text(bar(sim.to_a if sim else None))
        line.append(" B ")
        line.append_text(bar(sim.to_b if sim else None))
        line.append(" · ")
        count = row.copy  # the one count (pipeline.analysis.copy_count), named by its source
        if count.words:
            phrases = ", ".join(f"'{p}'" for p in count.phrases)
            line.append(f"{count.sentence()}: {phrases}",
                        style="bold #e5c07b" if count.from_reference else "#e5c07b")
        else:
            line.append("nothing copied", style="dim")
        line.append(" · ")
    for flag in sorted(flags):
        line.append(f" {flag} ", style="black on yellow")
        line.append(" ")
    if not flags:
        line.append("no flags", style="dim")
    return line

def _duplicates(data: InstructionData, flags: dict[str, str]) -> Text | None:
    """What a duplicate flag duplicates: each other constraint's position, text and score, on one line."""
    raw = flags.get("duplicate")
    if not raw:
        return None
    try:
        near = json.loads(raw).get("with", [])
    except (ValueError, AttributeError):
        return None
    line = Text("duplicates ", style="dim", no_wrap=True, overflow="ellipsis")
    for i, d in enumerate(near):
        other = data.constraints.get(d.get("constraint_id"))
        if other is None:
            continue
        if i:
            line.append(" · ")
        line.append(f"#{other.position} ", style="bold")
        line.append(other.text)
        line.append(f"  (score {d.get('score', 0):g})", style="dim")
    return line

def _lineage(data: InstructionData, con: Constraint) -> Text | None:
    if con.replaces_id and con.replaces_id in data.constraints:
        old = data.constraints[con.replaces_id]
        # pipeline.stages.revision keeps the reason on the new row (older stores: on the old one).
        reason = con.replaced_reason or old.replaced_reason or "?"
        return Text.assemble((f"replaced #{old.id}: ", "dim"), old.text, ("  because ", "dim"), reason,
                             no_wrap=True, overflow="ellipsis")
    if con.origin:
        base = "-" if con.base_verdict is None else "yes" if con.base_verdict else "no"
        return Text(f"{con.origin}; base article verdict: {base}", style="dim", no_wrap=True,
                    overflow="ellipsis")
    return None



def _trust_phrase(trust: Trust | None, verdicts: list[Verdict]) -> Text:
    if trust is None:
        return Text("not judged", style="dim")
    out = Text()
    if trust.split:
        out.append(f"judges split {trust.yes}-{trust.no}", style="bold yellow")
    elif trust.judged:
        out.append(f"{trust.yes or trust.no} {'yes' if trust.yes else 'no'}, agreed",
                   style="green" if trust.yes else "yellow")
    if trust.missing:
        out.append(f" ({trust.missing} gave none)", style="dim")
    unquoted = [v.judge for v in verdicts if v.verdict and v.quote_found == "missing"]
    if unquoted:
        out.append(f"; quote MISSING ({', '.join(unquoted)})", style="bold red")
    return out


def _lines(text: Text, console: Console, width: int, most: int) -> list[Text]:
    """``text`` wrapped at ``width``, in at most ``most`` lines (the last cut with "…" when it goes on)."""
    lines = list(text.wrap(console, width))
    if len(lines) > most >= 1:
        last = lines[most - 1]
        last.append(" …")
        last.truncate(width, overflow="ellipsis")
        lines = lines[:most]
    for line in lines:
        line.no_wrap, line.overflow = True, "ellipsis"
    return lines


def _one_row(line: Text) -> bool:
    return line.no_wrap is True and "\n" not in line.plain and "\t" not in line.plain
