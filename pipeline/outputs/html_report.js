// The HTML report's page logic (pipeline/outputs/html_report.py). It computes no number: every count,
// rate, score, rank, span, word count and outcome is in the JSON blocks the pipeline wrote. It only draws them, and parses
// an instruction's block (and its texts) when that instruction is opened.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const parse = (id) => { const el = $(id); return el ? JSON.parse(el.textContent) : null; };
  const meta = parse("meta");
  const index = parse("index-data");
  const PAGE = 100;
  let shown = index, page = 0;
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
  const pct = (x) => (x === null || x === undefined ? "-" : (100 * x).toFixed(1));
  // Data blocks are gzip + base64 (pipeline/outputs/html_report.py, _packed): unpacked when opened.
  async function unpack(id) {
    const el = $(id);
    if (!el) return null;
    const bytes = Uint8Array.from(atob(el.textContent), (ch) => ch.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }
  const texts = new Map();
  const text = (h) => (h ? texts.get(h) || "" : "");

  // -- the index of instructions, a page at a time --------------------------------------------
  function renderIndex() {
    const rows = shown.slice(page * PAGE, (page + 1) * PAGE).map((r) => {
      const resp = r[4].map((x) => `${esc(x[1] ? x[0] + "/" + x[1] : x[0])}: Org ${pct(x[2])} Core ${pct(x[3])}` +
        (x[4] ? ` <span class="flipped">${x[4]} flipped</span>` : "")).join("<br>");
      return `<tr class="row" data-id="${r[0]}"><td>#${r[0]}</td><td class="task">${esc(r[5])}</td>` +
        `<td>${esc(r[2])}</td><td>${esc(r[3])}</td><td>${esc(r[1])}</td><td>${resp}</td></tr>`;
    }).join("");
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    $("index").innerHTML = `<p class="muted">${shown.length} of ${index.length} instructions · page ${page + 1}/${pages}` +
      ` <button id="prev">prev</button><button id="next">next</button></p>` +
      `<table><thead><tr><th>id</th><th>task</th><th>domain</th><th>condition</th><th>run</th>` +
      `<th>responses (%; flipped at ratio ${meta.ratio})</th></tr></thead><tbody>${rows}</tbody></table>`;
    $("prev").onclick = () => { if (page > 0) { page--; renderIndex(); } };
    $("next").onclick = () => { if ((page + 1) * PAGE < shown.length) { page++; renderIndex(); } };
    for (const tr of $("index").querySelectorAll("tr.row")) tr.onclick = () => openInstruction(+tr.dataset.id);
  }
  $("filter").innerHTML = `<input id="q" placeholder="filter: id, task, domain, condition, run, model"> ` +
    `<label><input type="checkbox" id="only-flipped"> with flipped constraints</label>`;
  function applyFilter() {
    const q = $("q").value.trim().toLowerCase();
    const flippedOnly = $("only-flipped").checked;
    shown = index.filter((r) => (!q || [("#" + r[0]), r[1], r[2], r[3], ...r[4].map((x) => x[0]), r[5]].some(
      (s) => String(s).toLowerCase().includes(q))) && (!flippedOnly || r[4].some((x) => x[4] > 0)));
    page = 0;
    renderIndex();
  }
  $("q").oninput = applyFilter;
  $("only-flipped").onchange = applyFilter;
  renderIndex();

  // -- one instruction: its constraints, and the Audit content of the one selected -------------
  let current = null;
  const state = {response: 0, constraint: null, copy: "constraint"};

  async function openInstruction(id) {
    const data = await unpack("i" + id);
    if (!data) return;
    for (const h of data.texts) if (!texts.has(h)) texts.set(h, await unpack("t" + h));
    current = data;
    state.response = 0;
    state.constraint = (data.constraints.find((c) => c.active) || {}).id || null;
    renderAudit();
    $("audit").hidden = false;
    $("audit").scrollIntoView();
    history.replaceState(null, "", "#i" + id);
  }

  // Draw a text with its highlighted spans: classes per character range, from span lists.
  function highlight(body, layers) {
    const cuts = new Set([0, body.length]);
    for (const [, spans] of layers) for (const [a, b] of spans) { cuts.add(a); cuts.add(b); }
    const points = [...cuts].filter((x) => x >= 0 && x <= body.length).sort((a, b) => a - b);
    let out = "";
    for (let i = 0; i + 1 < points.length; i++) {
      const a = points[i], b = points[i + 1];
      const classes = layers.filter(([, spans]) => spans.some(([s, e]) => s <= a && b <= e)).map(([c]) => c);
      const piece = esc(body.slice(a, b));
      out += classes.length ? `<mark class="${classes.join(" ")}" data-start="${a}" data-end="${b}">${piece}</mark>` : piece;
    }
    return out;
  }

  function renderAudit() {
    const d = current;
    const r = d.responses[state.response];
    const tabs = d.responses.map((x, i) => `<button data-i="${i}" class="${i === state.response ? "on" : ""}">` +
      `${esc(x.label)}</button>`).join("");
    const cons = d.constraints.filter((c) => c.active).map((c) => {
      const cells = d.responses.map((x) => {
        const p = c.per[String(x.id)];
        // The outcome in the app's words (pipeline.core.definitions.Outcome), its name as the style.
        if (!p || p.full === null) return `<td class="muted">${esc(p ? p.label : "not judged")}</td>`;
        return `<td class="${p.state}" data-response="${x.id}">${esc(p.label)} ` +
          `<small>${p.full.toFixed(2)} / ${p.summary === null ? "-" : p.summary.toFixed(2)}</small></td>`;
      }).join("");
      return `<tr data-c="${c.id}" class="${c.id === state.constraint ? "on" : ""}"><td>${c.pos}</td>` +
        `<td>${esc(c.text)}</td>${cells}</tr>`;
    }).join("");
    const respHead = d.responses.map((x) => `<th>${esc(x.label)} Org / Core</th>`).join("");
    const summary = r ? `<p class="response-counts" data-response="${r.id}">${esc(r.label)}: Org ${pct(r.org)}%,` +
      ` Core ${pct(r.core)}%, superficial ${pct(r.superficial)}%, <span class="flip-count">${r.flipped}</span> flipped;` +
      ` copied ${meta.reference_n}-grams from A / B (report): <span class="copy-a">${r.copy_a ?? "-"}</span> /` +
      ` <span class="copy-b">${r.copy_b ?? "-"}</span>${r.refusal ? ' · <b class="warn">refusal</b>' : ""}</p>` : "";
    $("audit").innerHTML = `<h2>Instruction #${d.id} <small>${esc(d.domain)} · ${esc(d.condition)} · run ${esc(d.run)}</small>` +
      ` <button id="close">close</button></h2><p><b>Task:</b> ${esc(d.task)}</p><div class="tabs">${tabs}</div>${summary}` +
      `<p class="muted keys">j / k or \u2193 / \u2191: next / previous constraint</p>` +
      `<div class="audit-body"><table class="cons"><thead><tr><th>#</th><th>constraint</th>${respHead}</tr></thead>` +
      `<tbody>${cons}</tbody></table><div id="detail"></div></div>`;
    $("close").onclick = () => { $("audit").hidden = true; history.replaceState(null, "", "#"); };
    for (const b of $("audit").querySelectorAll(".tabs button")) b.onclick = () => { state.response = +b.dataset.i; renderAudit(); };
    for (const tr of $("audit").querySelectorAll(".cons tbody tr")) tr.onclick = () => select(+tr.dataset.c, false);
    renderDetail();
  }

  // Select a constraint: mark its row, draw its detail, and bring the detail into view. On a wide
  // page the detail stands beside the table and stays on screen (sticky); on a narrow one it is
  // below the table, so the page scrolls to it. A key move also keeps the row itself in view.
  function select(id, fromKey) {
    state.constraint = id;
    let row = null;
    for (const tr of $("audit").querySelectorAll(".cons tbody tr")) {
      tr.classList.toggle("on", +tr.dataset.c === id);
      if (+tr.dataset.c === id) row = tr;
    }
    renderDetail();
    if (fromKey && row) row.scrollIntoView({block: "nearest"});
    const top = $("detail").getBoundingClientRect().top;
    if (top < 0 || top > innerHeight * 0.6) $("detail").scrollIntoView({block: "start"});
  }

  // j / k and the arrow keys move through the instruction's constraints, as in the app's Audit.
  const STEPS = {j: 1, ArrowDown: 1, k: -1, ArrowUp: -1};
  function typing(el) {
    return el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT" ||
      (el.tagName === "INPUT" && !["checkbox", "radio", "button"].includes(el.type));
  }
  document.addEventListener("keydown", (e) => {
    const step = STEPS[e.key];
    if (!step || !current || $("audit").hidden || e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    // Away from the constraints (reading the tables above), the arrows scroll the page as usual.
    const box = $("audit").getBoundingClientRect();
    if (e.key.startsWith("Arrow") && (box.bottom < 0 || box.top > innerHeight)) return;
    const ids = [...$("audit").querySelectorAll(".cons tbody tr")].map((tr) => +tr.dataset.c);
    if (!ids.length) return;
    const at = ids.indexOf(state.constraint);
    const next = at < 0 ? 0 : Math.min(ids.length - 1, Math.max(0, at + step));
    e.preventDefault();  // the arrows move the selection, not the page
    if (ids[next] !== state.constraint) select(ids[next], true);
  });

  function renderDetail() {
    const d = current;
    const c = d.constraints.find((x) => x.id === state.constraint);
    const r = d.responses[state.response];
    if (!c || !r) { $("detail").innerHTML = ""; return; }
    const p = c.per[String(r.id)] || {v: [], copies: {r: [], s: []}, lex: {}};
    // A verdict: [judge index, "r" | "s", 1 | 0 | null, quote unless found exactly, exact | fuzzy | missing | located,
    // span, P(Yes) of a yes_no judge or null].
    const quotes = (kind, how) => p.v.filter((v) => v[1] === kind && v[5] && v[4] === how).map((v) => v[5]);
    const byConstraint = state.copy === "constraint";
    const panes = [
      ["ref-a", "Reference A", d.a, byConstraint ? c.copies.a : r.spans.a, [], c.lex.a],
      ["ref-b", "Reference B", d.b, byConstraint ? c.copies.b : r.spans.b, [], c.lex.b],
      ["response", "Response", r.r, byConstraint ? p.copies.r : r.spans.r, ["r"], p.lex.r],
      ["summary", meta.ratio === null ? "Summary" : `Summary @${meta.ratio}`, r.s, byConstraint ? p.copies.s : r.spans.s, ["s"], p.lex.s],
    ].map(([id, title, h, copies, kinds, lex]) => {
      // The one count of copied words (pipeline.analysis.copy_count) on the response and the summary.
      const count = p.count ? p.count[kinds[0]] : null;
      const body = text(h);
      const layers = [["copy", copies]];
      for (const k of kinds) {
        layers.push(["quote", quotes(k, "exact")]);
        layers.push(["fuzzy", quotes(k, "fuzzy")]);
        layers.push(["fuzzy", quotes(k, "located")]);
      }
      const shownBody = body ? highlight(body, layers) :
        `<span class="muted">${id === "ref-b" && d.condition === "single" ? "(single condition: one reference only)" : "(not generated)"}</span>`;
      return `<div class="pane" id="pane-${id}"><h4>${title} <small>${h ? d.words[h] : 0}` +
        ` words · lexical overlap ${lex === null || lex === undefined ? "-" : lex.toFixed(2)} · ` +
        `${byConstraint && count ? esc(count[2] || "nothing copied") : copies.length + " copied"}` +
        // The constraint's echo on the text (pipeline.stages.echo), where stored.
        `${byConstraint && p.echo && p.echo[kinds[0]] !== null && p.echo[kinds[0]] !== undefined ? " · echo " + p.echo[kinds[0]].toFixed(2) : ""}` +
        `</small></h4>${shownBody}</div>`;
    }).join("");
    const verdicts = p.v.map((v) => {
      const [judge, mode] = meta.judges[v[0]];
      const body = text(v[1] === "r" ? r.r : r.s);
      const quote = v[4] === "exact" && v[5] ? body.slice(v[5][0], v[5][1]) : v[3];
      return `<tr><td>${esc(judge)}</td><td>${esc(mode)}</td><td>${v[1] === "r" ? "full" : "summary " + meta.ratio}</td>` +
        `<td>${v[2] === null ? "missing" : v[2] ? "yes" : "no"}${v[6] === null || v[6] === undefined ? "" : ` (P(Yes) ${v[6].toFixed(2)})`}` +
        `</td><td>${esc(v[4] || "-")}</td><td>${esc(quote)}</td></tr>`;
    }).join("");
    let lineage = `<span class="muted">${esc(c.origin || "-")}</span>`;
    if (c.replaces) lineage = `replaced #${c.replaces.id}: ${esc(c.replaces.text)} <span class="muted">because</span> ${esc(c.replaces.reason || "?")}`;
    if (c.base) lineage += ` · base article verdict: ${c.base.verdict ? "yes" : "no"}`;
    // The stored constraint-reference similarity (pipeline.analysis.similarity): a number and a bar each.
    const bar = (x) => `<b>${x.toFixed(2)}</b> <span class="bar"><span style="width:${(100 * Math.max(0, Math.min(1, x))).toFixed(0)}%">` +
      `</span></span>`;
    const sim = c.sim ? `<p class="similarity">similarity to the references (${esc(c.sim.method)}): ` +
      ["a", "b"].filter((k) => c.sim[k] !== null && c.sim[k] !== undefined).map((k) => `${k.toUpperCase()} ${bar(c.sim[k])}`)
        .join(" &nbsp; ") + "</p>" : "";
    $("detail").innerHTML = `<h3>Constraint ${c.pos}: ${esc(c.text)}</h3>` +
      `<p>outcome on ${esc(r.label)}: <b class="${p.state || ""}" id="outcome">${esc(p.label || "not judged")}</b> · ` +
      `copied n-grams: <button id="copy-mode">${byConstraint ? `constraint vs each text (${meta.constraint_n}-grams)` :
        `response vs references (${meta.reference_n}-grams)`}</button></p><p class="lineage">${lineage}</p>${sim}` +
      `<div class="panes">${panes}</div><table class="verdicts"><thead><tr><th>judge</th><th>mode</th><th>text</th><th>verdict</th>` +
      `<th>quote</th><th>quote / reason</th></tr></thead><tbody>${verdicts}</tbody></table>`;
    $("copy-mode").onclick = () => { state.copy = byConstraint ? "references" : "constraint"; renderDetail(); };
  }

  // -- "Most suspicious": the ranking the pipeline wrote (pipeline.analysis.suspicion), in its order and
  // with its scores. Each item says which reasons fire for it; a reason switched off here hides the
  // items none of the reasons still on fires for. The page never sums a score nor sorts.
  const sus = parse("suspicion-data") || {};
  const enabled = new Set(sus.reasons || []);
  function renderSuspicious() {
    const listed = sus.items.filter((it) => sus.reasons.some((r, k) => enabled.has(r) && it[6][k]));
    $("sus-list").innerHTML = listed.slice(0, sus.top).map((it) => {
      // Each reason as the pipeline wrote it in words (pipeline.analysis.suspicion.reason_sentences).
      const why = sus.reasons.map((r, k) => [r, k]).filter(([r, k]) => enabled.has(r) && it[6][k] > 0).map(([r, k]) =>
        esc(it[10][k] || r));
      // One phrase across many constraints of the instruction leads once (group_by_phrase); its echo beside.
      if (it[13]) why.push(esc(it[13]));
      if (it[14] !== null && it[14] !== undefined) why.push(`echo ${it[14].toFixed(2)}`);
      if (it[12]) why.push(`<b class="mark">${esc(it[12])}</b>`);
      return `<li data-i="${it[0]}" data-c="${it[1]}" data-model="${esc(it[3])}" data-mode="${esc(it[4])}">` +
        `<span class="score">${it[15].toFixed(2)}</span> <button class="open">#${it[0]}, constraint ${it[2]}</button>, ` +
        `${esc(it[4] ? it[3] + "/" + it[4] : it[3])}: ${esc(it[5])}<br><small class="why">${why.join(" · ")}</small></li>`;
    }).join("") || `<li class="muted">none with the reasons switched on</li>`;
    for (const li of $("sus-list").querySelectorAll("li[data-c]")) {
      li.querySelector("button.open").onclick = () => {
        openConstraint(+li.dataset.i, +li.dataset.c, li.dataset.model, li.dataset.mode);
      };
    }
  }
  // An item opens its instruction on its response with its constraint's detail.
  async function openConstraint(iid, cid, model, mode) {
    await openInstruction(iid);
    const k = current.responses.findIndex((x) => x.model === model && x.mode === mode);
    if (k >= 0 && k !== state.response) { state.response = k; renderAudit(); }
    select(cid, true);
  }
  if ($("sus-reasons")) {
    $("sus-reasons").innerHTML = `<p class="muted">ranked as the app ranks them, all reasons counted;` +
      ` a reason unticked hides the items only it fires for</p>` +
      sus.reasons.map((r) => `<label><input type="checkbox" data-r="${r}" checked>` +
      `${r} <small>(${esc(sus.text[r])})</small></label>`).join(" ") +
      (sus.copy_missing ? `<p class="muted">${esc(sus.copy_missing)}</p>` : "");
    for (const box of $("sus-reasons").querySelectorAll("input")) {
      box.onchange = () => { if (box.checked) enabled.add(box.dataset.r); else enabled.delete(box.dataset.r); renderSuspicious(); };
    }
    renderSuspicious();
  }

  window.unspecificReport = {open: openInstruction, openConstraint, state};
  document.addEventListener("DOMContentLoaded", () => {
    const m = /^#i(\d+)$/.exec(location.hash);
    if (m) openInstruction(+m[1]);
  });
})();
