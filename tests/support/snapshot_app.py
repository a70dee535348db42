"""The app as the snapshot tests see it: a fixed synthetic store, a fixed title, no stages.

Like Posting's dedicated entry app: nothing from the developer's environment (store path,
$USER, config, stage modules) reaches the picture. ``textual run tests/support/snapshot_app.py``
shows the same app by hand.
"""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
from pathlib import Path

from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.app import add_similarities
from unspecific_tui.app import UnspecificApp

SPEC = SyntheticSpec(n_instructions=8, seed=7)
# The fit tests' store: model names as long as real ones, and constraints as long as real ones.
LONG_MODELS = ("meta-llama/Llama-3.1-70B-Instruct", "gpt-4o-mini")
LONG_SPEC = SyntheticSpec(n_instructions=8, seed=7, models=LONG_MODELS)
LONG_TAIL = (", making sure that the reader understands who decided it, when it was decided, "
             "and what each of the people affected by the decision said about it afterwards")


def make_app(folder: Path, *, both_modes: bool = False, long_names: bool = False) -> UnspecificApp:
    path = Path(folder) / "store.sqlite"
    if not path.exists():
        build_synthetic_store(path, LONG_SPEC if long_names else SPEC)
        if both_modes:
            add_edit_responses(path, LONG_MODELS[0] if long_names else "model-a")
        if long_names:
            lengthen_constraints(path)
            add_similarities(path)
    return UnspecificApp(path, stages={}, display_path="store.sqlite", annotator="snapshot", config_path=None)


# A store the Report can chart at 80x24: one domain, two conditions, two models (four bars).
SMALL_SPEC = SyntheticSpec(n_instructions=4, seed=7, domains=("news",), conditions=("single", "eval"))


def make_small_app(folder: Path) -> UnspecificApp:
    path = Path(folder) / "small.sqlite"
    if not path.exists():
        build_synthetic_store(path, SMALL_SPEC)
    return UnspecificApp(path, stages={}, display_path="small.sqlite", annotator="snapshot", config_path=None)


def lengthen_constraints(path: Path) -> None:
    """Every third constraint runs to ~200 characters, as generated ones often do."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE constraints SET text = rtrim(text, '.') || ? WHERE id % 3 = 1",
                     (LONG_TAIL + ".",))
    conn.close()


def add_edit_responses(path: Path, model: str = "model-a") -> None:
    """``model`` (model-a) also answers every instruction in edit mode: a different text (its sentences in
    reverse order) whose verdicts differ from the direct one's on every third constraint, so
    the screens have two responses of one model to keep apart."""
    conn = sqlite3.connect(path)
    with conn:
        top = conn.execute("SELECT max(id) FROM generations").fetchone()[0]
        responses = conn.execute("SELECT g.id, g.instruction_id, t.body FROM generations g JOIN texts t"
                                 " ON t.hash = g.text_hash WHERE g.kind = 'response' AND g.model = ?"
                                 " ORDER BY g.id", (model,)).fetchall()
        for k, (rid, iid, body) in enumerate(responses):
            edit_id = top + 1 + 2 * k
            edit_body = "Edited. " + " ".join(reversed(body.split(". ")))
            for gid, kind, parent, text in ((edit_id, "response", None, edit_body),
                                            (edit_id + 1, "summary", edit_id, "Edited summary. "
                                             + edit_body[:200])):
                h = hashlib.sha256(text.encode()).hexdigest()
                conn.execute("INSERT OR IGNORE INTO texts(hash, body) VALUES (?, ?)", (h, text))
                conn.execute("INSERT INTO generations(id, kind, instruction_id, model, mode, ratio, "
                             "parent_id, text_hash, words) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (gid, kind, iid, model if kind == "response" else "summarizer",
                              "edit" if kind == "response" else "", 0.25 if parent else None, parent, h,
                              len(text.split())))
            summary = conn.execute("SELECT id FROM generations WHERE parent_id = ? AND ratio = 0.25",
                                   (rid,)).fetchone()[0]
            for source, target in ((rid, edit_id), (summary, edit_id + 1)):
                conn.execute("INSERT INTO verdicts(generation_id, constraint_id, judge, "
                             "judging_mode, prompt_hash,"
                             " verdict, quote, reason, quote_found) SELECT ?, constraint_id, "
                             "judge, judging_mode,"
                             " prompt_hash, CASE WHEN constraint_id % 3 = 0 THEN 1 - verdict "
                             "ELSE verdict END, quote,"
                             " reason, NULL FROM verdicts WHERE generation_id = ? ORDER BY id",
                             (target, source))
    conn.close()


if __name__ == "__main__":  # pragma: no cover
    make_app(Path(tempfile.mkdtemp())).run()
