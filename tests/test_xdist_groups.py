"""`make test` runs `-n 2 --dist loadgroup`: the tests that share the llama.cpp server must share a
worker (one server per run), and every real-model test must be in a group (conftest.py)."""

from __future__ import annotations

import pytest


def groups(item: pytest.Item) -> set[str]:
    return {str(mark.args[0]) for mark in item.iter_markers("xdist_group")}


def test_real_model_tests_are_grouped(request: pytest.FixtureRequest) -> None:
    items = request.session.items
    on_server = [item for item in items if "local_server_url" in getattr(item, "fixturenames", ())]
    real = [item for item in items if item.get_closest_marker("real_model")]
    if not real:
        pytest.skip("no real-model test selected in this run")
    assert all(groups(item) for item in real), [item.nodeid for item in real if not groups(item)]
    assert {frozenset(groups(item)) for item in on_server} <= {frozenset({"local_server"})}
