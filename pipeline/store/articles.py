"""The ``articles`` table: corpus articles with their cleaning status (kept, duplicate,
near_duplicate, too_short, too_long, pending; ``reference`` for imported references).

Read and written by the corpus stage (pipeline.stages.corpus) and read by pairing and build.
None of these functions commits: the caller decides the transaction (the corpus import
commits every batch of articles)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.store.database import Store


@dataclass(frozen=True)
class CorpusArticle:
    """An article already stored for a corpus, as a re-import of that corpus sees it."""

    id: int
    domain: str
    status: str
    words: int


@dataclass(frozen=True)
class ArticleElsewhere:
    """An article another corpus of the same domain holds."""

    source_id: str
    text_hash: str
    corpus: str
    domain: str


@dataclass(frozen=True)
class ArticleRef:
    id: int
    text_hash: str


@dataclass(frozen=True)
class KeptArticle:
    id: int
    text_hash: str
    title: str
    words: int


@dataclass(frozen=True)
class ArticleLength:
    corpus: str
    domain: str
    status: str
    words: int


def corpus_articles(store: Store, corpus: str) -> dict[str, CorpusArticle]:
    """The corpus's stored articles by source id."""
    rows = store.conn.execute("SELECT source_id, id, domain, status, words FROM articles WHERE corpus = ?",
                              (corpus,))
    return {r[0]: CorpusArticle(r[1], r[2], r[3], r[4]) for r in rows}


def articles_elsewhere(store: Store, corpus: str, domain: str) -> list[ArticleElsewhere]:
    """The domain's articles held by other corpora (references excluded), newest first."""
    rows = store.conn.execute(
        "SELECT source_id, text_hash, corpus, domain FROM articles WHERE corpus != ? AND domain = ?"
        " AND status != 'reference' ORDER BY id DESC", (corpus, domain))
    return [ArticleElsewhere(*r) for r in rows]


def originals_by_hash(store: Store, domain: str) -> dict[str, int]:
    """Text hash -> the first article of the domain with that text that is not an exact duplicate."""
    rows = store.conn.execute(
        "SELECT text_hash, min(id) FROM articles WHERE domain = ? AND status != "
        "'duplicate' GROUP BY text_hash",
        (domain,))
    return {h: aid for h, aid in rows}


def insert_article(store: Store, *, corpus: str, domain: str, source_id: str, title: str,
                   text_hash: str, words: int,
                   status: str, duplicate_of: int | None, imported_at: str) -> int:
    """Add one article; returns its id."""
    cur = store.conn.execute(
        "INSERT INTO articles(corpus, domain, source_id, title, text_hash, words, status, "
        "duplicate_of, imported_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (corpus, domain, source_id, title, text_hash, words, status, duplicate_of, imported_at),
    )
    return int(cur.lastrowid or 0)


def set_article_status(store: Store, article_id: int, status: str) -> None:
    store.conn.execute("UPDATE articles SET status = ? WHERE id = ?", (status, article_id))


def settle_articles(store: Store, settled: Sequence[tuple[str, int | None, int]]) -> None:
    """Set (status, duplicate_of) of many articles: each item is (status, duplicate_of, article id)."""
    store.conn.executemany("UPDATE articles SET status = ?, duplicate_of = ? WHERE id = ?", settled)


def keep_pending(store: Store, domain: str) -> None:
    """Every pending article of the domain becomes kept (no near-duplicate check)."""
    store.conn.execute("UPDATE articles SET status = 'kept' WHERE domain = ? AND status = 'pending'",
                       (domain,))


def articles_with_status(store: Store, domain: str, status: str) -> list[ArticleRef]:
    """The domain's articles of one status, in id order."""
    rows = store.conn.execute("SELECT id, text_hash FROM articles WHERE domain = ? AND "
                              "status = ? ORDER BY id",
                              (domain, status))
    return [ArticleRef(*r) for r in rows]


def kept_articles(store: Store, domain: str) -> list[KeptArticle]:
    """The domain's kept articles, in id order: what pairing pairs."""
    rows = store.conn.execute(
        "SELECT id, text_hash, title, words FROM articles WHERE domain = ? AND status = 'kept' ORDER BY id",
        (domain,))
    return [KeptArticle(*r) for r in rows]


def lengths_outside_window(store: Store, corpus: str) -> list[int]:
    """Word counts of the corpus's articles outside the word window (too short or too long)."""
    rows = store.conn.execute("SELECT words FROM articles WHERE corpus = ? AND status IN "
                              "('too_short', 'too_long')",
                              (corpus,))
    return [r[0] for r in rows]


def article_lengths(store: Store) -> list[ArticleLength]:
    """Every corpus article (imported references excluded) with its status and length, by domain and
    corpus."""
    rows = store.conn.execute("SELECT corpus, domain, status, words FROM articles WHERE status != 'reference'"
                              " ORDER BY domain, corpus")
    return [ArticleLength(*r) for r in rows]


def status_counts(store: Store, corpus: str) -> dict[str, int]:
    """Articles of one corpus per status."""
    return dict(store.conn.execute(
        "SELECT status, count(*) FROM articles WHERE corpus = ? GROUP BY status", (corpus,)).fetchall())


def count_articles(store: Store, domain: str, status: str | None = None) -> int:
    """Articles of the domain (of one status when given)."""
    if status is None:
        row = store.conn.execute("SELECT count(*) FROM articles WHERE domain = ?", (domain,)).fetchone()
    else:
        row = store.conn.execute("SELECT count(*) FROM articles WHERE domain = ? AND status = ?",
                                 (domain, status)).fetchone()
    return int(row[0])


def article_text_hash(store: Store, article_id: int | None) -> str | None:
    """The hash of the article's text (None when there is no such article)."""
    row = store.conn.execute("SELECT text_hash FROM articles WHERE id = ?", (article_id,)).fetchone()
    return row[0] if row else None


@dataclass(frozen=True)
class ArticleDomain:
    id: int
    domain: str


def article_domain(store: Store, article_id: object) -> ArticleDomain | None:
    """The article's id and domain (None when there is no such article)."""
    row = store.conn.execute("SELECT id, domain FROM articles WHERE id = ?", (article_id,)).fetchone()
    return ArticleDomain(*row) if row else None


def articles_with_source_id(store: Store, source_id: str, corpus: str | None = None) -> list[ArticleDomain]:
    """Articles of this source id (in this corpus when given): more than one when corpora share ids."""
    sql, params = "SELECT id, domain FROM articles WHERE source_id = ?", [source_id]
    if corpus is not None:
        sql, params = sql + " AND corpus = ?", params + [corpus]
    return [ArticleDomain(*row) for row in store.conn.execute(sql, params)]


@dataclass(frozen=True)
class ArticleSource:
    """Where an article came from, as an export names a reference."""

    id: int
    corpus: str | None
    source_id: str | None
    title: str | None
    text_hash: str | None


def article_source(store: Store, article_id: int) -> ArticleSource | None:
    row = store.conn.execute("SELECT id, corpus, source_id, title, text_hash FROM articles WHERE id = ?",
                             (article_id,)).fetchone()
    return ArticleSource(*row) if row else None


def domain_article_bodies(store: Store, domain: str) -> list[str]:
    """The texts of the domain's articles, in id order, each text once and duplicates left out: the
    corpus a copied phrase's document frequency is counted in (pipeline.analysis.specificity). Articles
    outside the build's word window count: they are the domain's writing all the same."""
    rows = store.conn.execute("SELECT t.body FROM texts t WHERE t.hash IN (SELECT a.text_hash FROM articles a"
                              " WHERE a.domain = ? AND a.status NOT LIKE '%duplicate%') ORDER BY t.hash",
                              (domain,))
    return [row[0] for row in rows]
