"""`unspecific report --html`: one self-contained page whose numbers are the report's.

The page is opened in real headless Chromium (tests/browser.py) and checked for what it shows:
the tables' counts against pipeline.analysis.metrics' groups, the copied n-gram spans against
pipeline.analysis.copying, the judges' quotes where they are in the text, and the flipped constraints
against pipeline.analysis.metrics.constraint_items. Screenshots of the first screen and of the Audit
content are written to tmp_path.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.analysis import copying
from pipeline.analysis.metrics import constraint_items
from pipeline.cli import main
from pipeline.core.definitions import Outcome
from pipeline.core.text import count_words
from pipeline.outputs.html_highlights import merge_spans
from pipeline.outputs.html_report import PACKED, write_html
from pipeline.outputs.report import ReportOptions, build_report, main_groups
from pipeline.store.database import open_store
from tests.fakes.synthetic import SyntheticSpec, build_synthetic_store
from tests.support.browser import chromium

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("html")
    path = root / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=12, seed=3))
    store = open_store(path, create=False, readonly=True)
    report = build_report(store, ReportOptions(n_resamples=200))
    result = write_html(store, report, root / "out")
    yield store, report, result
    store.close()


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def _page(browser, result):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"error: {e}"))
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    # Nothing but the file itself may be requested: no CDN, no font, no beacon.
    page.on("request", lambda r: problems.append(f"request: {r.url}")
            if not r.url.startswith("file://") else None)
    page.goto(result.path.as_uri())
    return page, problems


def _block(page_text: str, block_id: str):
    m = re.search(rf'<script type="{re.escape(PACKED)}" id="{block_id}">([^<]*)</script>', page_text)
    assert m, block_id
    return json.loads(gzip.decompress(base64.b64decode(m.group(1))))


def _open(page, iid: int, response_index: int, cid: int, copy_mode: str = "constraint") -> None:
    page.evaluate(f"async () => await window.unspecificReport.open({iid})")
    page.locator(".tabs button").nth(response_index).click()
    page.locator(f'.cons tr[data-c="{cid}"]').click()
    if copy_mode == "references":
        page.locator("#copy-mode").click()
    page.wait_for_selector("#detail h3")


def _mark_ranges(page, selector: str) -> list[tuple[int, int]]:
    """The highlighted character ranges, adjacent pieces joined (a quote inside a copied span cuts it),
    by the page's own merge: what a test expects it computes without it."""
    pieces = page.eval_on_selector_all(selector, "els => els.map(e => [+e.dataset.start, +e.dataset.end])")
    return [(start, end) for start, end in merge_spans([tuple(p) for p in pieces])]


def test_page_is_self_contained_and_packed_per_instruction(built) -> None:
    store, report, result = built
    page = result.path.read_text(encoding="utf-8")
    for outside in ("<link", " src=", "href=", "url(", "http://", "https://", "@import"):
        assert outside not in page, outside
    assert "default-src 'none'" in page  # the page may not fetch anything, even if a text asked
    assert result.instructions == 12
    assert page.count(f'type="{PACKED}" id="i') == 12
    # A reference shared by the four conditions of a pair is stored once.
    assert page.count(f'type="{PACKED}" id="t') == result.texts
    assert result.texts < sum(len(_block(page, f"i{iid}")["texts"]) for iid in _instruction_ids(page))


def _instruction_ids(page: str) -> list[int]:
    return [int(x) for x in re.findall(rf'type="{re.escape(PACKED)}" id="i(\d+)"', page)]


def test_blocks_hold_the_reports_numbers(built) -> None:
    store, report, result = built
    page = result.path.read_text(encoding="utf-8")
    rows = {(r.response_id, r.ratio): r for r in report.metrics.rows}
    items = constraint_items(store, ratio=report.ratio)
    for iid in _instruction_ids(page):
        chunk = _block(page, f"i{iid}")
        for resp in chunk["responses"]:
            full, at = rows[(resp["id"], None)], rows[(resp["id"], report.ratio)]
            assert resp["org"] == pytest.approx(full.org, abs=1e-4)
            assert resp["core"] == pytest.approx(at.core, abs=1e-4)
            assert resp["copy_a"] == pytest.approx(at.extra["copy_a_ngrams"])
            flipped = {i.constraint_id for i in items if i.response_id == resp["id"] and i.flipped}
            assert resp["flipped"] == len(flipped)
            assert {c["id"] for c in chunk["constraints"] if c.get("per", {}).get(str(resp["id"]), {})
                    .get("state") == "flipped"} == flipped
        # Each text's words are the pipeline's count (pipeline.core.text.count_words): the page counts none.
        assert chunk["words"] == {h: count_words(_block(page, f"t{h}")) for h in chunk["texts"]}


def test_first_screen_shows_the_reports_counts(built, browser, tmp_path: Path) -> None:
    store, report, result = built
    page, problems = _page(browser, result)
    groups = main_groups(report)
    assert groups
    for g in groups:
        key = "|".join((g.domain, g.condition, g.model, g.mode))
        cells = page.locator(f'tr[data-group="{key}"] td').all_inner_texts()
        assert cells[6] == str(g.n), key
        assert cells[8] == f"{g.judged_items} / {g.expected_items}", key
        assert cells[2].split()[0] == f"{100 * g.org.value:.1f}", key
        assert cells[3].split()[0] == f"{100 * g.core.value:.1f}", key
    assert page.locator("svg.chart").count() == len({g.domain for g in groups})
    assert page.locator("#index tr.row").count() == 12
    shot = tmp_path / "report-first-screen.png"
    page.screenshot(path=str(shot))
    assert shot.read_bytes().startswith(PNG) and shot.stat().st_size > 20_000
    assert problems == []
    page.close()


def _known_copy(store, report, page_text: str):
    """An instruction, response and constraint whose response copies 5-grams from reference A."""
    for iid in _instruction_ids(page_text):
        chunk = _block(page_text, f"i{iid}")
        ref_a = store.conn.execute("SELECT body FROM texts WHERE hash = ?", (chunk["a"],)).fetchone()[0]
        ref_b = store.conn.execute("SELECT body FROM texts WHERE hash = ?", (chunk["b"],)).fetchone()
        for k, resp in enumerate(chunk["responses"]):
            text = store.conn.execute("SELECT body FROM texts WHERE hash = ?", (resp["r"],)).fetchone()[0]
            spans = copying.copied_ngrams(text, ref_a, 5) + (copying.copied_ngrams(text, ref_b[0], 5)
                                                             if ref_b else [])
            if spans:
                cid = next(c["id"] for c in chunk["constraints"] if c["active"])
                return iid, k, cid, resp, text, spans
    raise AssertionError("the synthetic store has no copied 5-gram")


def test_audit_highlights_a_known_copied_ngram(built, browser, tmp_path: Path) -> None:
    store, report, result = built
    page, problems = _page(browser, result)
    iid, k, cid, resp, text, spans = _known_copy(store, report, result.path.read_text(encoding="utf-8"))
    _open(page, iid, k, cid, copy_mode="references")
    expected = []
    for start, end in sorted((s.a_start, s.a_end) for s in spans):
        if expected and start <= expected[-1][1]:
            expected[-1] = (expected[-1][0], max(expected[-1][1], end))
        else:
            expected.append((start, end))
    assert _mark_ranges(page, "#pane-response mark.copy") == expected
    shown = page.locator("#pane-response mark.copy").all_inner_texts()
    assert spans[0].in_a(text).split()[0] in " ".join(shown)
    # The counts beside the response are the report's copied 5-grams (distinct, per reference).
    row = next(r for r in report.metrics.rows if r.response_id == resp["id"] and r.ratio is None)
    assert float(page.locator(".response-counts .copy-a").inner_text()) == row.extra["copy_a_ngrams"]
    page.screenshot(path=str(tmp_path / "report-audit.png"))
    assert problems == []
    page.close()


def test_audit_highlights_the_judges_quotes_and_counts_flips(built, browser) -> None:
    store, report, result = built
    page_text = result.path.read_text(encoding="utf-8")
    page, problems = _page(browser, result)
    items = constraint_items(store, ratio=report.ratio)
    iid = _instruction_ids(page_text)[0]
    chunk = _block(page_text, f"i{iid}")
    resp = chunk["responses"][0]
    text = store.conn.execute("SELECT body FROM texts WHERE hash = ?", (resp["r"],)).fetchone()[0]
    # A Yes verdict on the response whose quote judging found word for word.
    cid, quote = next(store.conn.execute(
        "SELECT v.constraint_id, v.quote FROM verdicts v JOIN constraints c ON c.id = v.constraint_id"
        " WHERE v.generation_id = ? AND v.verdict = 1 AND v.quote_found = 'exact' AND "
        "c.active = 1 ORDER BY v.id",
        (resp["id"],)))
    _open(page, iid, 0, cid)
    ranges = _mark_ranges(page, "#pane-response mark.quote")
    norm = lambda s: " ".join(s.lower().split())  # noqa: E731 - judging's normalisation, for ASCII
    assert any(norm(text[a:b]) == norm(quote).rstrip(".") for a, b in ranges), (quote, ranges)
    # Every FLIP the page marks for this response is one pipeline.analysis.metrics counts, and no other.
    flipped = {i.constraint_id for i in items if i.response_id == resp["id"] and i.flipped}
    marked = page.eval_on_selector_all(f'.cons td.flipped[data-response="{resp["id"]}"]',
                                       "els => els.map(e => +e.closest('tr').dataset.c)")
    assert set(marked) == flipped and len(marked) == len(flipped)
    assert page.locator(".response-counts .flip-count").inner_text() == str(len(flipped))
    assert problems == []
    page.close()


def test_nothing_leaks_into_the_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=4, seed=1))
    secret = "zq-private-value-0123456789"
    monkeypatch.setenv("ACME_API_KEY", secret)
    store = open_store(path)
    url = "https://llm.internal.example:8443/v1"
    log = "llama_model_load: loaded meta data with 26 key-value pairs"
    store.conn.execute("UPDATE runs SET config = ?, error = ?",
                       (json.dumps({"endpoints": {"x": {"base_url": url,
                                                        "api_key_env": "ACME_API_KEY"}}}), log))
    # A model that echoed a key into its text: the page redacts it like every error text.
    iid, cid = store.conn.execute("SELECT instruction_id, id FROM constraints "
                                  "WHERE active = 1 LIMIT 1").fetchone()
    store.conn.execute("UPDATE constraints SET text = text || ?  WHERE id = ?", (f" (key {secret})", cid))
    store.conn.execute("UPDATE instructions SET main_task = main_task || ? WHERE id = ?",
                       (" sk-abcdefghijklmnop1234", iid))
    store.commit()
    report = build_report(store, ReportOptions(n_resamples=50))
    result = write_html(store, report, tmp_path / "out")
    store.close()
    raw = result.path.read_text(encoding="utf-8")
    everything = raw + "".join(json.dumps(_block(raw, b))
                               for b in re.findall(rf'type="{re.escape(PACKED)}" id="(\w+)"', raw))
    for leak in (secret, url, "llm.internal", log, "llama_model_load", "sk-abcdefghijklmnop1234"):
        assert leak not in everything, leak
    assert "[REDACTED]" in everything


def test_cli_writes_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Wide enough that the printed path is never wrapped: xdist's tmp_path is longer (popen-gw0/).
    monkeypatch.setenv("COLUMNS", "400")
    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=4, seed=2))
    out = tmp_path / "html"
    assert main(["--store", str(path), "report", "--html", str(out), "--resamples", "50"]) == 0
    assert (out / "report.html").is_file()
    assert "report.html" in capsys.readouterr().out


def test_a_missing_verdict_is_listed_missing_and_counted_nowhere(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=4, seed=5))
    store = open_store(path)
    # One judge's verdict on a response becomes missing (the judge left the item out).
    vid, gid, cid, judge = store.conn.execute(
        "SELECT v.id, v.generation_id, v.constraint_id, v.judge FROM verdicts v JOIN generations g"
        " ON g.id = v.generation_id JOIN constraints c ON c.id = v.constraint_id"
        " WHERE g.kind = 'response' AND c.active = 1 ORDER BY v.id LIMIT 1").fetchone()
    store.conn.execute("UPDATE verdicts SET verdict = NULL, quote = NULL WHERE id = ?", (vid,))
    store.commit()
    report = build_report(store, ReportOptions(n_resamples=50))
    result = write_html(store, report, tmp_path / "out")
    items = {(i.constraint_id, i.response_id): i for i in constraint_items(store, ratio=report.ratio)}
    iid = store.conn.execute("SELECT instruction_id FROM generations WHERE id = ?", (gid,)).fetchone()[0]
    store.close()
    chunk = _block(result.path.read_text(encoding="utf-8"), f"i{iid}")
    meta_judges = json.loads(re.search(r'id="meta">([^<]*)<',
                                       result.path.read_text(encoding="utf-8")).group(1))["judges"]
    per = next(c for c in chunk["constraints"] if c["id"] == cid)["per"][str(gid)]
    listed = [v for v in per["v"] if v[1] == "r" and meta_judges[v[0]][0] == judge]
    assert len(listed) == 1 and listed[0][2] is None  # shown as missing, never as No
    item = items.get((cid, gid))
    # The outcome is the one pipeline.analysis.metrics gives without that verdict.
    assert per["state"] == (Outcome.NOT_JUDGED if item is None else item.outcome).key
    if item is not None:
        assert per["full"] == pytest.approx(item.full_score, abs=1e-4)


# -- finding one's way: the detail in view, the keys, the filter, the index ------------------------


def _in_view(page, selector: str) -> bool:
    """The element's top edge is on screen (a detail below the fold is not seen, however it is drawn)."""
    return page.eval_on_selector(selector, "el => { const r = el.getBoundingClientRect();"
                                           " return r.top >= 0 && r.top < innerHeight - "
                                           "20 && r.height > 0; }")


def _open_first(page, built_page: str) -> tuple[dict, list[dict]]:
    iid = _instruction_ids(built_page)[0]
    chunk = _block(built_page, f"i{iid}")
    page.evaluate(f"async () => await window.unspecificReport.open({iid})")
    return chunk, [c for c in chunk["constraints"] if c["active"]]


def test_a_click_on_the_last_constraint_shows_its_detail_beside_the_table(built, browser) -> None:
    store, report, result = built
    page, problems = _page(browser, result)
    chunk, active = _open_first(page, result.path.read_text(encoding="utf-8"))
    last = active[-1]
    page.locator(f'.cons tr[data-c="{last["id"]}"]').click()
    assert page.locator("#detail h3").inner_text().startswith(f"Constraint {last['pos']}:")
    assert _in_view(page, "#detail h3") and _in_view(page, f'.cons tr[data-c="{last["id"]}"]')
    table, detail = (page.locator(s).bounding_box() for s in (".cons", "#detail"))
    assert detail["x"] >= table["x"] + table["width"] - 1  # beside, not below, on a wide page
    assert problems == []
    page.close()


def test_a_click_on_a_narrow_page_scrolls_the_detail_into_view(built, browser) -> None:
    store, report, result = built
    page, problems = _page(browser, result)
    page.set_viewport_size({"width": 760, "height": 700})
    chunk, active = _open_first(page, result.path.read_text(encoding="utf-8"))
    page.locator(f'.cons tr[data-c="{active[0]["id"]}"]').click()
    assert page.locator("#detail h3").inner_text().startswith(f"Constraint {active[0]['pos']}:")
    assert _in_view(page, "#detail h3")
    assert problems == []
    page.close()


def test_j_k_and_the_arrows_move_through_the_constraints(built, browser) -> None:
    store, report, result = built
    page, problems = _page(browser, result)
    chunk, active = _open_first(page, result.path.read_text(encoding="utf-8"))
    page.locator(f'.cons tr[data-c="{active[0]["id"]}"]').click()

    def shown(in_view: bool = True) -> int:
        selected = page.eval_on_selector_all(".cons tr.on", "els => els.map(e => +e.dataset.c)")
        heading = page.locator("#detail h3").inner_text()
        pos = next(c["pos"] for c in active if c["id"] == selected[0])
        assert len(selected) == 1 and heading.startswith(f"Constraint {pos}:"), (selected, heading)
        assert _in_view(page, "#detail h3") or not in_view
        return [c["id"] for c in active].index(selected[0])

    for key, expected in (("j", 1), ("ArrowDown", 2), ("k", 1), ("ArrowUp", 0), ("k", 0)):
        page.keyboard.press(key)
        assert shown() == expected, key
    page.locator(".tabs button").last.click()  # a key still moves once a response's tab has the focus
    page.keyboard.press("j")
    assert shown() == 1
    for _ in range(len(active) + 2):
        page.keyboard.press("ArrowDown")
    assert shown() == len(active) - 1  # stops at the last one
    page.evaluate("() => scrollTo(0, 0)")  # reading the tables above: the arrows scroll the page
    page.keyboard.press("ArrowUp")
    assert shown(in_view=False) == len(active) - 1
    page.keyboard.press("ArrowDown")
    # The browser's own scroll is animated (the page's CSP forbids wait_for_function's eval).
    deadline = time.monotonic() + 3
    while page.evaluate("scrollY") == 0 and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert shown(in_view=False) == len(active) - 1 and page.evaluate("scrollY") > 0
    page.locator("#q").focus()  # typing in the filter (scrolled up to it) moves nothing
    page.keyboard.press("k")
    assert shown(in_view=False) == len(active) - 1 and page.locator("#q").input_value() == "k"
    assert problems == []
    page.close()


def test_the_flipped_checkbox_sits_with_its_label(built, browser) -> None:
    store, report, result = built
    page, problems = _page(browser, result)
    box = page.locator("#only-flipped").bounding_box()
    label = page.locator("label:has(#only-flipped)").bounding_box()
    text = page.evaluate("""() => { const r = document.createRange();
        r.selectNodeContents(document.querySelector('label:has(#only-flipped)'));
        const t = [...r.getClientRects()].filter(x => x.width > 0); return t[t.length - 1].left; }""")
    assert box["width"] < 30, box
    assert 0 <= text - (box["x"] + box["width"]) < 16, (box, text)  # the words start right after the box
    assert label["width"] < 260, label
    assert problems == []
    page.close()


def test_the_index_shows_each_task_and_filters_by_it(built, browser) -> None:
    from pipeline.store.metrics import report_instructions

    store, report, result = built
    page, problems = _page(browser, result)
    tasks = {iid: row.main_task for iid, row in report_instructions(store, _instruction_ids(
        result.path.read_text(encoding="utf-8"))).items()}
    shown = dict(page.eval_on_selector_all("#index tr.row", "els => els.map(e => [+e.dataset.id,"
                                                             " e.querySelector('.task').innerText])"))
    assert shown == tasks
    # A word of one task finds the instructions whose task holds it.
    word = next(w for w in max(tasks.values(), key=len).split() if len(w) > 6).strip(".,").lower()
    page.locator("#q").fill(word)
    listed = page.eval_on_selector_all("#index tr.row", "els => els.map(e => +e.dataset.id)")
    assert listed and set(listed) == {iid for iid, t in tasks.items() if word in t.lower()}
    assert problems == []
    page.close()


# -- corrected rates (issue 27): the judges' measured error beside the raw figures -------------------


def _scripted_report(scripted_store, tmp_path: Path, check=None):  # noqa: ANN001
    """The scripted judge's store (tests/test_correction.py: sensitivity 0.9, specificity 0.7) with
    ``check`` (items) as its built-in check, its report and its page."""
    from pipeline.store.judge_checks import put_check_items

    path = tmp_path / "store.sqlite"
    path.write_bytes(scripted_store[0].read_bytes())
    store = open_store(path)
    if check is not None:
        put_check_items(store, "judge-a", "builtin", check)
    report = build_report(store, ReportOptions(n_resamples=100, copy=False))
    result = write_html(store, report, tmp_path / "out")
    store.close()
    return report, result


def test_the_page_shows_raw_and_corrected_side_by_side(scripted, browser,
                                                       tmp_path: Path) -> None:  # noqa: F811
    import numpy as np

    from tests.support.judge_checks import known_check

    report, result = _scripted_report(scripted, tmp_path, known_check(np.random.default_rng(2), 0.9, 0.7, 600,
                                                                 "judge-a").items)
    page, problems = _page(browser, result)
    heads = page.locator("section.domain table.groups thead th").all_inner_texts()
    assert heads[2:8] == ["Org", "Org corr.", f"Core@{report.ratio:g}", f"Core@{report.ratio:g} corr.",
                          "superficial", "superficial corr."]
    for g in main_groups(report):
        key = "|".join((g.domain, g.condition, g.model, g.mode))
        cells = page.locator(f'tr[data-group="{key}"] td').all_inner_texts()
        fixed = report.correction.group(g.key).rates
        assert cells[2].split()[0] == f"{100 * g.org.value:.1f}" and "?" not in cells[2]
        assert cells[3].split()[0] == f"{100 * fixed.org.value:.1f}" != cells[2].split()[0]
        assert cells[7].split()[0] == f"{100 * fixed.superficial.value:.1f}"
    caption = page.locator("p.caption").first.inner_text()
    assert ("validation used: judge-a: built-in check" in caption
            and "constructed, not drawn from these texts" in caption)
    (judge,) = page.locator("#judges li").all_inner_texts()
    assert (judge.startswith("judge-a: sensitivity")
            and "built-in check (constructed, not drawn from these texts)" in judge)
    assert problems == []
    page.close()


def test_a_chance_level_judge_has_a_warning_and_no_corrected_number(scripted,
                                                                    tmp_path: Path) -> None:  # noqa: F811
    from pipeline.store.judge_checks import CheckItem

    chance = ([CheckItem("news", f"p{i}", 1, int(i < 5)) for i in range(10)]
              + [CheckItem("news", f"n{i}", 0, int(i < 6))
                 for i in range(10)])  # sensitivity 0.5, specificity 0.4
    report, result = _scripted_report(scripted, tmp_path, chance)
    text = result.path.read_text(encoding="utf-8")
    assert "corr.</th>" not in text
    warnings = re.search(r'<section id="warnings">(.*?)</section>', text).group(1)
    assert "no better than chance" in warnings and "carry no information" in warnings
    assert "no corrected figure" in re.search(r'<section id="judges">(.*?)</section>', text).group(1)


def test_an_unvalidated_judges_rates_are_marked_with_the_command(scripted,
                                                                 tmp_path: Path) -> None:  # noqa: F811
    report, result = _scripted_report(scripted, tmp_path)
    text = result.path.read_text(encoding="utf-8")
    rows = re.findall(r'<tr data-group="[^"]*">(.*?)</tr>', text)
    assert rows and "corr.</th>" not in text
    for row in rows:
        cells = re.findall(r"<td>(.*?)</td>", row)
        assert all('class="unvalidated"' in cell and "unspecific validate judges --builtin" in cell
                   for cell in cells[2:5] if cell != "-")
    caption = re.search(r'<p class="caption warn">(.*?)</p>', text).group(1)
    assert "unvalidated: judge-a" in caption and "unspecific validate judges --builtin" in caption
    judges = re.search(r'<section id="judges">(.*?)</section>', text).group(1)
    assert "unvalidated" in judges and "unspecific validate judges --builtin" in judges


# -- "Most suspicious" and the constraint-reference similarity --------------------------------------


@pytest.fixture(scope="module")
def with_similarity(tmp_path_factory):
    from pipeline.analysis.embeddings import get_embedder
    from pipeline.stages.similarity import compute_similarities

    root = tmp_path_factory.mktemp("sus")
    path = root / "s.sqlite"
    build_synthetic_store(path, SyntheticSpec(n_instructions=12, seed=3))
    store = open_store(path)
    assert compute_similarities(store, get_embedder("hash")) > 0
    report = build_report(store, ReportOptions(n_resamples=50, copy=False))
    result = write_html(store, report, root / "out")
    yield store, report, result
    store.close()


def test_most_suspicious_shows_the_pipelines_ranking_and_hides_by_reason(with_similarity, browser) -> None:
    from pipeline.analysis.similarity import constraint_similarities
    from pipeline.analysis.suspicion import suspicion_queue

    store, report, result = with_similarity
    page, problems = _page(browser, result)
    queue = suspicion_queue(store, ratio=report.ratio)
    by_item = {(e.instruction_id, e.position, e.writer.model, e.writer.mode): e for e in queue}

    def shown() -> list[tuple[float, Any, str]]:
        out = []
        for li in page.locator("#sus-list li[data-c]").all():
            score = float(li.locator(".score").inner_text())
            iid, pos = (int(x) for x in re.findall(r"\d+", li.locator("button.open").inner_text()))
            out.append((score,
                        by_item[(iid, pos, li.get_attribute("data-model"), li.get_attribute("data-mode"))],
                        li.locator(".why").inner_text()))
        return out

    def key(e: Any) -> tuple[int, int, str, str]:
        return e.instruction_id, e.position, e.writer.model, e.writer.mode

    # The pipeline's order and scores, as written: the page neither sums nor sorts.
    items = shown()
    assert [key(e) for _, e, _ in items] == [key(e) for e in queue[:20]]
    assert all(score == pytest.approx(e.score(), abs=0.005) for score, e, _ in items)
    # A reason switched off hides the items only it fires for; the others keep their place and score.
    page.locator('#sus-reasons input[data-r="lost"]').uncheck()
    items = shown()
    kept = [e for e in queue if set(e.reasons()) - {"lost"}][:20]
    assert any(e.reasons() == ("lost",) for e in queue), "no item only 'lost' fires for: nothing to hide"
    assert [key(e) for _, e, _ in items] == [key(e) for e in kept]
    assert all(score == pytest.approx(e.score(), abs=0.005) and "lost" not in why for score, e, why in items)
    # An item opens its constraint's detail on its response, with the stored similarity and a bar.
    _, first, _ = items[0]
    page.locator("#sus-list li[data-c] button.open").first.click()
    page.wait_for_selector("#detail .similarity")
    assert first.text in page.locator("#detail h3").inner_text()
    assert page.locator(".tabs button.on").inner_text() == f"{first.writer.model}/{first.writer.mode}"
    sim = constraint_similarities(store)[first.constraint_id]
    assert f"A {sim.to_a:.2f}" in page.locator("#detail .similarity").inner_text()
    width = page.locator("#detail .similarity .bar > span").first.evaluate("e => e.style.width")
    assert width == f"{100 * min(1, max(0, sim.to_a)):.0f}%"
    assert problems == []
    page.close()
