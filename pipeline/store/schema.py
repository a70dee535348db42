"""The store's schema: the migrations that build it, one per version.

``MIGRATIONS[i]`` brings a store from version ``i`` to ``i + 1`` (``PRAGMA user_version``);
``pipeline.store.database.open_store`` runs the ones a store lacks, each in its own transaction.
Migrations run their own SQL (the one place outside the query modules that may).

Tables (see DESIGN.md):
  texts          every body of text, once, keyed by its sha256
  articles       corpus articles (domain, cleaning status) -> texts
  embeddings     one vector per (text, embedding model)
  pairs          article A, partner B, cosine, rank, rule, next candidates
  runs           a build or evaluation run: config (no secrets), status, accounting
  instructions   main task + constraints for one condition of one pair/article
  constraints    the constraints, with lineage (which one a revision replaced, and why)
  constraint_flags  quality flags per constraint (proper noun, leak, copied n-gram ...)
  constraint_similarity  per constraint, its similarity to reference A and B, and by which method
  contradictions pairs of constraints an LLM found jointly unsatisfiable
  generations    base articles, responses, summaries -> texts
  verdicts       judge x text x constraint: yes/no (NULL: missing, never counted), quote, quote found?
  annotations    human labels of flipped constraints
  validation_plans, validation_items
                 the stratified samples people label (pipeline.analysis.validation)
  judge_plans, judge_items, text_labels
                 people's own Yes/No on constraints and texts, to validate the judges
                 (pipeline.analysis.judge_validation)
  naturalness    pairwise preferences between constraint sets
  llm_calls      every finished LLM call (tokens, cached prompt tokens, cost, time); the cache
  batches, batch_requests
                 calls deferred to a provider's batch API or vLLM's run_batch, and their results
  text_scores, text_agreement, text_scores_stale
                 per-text verdict totals for the metrics, kept fresh (pipeline.store.scores)
  copy_stats     copied n-grams of a response against a reference, by the texts' hashes
  copy_evidence  per (response, constraint): the constraint's n-grams in a reference and the response,
                 each phrase's specificity, the phrases it echoes
  constraint_echo per (response or summary, constraint): the highest constraint-sentence cosine
  suspicion_marks  per (response, constraint): the auditor's confirmed / dismissed on a suspect
  text_item_marks  per text, its items where judges split, a quote is missing, the item flipped, or a
                   P(Yes) is near its judge's threshold
  instruction_families  the specificity levels of one task (CS4: 7 to 39 constraints), as one family
  judge_checks   per judge and source (people | own | builtin), each checked item's truth, verdict and P(Yes)
  judge_calibrations  per judge and judging mode, the threshold on P(Yes) chosen on its check
  constraint_ledgers  per instruction and stage, what the constraint gate wrote, rejected and kept

Imported work (pipeline.importing.importer) lives in the same tables: a run of kind ``import``,
instructions with their ``source_id``, generations with their ``import_run``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite_utils


def _v1(db: sqlite_utils.Database) -> None:
    db.table("meta").create({"key": str, "value": str}, pk="key")
    db.table("texts").create({"hash": str, "body": str}, pk="hash")
    db.table("articles").create(
        {
            "id": int,
            "corpus": str,
            "domain": str,
            "source_id": str,
            "title": str,
            "text_hash": str,
            "words": int,
            # kept | duplicate | near_duplicate | too_short | too_long | pending (near-dup check due)
            "status": str,
            "duplicate_of": int,
            "imported_at": str,
        },
        pk="id",
        foreign_keys=[("text_hash", "texts", "hash")],
    )
    db.table("articles").create_index(["corpus", "source_id"], unique=True)
    db.table("articles").create_index(["domain", "status"])
    db.table("embeddings").create(
        {"text_hash": str, "model": str, "dim": int, "vector": bytes},
        pk=("text_hash", "model"),
    )
    db.table("pairs").create(
        {
            "id": int,
            "domain": str,
            "rule": str,  # paper | research
            "params": str,  # JSON: thresholds, model
            "article_a": int,
            "article_b": int,
            "cosine": float,
            "rank": int,  # partner's rank among A's neighbours (1 = most similar)
            "candidates": str,  # JSON: [{"article": id, "cosine": c}, ...] next candidates
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("article_a", "articles", "id"), ("article_b", "articles", "id")],
    )
    db.table("pairs").create_index(["domain", "rule", "article_a"], unique=True)
    db.table("runs").create(
        {
            "id": str,
            "kind": str,  # build | evaluate | naturalness
            "name": str,
            "config": str,  # JSON, never holds key values
            "status": str,  # running | paused | done | failed | interrupted (its process was gone)
            "started_at": str,
            "finished_at": str,
            "calls": int,
            "cache_hits": int,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cost": float,
            "error": str,
        },
        pk="id",
    )
    db.table("instructions").create(
        {
            "id": int,
            "run_id": str,
            "domain": str,
            "condition": str,  # single | none | direct | eval
            "pair_id": int,
            "article_a": int,
            "article_b": int,
            "main_task": str,
            "n_constraints": int,
            "status": str,  # pending | synthesized | base_judged | done | failed
            "error": str,
            "base_generation_id": int,
            "created_at": str,
        },
        pk="id",
    )
    db.table("instructions").create_index(["run_id", "condition", "article_a", "article_b"], unique=True)
    db.table("instructions").create_index(["domain", "condition"])
    db.table("constraints").create(
        {
            "id": int,
            "instruction_id": int,
            "position": int,  # 1-based place in the final list; NULL when replaced
            "text": str,
            "origin": str,  # synthesized | revised
            "active": int,  # 1 = part of the final list
            "replaces_id": int,  # the constraint this one replaced
            "source_id": int,  # the shared common-synthesis constraint this one is a copy of
            "replaced_reason": str,  # why the replaced one went: "too easy: base article satisfied it"
            "base_verdict": int,  # the base article's verdict on this constraint
            "base_quote": str,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("instruction_id", "instructions", "id")],
    )
    db.table("constraints").create_index(["instruction_id", "active", "position"])
    db.table("constraint_flags").create(
        {"constraint_id": int, "flag": str, "detail": str},
        pk=("constraint_id", "flag"),
        foreign_keys=[("constraint_id", "constraints", "id")],
    )
    db.table("constraint_flags").create_index(["flag"])
    db.table("contradictions").create(
        {"instruction_id": int, "constraint_a": int, "constraint_b": int, "reason": str},
        pk=("instruction_id", "constraint_a", "constraint_b"),
    )
    db.table("generations").create(
        {
            "id": int,
            "kind": str,  # base | response | summary
            "instruction_id": int,
            "model": str,  # endpoint/model name of the writer
            "mode": str,  # direct | edit ('' for base and summaries)
            "ratio": float,  # summaries: target share of the response's words
            "parent_id": int,  # summaries: the response summarised
            "text_hash": str,
            "words": int,
            "achieved_ratio": float,
            "call_id": int,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("instruction_id", "instructions", "id"), ("text_hash", "texts", "hash")],
    )
    db.table("generations").create_index(
        ["kind", "instruction_id", "model", "mode", "ratio", "parent_id"], unique=True
    )
    db.table("verdicts").create(
        {
            "id": int,
            "generation_id": int,
            "constraint_id": int,
            "judge": str,
            "judging_mode": str,  # batched | per_constraint
            "prompt_hash": str,  # the judge template's hash: a new prompt judges anew
            "verdict": int,  # 1 yes, 0 no
            "quote": str,
            "reason": str,
            "quote_found": str,  # exact | fuzzy | missing | NULL (no quote)
            "quote_score": float,
            "call_id": int,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[
            ("generation_id", "generations", "id"),
            ("constraint_id", "constraints", "id"),
        ],
    )
    db.table("verdicts").create_index(
        ["generation_id", "constraint_id", "judge", "judging_mode", "prompt_hash"], unique=True
    )
    db.table("verdicts").create_index(["constraint_id"])
    db.table("annotations").create(
        {
            "id": int,
            "constraint_id": int,
            "generation_id": int,  # the response whose summary flipped
            "annotator": str,
            "label": str,  # integrated | superficial | ambiguous
            "note": str,
            "created_at": str,
        },
        pk="id",
    )
    db.table("annotations").create_index(["constraint_id", "generation_id", "annotator"], unique=True)
    db.table("naturalness").create(
        {
            "id": int,
            "judge": str,
            "instruction_a": int,
            "instruction_b": int,
            "shown_first": int,  # which instruction the judge saw first
            "winner": int,  # instruction id, or NULL for a tie
            "reason": str,
            "call_id": int,
            "created_at": str,
        },
        pk="id",
    )
    db.table("naturalness").create_index(["judge", "instruction_a", "instruction_b"], unique=True)
    db.table("llm_calls").create(
        {
            "id": int,
            "cache_key": str,
            "endpoint": str,
            "model": str,
            "template": str,
            "template_hash": str,
            "request": str,  # JSON: messages and parameters (no key)
            "response": str,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cost": float,
            "latency_s": float,
            "run_id": str,
            "created_at": str,
        },
        pk="id",
    )
    db.table("llm_calls").create_index(["cache_key"], unique=True)
    db.table("llm_calls").create_index(["run_id"])


def _v2(db: sqlite_utils.Database) -> None:
    """Derived data that keeps reports fast at scale: per-text verdict totals kept current
    (pipeline.store.scores) and copy statistics computed once."""
    from pipeline.store.scores import create_tables

    create_tables(db.conn)
    # Keyed by the two texts' hashes: a text never changes, so an entry never goes stale.
    db.table("copy_stats").create(
        {"text_hash": str, "reference_hash": str, "ngram": int, "shared_ngrams": int, "copied_words": int,
         "words": int, "longest": int},
        pk=("text_hash", "reference_hash", "ngram"),
        if_not_exists=True,
    )


def _v3(db: sqlite_utils.Database) -> None:
    """Rescore every judged text: ``text_items.flipped`` now counts only the raters who judged
    an item on both the response and its summary (pipeline.store.scores.item_outcome_sql), as every
    other consumer does; totals kept under the old rule would disagree with them.

    And naturalness judgments are kept per order: a pair is judged with each set shown first
    (pipeline.stages.naturalness), so the order is part of the key."""
    db.conn.execute("INSERT OR IGNORE INTO text_scores_stale SELECT DISTINCT generation_id FROM verdicts")
    db.conn.execute("DROP INDEX IF EXISTS idx_naturalness_judge_instruction_a_instruction_b")
    db.conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS idx_naturalness_judge_pair_order"
                    " ON naturalness(judge, instruction_a, instruction_b, shown_first)")


# The reason a missing verdict was once stored with (as a No); judging still records it.
UNANSWERED = "no verdict from the judge"


def _v4(db: sqlite_utils.Database) -> None:
    """Missing is not No: a verdict the judge never gave was stored as No with the reason
    ``UNANSWERED``; it becomes NULL (missing), left out of every rate. The update
    triggers of pipeline.store.scores mark those texts for rescoring. Runs record the process that
    runs them (pid, host), so a run whose process is gone can be marked interrupted."""
    db.conn.execute("UPDATE verdicts SET verdict = NULL WHERE call_id IS NULL AND reason = ? AND verdict = 0",
                    (UNANSWERED,))
    # Small (only missing verdicts): finds the raters a coverage figure expects without a scan.
    db.conn.execute("CREATE INDEX IF NOT EXISTS verdicts_missing ON verdicts(generation_id, "
                    "judge, judging_mode) WHERE verdict IS NULL")
    for column in ("pid", "host"):
        if column not in db.table("runs").columns_dict:
            db.table("runs").add_column(column, int if column == "pid" else str)
    # A response that refuses the task is the model's answer, kept and flagged (pipeline.llm.contract).
    if "refusal" not in db.table("generations").columns_dict:
        db.table("generations").add_column("refusal", int)
    _flag_refusals(db.conn)


def _flag_refusals(conn: sqlite3.Connection) -> None:
    from pipeline.core.text import is_refusal

    rows = conn.execute("SELECT g.id, t.body FROM generations g JOIN texts t ON t.hash = g.text_hash"
                        " WHERE g.kind = 'response' AND g.refusal IS NULL AND g.words <= 200").fetchall()
    flags = [(int(is_refusal(body)), gid) for gid, body in rows]
    conn.executemany("UPDATE generations SET refusal = ? WHERE id = ?", flags)
    # Longer responses cannot be refusals (pipeline.llm.contract.REFUSAL_MAX_WORDS): no need to read them.
    conn.execute("UPDATE generations SET refusal = 0 WHERE kind = 'response' AND refusal IS NULL")


def _v5(db: sqlite_utils.Database) -> None:
    """Imports (pipeline.importing.importer): an imported instruction keeps its id in the source file
    (``instructions.source_id``), unique within its import run, so importing the same file again
    finds it instead of adding it twice; a text written elsewhere (a response, a summary, a base
    article) records the import run it came from (``generations.import_run``), so evaluation
    summarises and judges it without asking an endpoint to write it."""
    if "source_id" not in db.table("instructions").columns_dict:
        db.table("instructions").add_column("source_id", str)
    db.conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS instructions_source ON instructions(run_id, source_id)"
                    " WHERE source_id IS NOT NULL")
    if "import_run" not in db.table("generations").columns_dict:
        db.table("generations").add_column("import_run", str)


def _v6(db: sqlite_utils.Database) -> None:
    """Validation plans (pipeline.analysis.validation): the seeded, stratified sample of (constraint,
    response) items people label, stored so that the app, the sheets and the report all use
    exactly the same items. ``params`` holds each stratum's population and drawn count, which
    the report's weights need."""
    db.conn.execute("CREATE TABLE IF NOT EXISTS validation_plans(name TEXT PRIMARY KEY, ratio REAL NOT NULL,"
                    " seed INTEGER NOT NULL, run TEXT, params TEXT NOT NULL, created_at TEXT)")
    db.conn.execute("CREATE TABLE IF NOT EXISTS validation_items(plan TEXT NOT NULL, "
                    "position INTEGER NOT NULL,"
                    " constraint_id INTEGER NOT NULL, response_id INTEGER NOT NULL, "
                    "summary_id INTEGER NOT NULL,"
                    " instruction_id INTEGER NOT NULL, domain TEXT NOT NULL, stratum TEXT NOT NULL,"
                    " PRIMARY KEY (plan, constraint_id, response_id))")
    db.conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS validation_items_order ON "
                    "validation_items(plan, position)")
    # Judge validation (pipeline.analysis.judge_validation): a sample of (constraint, text) items, texts
    # being responses and summaries, and people's own Yes/No on them, blind to the judges.
    db.conn.execute("CREATE TABLE IF NOT EXISTS judge_plans(name TEXT PRIMARY KEY, ratio REAL NOT NULL,"
                    " seed INTEGER NOT NULL, run TEXT, params TEXT NOT NULL, created_at TEXT)")
    db.conn.execute("CREATE TABLE IF NOT EXISTS judge_items(plan TEXT NOT NULL, position INTEGER NOT NULL,"
                    " constraint_id INTEGER NOT NULL, generation_id INTEGER NOT NULL, "
                    "text_kind TEXT NOT NULL,"
                    " instruction_id INTEGER NOT NULL, domain TEXT NOT NULL, PRIMARY KEY (plan, "
                    "constraint_id, generation_id))")
    db.conn.execute("CREATE TABLE IF NOT EXISTS text_labels(id INTEGER PRIMARY KEY, "
                    "constraint_id INTEGER NOT NULL,"
                    " generation_id INTEGER NOT NULL, annotator TEXT NOT NULL, label INTEGER NOT NULL,"
                    " note TEXT, created_at TEXT, UNIQUE (constraint_id, "
                    "generation_id, annotator))")  # label: 1 yes, 0 no


def _v7(db: sqlite_utils.Database) -> None:
    """Batch mode (pipeline.llm.batch). ``batch_requests``: calls a stage deferred to a batch, one per
    cache key (so nothing is asked twice), with the result once collected; ``batches``: each
    batch sent to a provider or exported for vLLM, with its state. Cached calls record how they
    were paid (``via``: online or batch), and runs what they paid in batch."""
    db.table("batches").create(
        {"id": str, "kind": str, "endpoint": str, "remote_id": str, "input_file_id": str,
         "output_file_id": str,
         "error_file_id": str, "path": str, "state": str, "requests": int, "completed": int, "failed": int,
         "error": str, "pid": int, "host": str, "created_at": str, "updated_at": str, "collected_at": str},
        pk="id", if_not_exists=True,
    )
    db.table("batch_requests").create(
        {"id": int, "cache_key": str, "endpoint": str, "template": str, "template_hash": str,
         "request": str,  # JSON: messages and parameters, as sent (the row goes once the result is cached)
         "status": str,  # pending | submitted | done | failed | online
         "batch_id": str, "response": str, "prompt_tokens": int, "completion_tokens": int, "cost": float,
         "error": str, "run_id": str, "created_at": str, "updated_at": str},
        pk="id", if_not_exists=True,
    )
    db.conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS batch_requests_key ON batch_requests(cache_key)")
    db.conn.execute("CREATE INDEX IF NOT EXISTS batch_requests_batch ON batch_requests(batch_id, status)")
    db.conn.execute("CREATE INDEX IF NOT EXISTS batch_requests_status ON batch_requests(status, endpoint)")
    if "via" not in db.table("llm_calls").columns_dict:
        db.table("llm_calls").add_column("via", str)  # NULL: online (every call before batch mode)
    for column in ("batch_calls", "batch_cost"):
        if column not in db.table("runs").columns_dict:
            db.table("runs").add_column(column, int if column == "batch_calls" else float, not_null_default=0)


def _v8(db: sqlite_utils.Database) -> None:
    """Instruction families (pipeline.store.families): CS4 releases each instruction at several levels
    of specificity (the same task with 7, 15, 23, 31 and 39 constraints); the lists of one task are
    one family, each at its level (its number of constraints), so satisfaction can be read against
    specificity. One row per member instruction; ``family`` is unique within the instruction's run."""
    db.conn.execute("CREATE TABLE IF NOT EXISTS instruction_families(instruction_id INTEGER PRIMARY KEY"
                    " REFERENCES instructions(id), family TEXT NOT NULL, level INTEGER NOT NULL)")
    db.conn.execute("CREATE INDEX IF NOT EXISTS instruction_families_family ON "
                    "instruction_families(family, level)")


def _v9(db: sqlite_utils.Database) -> None:
    """Judge checks (pipeline.store.judge_checks): per judge (a rater) and source (``people``, ``builtin``),
    the item-level outcomes of its check, truth against verdict, so the rates can be corrected for the
    judge's measured sensitivity and specificity (pipeline.analysis.correction) and the validation sample's
    own uncertainty resampled."""
    db.conn.execute("CREATE TABLE IF NOT EXISTS judge_checks(judge TEXT NOT NULL, source TEXT NOT NULL,"
                    " domain TEXT NOT NULL, item_key TEXT NOT NULL, truth INTEGER NOT NULL, verdict INTEGER,"
                    " quote_found TEXT, checked_at TEXT, PRIMARY KEY (judge, source, item_key))")


def _v10(db: sqlite_utils.Database) -> None:
    """Constraint-reference similarity (pipeline.store.similarity): per constraint, how close it is to
    reference A and to reference B (NULL: one reference only), by ``method`` (an embedder's name, or
    ``lexical``). One row per constraint: computing with another method replaces it. Read by
    instruction, so indexed on it."""
    db.conn.execute("CREATE TABLE IF NOT EXISTS constraint_similarity(constraint_id INTEGER PRIMARY KEY"
                    " REFERENCES constraints(id), instruction_id INTEGER NOT NULL, method TEXT NOT NULL,"
                    " to_a REAL NOT NULL, to_b REAL, computed_at TEXT)")
    db.conn.execute("CREATE INDEX IF NOT EXISTS constraint_similarity_instruction"
                    " ON constraint_similarity(instruction_id)")


def _v11(db: sqlite_utils.Database) -> None:
    """Copy evidence (pipeline.store.suspicion): per (response, active constraint), the constraint's word
    n-grams found both in a reference and in the response (``copied``, a JSON list of the constraint's
    phrases, ``[]`` when none) and which reference(s) (``copied_from``: '', 'A', 'B' or 'AB'). One row per
    pair once computed (pipeline.stages.copy_evidence), so the missing pairs are the work left."""
    db.conn.execute("CREATE TABLE IF NOT EXISTS copy_evidence(response_id INTEGER NOT NULL, "
                    "constraint_id INTEGER"
                    " NOT NULL, ngram INTEGER NOT NULL, copied TEXT NOT NULL, copied_from TEXT NOT NULL,"
                    " PRIMARY KEY (response_id, constraint_id)) WITHOUT ROWID")


def _v12(db: sqlite_utils.Database) -> None:
    """Per text, the items where the judges split, a Yes's quote is missing or the item flipped
    (pipeline.store.scores text_item_marks: the suspicion queue ranks on them); every judged text is
    rescored to fill it."""
    from pipeline.store.scores import create_tables

    create_tables(db.conn)


def _v13(db: sqlite_utils.Database) -> None:
    """Judging from the Yes/No probabilities (pipeline.stages.judging, mode ``yes_no``): a call's first
    tokens' top log-probabilities beside its reply (``llm_calls.logprobs``, ``batch_requests.logprobs``:
    JSON, NULL when none were asked or the endpoint gave none); P(Yes) beside each verdict and each
    checked item (NULL for a judge that writes its verdict); and each judge's calibration: the threshold
    on P(Yes) chosen on its check (``judge_calibrations``)."""
    for table, column, kind in (("llm_calls", "logprobs", str), ("batch_requests", "logprobs", str),
                                ("verdicts", "p_yes", float), ("judge_checks", "p_yes", float)):
        if db[table].exists() and column not in db.table(table).columns_dict:
            db.table(table).add_column(column, kind)
    db.conn.execute("CREATE TABLE IF NOT EXISTS judge_calibrations(judge TEXT NOT NULL, "
                    "judging_mode TEXT NOT NULL,"
                    " source TEXT NOT NULL, threshold REAL NOT NULL, rule TEXT NOT NULL, n INTEGER NOT NULL,"
                    " auc REAL, held_out_accuracy REAL, calibrated_at TEXT, PRIMARY KEY "
                    "(judge, judging_mode))")


def _v14(db: sqlite_utils.Database) -> None:
    """The auditor's marks on the suspicion queue (pipeline.store.marks): per (response, constraint),
    ``confirmed`` (copy-paste confirmed) or ``dismissed``, who marked it and when. Apart from
    ``annotations``, whose labels validate the Core metric and must not mix with these."""
    db.conn.execute("CREATE TABLE IF NOT EXISTS suspicion_marks(response_id INTEGER NOT NULL, "
                    "constraint_id INTEGER"
                    " NOT NULL, mark TEXT NOT NULL CHECK (mark IN ('confirmed', 'dismissed')), "
                    "auditor TEXT NOT NULL,"
                    " marked_at TEXT NOT NULL, PRIMARY KEY (response_id, constraint_id)) WITHOUT ROWID")


def _v15(db: sqlite_utils.Database) -> None:
    """The per-item marks also say where a yes_no judge's P(Yes) is near its threshold
    (pipeline.store.scores text_item_marks ``uncertain``: the suspicion queue's reason of that name):
    the table is built anew and every judged text rescored to fill it. A new calibration marks the
    texts its judge gave a P(Yes) on for rescoring (triggers on judge_calibrations): a verdict's
    doubt moves with the threshold even where the verdict does not flip."""
    from pipeline.store.scores import MARKS_LATEST_COLUMN, create_calibration_triggers, create_tables

    if MARKS_LATEST_COLUMN not in db.table("text_item_marks").columns_dict:
        db.conn.execute("DROP TABLE IF EXISTS text_item_marks")
    create_tables(db.conn)
    create_calibration_triggers(db.conn)


def _v16(db: sqlite_utils.Database) -> None:
    """Copy evidence that tells copying from the topic (pipeline.analysis.specificity): per (response,
    constraint), each copied phrase's facts (JSON: which references hold it, its share outside the main
    task, the domain's articles holding it, a name, a number, its specificity), the item's specificity,
    the constraint's phrases the response repeats (``echoed``, JSON) and the phrase the item is about
    (``lead``). The table holds only derived values, so it is built anew and the stage refills it
    (`unspecific evidence`, evaluate, build). And the constraint's echo (``constraint_echo``): per
    (response or summary, constraint), the highest cosine between the constraint and a sentence of the
    text (the research code's copy-paste score), by ``method`` (the embedder), with that sentence's span."""
    db.conn.execute("DROP TABLE IF EXISTS copy_evidence")
    db.conn.execute("CREATE TABLE copy_evidence(response_id INTEGER NOT NULL, constraint_id INTEGER NOT NULL,"
                    " ngram INTEGER NOT NULL, copied TEXT NOT NULL, copied_from TEXT NOT NULL, "
                    "facts TEXT NOT NULL,"
                    " specificity REAL NOT NULL, echoed TEXT NOT NULL, lead TEXT NOT NULL,"
                    " PRIMARY KEY (response_id, constraint_id)) WITHOUT ROWID")
    db.conn.execute("CREATE TABLE IF NOT EXISTS constraint_echo(generation_id INTEGER NOT NULL, "
                    "constraint_id INTEGER"
                    " NOT NULL, method TEXT NOT NULL, echo REAL NOT NULL, sentence_start INTEGER NOT NULL,"
                    " sentence_end INTEGER NOT NULL, PRIMARY KEY (generation_id, "
                    "constraint_id)) WITHOUT ROWID")


def _v17(db: sqlite_utils.Database) -> None:
    """Copy evidence names the definition it was computed by (``version``: pipeline.core.definitions
    .copy_evidence_version); rows of another version are stale, left out of the ranking and computed
    again by the stage. Rows from before say '' (stale)."""
    if "version" not in db.table("copy_evidence").columns_dict:
        db.conn.execute("ALTER TABLE copy_evidence ADD COLUMN version TEXT NOT NULL DEFAULT ''")


def _v18(db: sqlite_utils.Database) -> None:
    """Of a call's prompt tokens, those the endpoint read from its own prompt cache, as its reply said
    (``llm_calls.cached_prompt_tokens``: OpenAI's and llama.cpp's ``prompt_tokens_details.cached_tokens``).
    NULL where the endpoint did not say, and for every call stored before: missing, not 0."""
    if "cached_prompt_tokens" not in db.table("llm_calls").columns_dict:
        db.table("llm_calls").add_column("cached_prompt_tokens", int)


def _v19(db: sqlite_utils.Database) -> None:
    """The constraint gate's ledger (pipeline.store.ledgers): per instruction and stage (``synthesis``,
    ``revision``, ``import``), JSON saying the candidates written, how many each check rejected, the
    rounds, how many were kept of those wanted, and some rejected candidates with why."""
    db.conn.execute("CREATE TABLE IF NOT EXISTS constraint_ledgers(instruction_id INTEGER NOT NULL"
                    " REFERENCES instructions(id), stage TEXT NOT NULL, ledger TEXT NOT NULL,"
                    " written_at TEXT, PRIMARY KEY (instruction_id, stage)) WITHOUT ROWID")


# Forward migrations: MIGRATIONS[i] brings a store from version i to i + 1.
MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [_v1, _v2, _v3, _v4, _v5, _v6,
                                                             _v7, _v8, _v9, _v10,
                                                             _v11, _v12, _v13, _v14, _v15, _v16, _v17, _v18,
                                                             _v19]
SCHEMA_VERSION = len(MIGRATIONS)
