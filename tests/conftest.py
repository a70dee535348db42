"""Shared fixtures: a store in tmp_path, the scripted fake OpenAI server, the real local server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The build embeds constraints by default with mpnet; tests use the hash embedder instead (no model
# to load), unless a test names an embedder itself. Set, not defaulted: a developer's own value must
# not make every test load a model.
os.environ["UNSPECIFIC_EMBEDDER"] = "hash"
# The model some tests load in-process gets the short OpenMP spin the server gets
# (local_model.server_environment): with libgomp's long default spin, it and a second xdist
# worker slow each other down many times over. Read when libgomp loads, so set before any import.
if "OMP_WAIT_POLICY" not in os.environ:
    from pipeline.llm.local_model import OMP_SPIN_COUNT

    os.environ.setdefault("GOMP_SPINCOUNT", OMP_SPIN_COUNT)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook turns the group marks into node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Groups for `-n 2 --dist loadgroup`: the tests on the shared llama.cpp server run on one
    worker, so it starts once per run; the tests that load the model in-process run together on
    one worker, so their module's model loads once. Being the largest groups, xdist hands them
    out first, one to each worker, and the long real-model tests start at once. Without xdist the
    marks do nothing."""
    for item in items:
        if "local_server_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("local_server"))
        elif item.get_closest_marker("real_model"):
            item.add_marker(pytest.mark.xdist_group(f"model_in_{item.module.__name__}"))


# The scripted judge's store (module-scoped), shared by the correction, report and export tests.
from tests.support.judge_checks import scripted  # noqa: E402, F401


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store.sqlite"


@pytest.fixture
def store(store_path: Path):
    from pipeline.store.database import open_store

    s = open_store(store_path)
    yield s
    s.close()


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic store (8 instructions, two models, two judges), built once: tests copy it."""
    from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store

    path = tmp_path_factory.mktemp("seed") / "seed.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=8))
    return path


@pytest.fixture
def seeded_copy(seeded: Path, tmp_path: Path) -> Path:
    """A copy of ``seeded`` of the test's own, to write to."""
    import shutil

    path = tmp_path / "store.sqlite"
    shutil.copy(seeded, path)
    return path


@pytest.fixture
def model_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache of shipped models (UNSPECIFIC_CACHE) in the test's own folder."""
    root = tmp_path / "cache"
    monkeypatch.setenv("UNSPECIFIC_CACHE", str(root))
    return root


@pytest.fixture
def fake_server():
    from tests.fakes.fake_server import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="session")
def local_server_url() -> Iterator[str]:
    """The embedded llama.cpp server (holding the demo's second model too), started once per session (or
    borrowed from a running `unspecific local serve`). Never skipped: without llama-cpp-python the test fails,
    which is what CI must report, since `make test` installs it.

    While it is up, UNSPECIFIC_LOCAL_URL points at it, so `runs.open_client` in a test that asks
    for this fixture uses it instead of starting a server of its own."""
    from pipeline.core.config import default_config
    from pipeline.llm.local_model import acquire_server, served_models
    from pipeline.stages.demo import demo_config

    # With the demo's second model beside the embedded one, as `make demo` runs them.
    lease = acquire_server(timeout_s=300, others=served_models(demo_config(default_config())))
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
