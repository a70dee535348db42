"""The Audit screen's head: where the auditor is, the constraint, its outcome, lineage, duplicates and
evidence in a fixed number of lines; what is followed; the panes' titles; the legend line, where what
the last key changed is said.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual.widgets import Static

from pipeline.analysis.similarity import LEXICAL
from pipeline.analysis.trust import Trust
from pipeline.store.verdicts import Verdict
from pipeline.store.view import Constraint, InstructionData
from unspecific_tui.screens.audit.state import NARROW, PANE_TITLES, PANES, AuditBase
from unspecific_tui.widgets.bar import bar
from unspecific_tui.widgets.constraint_list import ListRow, outcome_cell
from unspecific_tui.widgets.flag_picker import QUEUE
from unspecific_tui.widgets.highlight import QUOTE_STYLE, SOURCE_STYLES
from unspecific_tui.widgets.refusal import WORD as REFUSAL
from unspecific_tui.widgets.refusal import refusal_mark
from unspecific_tui.widgets.text_pane import TextLines, TextPane

HEAD, NARROW_HEAD = 7, 4  # the head's lines (audit.tcss gives it this height)


class HeadPart(AuditBase):
    """The head, the panes' titles and the legend."""

    def _put(self, widget_id: str, content: Any, *, layout: bool = False) -> None:
        """Update a Static unless it already shows ``content``: an update repaints it, and most
        moves within an instruction leave the task, the list's head and the legend as they were."""
        if self._last.get(widget_id) == content and not layout:
            return
        self._last[widget_id] = content
        self.query_one(f"#{widget_id}", Static).update(content, layout=layout)

    def _say(self, message: str) -> None:
        """What the last key changed, as a notice: the app shows notices in the header's row
        (app.tcss), where they cover no pane, verdict or legend, at every width."""
        self.notify(message, timeout=3)

    def _render_titles(self) -> None:
        """The panes' titles. Narrow shows one pane at a time: its title says which of the four it is
        and how to get the next, and its bottom border keeps its footer (words, copied), focused or
        not; the source view's right pane says how to go back."""
        narrow = self._narrow()
        for i, pane in enumerate(PANES):
            title = PANE_TITLES[pane]
            if pane == "response" and self.shown.refusal:
                title = f"{title}: {REFUSAL}"
            if narrow and i == self.pane and not self.source_view:
                title = f"{title} ({i + 1}/{len(PANES)}, t: next)"
            self.query_one(f"#{pane}", TextPane).border_title = title

    def _render_legend(self, row: ListRow | None) -> None:
        legend = Text(no_wrap=True, overflow="ellipsis")
        if self.source_view:
            count = row.copy if row else None
            legend.append(" copied words ", style=SOURCE_STYLES["A"])
            legend.append(f" {count.sentence() if count and count.words else 'nothing copied'}"
                          " · the same words in the source on the right (o: back)")
        elif self.copy_mode == "references":
            legend.append("copied 5-grams in response/summary, from ")
            for name, label in (("A", "A"), ("B", "B"), ("both", "both")):
                legend.append(f" {label} ", style=SOURCE_STYLES[name])
                legend.append(" ")
            legend.append("· in references: from the response", style="dim")
        else:
            legend.append(" constraint 3-grams ", style=SOURCE_STYLES["A"])
            where = " and ".join(row.copied_from) if row and row.copied_from else ""
            legend.append(f" in each text · copied into the response from {where}" if where
                          else " in each text · none both in a reference and the response")
        legend.append("  ")
        legend.append(" quote ", style=QUOTE_STYLE)
        self._put("audit-legend", legend)

    def _render_head_only(self) -> None:
        if self.order and self.shown.constraint_id is not None:
            self.refresh_constraint()

    def _render_head(self, data: InstructionData, con: Constraint, flags: dict[str, str], row: ListRow | None,
                     verdicts: list[Verdict], ratio: float) -> None:
        active = sum(1 for c in data.constraints.values() if c.active)
        where = Text.assemble(
            (f"#{data.id}", "bold"), f" {data.domain} · {data.condition} · constraint {con.position}/{active} · ",
            (self.writer.label if self.writer else "-", "bold"),
            refusal_mark() if self.shown.refusal else "",
            f" · summary {ratio:g} · copy: {self.copy_mode}",
            f" ({self.index + 1}/{len(self.order)})", no_wrap=True, overflow="ellipsis")
        narrow = self.app.size.width < NARROW  # the breakpoint class may not be set yet on the first show
        # Narrow, the constraint is one line over a text pane; over the list (`l`), whose column cuts
        # it, the head gives it the lines it needs: the whole constraint stands above its row.
        one_line = narrow and not self.has_class("-list")
        text = Text(con.text, style="bold", no_wrap=one_line, overflow="ellipsis")
        console, width = self.app.console, max(20, self.app.size.width - 2)
        # The head's height is fixed (a move never lays the screen out again): the lines that fit,
        # by importance; the list shows each row's similarity and copies when the last lines go.
        height = NARROW_HEAD if narrow else HEAD
        budget = height - 1 - (1 if one_line else len(text.wrap(console, width)))
        rest = [self._outcome_line(row, verdicts), self._lineage(data, con), self._duplicates(data, flags),
                self._evidence_line(row, flags)]
        follow = self._following_line()
        if follow is not None:
            budget -= 1
        lines = ([follow] if follow is not None else []) + [where, text] + \
            [line for line in rest if line is not None][:max(0, budget)]
        # Wrapped here as a Static would wrap them, padded to the fixed height (never a layout).
        # A one-line no_wrap line is its own row: TextLines cuts it at the width as wrap would.
        rows = [piece for line in lines
                for piece in ([line] if _one_row(line) else line.wrap(console, width))][:height]
        self.query_one("#audit-head", TextLines).show(rows + [Text()] * (height - len(rows)))

    def _following_line(self) -> Text | None:
        """While n/p follow a list: "suspicion queue item k of N", the item's mark, the count done;
        after a key left the list, that the item shown is not in it (and which item n/p go back to)."""
        following = self.app.following
        if following is None:
            return None
        line = Text(no_wrap=True, overflow="ellipsis")
        position = f"item {following.index + 1:,} of {len(following.stops):,}"
        if following.left:
            line.append(f"not in the {following.label}", style="bold yellow")
            line.append(f" · n/p back to {position}", style="dim")
        else:
            line.append(f"{following.label} {position}", style="bold magenta")
        if following.label == QUEUE:
            shown = self.shown
            mark = self.app.marks.get((shown.response_id or 0, shown.constraint_id or 0))
            line.append(f" · {mark}" if mark else " · not marked",
                        style="bold green" if mark == "confirmed" else "dim")
            line.append(" · y confirm · d dismiss", style="magenta")
            line.append(f" · {self._done()}")
        if not following.left:
            line.append(" · n/p next/prev", style="dim")
        line.append(" · esc stops", style="dim")
        return line

    def _outcome_line(self, row: ListRow | None, verdicts: list[Verdict]) -> Text:
        """The outcome and how far it can be trusted: agreement and missing quotes on each text."""
        line = Text(no_wrap=True, overflow="ellipsis")
        if row is None:
            return line.append("not judged", style="dim")
        line.append_text(outcome_cell(row))
        for name, trust in (("response", row.response_trust), ("summary", row.summary_trust)):
            line.append(f" · {name}: ")
            line.append_text(_trust_phrase(trust, [v for v in verdicts if v.kind == name]))
        if row.outcome == "FLIPPED" and row.response_trust is not None and row.response_trust.unquoted:
            line.append(" · rests on a Yes whose quote is MISSING", style="bold red")
        elif row.outcome in ("pass both", "FLIPPED") and row.split:
            line.append(" · the judges split: not a clear call", style="bold yellow")
        return line

    def _evidence_line(self, row: ListRow | None, flags: dict[str, str]) -> Text:
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

    def _duplicates(self, data: InstructionData, flags: dict[str, str]) -> Text | None:
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

    @staticmethod
    def _lineage(data: InstructionData, con: Constraint) -> Text | None:
        if con.replaces_id and con.replaces_id in data.constraints:
            old = data.constraints[con.replaces_id]
            # pipeline.stages.revision keeps the reason on the new row (older stores: on the old one).
            reason = con.replaced_reason or old.replaced_reason or "?"
            return Text.assemble((f"replaced #{old.id}: ", "dim"), old.text, ("  because ", "dim"), reason,
                                 no_wrap=True, overflow="ellipsis")
        if con.origin:
            base = "-" if con.base_verdict is None else "yes" if con.base_verdict else "no"
            return Text(f"{con.origin}; base article verdict: {base}", style="dim", no_wrap=True, overflow="ellipsis")
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


def _one_row(line: Text) -> bool:
    return line.no_wrap is True and "\n" not in line.plain and "\t" not in line.plain
