"""Shared fixtures: a store in tmp_path, the scripted fake OpenAI server, the real local server."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The fakes live with the tests (tests/fakes): importable as tests.fakes from the repo root.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The build embeds constraints by default with mpnet; tests use the hash embedder instead (no model
# to load), unless a test names an embedder itself. Set, not defaulted: a developer's own value must
# not make every test load a model.
os.environ["UNSPECIFIC_EMBEDDER"] = "hash"


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store.sqlite"


@pytest.fixture
def store(store_path: Path):
    from pipeline.store.database import open_store

    s = open_store(store_path)
    yield s
    s.close()


@pytest.fixture
def fake_server():
    from tests.fakes.fake_server import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="session")
def local_server_url() -> Iterator[str]:
    """The embedded llama.cpp server, started once per session (or borrowed from a running
    `unspecific local serve`). Never skipped: without llama-cpp-python the test fails, which is
    what CI must report, since `make test` installs it.

    While it is up, UNSPECIFIC_LOCAL_URL points at it, so `runs.open_client` in a test that asks
    for this fixture uses it instead of starting a server of its own."""
    from pipeline.llm.local_model import acquire_server

    lease = acquire_server(timeout_s=300)
    previous = os.environ.get("UNSPECIFIC_LOCAL_URL")
    os.environ["UNSPECIFIC_LOCAL_URL"] = lease.base_url
    try:
        yield lease.base_url
    finally:
        if previous is None:
            os.environ.pop("UNSPECIFIC_LOCAL_URL", None)
        else:
            os.environ["UNSPECIFIC_LOCAL_URL"] = previous
        lease.release()
