"""The HTML report and the served app, measured in headless Chromium.

For synthetic stores of 200 and 2,000 instructions (tests.fakes.synthetic; 39 constraints, two
models, two judges): the time to write report.html (build_report excluded, printed apart), its
size (target <= 25 MB), the first contentful paint of the page opened from disk (target <= 2 s),
and the time to open one instruction (unpack its block and texts, draw its constraints and the
Audit content). Then `unspecific serve` on the 200-instruction store: the time from asking for
the page to the app's first screen in the browser.

    python -m bench.html_report [--sizes 200,2000] [--keep DIR]

Needs /usr/bin/chromium (Debian's chromium) and playwright from the dev extras.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipeline.outputs.html_report import write_html
from pipeline.outputs.report import ReportOptions, build_report
from pipeline.store.database import open_store
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.browser import chromium

ROOT = Path(__file__).resolve().parent.parent

MB = 1e6
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


def first_paint(browser, path: Path) -> tuple[float, float, float]:
    """(first contentful paint ms, load event ms, open one instruction ms) for the page on disk."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(path.as_uri())
    fcp = None
    for _ in range(200):
        fcp = page.evaluate("(performance.getEntriesByName('first-contentful-paint')[0] || "
                            "{}).startTime || null")
        if fcp:
            break
        page.wait_for_timeout(20)
    load = page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd")
    first_id = page.eval_on_selector("#index tr.row", "el => +el.dataset.id")
    opened = page.evaluate(f"""async () => {{
        const t = performance.now();
        await window.unspecificReport.open({first_id});
        await new Promise(requestAnimationFrame);
        return performance.now() - t; }}""")
    page.close()
    return float(fcp or "nan"), float(load), float(opened)


def served_first_screen(browser, store: Path) -> float:
    """Seconds from asking for the served page (with its token) to the app's first screen."""
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "--store", str(store), "serve", "--host",
                             "127.0.0.2", "--port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        url = None
        while url is None:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("serve stopped")
            m = re.search(r"http://\S+\?token=\S+", line)
            url = m.group(0) if m else None
        for _ in range(200):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.2", port)) == 0:
                    break
            time.sleep(0.05)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        frames: list[str] = []
        page.on("websocket", lambda ws: ws.on("framereceived", lambda p: frames.append(
            ANSI.sub("", p.decode("utf-8", "ignore") if isinstance(p, bytes) else p))))
        start = time.perf_counter()
        page.goto(url)
        while "[read-only]" not in "".join(frames):
            if time.perf_counter() - start > 120:
                raise RuntimeError("no first screen in 120 s")
            page.wait_for_timeout(20)
        took = time.perf_counter() - start
        page.close()
        return took
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="200,2000")
    ap.add_argument("--keep", default=None, help="write the stores and pages here (default: a temp folder)")
    args = ap.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-html-"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split(",")]
    stores = {}
    with chromium() as browser:
        for n in sizes:
            path = work / f"s{n}.sqlite"
            if not path.exists():
                build_synthetic_store(path, SyntheticSpec(n_instructions=n))
            stores[n] = path
            store = open_store(path, create=False, readonly=True)
            try:
                t = time.perf_counter()
                report = build_report(store, ReportOptions())
                t_report = time.perf_counter() - t
                t = time.perf_counter()
                result = write_html(store, report, work / f"html{n}")
                t_html = time.perf_counter() - t
            finally:
                store.close()
            fcp, load, opened = first_paint(browser, result.path)
            print(f"{n:>5} instructions: report.html {result.bytes / MB:.1f} MB (target 25), "
                  f"{result.texts} texts;"
                  f" build_report {t_report:.1f} s, write_html {t_html:.1f} s; first "
                  f"contentful paint {fcp:.0f} ms"
                  f" (target 2000), load event {load:.0f} ms; open one instruction {opened:.0f} ms",
                  flush=True)
        smallest = stores[min(sizes)]
        took = served_first_screen(browser, smallest)
        print(f"served app ({min(sizes)} instructions): first screen {took:.2f} s after "
              "the page was asked for")


if __name__ == "__main__":
    main()
