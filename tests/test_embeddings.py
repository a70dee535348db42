"""Embeddings: the vector cache, cosine, offline model loading (MiniLM real; mpnet marked)."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from pipeline.analysis.embeddings import (
    HashEmbedder,
    cached_vectors,
    cosine,
    embed_stored,
    embed_texts,
    get_embedder,
    unpack_split_zip,
)
from pipeline.core.errors import EmbeddingError
from pipeline.core.progress import ProgressEvent
from pipeline.store.database import text_hash


class CountingEmbedder(HashEmbedder):
    """A hash embedder that records what it was asked to embed."""

    def __init__(self) -> None:
        super().__init__(dim=64, name="counting")
        self.seen: list[str] = []

    def embed(self, texts):
        self.seen.extend(texts)
        return super().embed(texts)


def test_cosine_vectors_and_matrices():
    a = np.array([1.0, 0.0])
    b = np.array([1.0, 1.0])
    assert cosine(a, b) == pytest.approx(2**-0.5)
    m = cosine(np.stack([a, b]), np.stack([a, b, -a]))
    assert m.shape == (2, 3)
    assert m[0, 2] == pytest.approx(-1.0) and m[1, 1] == pytest.approx(1.0)


def test_hash_embedder_is_deterministic_unit_and_similarity_aware():
    e = HashEmbedder()
    texts = ["the council argued over the budget", "the council argued about the budget", "a cat chased mice"]
    v1, v2 = e.embed(texts), HashEmbedder().embed(texts)
    assert np.array_equal(v1, v2) and v1.dtype == np.float32
    assert np.allclose(np.linalg.norm(v1, axis=1), 1.0)
    assert cosine(v1[0], v1[1]) > cosine(v1[0], v1[2])


def test_embed_texts_caches_by_hash_and_keeps_order(store):
    e = CountingEmbedder()
    events: list[ProgressEvent] = []
    texts = ["alpha beta", "gamma delta", "alpha beta", "epsilon"]
    first = embed_texts(store, e, texts, progress=events.append)
    assert first.shape == (4, 64)
    assert sorted(e.seen) == ["alpha beta", "epsilon", "gamma delta"]  # each distinct text once
    assert np.array_equal(first[0], first[2])
    assert events[-1].stage == "embed" and events[-1].done == events[-1].total == 3
    e.seen.clear()
    second = embed_texts(store, e, list(reversed(texts)) + ["new one"])
    assert e.seen == ["new one"]  # a re-run embeds only what is new
    assert np.array_equal(second[0], first[3]) and np.array_equal(second[3], first[0])
    assert store.scalar("SELECT count(*) FROM embeddings WHERE model = 'counting'") == 4
    assert store.scalar("SELECT dim FROM embeddings LIMIT 1") == 64


def test_vectors_are_cached_per_model(store):
    embed_texts(store, HashEmbedder(dim=32, name="hash-32"), ["one text"])
    other = CountingEmbedder()
    embed_texts(store, other, ["one text"])
    assert other.seen == ["one text"]
    assert set(cached_vectors(store, "hash-32", [text_hash("one text")])) == {text_hash("one text")}


def test_embed_stored_reads_bodies_from_the_store(store):
    h = store.put_text("a stored article body")
    store.commit()
    vectors = embed_stored(store, CountingEmbedder(), [h])
    assert vectors.shape == (1, 64)
    assert embed_stored(store, CountingEmbedder(), []).shape == (0, 64)


def test_unknown_model_is_a_clear_error():
    with pytest.raises(EmbeddingError, match="unknown embedding model 'bert-huge'"):
        get_embedder("bert-huge")


def test_unpack_split_zip_joins_parts_in_order(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("tiny-model/modules.json", "[]")
        zf.writestr("tiny-model/weights.bin", bytes(range(256)) * 40)
    data = buf.getvalue()
    parts = []
    for i, start in enumerate(range(0, len(data), len(data) // 3 + 1), 1):
        part = tmp_path / f"m.zip.{i:03d}"
        part.write_bytes(data[start : start + len(data) // 3 + 1])
        parts.append(part)
    target = tmp_path / "cache" / "tiny"
    assert unpack_split_zip(parts, target) == target
    assert (target / "modules.json").read_text() == "[]"
    assert (target / "weights.bin").read_bytes() == bytes(range(256)) * 40
    assert [p.name for p in target.parent.iterdir() if not p.name.endswith(".lock")] == ["tiny"]
    with pytest.raises(EmbeddingError, match="could not unpack"):
        unpack_split_zip(list(reversed(parts)), tmp_path / "cache" / "wrong")


def test_importing_embeddings_does_not_load_torch():
    code = ("import sys, pipeline.analysis.embeddings, pipeline.stages.corpus, pipeline.stages.pairing; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_minilm_loads_offline_and_separates_topics(store):
    e = get_embedder("minilm")
    assert e.name == "all-MiniLM-L6-v2" and e.dim == 384
    texts = ["The city council voted on the budget shortfall.",
             "Councillors argued over how to close the town's budget gap.",
             "The striker scored twice in the cup final."]
    v = embed_texts(store, e, texts)
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert cosine(v[0], v[1]) > cosine(v[0], v[2]) + 0.2


@pytest.mark.real_embeddings
def test_mpnet_loads_from_the_split_packages(store):
    e = get_embedder("mpnet")
    assert get_embedder(None) is e is get_embedder("all-mpnet-base-v2")  # None: the default
    assert e.name == "all-mpnet-base-v2" and e.dim == 768
    v = embed_texts(store, e, ["A council fights over a budget.", "A footballer scores a goal."])
    assert v.shape == (2, 768)
    assert -1.0 <= cosine(v[0], v[1]) < 0.6


def test_aliases_share_one_instance():
    assert get_embedder("hash") is get_embedder("HASH-256")
    assert get_embedder("hash-32").dim == 32
    with pytest.raises(EmbeddingError, match="hash-N"):
        get_embedder("hash-x")
