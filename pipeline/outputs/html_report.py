"""`unspecific report --html DIR`: the report and the Audit content in one self-contained HTML file.

Anyone can open the file: no server, no network, no CDN; the styles and the script are inlined
(``html_report.css`` and ``html_report.js`` beside this module). It holds (the first screen drawn by
pipeline.outputs.html_tables, the highlights' spans found by pipeline.outputs.html_highlights):

- the condition x model tables of ``pipeline.outputs.report.main_groups`` with their intervals and
  coverage, the warnings, and the depth profile when several summary ratios exist;
- beside each raw rate its corrected one (pipeline.analysis.correction, as `report` prints it), a
  caption naming the validation used, each judge's measured error (the built-in check said to be
  constructed, not human gold), and a "?" on every raw rate of an unvalidated judge with the command;
- the Org vs Core charts as inline SVG, drawn from the same groups;
- "Models compared" (pipeline.outputs.html_models): each model pair on the same instructions, which
  follows more deeply if the tests can tell, and each model's refusals;
- "Most suspicious": pipeline.analysis.suspicion's ranking of the page's items, in its order and with
  its scores, each with its reasons in words; a checkbox per reason hides the items none of the
  checked reasons fires for (the page never sums or sorts a score); an item opens its constraint's
  detail;
- an index of instructions (the task; Org, Core, flipped per response, from ``Metrics.rows``);
- per instruction, its constraints with each response's outcome (``pipeline.analysis.metrics.Item``:
  pipeline.core.definitions.Outcome, the app's words), each judge's verdict as the Audit lists it
  (pipeline.store.verdicts.shown_verdicts: the latest Yes/No, else a missing one) with the quote found in
  the text, the copied n-grams (pipeline.analysis.copying), lexical similarity
  (pipeline.analysis.copying.lexical_overlap), the stored constraint-reference similarity with a bar
  (pipeline.analysis.similarity) and lineage.
  A click on a constraint shows that detail beside the list (on a narrow page below it, scrolled
  to); j / k and the arrow keys move through the constraints.

Nothing is recomputed here: every count and rate is read from the report's ``Metrics`` or from
the pipeline functions the app uses. The page computes nothing either, not even a text's words
(pipeline.core.text.count_words, written beside the texts): it only draws.

Scale: at 2,000 instructions the texts alone are megabytes. Each instruction is an inert
``<script type="application/x-gzip-base64+json">`` block (gzip, then base64) that the page
unpacks and parses only when it is opened, and each text (a reference is shared by the four
conditions of a pair) is its own block, stored once. The first screen
(tables and charts) is plain HTML ahead of every data block, so the browser paints it before it
reads the rest of the file.

What never goes in: the config (endpoints, keys), run errors and server logs. The store's text
fields that may hold such things (runs.error, runs.config, llm_calls) are not read at all; the
texts that are written pass ``pipeline.core.redact.redact`` once more as a last guard.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.analysis import copying
from pipeline.analysis.metrics import constraint_items, runs_covered
from pipeline.analysis.metrics.items import flipped_per_response, items_by_pair, shown_verdicts_by_pair
from pipeline.analysis.similarity import constraint_similarities
from pipeline.analysis.specificity import template_words
from pipeline.analysis.support import LOCATED
from pipeline.analysis.suspicion import (
    REASON_TEXT,
    REASONS,
    Evidence,
    reason_sentences,
    same_phrase_sentence,
    suspicion_queue,
)
from pipeline.core.definitions import Outcome, same_ratio
from pipeline.core.redact import known_secrets, redact
from pipeline.core.text import count_words
from pipeline.outputs.html_copying import copying_html
from pipeline.outputs.html_highlights import copied_spans, copy_count_cell, merge_spans, quote_span
from pipeline.outputs.html_models import models_html
from pipeline.outputs.html_tables import depth_html, esc, gate_html, judges_html, tables_html
from pipeline.outputs.report import writer_label
from pipeline.outputs.suspicion import MISSING_COPY, mark_of
from pipeline.store import metrics as reads
from pipeline.store.constraints import ConstraintRecord, constraint_records_of
from pipeline.store.echo import echoes_of
from pipeline.store.marks import marks
from pipeline.store.verdicts import Verdict

if TYPE_CHECKING:
    from pipeline.outputs.report import Report
    from pipeline.store.database import Store

HERE = Path(__file__).parent
FILE_NAME = "report.html"
# The data blocks' type: not JavaScript, so the browser neither runs nor parses them at load.
PACKED = "application/x-gzip-base64+json"
SUSPICIOUS_TOP = 20  # shown in "Most suspicious"; the page keeps SUSPICIOUS_MAX to re-rank from
SUSPICIOUS_MAX = 2000
CONSTRAINT_N = 3  # as the Audit screen: a constraint is short, three shared words already say "copied"
REFERENCE_N = 5  # between long texts, the paper's 5-gram (the report's copy_*_ngrams)


@dataclass(frozen=True)
class HtmlResult:
    path: Path
    bytes: int
    instructions: int
    texts: int


# -- small helpers -------------------------------------------------------------------------------


def _num(x: float | None) -> float | None:
    """JSON-safe number (NaN -> null), rounded: the page shows 3 decimals at most."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None
    return round(float(x), 4)


def _json_block(data: Any) -> str:
    """JSON safe inside <script>: no '<' at all, so no '</script>' or '<!--' can end the block."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).replace("<", "\\u003c")


def _packed(data: Any) -> str:
    """gzip, then base64: JSON of judges' quotes and spans shrinks about 6x, texts about 3x, and
    base64 has no '<'. The page unpacks a block with the browser's DecompressionStream when it
    is opened, so the unpacked megabytes never exist at load."""
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


@dataclass(frozen=True)
class Cleaner:
    """Redacts the keys the environment holds (known_secrets, read once per page) from page text."""

    secrets: tuple[str, ...]

    def __call__(self, text: str | None) -> str:
        return redact(text or "", list(self.secrets)) or ""


# -- what the store holds, read in bulk ---------------------------------------------------------


def _read_store(store: Store, instruction_ids: list[int], response_ids: list[int]) -> dict[str, Any]:
    return {"instructions": reads.report_instructions(store, instruction_ids),
            "constraints": constraint_records_of(store, instruction_ids),
            "generations": reads.responses_and_summaries(store, response_ids)}


# -- the page ------------------------------------------------------------------------------------


def write_html(store: Store, report: Report, out_dir: str | Path, *, progress: Any = None) -> HtmlResult:
    """Write ``report.html`` into ``out_dir`` and return where and how big.

    ``report`` is the one ``pipeline.analysis.report_model.build_report`` made: the page shows its
    groups, rows and warnings as they are. ``progress`` (optional) is called with (done, total) instructions.
    """
    clean = Cleaner(tuple(known_secrets()))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    m = report.metrics
    ratio = report.ratio
    filters = report.options.filters

    # The responses the report counted, and their per-response numbers.
    full_rows = {r.response_id: r for r in m.rows if r.ratio is None}
    ratio_rows = {r.response_id: r for r in m.rows if r.ratio is not None and ratio is not None
                  and same_ratio(r.ratio, ratio)}
    instruction_ids = sorted({r.instruction_id for r in full_rows.values()})
    store_data = _read_store(store, instruction_ids, sorted(full_rows))
    gens = store_data["generations"]
    outcome = items_by_pair(constraint_items(store, filters, ratio=ratio) if ratio is not None else [])
    # The summary each response is shown with: the first at the report ratio (as the app and Item).
    summary_of: dict[int, tuple] = {}
    for g in gens.values():
        if g[1] == "summary" and ratio is not None and g[5] is not None and same_ratio(g[5], ratio):
            summary_of.setdefault(g[6], g)
    text_ids = sorted(set(full_rows) | {g[0] for g in summary_of.values()})
    store_data["echoes"] = echoes_of(store, text_ids)
    verdicts_by = shown_verdicts_by_pair(store, text_ids, filters)
    rater_list = sorted({(v.judge, v.judging_mode) for vs in verdicts_by.values() for v in vs})
    raters = {r: k for k, r in enumerate(rater_list)}  # a verdict names its rater by this index
    hashes = {h for row in store_data["instructions"].values() for h in row[5:7] if h}
    hashes |= {g[7] for g in gens.values() if g[7]}
    bodies = {h: clean(b) for h, b in reads.text_bodies(store, hashes).items()}

    flips = flipped_per_response(outcome)
    responses_of: dict[int, list[int]] = defaultdict(list)
    for rid, row in sorted(full_rows.items(), key=lambda kv: (kv[1].model, kv[1].mode, kv[0])):
        responses_of[row.instruction_id].append(rid)

    similarities = constraint_similarities(store)
    index: list[list[Any]] = []
    blocks: list[str] = []
    used_texts: set[str] = set()
    for k, iid in enumerate(instruction_ids):
        chunk, entry = _instruction_chunk(iid, store_data, responses_of[iid], full_rows,
                                          ratio_rows, summary_of,
                                          outcome, verdicts_by, bodies, flips, raters, clean)
        # the stored constraint-reference similarity (pipeline.analysis.similarity)
        for c in chunk["constraints"]:
            sim = similarities.get(c["id"])
            if sim is not None:
                c["sim"] = {"a": _num(sim.to_a), "b": _num(sim.to_b), "method": sim.method}
        used_texts |= set(chunk["texts"])
        index.append(entry)
        blocks.append(f'<script type="{PACKED}" id="i{iid}">{_packed(chunk)}</script>')
        if progress is not None:
            progress(k + 1, len(instruction_ids))
    for h in sorted(used_texts):
        blocks.append(f'<script type="{PACKED}" id="t{h}">{_packed(bodies.get(h, ""))}</script>')

    meta = {"ratio": ratio, "raters": m.raters, "runs": runs_covered(m), "filters": {k: v for k, v in
            vars(filters).items() if v}, "judges": [list(r) for r in rater_list],
            "constraint_n": CONSTRAINT_N, "reference_n": REFERENCE_N,
            "columns": ["id", "run", "domain", "condition", "responses", "task"]}
    suspicious = _suspicious(store, ratio, filters.run, set(instruction_ids),
                             {(r.model, r.mode) for r in full_rows.values()}, clean)
    page = _page(report, meta, index, blocks, clean, suspicious)
    path = out / FILE_NAME
    path.write_text(page, encoding="utf-8")
    return HtmlResult(path, path.stat().st_size, len(instruction_ids), len(used_texts))


def _instruction_chunk(iid: int, data: dict[str, Any], response_ids: list[int], full_rows: dict[int, Any],
                       ratio_rows: dict[int, Any], summary_of: dict[int, tuple],
                       outcome: dict[tuple[int, int], Any],
                       verdicts_by: dict[tuple[int, int], list[Verdict]], bodies: dict[str, str],
                       flips: dict[int, int], raters: dict[tuple[str, str], int], clean: Cleaner
                       ) -> tuple[dict[str, Any], list[Any]]:
    """One instruction's block (texts by hash) and its row in the index."""
    irow = data["instructions"][iid]
    _, run_id, domain, condition, main_task, hash_a, hash_b = irow
    gens = data["generations"]
    ref_a, ref_b = bodies.get(hash_a or "", ""), bodies.get(hash_b or "", "")
    texts = {h for h in (hash_a, hash_b) if h}
    responses = []
    index_responses = []
    for rid in response_ids:
        row = full_rows[rid]
        at = ratio_rows.get(rid)
        g = gens.get(rid)
        s = summary_of.get(rid)
        r_hash, s_hash = (g[7] if g else None), (s[7] if s else None)
        texts |= {h for h in (r_hash, s_hash) if h}
        r_text, s_text = bodies.get(r_hash or "", ""), bodies.get(s_hash or "", "")
        extra = (at or row).extra
        responses.append({
            "id": rid, "model": row.model, "mode": row.mode,
            "label": writer_label(row.model, row.mode, set()),
            "r": r_hash, "s": s_hash, "sid": s[0] if s else None, "refusal": bool(g[8]) if g else False,
            "flipped": flips.get(rid, 0), "org": _num(row.org), "core": _num(at.core) if at else None,
            "superficial": _num(at.superficial) if at else None, "judged": _num(row.judged),
            "n": row.n_active,
            "copy_a": _num(extra.get("copy_a_ngrams")), "copy_b": _num(extra.get("copy_b_ngrams")),
            "copy_a_share": _num(extra.get("copy_a_share")), "copy_b_share": _num(extra.get("copy_b_share")),
            # The response's passages copied from the references (the report's copied 5-grams), and
            # the summary's; references show what the response took from them.
            "spans": {"r": merge_spans([(start, end)
                                        for start, end in copied_spans(ref_a, r_text, REFERENCE_N)
                                   + copied_spans(ref_b, r_text, REFERENCE_N)]),
                      "s": merge_spans([(start, end)
                                        for start, end in copied_spans(ref_a, s_text, REFERENCE_N)
                                   + copied_spans(ref_b, s_text, REFERENCE_N)]),
                      "a": copied_spans(r_text, ref_a, REFERENCE_N),
                      "b": copied_spans(r_text, ref_b, REFERENCE_N)},
        })
        index_responses.append([row.model, row.mode, _num(row.org), _num(at.core) if at else None,
                                flips.get(rid, 0)])
    cons = []
    records: list[ConstraintRecord] = data["constraints"].get(iid, [])
    template = template_words(tuple(c.text for c in records if c.active))
    echoes: dict[tuple[int, int], float] = data["echoes"]
    all_cons = {c.id: c for c in records}
    for c in records:
        cid, position, origin, active = c.id, c.position, c.origin, c.active
        replaces_id, reason, base_verdict, base_quote = (c.replaces_id, c.replaced_reason,
                                                         c.base_verdict, c.base_quote)
        text = clean(c.text)
        entry: dict[str, Any] = {"id": cid, "pos": position, "text": text, "origin": origin or "",
                                 "active": bool(active)}
        if replaces_id and replaces_id in all_cons:
            old = all_cons[replaces_id]
            # pipeline.stages.revision keeps the reason on the new row (older stores: on the old one).
            entry["replaces"] = {"id": old.id, "text": clean(old.text),
                                 "reason": clean(reason or old.replaced_reason or "")}
        if base_verdict is not None:
            entry["base"] = {"verdict": base_verdict, "quote": clean(base_quote)}
        if active:
            entry["copies"] = {"a": copied_spans(text, ref_a, CONSTRAINT_N),
                               "b": copied_spans(text, ref_b, CONSTRAINT_N)}
            entry["lex"] = {"a": _num(copying.lexical_overlap(text, ref_a)) if ref_a else None,
                            "b": _num(copying.lexical_overlap(text, ref_b)) if ref_b else None}
            per = {}
            for rid in response_ids:
                s = summary_of.get(rid)
                g = gens.get(rid)
                r_text = bodies.get(g[7] if g else "", "")
                s_text = bodies.get(s[7] if s else "", "")
                item = outcome.get((cid, rid))
                verdicts = []
                for gid, kind, body in ((rid, "r", r_text), (s[0] if s else None, "s", s_text)):
                    if gid is None:
                        continue
                    for v in verdicts_by.get((gid, cid), ()):
                        quote = clean(v.quote)
                        how, span = quote_span(quote, body,
                                               v.quote_found) if v.verdict and quote else (None, None)
                        # A quote found exactly is the text at its span: the page reads it there. A yes_no
                        # judge's sentence was located, not quoted by the judge: it says so.
                        shown = LOCATED if how and v.quote_found == LOCATED else how
                        verdicts.append([raters[(v.judge, v.judging_mode)], kind, v.verdict,
                                         "" if how == "exact" else quote, shown, list(span) if span else None,
                                         None if v.p_yes is None else round(v.p_yes, 3)])
                state = item.outcome if item else Outcome.NOT_JUDGED
                per[str(rid)] = {
                    # The outcome's name for the page's styles, and its words (Audit's list's).
                    "state": state.key, "label": state.value, "full": _num(item.full_score) if item else None,
                    "summary": _num(item.summary_score) if item else None, "v": verdicts,
                    "copies": {"r": copied_spans(text, r_text, CONSTRAINT_N),
                               "s": copied_spans(text, s_text, CONSTRAINT_N)},
                    # pipeline.analysis.copy_count: the one count of copied words, named by its source.
                    "count": {k: copy_count_cell(c.text, body, ref_a, ref_b, name, template,
                                                 echoes.get((gid or 0, cid)))
                              for k, body, name, gid in (("r", r_text, "response", rid),
                                                         ("s", s_text, "summary", s[0] if s else None))},
                    # The constraint's echo (pipeline.stages.echo): its highest cosine with a sentence.
                    "echo": {"r": _num(echoes.get((rid, cid))),
                             "s": _num(echoes.get((s[0], cid)) if s else None)},
                    "lex": {"r": _num(copying.lexical_overlap(text, r_text)) if r_text else None,
                            "s": _num(copying.lexical_overlap(text, s_text)) if s_text else None},
                }
            entry["per"] = per
        cons.append(entry)
    chunk = {"id": iid, "run": run_id or "", "domain": domain or "", "condition": condition or "",
             "task": clean(main_task), "a": hash_a, "b": hash_b, "responses": responses, "constraints": cons,
             "texts": sorted(texts), "words": {h: count_words(bodies.get(h, "")) for h in sorted(texts)}}
    return chunk, [iid, run_id or "", domain or "", condition or "", index_responses, chunk["task"]]


def _suspicious(store: Store, ratio: float | None, run_id: str | None, instructions: set[int],
                writers: set[tuple[str, str]], clean: Cleaner) -> dict[str, Any]:
    """The suspicion ranking (pipeline.analysis.suspicion) of the page's instructions and writers: the
    first SUSPICIOUS_MAX items by every reason, in its order, each with its score and which reasons
    fire for it (a reason switched off on the page hides the items only it fires for; the page never
    sums a score or sorts)."""
    def on_page(queue: list[Evidence]) -> list[Evidence]:
        return [e for e in queue if e.instruction_id in instructions
                and (e.writer.model, e.writer.mode) in writers][:SUSPICIOUS_MAX]

    # The head of the ranking is read as evidence; the whole of it only when the page's filters leave
    # fewer than SUSPICIOUS_MAX of that head (building every item costs seconds on a large benchmark).
    queue = suspicion_queue(store, ratio=ratio, run_id=run_id, limit=SUSPICIOUS_MAX)
    kept = on_page(queue)
    if len(kept) < SUSPICIOUS_MAX and queue.total > len(queue):
        queue = suspicion_queue(store, ratio=ratio, run_id=run_id)
        kept = on_page(queue)
    items = []
    marked = marks(store)
    for e in kept:
        sim = e.similarity
        fired = e.reasons()
        items.append([e.instruction_id, e.constraint_id, e.position, e.writer.model,
                      e.writer.mode, clean(e.text),
                      [int(r in fired) for r in REASONS], _num(sim.highest) if sim else None,
                      [clean(c) for c in e.copied[:3]], "+".join(e.copied_from),
                      # Each reason in words, aligned with REASONS ("" where it does not fire).
                      [next(iter(reason_sentences(e, (r,))), "") for r in REASONS], e.copy_count.short(),
                      mark_of(marked, e), same_phrase_sentence(e) if e.same_phrase else "", _num(e.echo),
                      e.score()])
    return {"reasons": list(REASONS), "text": REASON_TEXT, "items": items, "top": SUSPICIOUS_TOP,
            "copy_missing": MISSING_COPY if queue.copy_evidence_missing else ""}


def _page(report: Report, meta: dict[str, Any], index: list[list[Any]], blocks: list[str], clean: Cleaner,
          suspicious: dict[str, Any] | None = None) -> str:
    css = (HERE / "html_report.css").read_text(encoding="utf-8")
    js = (HERE / "html_report.js").read_text(encoding="utf-8")
    m = report.metrics
    warnings = "".join(f"<li>{esc(clean(w.message))}</li>" for w in report.warnings)
    runs = ", ".join(runs_covered(m))
    ratio = report.ratio
    summary = (f"{len(index)} instructions; judges: {esc(', '.join(m.raters)) or '-'}; "
               f"runs: {esc(runs) or '-'};"
               f" summary ratio {ratio:g}" if ratio is not None else f"{len(index)} instructions")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        # No request leaves the page: the policy forbids every fetch, image and frame source.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline';"
        " script-src 'unsafe-inline'; img-src data:\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>unspecific report</title><style>{css}</style></head><body>"
        "<header><h1>unspecific report</h1>"
        f"<p class=\"meta\">{summary}. Org = share of constraints satisfied by the full "
        "response; Core = on its"
        " summary; superficial = share of satisfied constraints that flipped (per judge, "
        "then averaged). Missing verdicts are left out and counted in the coverage.</p></header>"
        f"<main><section id=\"tables\"><h2>Condition x model</h2>{tables_html(report)}{depth_html(report)}"
        + copying_html(report)
        + gate_html(report)
        + models_html(report)
        + (f"<section id=\"warnings\"><h3>{len(report.warnings)} warning(s)</h3><ul>{warnings}</ul></section>"
           if warnings else "")
        + judges_html(report)
        + "</section>"
        + ("<section id=\"suspicious\"><h2>Most suspicious</h2><div "
           "id=\"sus-reasons\"></div><ol id=\"sus-list\">"
           "</ol></section>" if suspicious and suspicious["items"] else "")
        + "<section id=\"instructions\"><h2>Instructions</h2><div id=\"filter\"></div>"
        "<div id=\"index\"></div></section><section id=\"audit\" hidden></section></main>"
        f"<script type=\"application/json\" id=\"meta\">{_json_block(meta)}</script>"
        f"<script type=\"application/json\" id=\"index-data\">{_json_block(index)}</script>"
        f"<script type=\"application/json\" id=\"suspicion-data\">{_json_block(suspicious or {})}</script>"
        f"<script>{js}</script>\n" + "\n".join(blocks) + "\n</body></html>\n"
    )
