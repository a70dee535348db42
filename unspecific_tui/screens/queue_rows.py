"""What a row of the suspicion queue shows, apart from the screen that asks the store for it
(screens/queue.py) and the table that holds the rows (screens/queue_table.py): the rows in rank
order with the items filed under a leader, each cell (the constraint cut at a word, "model
[mode]", the reasons as tags, the marks), the columns that fit a width, how long the queue is,
the reasons bar and the highlighted row in full. Plain functions of the rows: no widget, no state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from pipeline.analysis.suspicion import REASONS, Evidence, reason_sentences, same_phrase_sentence
from pipeline.core.definitions import ECHO_HIGH
from pipeline.store.view import Writer
from unspecific_tui.widgets.fit import distinct_clip
from unspecific_tui.widgets.outcome import outcome_text

# One key per reason (digits switch screens); its short tag in the table.
REASON_KEYS = {"similar": "s", "copied": "c", "echo": "e", "lost": "l", "split": "d", "unquoted": "u",
               "uncertain": "t"}
REASON_TAGS = {"similar": "sim", "copied": "copy", "echo": "echo", "lost": "lost", "split": "split",
               "unquoted": "unq",
               "uncertain": "unsure"}
REASON_STYLES = {"similar": "cyan", "copied": "magenta", "echo": "magenta", "lost": "yellow", "split": "red",
                 "unquoted": "red", "uncertain": "red"}
# Optional columns give way before the constraint gets narrower than this (or a fifth of the width).
MIN_CONSTRAINT_WIDTH = 20
ROOMY_CONSTRAINT = 30  # the model/mode column widens to its labels only while the constraint keeps this


@dataclass(frozen=True)
class Ranked:
    score: float
    evidence: Evidence
    rank: int = 0  # the leader's place in the queue; 0: an item filed under the leader above it


Key = tuple[int, Writer]  # a row's item: its constraint and response


def key_of(e: Evidence) -> Key:
    return e.constraint_id, e.writer


def ranked(evidence: Sequence[Evidence], enabled: tuple[str, ...]) -> list[Ranked]:
    """The queue's leaders (already in rank order), their ranks and scores under the ``enabled`` reasons."""
    return [Ranked(e.score(enabled), e, i) for i, e in enumerate(evidence, 1)]


def rows_of(leaders: Sequence[Ranked], expanded: set[Key], enabled: tuple[str, ...]) -> list[Ranked]:
    """The table's rows: the leaders, each ``expanded`` one followed by the items filed under it."""
    out: list[Ranked] = []
    for r in leaders:
        out.append(r)
        if r.evidence.same_phrase and key_of(r.evidence) in expanded:
            out += [Ranked(f.score(enabled), f) for f in r.evidence.same_phrase]
    return out


def length_line(leaders: Sequence[Ranked], total: int, *, wide: bool) -> str:
    """How long the queue is, one way: "80 leaders, 27 more filed under them" (the items
    group_by_phrase filed under a leader), "80 suspects" when nothing is filed; when the store
    holds more than the head read, how many of its ``total`` were read."""
    filed = sum(len(r.evidence.same_phrase) for r in leaders)
    n, read = len(leaders), len(leaders) + filed
    rows = (f"{n:,} leader{'' if n == 1 else 's'}, {filed:,} more filed under them" if filed
            else f"{n:,} suspect{'' if n == 1 else 's'}")
    if read >= total:
        return rows
    if not wide:
        return f"{rows} · {read:,} of {total:,} read"
    head = f"the top {read:,} of {total:,} suspects"
    return f"{head}: {rows} (more as you scroll)" if filed else f"{head} (more as you scroll)"


def shorten(text: str, width: int) -> str:
    """``text`` in ``width`` cells: cut at a word boundary with an ellipsis, never mid-word
    (unless one word alone is wider than the cell)."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = text[: max(1, width - 1)]
    if " " in cut and text[len(cut)] != " ":
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "…"


def writer_cell(model: str, mode: str, width: int, models: Sequence[str] = ()) -> str:
    """"model [mode]" in ``width`` cells: the model's name is cut where it does not tell it from the
    other ``models`` shown, never the mode (two responses of one model differ only there)."""
    if not mode:
        return distinct_clip(model, models, width)
    tail = f" [{mode}]"
    return distinct_clip(model, models, max(1, width - len(tail))) + tail


def outcome(e: Evidence) -> Text:
    """The item's outcome, as Audit's list says it (pipeline.core.definitions.Outcome)."""
    return outcome_text(e.outcome)


def same_phrase_tag(e: Evidence, expanded: bool = False) -> str:
    """'[+15] ' before an item with 15 more constraints of its instruction filed under it (on its
    phrase alone); '[-15] ' while they are shown under it."""
    return f"[{'-' if expanded else '+'}{len(e.same_phrase)}] " if e.same_phrase else ""


def copied(e: Evidence) -> str:
    """pipeline.analysis.copy_count's count: "12w A" (words of the constraint, and their source)."""
    return e.copy_count.short()


MARK_CELLS = {"confirmed": Text("✓", style="bold green"), "dismissed": Text("✗", style="dim")}


def mark_cell(mark: str | None) -> Text:
    return MARK_CELLS.get(mark or "", Text(" "))


def trust_marks(e: Evidence) -> str:
    marks = [f"{name[0]}: {t.marks}" for name, t in (("resp", e.response_trust), ("sum", e.summary_trust))
             if t is not None and t.marks]
    return " · ".join(marks) or "-"


def reason_tags(e: Evidence, enabled: tuple[str, ...], *, short: bool = False) -> Text:
    """The row's reasons as tags; the ones switched off are dim (they count for nothing)."""
    text = Text()
    for reason in e.reasons():
        tag = REASON_KEYS.get(reason, reason[0]) if short else REASON_TAGS.get(reason, reason)
        style = REASON_STYLES.get(reason, "bold") if reason in enabled else "dim strike"
        text.append(tag, style=style)
        text.append("" if short else " ")
    text.rstrip()
    return text


REASON_ON, REASON_OFF = "●", "○"  # a reason switched on / off: a symbol as well as a colour


def reasons_bar(enabled: tuple[str, ...], width: int) -> Text:
    """Each reason with its key and whether it counts ("● s similar", "○ e echo") after a legend of the
    symbols, in ``width`` cells: where one line is too narrow, the reasons go on a second line, broken
    between two reasons, never inside one."""
    parts = [Text.assemble(("reasons", "bold"), (f" {REASON_ON} on {REASON_OFF} off:", "dim"))]
    for reason in REASONS:
        on = reason in enabled
        parts.append(Text.assemble((f"{REASON_ON if on else REASON_OFF} ", "bold" if on else "dim"),
                                   (REASON_KEYS.get(reason, "?"), "reverse" if on else "dim"),
                                   (f" {reason}", REASON_STYLES.get(reason, "bold") if on else "dim strike")))
    line = Text()
    used = 0
    for part in parts:
        if used and used + 1 + part.cell_len > width:
            line.append("\n")
            used = 0
        elif used:
            line.append(" ")
            used += 1
        line.append_text(part)
        used += part.cell_len
    return line




@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int  # 0: the constraint column, which takes what is left


# Always shown, then the optional ones in the order they give way (last first) as width shrinks:
# the copied count before the instruction's number (the row's detail names its instruction).
WRITER = Column("writer", "model/mode", 15)
CORE = (Column("mark", "✓", 1), Column("rank", "#", 6), Column("score", "score", 5),
        Column("constraint", "constraint", 0), WRITER)
OPTIONAL = (Column("reasons", "reasons", 22), Column("copied", "copied", 8), Column("instr", "instr.", 6),
            Column("outcome", "outcome", 9), Column("similarity", "similarity", 11),
            Column("trust", "trust", 18),
            Column("echo", "echo", 4), Column("flags", "flags", 14))
# Left to right, whichever are shown.
ORDER = ("mark", "rank", "score", "instr", "constraint", "writer", "reasons", "outcome",
         "similarity", "copied",
         "echo", "trust", "flags")
SHORT_REASONS = Column("reasons", "why", len(REASON_KEYS))  # when the full tags do not fit: the toggle keys
CELL_PADDING = 2  # a DataTable cell's padding, left and right
CHROME = 2  # the vertical scrollbar


def layout(width: int, writer: int = 0, ranks: int = 0) -> tuple[list[Column], int]:
    """The columns that fit ``width`` cells, left to right, and the constraint column's width. The
    model/mode column grows towards ``writer`` cells (the longest label) while the constraint keeps
    ROOMY_CONSTRAINT; the rank column is as wide as the highest of ``ranks`` rows' numbers."""

    def used(cols: list[Column]) -> int:
        return sum(c.width + CELL_PADDING for c in cols) + CHROME

    least = max(MIN_CONSTRAINT_WIDTH, width // 5)
    # Six cells held "300" in three: at 80 columns the constraint gets them.
    columns = [Column("rank", "#", len(str(ranks))) if c.key == "rank" and ranks else c for c in CORE]
    copied = next(c for c in OPTIONAL if c.key == "copied")
    for column in OPTIONAL:
        # The reasons' words only where the copy count fits beside them: the count is what the
        # queue is read for, the toggle keys say the same reasons in fewer cells.
        after = [copied] if column.key == "reasons" else []
        if width - used([*columns, column, *after]) >= least:
            columns.append(column)
        elif column.key == "reasons" and width - used([*columns, SHORT_REASONS]) >= least:
            columns.append(SHORT_REASONS)
    columns.sort(key=lambda c: ORDER.index(c.key))
    left = width - used(columns)
    grow = min(max(0, writer - WRITER.width), left - ROOMY_CONSTRAINT)
    if grow > 0:
        columns = [Column(c.key, c.label, c.width + grow) if c.key == "writer" else c for c in columns]
        left -= grow
    return columns, max(12, left)


def label_width(evidence: Sequence[Evidence] | None) -> int:
    """The longest "model [mode]" label of the rows."""
    return max((len(f"{e.writer.model} [{e.writer.mode}]" if e.writer.mode else e.writer.model)
                for e in evidence or []), default=0)


def column_width(columns: Sequence[Column], key: str) -> int:
    return next(c.width for c in columns if c.key == key)



def detail_text(e: Evidence, enabled: tuple[str, ...], mark: str | None, expanded: bool) -> Text:
    """The row in full: its constraint and what each of its reasons means (switched off: dim);
    ``expanded``: the items filed under it are shown below it."""
    # "instruction 1", not "#1": beside a ranked list a bare number reads as the rank.
    text = Text.assemble((f"instruction {e.instruction_id} · {e.writer.label} · ", "bold"),
                         f"{e.position}. {e.text}")
    if mark:
        text.append(f"  [{mark}]", style="bold green" if mark == "confirmed" else "dim")
    # Each reason in words (pipeline.analysis.suspicion.reason_sentences).
    for reason in e.reasons():
        on = reason in enabled
        sentence = next(iter(reason_sentences(e, (reason,))), reason)
        text.append("\n• ", style=REASON_STYLES.get(reason, "bold") if on else "dim")
        text.append(sentence, style="" if on else "dim strike")
    if e.echo is not None:
        text.append(f"\necho {e.echo:.2f}", style="bold" if e.echo >= ECHO_HIGH else "dim")
        text.append(" (the constraint's highest cosine with a sentence of the response)", style="dim")
    if e.same_phrase:
        text.append("\n• ", style="magenta")
        text.append(same_phrase_sentence(e) + ": " + ", ".join(f"#{f.position}" for f in e.same_phrase))
        text.append(f" ({'shown below: + hides them' if expanded else '+ shows them'})", style="dim")
    if e.flags:
        text.append("\nflags: ", style="bold")
        text.append(", ".join(e.flags))
    return text
