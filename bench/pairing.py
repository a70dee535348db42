"""Benchmark: pairing with the usearch index vs brute force, and embedding speed.

1. 20,000 unit vectors (768 dims, the mpnet size) are paired under the paper rule (most
   similar other vector with cosine < 0.85) twice: by the index path of pipeline.stages.pairing
   (usearch HNSW, self-checked on a sample, exact fallback when its recall is short) and by
   exact chunked numpy search. Prints both times (wall and CPU: the machine is shared),
   their ratio and the share of articles whose partner is the same (must be >= 0.99).
   Two data sets: random unit vectors (as asked; HNSW's worst case, high intrinsic
   dimension) and clustered vectors of low intrinsic dimension (like real embeddings).
2. Articles embedded per second by mpnet and MiniLM on ~50 real BBC articles (300-1000
   words), the model loaded beforehand, no cache.

    .venv/bin/python -m bench.pairing [--n 20000] [--dim 768] [--articles 50] [--skip-embed] [--skip-pairing]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from pipeline.stages.pairing import choose_paper, neighbours_brute, neighbours_index

MIN_AGREEMENT = 0.99


def random_vectors(n: int, dim: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def clustered_vectors(n: int, dim: int, topics: int = 40, latent: int = 24) -> np.ndarray:
    """Topics in a 24-dim latent space, projected to ``dim`` with isotropic noise."""
    rng = np.random.default_rng(1)
    centres = 2 * rng.standard_normal((topics, latent))
    points = centres[rng.integers(0, topics, n)] + rng.standard_normal((n, latent))
    v = points @ rng.standard_normal((latent, dim)) + np.sqrt(latent) * rng.standard_normal((n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def bench_pairing(label: str, vectors: np.ndarray, k: int = 32, max_cos: float = 0.85) -> float:
    def brute():
        ids, sims = neighbours_brute(vectors, k)
        return {a: b for a, b, *_ in choose_paper(vectors, ids, sims, max_cos, 5)}

    def index():
        ids, sims, report = neighbours_index(vectors, k)
        return {a: b for a, b, *_ in choose_paper(vectors, ids, sims, max_cos, 5)}, report

    brute_pairs, brute_wall, brute_cpu = timed(brute)
    (index_pairs, report), index_wall, index_cpu = timed(index)
    agree = sum(1 for a, b in brute_pairs.items() if index_pairs.get(a) == b) / len(brute_pairs)
    n, dim = vectors.shape
    recalls = ", ".join(f"{es}: {r:.3f}" for es, r in report.recalls.items())
    steps = ", ".join(f"{step} {s:.1f}" for step, s in report.seconds.items())
    print(f"{label}: {n:,} vectors, {dim} dims, paper rule (cosine < {max_cos})")
    print(f"  brute force (chunked numpy): {brute_wall:8.1f} s wall {brute_cpu:8.1f} s CPU")
    print(f"  index path ({report.method:<12}): {index_wall:8.1f} s wall {index_cpu:8.1f} s CPU  [{steps} s]")
    print(f"  ratio index / brute        : {index_wall / brute_wall:8.2f} wall "
          f"{index_cpu / brute_cpu:8.2f} CPU")
    print(f"  HNSW sampled recall@1 by expansion_search: {recalls}")
    print(f"  pairs that agree           : {agree:8.4f}  "
          f"({'OK' if agree >= MIN_AGREEMENT else 'BELOW'} {MIN_AGREEMENT})")
    return agree


def bbc_sample(count: int) -> list[str]:
    from pipeline.core.text import count_words
    from pipeline.stages.corpus import RawArticle, clean_text, read_bbc_news

    texts: list[str] = []
    items = [i for i in read_bbc_news() if isinstance(i, RawArticle)]
    step = max(1, len(items) // (count * 3))  # spread over the five topics
    for item in items[::step]:
        text = clean_text(item.text)
        if 300 <= count_words(text) <= 1000:
            texts.append(text)
        if len(texts) == count:
            break
    return texts


def bench_embedding(count: int) -> None:
    from pipeline.analysis.embeddings import get_embedder

    texts = bbc_sample(count)
    words = sum(len(t.split()) for t in texts)
    print(f"embedding {len(texts)} BBC articles ({words / len(texts):.0f} words on average), CPU, "
          f"{os.cpu_count()} cores")
    for name in ("minilm", "mpnet"):
        embedder = get_embedder(name)
        t0 = time.perf_counter()
        embedder.embed(texts[:2])  # load the model and warm up, outside the timing
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        embedder.embed(texts)
        seconds = time.perf_counter() - t0
        print(f"  {embedder.name:<20} {len(texts) / seconds:6.1f} articles/s  ({seconds:.1f} s; "
              f"load+warm-up {load_s:.1f} s)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--articles", type=int, default=50)
    parser.add_argument("--skip-embed", action="store_true", help="skip the embedding speed part")
    parser.add_argument("--skip-pairing", action="store_true", help="skip the index vs brute force part")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    agreements = [] if args.skip_pairing else [
        bench_pairing("clustered (low intrinsic dimension)", clustered_vectors(args.n, args.dim)),
        bench_pairing("random unit vectors", random_vectors(args.n, args.dim)),
    ]
    if not args.skip_embed:
        bench_embedding(args.articles)
    return 0 if min(agreements, default=1.0) >= MIN_AGREEMENT else 1


if __name__ == "__main__":
    sys.exit(main())
