"""Constraint-reference similarity: computed with the embedder (hash here), stored per constraint,
read back through constraint_similarities; lexical without an embedder; resumable; on by default
in the build; a bad embedder name named with its setting; a revised constraint's own value."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.analysis.copying import lexical_overlap
from pipeline.analysis.embeddings import HashEmbedder, get_embedder
from pipeline.analysis.similarity import LEXICAL, Similarity, constraint_similarities
from pipeline.core.errors import StageError
from pipeline.llm.client import LLMClient
from pipeline.stages.build import BuildOptions, run_build
from pipeline.stages.similarity import (
    DEFAULT_EMBEDDER,
    EMBEDDER_ENV,
    compute_similarities,
    embedder_name,
    resolve_embedder,
)
from pipeline.store.constraints import Replacement, active_constraints, apply_revision, write_synthesis
from pipeline.store.database import now
from pipeline.store.instructions import insert_instruction
from pipeline.store.view import StoreView
from tests.fakes.fake_server import FakeOpenAIServer
from tests.fakes.responders import ScriptedModel, fake_config, make_store

CONSTRAINTS = [
    "Mention the town council, its budget shortfall and the closed public library.",  # words from A
    "Describe the community centre and what the board chair said about insurance premiums.",  # words from B
    "Use a formal tone throughout.",
    "End with a question to the reader.",
]


class CountingEmbedder:
    """The hash embedder, counting the texts it is asked to embed; fails after ``fail_after`` calls."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.inner = HashEmbedder()
        self.texts = 0
        self.calls = 0
        self.fail_after = fail_after

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError("killed mid-way")
        self.calls += 1
        self.texts += len(texts)
        return self.inner.embed(texts)


def _instructions(tmp_path, n_pairs: int = 1, *, condition: str = "direct"):
    """A store with one instruction per pair (references A and B), holding CONSTRAINTS."""
    store = make_store(tmp_path / "store.sqlite", n_pairs)
    ids = []
    for pair in store.query("SELECT id, article_a, article_b FROM pairs ORDER BY id"):
        insert_instruction(store, run_id="r", domain="news", condition=condition, pair_id=pair["id"],
                           article_a=pair["article_a"], article_b=None if condition == "single"
                           else pair["article_b"],
                           n_constraints=len(CONSTRAINTS), created_at=now())
        iid = store.scalar("SELECT max(id) FROM instructions")
        write_synthesis(store, iid, "Write an article.", CONSTRAINTS, status="done", created_at=now())
        ids.append(iid)
    return store, ids


def _b(s: Similarity) -> float:
    assert s.to_b is not None, f"constraint {s.constraint_id}: no reference B"
    return s.to_b


def _reference(store, instruction_id: int, column: str) -> str:
    return store.scalar(f"SELECT t.body FROM instructions i JOIN pairs p ON p.id = i.pair_id JOIN articles a"
                        f" ON a.id = p.{column} JOIN texts t ON t.hash = a.text_hash WHERE i.id = ?",
                        [instruction_id])


def test_stored_values_equal_a_direct_cosine_of_the_hash_vectors(tmp_path) -> None:
    store, (iid,) = _instructions(tmp_path)
    embedder = get_embedder("hash")
    assert compute_similarities(store, embedder) == len(CONSTRAINTS)
    sims = constraint_similarities(store, instruction_id=iid)
    ref_a, ref_b = _reference(store, iid, "article_a"), _reference(store, iid, "article_b")
    ra, rb = embedder.embed([ref_a, ref_b])
    for c in active_constraints(store, iid):
        (v,) = embedder.embed([c.text])
        s = sims[c.id]
        assert s.method == "hash-256"
        assert s.to_a == pytest.approx(float(v @ ra), abs=1e-6)
        assert s.to_b == pytest.approx(float(v @ rb), abs=1e-6)
        assert s.highest == max(s.to_a, _b(s))
    by_text = {c.text: sims[c.id] for c in active_constraints(store, iid)}
    assert by_text[CONSTRAINTS[0]].to_a > _b(by_text[CONSTRAINTS[0]])  # the library is A's story
    assert _b(by_text[CONSTRAINTS[1]]) > by_text[CONSTRAINTS[1]].to_a
    # vectors are cached: the references and constraints are in the embeddings table
    assert store.scalar("SELECT count(*) FROM embeddings WHERE model = 'hash-256'") == len(CONSTRAINTS) + 2
    # the whole store, and the app's read-only view, read the same values
    assert constraint_similarities(store) == sims
    store.close()
    view = StoreView.open(tmp_path / "store.sqlite")
    try:
        assert constraint_similarities(view, instruction_id=iid) == sims
    finally:
        view.close()


def test_without_an_embedder_similarity_is_lexical_overlap(tmp_path) -> None:
    store, (iid,) = _instructions(tmp_path)
    assert compute_similarities(store, None) == len(CONSTRAINTS)
    ref_a, ref_b = _reference(store, iid, "article_a"), _reference(store, iid, "article_b")
    sims = constraint_similarities(store, instruction_id=iid)
    for c in active_constraints(store, iid):
        assert sims[c.id] == Similarity(c.id, LEXICAL, lexical_overlap(c.text, ref_a),
                                        lexical_overlap(c.text, ref_b))
    assert store.scalar("SELECT count(*) FROM embeddings") == 0
    # another method replaces the values (stale), the same one computes nothing
    assert compute_similarities(store, None) == 0
    assert compute_similarities(store, get_embedder("hash")) == len(CONSTRAINTS)
    assert {s.method for s in constraint_similarities(store).values()} == {"hash-256"}


def test_single_has_no_reference_b(tmp_path) -> None:
    """The single condition is written from A alone: B is shown nowhere, so it has no similarity
    (even though the pair has a partner, which only the leak flag compares with)."""
    store, (iid,) = _instructions(tmp_path, condition="single")
    assert store.scalar("SELECT pair_id FROM instructions WHERE id = ?", (iid,)) is not None
    for embedder in (None, get_embedder("hash")):
        compute_similarities(store, embedder)
        sims = constraint_similarities(store, instruction_id=iid)
        assert len(sims) == len(CONSTRAINTS) and all(s.to_b is None and s.highest == s.to_a
                                                     for s in sims.values())


def test_two_references_compare_with_each(tmp_path) -> None:
    store, (iid,) = _instructions(tmp_path, condition="none")
    compute_similarities(store, None)
    ref_a, ref_b = _reference(store, iid, "article_a"), _reference(store, iid, "article_b")
    for c in active_constraints(store, iid):
        sim = constraint_similarities(store, instruction_id=iid)[c.id]
        assert (sim.to_a, sim.to_b) == (lexical_overlap(c.text, ref_a), lexical_overlap(c.text, ref_b))


def test_a_killed_run_keeps_what_it_finished_and_a_rerun_embeds_only_the_rest(tmp_path) -> None:
    store, ids = _instructions(tmp_path, n_pairs=3)
    # Each instruction: its two references, then its constraints (one call each, 4 < the batch of 16);
    # later instructions find the same constraint texts cached. The third call (the second pair's
    # references) dies.
    dying = CountingEmbedder(fail_after=2)
    with pytest.raises(RuntimeError, match="killed"):
        compute_similarities(store, dying)
    assert set(constraint_similarities(store)) == {c.id for c in active_constraints(store, ids[0])}
    assert dying.texts == 2 + len(CONSTRAINTS)
    again = CountingEmbedder()
    assert compute_similarities(store, again) == 2 * len(CONSTRAINTS)
    assert again.texts == 2 + 2  # the two remaining pairs' references: nothing embedded twice
    assert len(constraint_similarities(store)) == 3 * len(CONSTRAINTS)
    assert compute_similarities(store, again) == 0 and again.texts == 4


def test_a_stop_between_instructions_is_resumed(tmp_path) -> None:
    from pipeline.core.progress import StopFlag

    store, ids = _instructions(tmp_path, n_pairs=2)
    stop = StopFlag()
    events = []

    def progress(event) -> None:
        events.append(event)
        if event.done:
            stop.stop("enough")

    assert compute_similarities(store, None, progress=progress, stop=stop) == len(CONSTRAINTS)
    assert events[0].total == 2 * len(CONSTRAINTS)
    assert compute_similarities(store, None, instruction_ids=ids) == len(CONSTRAINTS)


def test_a_replaced_constraint_gets_its_own_value(tmp_path) -> None:
    store, (iid,) = _instructions(tmp_path)
    embedder = get_embedder("hash")
    compute_similarities(store, embedder)
    old = active_constraints(store, iid)[0]
    apply_revision(store, iid,
                   [Replacement(old.id, old.position,
                                "Describe the community centre closure and the insurance premiums.",
                                "too easy")],
                   created_at=now())
    assert compute_similarities(store, embedder) == 1
    new = active_constraints(store, iid)[0]
    sims = constraint_similarities(store, instruction_id=iid)
    assert new.id != old.id and new.id in sims and old.id in sims  # the old value stays with the old row
    assert _b(sims[new.id]) > _b(sims[old.id])


def test_embedder_names_default_and_errors(monkeypatch) -> None:
    monkeypatch.delenv(EMBEDDER_ENV, raising=False)
    assert embedder_name(None) == DEFAULT_EMBEDDER == "mpnet"  # the paper's model, when nothing says
    monkeypatch.setenv(EMBEDDER_ENV, "hash")
    assert embedder_name(None) == "hash" and embedder_name("minilm") == "minilm"
    assert resolve_embedder("lexical", "x") is None and resolve_embedder("none", "x") is None
    assert resolve_embedder(None, "x") is get_embedder("hash")
    with pytest.raises(StageError, match=r"\[build\] embedder.*'mpnett'"):
        resolve_embedder("mpnett", "unspecific.toml [build] embedder")


async def _build(tmp_path, **build):
    store = make_store(tmp_path / "store.sqlite", 1)
    server = FakeOpenAIServer(ScriptedModel()).start()
    config = fake_config(server.base_url, build=build or None)
    client = LLMClient(config, store, backoff_base_s=0.01)
    try:
        options = BuildOptions.from_config(config, n=1, conditions=("single", "direct"),
                                           n_constraints=6, words=60)
        summary = await run_build(store, config, client, options)
    finally:
        await client.aclose()
        server.stop()
    return store, summary


async def test_the_build_stores_similarities_by_default(tmp_path) -> None:
    store, summary = await _build(tmp_path)
    assert summary.complete
    active = store.query("SELECT c.id FROM constraints c JOIN instructions i ON i.id = c.instruction_id"
                         " WHERE c.active = 1 AND i.status = 'done'")
    sims = constraint_similarities(store)
    assert set(sims) == {r["id"] for r in active} and len(active) == 2 * 6
    assert {s.method for s in sims.values()} == {"hash-256"}  # the tests' default (conftest)
    single = {r["id"]
              for r in store.query("SELECT c.id FROM constraints c JOIN instructions i ON "
                                   "i.id = c.instruction_id"
                                           " WHERE i.condition = 'single'")}
    assert all((s.to_b is None) == (cid in single) for cid, s in sims.items())  # single: A alone
    # The leak flag used the same vectors: nothing was embedded twice.
    constraint_texts = {r["text"] for r in store.query("SELECT text FROM constraints")}
    assert store.scalar("SELECT count(*) FROM embeddings") <= len(constraint_texts) + 2


async def test_the_build_with_lexical_embeds_nothing(tmp_path) -> None:
    store, _ = await _build(tmp_path, embedder="lexical")
    assert {s.method for s in constraint_similarities(store).values()} == {LEXICAL}
    assert store.scalar("SELECT count(*) FROM embeddings") == 0


def test_a_bad_embedder_setting_is_named(tmp_path) -> None:
    config = fake_config("http://127.0.0.1:9/v1", build={"embedder": "mpnett"})
    with pytest.raises(StageError, match=r"\[build\] embedder / --embedder: unknown embedder 'mpnett'"):
        BuildOptions.from_config(config, n=1)


def test_cli_fills_in_an_older_store(tmp_path, capsys) -> None:
    from pipeline.cli import main

    store, ids = _instructions(tmp_path, n_pairs=2)
    store.close()
    path = str(tmp_path / "store.sqlite")
    assert main(["--store", path, "evidence", "--embedder", "hash", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {
        "method": "hash-256", "stored": 2 * len(CONSTRAINTS), "copy_evidence": 0, "echo": 0,
        "run": None}  # no responses yet
    # `similarity` is the same command (its first name)
    assert main(["--store", path, "similarity", "--embedder", "lexical", "--run", "other", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["stored"] == 0
    assert main(["--store", path, "similarity", "--embedder", "nope"]) != 0
    assert "--embedder: unknown embedder 'nope'" in capsys.readouterr().err.replace("\n", " ")


@pytest.mark.real_embeddings
def test_minilm_on_three_constraints(tmp_path) -> None:
    store, (iid,) = _instructions(tmp_path)
    embedder = get_embedder("minilm")
    assert compute_similarities(store, embedder, instruction_ids=[iid]) == len(CONSTRAINTS)
    sims = {c.text: constraint_similarities(store, instruction_id=iid)[c.id]
            for c in active_constraints(store, iid)}
    assert {s.method for s in sims.values()} == {"all-MiniLM-L6-v2"}
    assert sims[CONSTRAINTS[0]].to_a > _b(sims[CONSTRAINTS[0]])  # the library: A's story
    assert _b(sims[CONSTRAINTS[1]]) > sims[CONSTRAINTS[1]].to_a  # the community centre: B's
    assert all(-1.0 <= s.to_a <= 1.0 for s in sims.values())


def test_the_report_reads_the_stored_values(tmp_path) -> None:
    from pipeline.analysis.metrics import compute_metrics
    from pipeline.store.database import open_store
    from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store

    path = tmp_path / "synthetic.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=4, conditions=("direct",), n_constraints=5))
    store = open_store(path)
    try:
        embedder = get_embedder("hash")
        computed = {r.instruction_id: r.extra["sim_ref_a"]
                    for r in compute_metrics(store, embedder=embedder, n_resamples=10).rows}
        compute_similarities(store, embedder)
        sims = constraint_similarities(store)
        for iid, value in computed.items():  # stored equals what the report computed itself
            stored = [s.to_a for s in sims.values() if s.constraint_id in
                      {c.id for c in active_constraints(store, iid)}]
            assert value == pytest.approx(float(np.mean(stored)), abs=1e-5)
        # the stored values are the source: change them and the report follows
        store.conn.execute("UPDATE constraint_similarity SET to_a = 0.5")
        store.commit()
        rows = compute_metrics(store, embedder=embedder, n_resamples=10).rows
        assert rows and all(r.extra["sim_ref_a"] == pytest.approx(0.5) for r in rows)
    finally:
        store.close()
