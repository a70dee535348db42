"""Time `unspecific --help`: heavy libraries must not load at startup. Target < 0.3 s.

Runs the installed console script several times (after one warm-up run that fills the OS
file cache) and prints the median and its ratio to the target. `--check` exits 1 above target.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 0.3


def command() -> list[str]:
    script = Path(sys.executable).parent / "unspecific"
    if script.exists():
        return [str(script), "--help"]
    found = shutil.which("unspecific")
    if found:
        return [found, "--help"]
    return [sys.executable, "-m", "pipeline.cli", "--help"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--check", action="store_true", help="exit 1 when the median is above target")
    args = parser.parse_args()
    cmd = command()
    subprocess.run(cmd, capture_output=True, check=True)  # warm-up
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    median = statistics.median(times)
    print(f"command: {' '.join(cmd)}")
    print(f"runs: {args.runs}, min {min(times):.3f}s, median {median:.3f}s, max {max(times):.3f}s")
    print(f"target: < {TARGET_S:.2f}s; median / target = {median / TARGET_S:.2f} "
          f"({'OK' if median < TARGET_S else 'ABOVE TARGET'})")
    return 1 if args.check and median >= TARGET_S else 0


if __name__ == "__main__":
    sys.exit(main())
