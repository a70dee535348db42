"""Headless Chromium for tests: Debian's /usr/bin/chromium driven by Playwright for Python.

Playwright's own browser download cannot run here, so the browser is the system's; `make test`
installs it first (its `browser` target). A missing browser fails the test with how to get it,
never a silent skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
# As root in a container Chromium needs --no-sandbox; the network flags stop its background
# connections, which this machine's closed network refuses (and which a test must not make).
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def require_chromium() -> Path:
    if not CHROMIUM.exists():
        raise AssertionError(f"{CHROMIUM} is missing: install Debian's chromium package "
                             "(apt-get install chromium); `make browser` (a step of `make test`) installs it")
    return CHROMIUM


@contextmanager
def chromium() -> Iterator[object]:
    """A launched headless browser, closed after. Playwright's launch() gives every browser a new
    empty profile folder of its own (and refuses --user-data-dir in args)."""
    from playwright.sync_api import sync_playwright

    path = require_chromium()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(path), headless=True, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
