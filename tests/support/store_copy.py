"""A store built once per module and copied for each test that writes to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pipeline.store.database import Store, open_store


def open_copy(base: Path, tmp_path: Path) -> Iterator[Store]:
    """A copy of the store at ``base`` in ``tmp_path``, open while the test runs (a fixture's body:
    ``yield from open_copy(base, tmp_path)``)."""
    path = tmp_path / "store.sqlite"
    path.write_bytes(base.read_bytes())
    store = open_store(path)
    try:
        yield store
    finally:
        store.close()
