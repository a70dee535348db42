"""Quitting while a worker still reads the store: its message, queued as the app shuts down, is
dropped, never read from the closed view (a CI run once failed on it: `Cannot operate on a closed
database` from `watch_analysis`)."""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.app import make_known_store
from unspecific_tui.app import UnspecificApp


@pytest.mark.parametrize("attempt", range(3))
async def test_metrics_queued_while_quitting_are_dropped_unread(tmp_path, monkeypatch, attempt):
    import pipeline.analysis.metrics as metrics_module

    known = make_known_store(tmp_path / "s.sqlite")
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()
    compute = metrics_module.compute_metrics

    def held(view, **kwargs):  # the store-wide pass, still running when the user quits
        entered.set()
        release.wait(10)
        try:
            return compute(view, **kwargs)
        finally:
            finished.set()

    monkeypatch.setattr(metrics_module, "compute_metrics", held)
    app = UnspecificApp(known.path)
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 20
        while not entered.is_set():
            assert time.monotonic() < deadline
            await pilot.pause(0.05)
        screen_class = type(app.screen)
        unmount = getattr(screen_class, "on_unmount", None)

        def on_unmount(self) -> None:
            # The screens close before the app does: the worker finishes now, and its metrics are
            # queued for the app, which then closes the store's view before reading its queue.
            if unmount is not None:
                unmount(self)
            release.set()
            finished.wait(10)
            time.sleep(0.1 * attempt)

        monkeypatch.setattr(screen_class, "on_unmount", on_unmount, raising=False)
    # run_test re-raises what a handler raised: reaching here, the late message was never read.
    assert finished.is_set()
    assert app.view.closed
