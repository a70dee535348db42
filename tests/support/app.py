"""Stores for the app's tests: a hand-made one with known overlaps, and synthetic ones."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.store.database import open_store
from unspecific_tui.textual_check import private_import

if TYPE_CHECKING:
    from textual.pilot import Pilot

STAMP = "2026-01-01T00:00:00+00:00"


def add_similarities(path: Path) -> None:
    """Constraint-reference similarities as the build stores them (lexical: no embedder to load)."""
    from pipeline.stages.similarity import compute_similarities

    store = open_store(path)
    try:
        compute_similarities(store, None)
    finally:
        store.close()

A = ("The mayor unveiled a flood defence plan for the river district. "
     "Residents argued about the budget shortfall at a packed meeting.")
B = "A town council debated a budget shortfall for weeks. The flood defence plan was delayed again."
RESPONSE = ("Our town faced a budget shortfall this year. The council promised a flood defence plan for the "
            "river district, and residents argued about it at a packed meeting.")
SUMMARY = "The council promised a flood defence plan."
RESPONSE_2 = "Weather was calm that week. In the end the flood defence plan passed without a vote."
SUMMARY_2 = "The flood defence plan passed."

C1 = "Describe the flood defence plan and who opposed it."
C2_OLD = "Mention the council."
C2 = "Mention the weather during the meeting."
C3 = "Explain the budget shortfall, naming Harrowgate."
QUOTE_1 = "a flood defence plan for the river district"
QUOTE_MISSING = "the mayor approved it"


@dataclass
class Known:
    path: Path
    instruction: int
    c1: int
    c2: int
    c2_old: int
    c3: int
    response: int
    summary: int
    response_2: int
    summary_2: int


def make_known_store(path: Path) -> Known:
    """One instruction (condition eval), three active constraints, two models, two judges.

    - C1 copies "flood defence plan" into every text; judge-a quotes QUOTE_1 in the response
      (exact), judge-b quotes QUOTE_MISSING (not in the text).
    - C2 replaced C2_OLD ("too easy"); satisfied on both responses, failed on model m1's
      summary by both judges: flipped for m1.
    - C3 carries a proper-noun flag; fails everywhere.
    """
    store = open_store(path)
    put = store.put_text
    c = store.conn
    c.execute("INSERT INTO articles(id, corpus, domain, source_id, title, text_hash, words, "
              "status, imported_at)"
              " VALUES (1, 't', 'news', 'a', 'A', ?, 20, 'kept', ?), (2, 't', 'news', 'b', "
              "'B', ?, 18, 'kept', ?)",
              (put(A), STAMP, put(B), STAMP))
    c.execute("INSERT INTO pairs(id, domain, rule, params, article_a, article_b, cosine, rank, "
              "candidates, created_at) VALUES (1, 'news', 'paper', '{}', 1, 2, 0.8, 1, '[]', ?)", (STAMP,))
    c.execute("INSERT INTO runs(id, kind, name, config, status, started_at, calls, cache_hits, prompt_tokens,"
              " completion_tokens, cost) VALUES ('r1', 'build', 'r1', '{}', 'done', ?, 12, "
              "3, 4000, 900, 0.0123)",
              (STAMP,))
    c.execute("INSERT INTO instructions(id, run_id, domain, condition, pair_id, article_a, "
              "article_b, main_task,"
              " n_constraints, status, created_at) VALUES (1, 'r1', 'news', 'eval', 1, 1, 2,"
              " 'Write a news article about a town fighting over a flood plan.', 3, 'done', ?)", (STAMP,))
    rows = [
        (1, 1, 1, C1, "synthesized", 1, None, None, 0),
        (2, 1, None, C2_OLD, "synthesized", 0, None, "too easy: base article satisfied it", 1),
        (3, 1, 2, C2, "revised", 1, 2, None, 0),
        (4, 1, 3, C3, "synthesized", 1, None, None, 0),
    ]
    c.executemany("INSERT INTO constraints(id, instruction_id, position, text, origin, active, replaces_id,"
                  " replaced_reason, base_verdict, created_at) VALUES (?,?,?,?,?,?,?,?,?,'"
                  + STAMP + "')", rows)
    c.execute("INSERT INTO constraint_flags VALUES (4, 'proper_noun', 'Harrowgate')")
    gens = [
        (1, "response", "m1", "direct", None, None, put(RESPONSE)),
        # A summary's model is its summarizer's (pipeline.stages.generation), not the response's.
        (2, "summary", "summarizer", "", 0.25, 1, put(SUMMARY)),
        (3, "response", "m2", "direct", None, None, put(RESPONSE_2)),
        (4, "summary", "summarizer", "", 0.25, 3, put(SUMMARY_2)),
    ]
    c.executemany("INSERT INTO generations(id, kind, instruction_id, model, mode, ratio, "
                  "parent_id, text_hash, created_at) VALUES (?, ?, 1, ?, ?, ?, ?, ?, '" + STAMP + "')", gens)
    v = []

    def verdict(gen: int, con: int, judge: str, yes: int, quote: str = "", found: str | None = None) -> None:
        v.append((gen, con, judge, "batched", "h", yes, quote, "" if yes else "not there", found))

    verdict(1, 1, "judge-a", 1, QUOTE_1, "exact")
    verdict(1, 1, "judge-b", 1, QUOTE_MISSING, "missing")
    verdict(2, 1, "judge-a", 1, "a flood defence plan", "exact")
    verdict(2, 1, "judge-b", 1, "a flood defence plan", "exact")
    verdict(1, 3, "judge-a", 1, "residents argued about it at a packed meeting", "exact")
    verdict(1, 3, "judge-b", 1, "at a packed meeting", "exact")
    verdict(2, 3, "judge-a", 0)
    verdict(2, 3, "judge-b", 0)
    for judge in ("judge-a", "judge-b"):
        verdict(1, 4, judge, 0)
        verdict(2, 4, judge, 0)
        verdict(3, 1, judge, 1, "the flood defence plan passed", "exact")
        verdict(4, 1, judge, 1, "The flood defence plan passed", "exact")
        verdict(3, 3, judge, 1, "Weather was calm that week", "exact")
        verdict(4, 3, judge, 0)
        verdict(3, 4, judge, 0)
        verdict(4, 4, judge, 0)
    c.executemany("INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, "
                  "prompt_hash, verdict,"
                  " quote, reason, quote_found, created_at) VALUES (?,?,?,?,?,?,?,?,?,'" + STAMP + "')", v)
    store.commit()
    store.close()
    return Known(path, 1, 1, 3, 2, 4, 1, 2, 3, 4)


async def settle(app, pilot, rounds: int = 2) -> None:  # noqa: ANN001
    """Wait for workers (analysis, counts) and the messages they post, ``rounds`` times over (the
    second round: what the first one's messages started)."""
    await pilot.pause()
    for _ in range(rounds):
        await app.workers.wait_for_complete()
        await pilot.pause()


async def goto(app, pilot, key: str):  # noqa: ANN001, ANN201
    """Press ``key`` (a screen's number, or a key that opens a screen) and wait until the app has
    settled; the screen then shown."""
    await pilot.press(key)
    await settle(app, pilot)
    return app.screen


@asynccontextmanager
async def on_screen(app, key: str, size: tuple[int, int]) -> AsyncIterator[Pilot]:  # noqa: ANN001
    """``app`` running at ``size``, settled, on the screen ``key`` opens (a screen's number)."""
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        await goto(app, pilot, key)
        yield pilot


def text_of(widget) -> str:  # noqa: ANN001
    """The plain text a Static shows, whatever it was given (markup, Text, a Rich table)."""
    from rich.console import Console
    from rich.text import Text
    from textual.content import Content

    content = widget.content
    if isinstance(content, str):
        return Content.from_markup(content).plain
    if isinstance(content, (Text, Content)):
        return content.plain
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(content)
    return console.export_text()


EDIT_RESPONSE = ("Edited draft: the flood defence plan was opposed by the river district. Weather was stormy "
                 "during the meeting, and the budget shortfall came up again.")
EDIT_SUMMARY = "Edited: the weather was stormy at the meeting."


def make_two_mode_store(path: Path) -> tuple[Known, int, int]:
    """The known store plus model m1's *edit* response (and its summary at 0.25), a different text
    from its direct one with different verdicts: C1 flips on the edit response (it passes both
    texts of the direct one), C2 passes both there (it flips on the direct one). Returns the
    known ids and the edit response's and summary's ids."""
    known = make_known_store(path)
    store = open_store(path)
    c = store.conn
    c.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, ratio, parent_id, "
              "text_hash, created_at)"
              " VALUES (5, 'response', 1, 'm1', 'edit', NULL, NULL, ?, ?)",
              (store.put_text(EDIT_RESPONSE), STAMP))
    c.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, ratio, parent_id, "
              "text_hash, created_at)"
              " VALUES (6, 'summary', 1, 'summarizer', '', 0.25, 5, ?, ?)",
              (store.put_text(EDIT_SUMMARY), STAMP))
    rows = []
    for judge in ("judge-a", "judge-b"):
        rows += [(5, known.c1, judge, 1, "the flood defence plan was opposed"), (6, known.c1, judge, 0, ""),
                 (5, known.c2, judge, 1, "Weather was stormy"),
                 (6, known.c2, judge, 1, "the weather was stormy"),
                 (5, known.c3, judge, 0, ""), (6, known.c3, judge, 0, "")]
    c.executemany("INSERT INTO verdicts(generation_id, constraint_id, judge, judging_mode, "
                  "prompt_hash, verdict, quote,"
                  " created_at) VALUES (?, ?, ?, 'batched', 'h', ?, ?, '" + STAMP + "')", rows)
    store.commit()
    store.close()
    return known, 5, 6


def synthetic_app(tmp_path: Path, **spec: int):  # noqa: ANN201
    """The app on a synthetic store of ``spec`` (tests.fakes.synthetic.SyntheticSpec's fields)."""
    from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
    from unspecific_tui.app import UnspecificApp

    path = tmp_path / "syn.sqlite"
    build_synthetic_store(path, SyntheticSpec(**spec))
    return UnspecificApp(path, stages={})


def store_rows(app, sql: str, params: tuple = ()) -> list[tuple]:  # noqa: ANN001
    """A query's rows on the app's store, on a connection of the test's own: the app holds no Store."""
    import sqlite3

    conn = sqlite3.connect(app.store_path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


REFUSAL = "I'm sorry, but I can't assist with that request."


def make_refusal(path: Path, response_id: int) -> None:
    """Response ``response_id`` becomes a refusal, flagged as the respond stage stores one (the demo's
    local model refused an instruction so); its verdicts stay (a refusal is scored as the answer)."""
    store = open_store(path)
    try:
        words = len(REFUSAL.split())
        store.conn.execute("UPDATE generations SET text_hash = ?, words = ?, refusal = 1"
                           " WHERE id = ? AND kind = 'response'",
                           (store.put_text(REFUSAL), words, response_id))
        store.commit()
    finally:
        store.close()


def screen_text(app) -> str:  # noqa: ANN001
    """The screen as plain text lines (from the SVG Textual exports: one <text> per run)."""
    import re

    svg = app.export_screenshot()
    lines: dict[str, list[tuple[float, str]]] = {}
    for x, y, body in re.findall(r'<text[^>]*x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        lines.setdefault(y, []).append((float(x), body))
    out = []
    for y in sorted(lines, key=float):
        text = "".join(b for _, b in sorted(lines[y]))
        text = text.replace("&#160;", " ").replace("&amp;", "&")
        out.append(text.replace("&lt;", "<").replace("&gt;", ">").replace("&#x27;", "'"))
    return "\n".join(out)


def textual_private(module: str, name: str) -> type:
    """A class from a private Textual module (``textual.widgets._footer``'s FooterKey, ``_toast``'s
    Toast) for a test to query, reached as the app reaches one: through its guard
    (unspecific_tui/textual_check.py's ``private_import``), never imported directly."""
    found = private_import(module, name)
    assert isinstance(found, type), f"{module}.{name} moved in this Textual (unspecific_tui/textual_check.py)"
    return found
