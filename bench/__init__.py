"""The benchmarks: one module each, run from the repo root as ``python -m bench.NAME`` (``make bench``
runs them all); each module's docstring says what it measures and how to run it. docs/measurements.md
keeps their numbers. Modules shared by several benches (app_timing, app_latency's store) are
imported as ``bench.NAME``.
"""
