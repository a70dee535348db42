"""Small shipped models for tests: fake part packages in a temporary folder on sys.path, and a
registry entry (pipeline.llm.model_file.ShippedModel) whose sizes and sha256s are theirs."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import pytest

from pipeline.llm import model_file

# Three small parts standing in for the 22 real ones (a GGUF header, then bytes).
BODIES = (b"GGUF" + b"a" * 1000, b"b" * 2000, b"c" * 500)
_serial = itertools.count(1)


def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bodies: tuple[bytes, ...] = BODIES, *,
               name: str = "tiny", register_as: str | None = None) -> model_file.ShippedModel:
    """A model of ``bodies`` as parts: package ``fake-part-<n>-<i>`` (module ``fake_part_<n>_<i>``,
    file ``data/part<i>.bin``) each, installed in ``tmp_path/site`` on sys.path. With
    ``register_as``, it takes that name's place in the registry for the test."""
    serial = next(_serial)
    site = tmp_path / "site"
    parts = []
    for i, body in enumerate(bodies, 1):
        module = f"fake_part_{serial}_{i}"
        folder = site / module / "data"
        folder.mkdir(parents=True)
        (site / module / "__init__.py").write_text("raise RuntimeError('a part is found, never imported')\n")
        (folder / f"part{i:02d}.bin").write_bytes(body)
        parts.append(model_file.Part(f"fake-part-{serial}-{i}", "1.0.0", module, f"data/part{i:02d}.bin",
                                     len(body), hashlib.sha256(body).hexdigest()))
    monkeypatch.syspath_prepend(str(site))
    whole = b"".join(bodies)
    model = model_file.ShippedModel(
        name=name, alias=f"{name}-alias", title=f"Tiny {name}", licence="MIT", file=f"{name}.gguf",
        size=len(whole), sha256=hashlib.sha256(whole).hexdigest(), chat_format="chatml", max_ctx=512,
        parts=tuple(parts),
    )
    if register_as is not None:
        monkeypatch.setitem(model_file.SHIPPED, register_as, model)
    return model


def part_file(model: model_file.ShippedModel, i: int) -> Path:
    """The file of part ``i`` (from 1)."""
    path = model.parts[i - 1].location()
    assert path is not None
    return path


def stamp_as_verified(model: model_file.ShippedModel, path: Path) -> None:
    """Write the stamp that says ``path`` was checked as ``model``'s file (for a stand-in file a
    test makes, so no one hashes or assembles the real model)."""
    import json

    st = path.stat()
    path.with_name(path.name + model_file.STAMP_SUFFIX).write_text(
        json.dumps({"sha256": model.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}),
        encoding="utf-8")
