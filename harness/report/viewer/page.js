"use strict";
// The evidence viewer: an index of questions and, per question, the contexts of the chosen policies side by
// side. The payload (harness/report/viewer/data.py) is gzip-compressed JSON in a script tag; snippet records and
// pools stay JSON strings until their question is opened.

const state = {
  data: null,
  shown: new Set(), // variant indices shown side by side and scanned by the disagreement filters
  a: 0,
  b: 1,
  sort: { key: "index", dir: 1 },
  limit: 1000,
};

function escapeHtml(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function fmt(value, digits = 3) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (typeof value !== "number") return escapeHtml(value);
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}

async function loadPayload() {
  const text = document.getElementById("payload").textContent.trim();
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

function metricIndex(name) {
  return state.data.metrics.indexOf(name);
}

function cellOf(question, variant) {
  const index = question.cells[variant];
  return index === undefined ? null : state.data.cells[index];
}

function metricOf(question, variant, name) {
  const cell = cellOf(question, variant);
  const i = metricIndex(name);
  return cell && i >= 0 ? cell.m[i] : null;
}

// ---- filters -------------------------------------------------------------------------------------------

function disagrees(question, name) {
  const values = new Set();
  for (const v of state.shown) {
    const value = metricOf(question, v, name);
    if (value !== null) values.add(value);
  }
  return values.size > 1;
}

function packingDropped(question) {
  // Seed 000's Figure 2 case: every gold document retrieved, a kept candidate holds the answer, the packed
  // context does not.
  for (const v of state.shown) {
    const cell = cellOf(question, v);
    if (!cell || !cell.pool) continue;
    if (metricOf(question, v, "all_gold_at_k") !== 1 || metricOf(question, v, "answer_in_context") !== 0) continue;
    if (JSON.parse(cell.pool).some((c) => c.kept && c.ans)) return true;
  }
  return false;
}

function f1Difference(question) {
  const a = metricOf(question, state.a, "f1");
  const b = metricOf(question, state.b, "f1");
  return a === null || b === null ? null : a - b;
}

function passes(question) {
  const dataset = document.getElementById("filter-dataset").value;
  if (dataset && question.ds !== dataset) return false;
  const search = document.getElementById("filter-search").value.trim().toLowerCase();
  if (search && !(question.q.toLowerCase().includes(search) || question.id.toLowerCase().includes(search))) return false;
  if (document.getElementById("filter-disagree-aic").checked && !disagrees(question, "answer_in_context")) return false;
  if (document.getElementById("filter-disagree-f1").checked && !disagrees(question, "f1")) return false;
  if (document.getElementById("filter-dropped").checked && !packingDropped(question)) return false;
  const minimum = parseFloat(document.getElementById("filter-delta").value);
  if (!Number.isNaN(minimum) && minimum > 0) {
    const delta = f1Difference(question);
    if (delta === null || Math.abs(delta) < minimum) return false;
  }
  return true;
}

// ---- index ---------------------------------------------------------------------------------------------

function indexColumns() {
  const d = state.data;
  const columns = [
    { key: "index", label: "#", value: (q, i) => i },
    { key: "id", label: "question id", value: (q) => q.id },
    { key: "ds", label: "dataset", value: (q) => q.ds },
    { key: "q", label: "question", value: (q) => q.q },
  ];
  if (metricIndex("answer_in_context") >= 0) {
    columns.push({
      key: "aic_shown",
      label: "AiC (shown)",
      title: "policies shown whose context holds a gold answer",
      value: (q) => [...state.shown].filter((v) => metricOf(q, v, "answer_in_context") === 1).length,
    });
  }
  for (const [side, v] of [["A", state.a], ["B", state.b]]) {
    if (v === undefined || v >= d.variants.length) continue;
    for (const name of ["f1", "answer_in_context"]) {
      if (metricIndex(name) < 0) continue;
      columns.push({ key: `${side}_${name}`, label: `${side} ${name === "f1" ? "F1" : "AiC"}`, title: d.variants[v].label, value: (q) => metricOf(q, v, name) });
    }
  }
  if (metricIndex("f1") >= 0) columns.push({ key: "delta", label: "ΔF1 (A−B)", value: (q) => f1Difference(q) });
  return columns;
}

function renderIndex() {
  const d = state.data;
  const columns = indexColumns();
  const rows = [];
  d.questions.forEach((q, i) => { if (passes(q)) rows.push([q, i]); });
  const column = columns.find((c) => c.key === state.sort.key) || columns[0];
  rows.sort((x, y) => {
    const a = column.value(x[0], x[1]);
    const b = column.value(y[0], y[1]);
    if (a === b) return x[1] - y[1];
    if (a === null) return 1;
    if (b === null) return -1;
    return (a < b ? -1 : 1) * state.sort.dir;
  });
  document.getElementById("count").textContent = `${rows.length} of ${d.questions.length} questions`;
  const head = columns.map((c) => {
    const arrow = c.key === state.sort.key ? (state.sort.dir > 0 ? " ▲" : " ▼") : "";
    return `<th data-sort="${c.key}" title="${escapeHtml(c.title || "")}">${escapeHtml(c.label)}${arrow}</th>`;
  }).join("");
  const body = rows.slice(0, state.limit).map(([q, i]) => {
    const cells = columns.map((c) => {
      const value = c.value(q, i);
      const text = c.key === "q" ? escapeHtml(q.q.length > 110 ? q.q.slice(0, 110) + "…" : q.q) : fmt(value);
      return `<td class="col-${c.key}">${text}</td>`;
    }).join("");
    return `<tr data-question="${i}" data-key="${escapeHtml(q.key)}">${cells}</tr>`;
  }).join("");
  const more = rows.length > state.limit ? `<tr><td colspan="${columns.length}"><button id="show-more">show all ${rows.length}</button></td></tr>` : "";
  document.getElementById("index").innerHTML = `<thead><tr>${head}</tr></thead><tbody>${body}${more}</tbody>`;
}

// ---- question page -------------------------------------------------------------------------------------

function renderText(text, start, end, spans) {
  // The characters [start, end) of the context with the answer spans marked.
  let html = "";
  let at = start;
  spans.forEach(([a, b], k) => {
    const from = Math.max(a, start);
    const to = Math.min(b, end);
    if (from >= to) return;
    html += escapeHtml(text.slice(at, from)) + `<mark class="answer" data-span="${k}">${escapeHtml(text.slice(from, to))}</mark>`;
    at = to;
  });
  return html + escapeHtml(text.slice(at, end));
}

function renderContext(cell) {
  const spans = cell.spans ? JSON.parse(cell.spans) : [];
  if (!cell.sn) {
    return `<div class="context plain">${renderText(cell.ctx, 0, cell.ctx.length, spans)}</div>`;
  }
  const snippets = JSON.parse(cell.sn);
  const parts = snippets.map((s) => {
    const classes = ["snippet", `kind-${s.kind}`];
    if (s.gold) classes.push("gold");
    if (s.sup) classes.push("supporting");
    if (s.cut) classes.push("cut");
    const badges = [];
    if (s.kind === "summary") badges.push(`<span class="badge summary">summary L${s.layer ?? "?"}</span>`);
    if (s.kind === "copy") badges.push(`<span class="badge copy">copy of ${escapeHtml(s.copy_of)}</span>`);
    if (s.cut) badges.push('<span class="badge cut">cut by budget</span>');
    if (s.sup) badges.push('<span class="badge sup">supporting</span>');
    const where = s.sents && s.sents.length ? ` · sent. ${s.sents.join(",")}` : "";
    const tip = `${s.title || s.doc} (${s.doc}${where}) · ${s.tok} tokens${s.gold ? " · gold document" : ""}`;
    return `<div class="${classes.join(" ")}" title="${escapeHtml(tip)}"><span class="source">${escapeHtml(s.title || s.doc)}${escapeHtml(where)}</span>${badges.join("")}<span class="text">${renderText(cell.ctx, s.start, s.end, spans)}</span></div>`;
  });
  return `<div class="context">${parts.join("")}</div>`;
}

function renderPool(cell) {
  if (!cell.pool) return "";
  const pool = JSON.parse(cell.pool);
  const rows = pool.map((c, rank) => `<tr class="${c.kept ? "kept" : ""} ${c.gold ? "gold" : ""}"><td>${rank + 1}</td><td>${escapeHtml(c.id)}</td><td>${escapeHtml(c.title)}</td><td>${fmt(c.score)}</td><td>${c.gold ? "gold" : ""}</td><td>${c.ans ? "answer" : ""}</td><td>${escapeHtml(c.kind)}${c.layer ? " L" + c.layer : ""}</td><td>${c.kept ? "kept" : ""}</td></tr>`);
  const kept = pool.filter((c) => c.kept).length;
  return `<details class="pool"><summary>retrieved pool: ${pool.length} candidates, ${kept} kept by the diversifier</summary><table><thead><tr><th>rank</th><th>id</th><th>title</th><th>score</th><th>gold</th><th>answer</th><th>kind</th><th>kept</th></tr></thead><tbody>${rows.join("")}</tbody></table></details>`;
}

function renderTree(cell) {
  const t = cell.tree;
  if (!t) return "";
  const reached = cell.sn ? JSON.parse(cell.sn).filter((s) => s.kind === "summary").map((s) => s.cand) : [];
  const lines = [];
  if (t.question_class !== undefined) lines.push(`<div>class: <b>${escapeHtml(t.question_class)}</b> (${escapeHtml(t.class_source ?? "")})${t.annotated_class !== undefined ? ` · annotated: ${escapeHtml(t.annotated_class)}` : ""}</div>`);
  if (t.class_raw) lines.push(`<div>classifier output: <code>${escapeHtml(t.class_raw)}</code></div>`);
  if (t.built !== undefined) lines.push(`<div>tree built: ${t.built ? "yes" : "no"}${t.build_seconds !== undefined ? ` (${fmt(t.build_seconds, 1)} s)` : ""}</div>`);
  if (t.nodes_per_layer) lines.push(`<div>nodes per layer: ${escapeHtml(JSON.stringify(t.nodes_per_layer))}</div>`);
  if (t.toc) lines.push(`<details><summary>table of contents</summary><pre>${escapeHtml(t.toc)}</pre></details>`);
  if (t.sub_questions && t.sub_questions.length) lines.push(`<div>sub-questions:<ol>${t.sub_questions.map((s) => `<li>${escapeHtml(s)}</li>`).join("")}</ol></div>`);
  lines.push(`<div>summary nodes in the context: ${reached.length ? reached.map(escapeHtml).join(", ") : "none"}</div>`);
  return `<div class="tree">${lines.join("")}</div>`;
}

function renderCell(question, v) {
  const d = state.data;
  const cell = cellOf(question, v);
  const label = escapeHtml(d.variants[v].label);
  if (!cell) return `<div class="cell missing" data-variant="${v}"><h3>${label}</h3><p>no row for this question</p></div>`;
  const metrics = d.metrics.map((m, i) => `<span class="metric"><span>${escapeHtml(m)}</span> ${fmt(cell.m[i])}</span>`).join("");
  const ratio = cell.B ? Math.min(cell.tok / cell.B, 1) : 0;
  const bar = cell.B
    ? `<div class="budget" title="${cell.tok} of ${cell.B} reader tokens"><div class="budget-bar" data-ratio="${(cell.tok / cell.B).toFixed(4)}"><div class="fill" style="width:${(ratio * 100).toFixed(2)}%"></div></div><span>${cell.tok} / ${cell.B} tokens</span></div>`
    : "";
  const answer = cell.ans === null || cell.ans === undefined
    ? '<div class="answer-line muted">not read (read=false)</div>'
    : `<div class="answer-line">reader: <b>${escapeHtml(cell.ans)}</b>${cell.raw && cell.raw !== cell.ans ? `<details><summary>raw output</summary><pre>${escapeHtml(cell.raw)}</pre></details>` : ""}</div>`;
  const seeds = cell.seeds > 1 ? `<div class="muted">first of ${cell.seeds} seeds</div>` : "";
  return `<div class="cell" data-variant="${v}"><h3>${label}</h3><div class="metrics">${metrics}</div>${bar}${answer}${seeds}${renderTree(cell)}${renderContext(cell)}${renderPool(cell)}</div>`;
}

function renderQuestion(i) {
  const d = state.data;
  const q = d.questions[i];
  const shown = [...state.shown].sort((x, y) => x - y).filter((v) => q.cells[v] !== undefined);
  const notice = d.provenance ? "" : '<p class="notice">These rows were written before provenance was recorded: contexts are shown as plain text.</p>';
  document.getElementById("question").innerHTML = `<p><a href="#" id="back">← all questions</a></p>
    <h2>${escapeHtml(q.q)}</h2>
    <p class="muted">${escapeHtml(q.ds)} · ${escapeHtml(q.id)}</p>
    <p>gold: ${q.gold.map((g) => `<span class="gold-answer">${escapeHtml(g)}</span>`).join(" ")}</p>${notice}
    <div class="legend"><span class="snippet gold">gold document</span><span class="snippet supporting">supporting sentence</span><mark class="answer">answer</mark><span class="snippet cut">cut by budget</span><span class="badge summary">summary node</span><span class="badge copy">injected copy</span></div>
    <div class="cells">${shown.map((v) => renderCell(q, v)).join("")}</div>`;
}

// ---- controls and routing ------------------------------------------------------------------------------

function renderControls() {
  const d = state.data;
  const datasets = [...new Set(d.questions.map((q) => q.ds))].sort();
  document.getElementById("filter-dataset").innerHTML = `<option value="">all datasets</option>` + datasets.map((s) => `<option>${escapeHtml(s)}</option>`).join("");
  const options = d.variants.map((v, i) => `<option value="${i}">${escapeHtml(v.label)}</option>`).join("");
  document.getElementById("choose-a").innerHTML = options;
  document.getElementById("choose-b").innerHTML = options;
  document.getElementById("choose-a").value = String(state.a);
  document.getElementById("choose-b").value = String(state.b);
  document.getElementById("variants").innerHTML = d.variants.map((v, i) => `<label><input type="checkbox" class="variant" value="${i}" ${state.shown.has(i) ? "checked" : ""}> ${escapeHtml(v.label)}</label>`).join("");
  document.getElementById("pairs").innerHTML = `<option value="">one-key comparisons (${d.pairs.length})</option>` + d.pairs.map(([a, b, key], k) => `<option value="${k}">${escapeHtml(d.variants[a].label)} vs ${escapeHtml(d.variants[b].label)} (${escapeHtml(key)})</option>`).join("");
}

function compare(a, b) {
  state.a = a;
  state.b = b;
  state.shown = new Set([a, b]);
  renderControls();
}

function route() {
  const d = state.data;
  const hash = location.hash.slice(1);
  const params = new URLSearchParams(hash);
  if (params.has("compare")) {
    const [la, lb] = params.get("compare").split("|");
    const a = d.variants.findIndex((v) => v.label === la);
    const b = d.variants.findIndex((v) => v.label === lb);
    if (a >= 0 && b >= 0 && (a !== state.a || b !== state.b || state.shown.size !== 2)) compare(a, b);
  }
  const key = params.get("q");
  const i = key === null ? -1 : d.questions.findIndex((q) => q.key === key);
  document.getElementById("index-view").hidden = i >= 0;
  document.getElementById("question-view").hidden = i < 0;
  if (i >= 0) renderQuestion(i);
  else renderIndex();
}

function openQuestion(i) {
  const params = new URLSearchParams(location.hash.slice(1));
  params.set("q", state.data.questions[i].key);
  location.hash = params.toString();
}

function wire() {
  for (const id of ["filter-dataset", "filter-disagree-aic", "filter-disagree-f1", "filter-dropped", "filter-delta", "filter-search"]) {
    document.getElementById(id).addEventListener("input", renderIndex);
  }
  document.getElementById("choose-a").addEventListener("change", (e) => { state.a = +e.target.value; renderIndex(); });
  document.getElementById("choose-b").addEventListener("change", (e) => { state.b = +e.target.value; renderIndex(); });
  document.getElementById("pairs").addEventListener("change", (e) => {
    if (e.target.value === "") return;
    const [a, b] = state.data.pairs[+e.target.value];
    compare(a, b);
    renderIndex();
  });
  document.getElementById("variants").addEventListener("change", (e) => {
    if (!e.target.classList.contains("variant")) return;
    const v = +e.target.value;
    if (e.target.checked) state.shown.add(v); else state.shown.delete(v);
    renderIndex();
  });
  document.getElementById("index").addEventListener("click", (e) => {
    const th = e.target.closest("th");
    if (th) {
      const key = th.dataset.sort;
      state.sort = { key, dir: state.sort.key === key ? -state.sort.dir : 1 };
      renderIndex();
      return;
    }
    if (e.target.id === "show-more") { state.limit = Infinity; renderIndex(); return; }
    const tr = e.target.closest("tr[data-question]");
    if (tr) openQuestion(+tr.dataset.question);
  });
  document.getElementById("question").addEventListener("click", (e) => {
    if (e.target.id !== "back") return;
    e.preventDefault();
    const params = new URLSearchParams(location.hash.slice(1));
    params.delete("q");
    location.hash = params.toString();
  });
  window.addEventListener("hashchange", route);
}

async function main() {
  const started = performance.now();
  state.data = await loadPayload();
  const d = state.data;
  state.shown = new Set(d.variants.map((_, i) => i));
  state.b = Math.min(1, d.variants.length - 1);
  document.getElementById("title").textContent = d.title;
  document.getElementById("sources").textContent = d.sources.join(", ");
  if (!d.provenance) document.getElementById("provenance-notice").hidden = false;
  renderControls();
  wire();
  route();
  document.body.dataset.loadMs = String(Math.round(performance.now() - started));
  document.body.dataset.ready = "1";
}

main().catch((error) => {
  document.body.dataset.error = String(error);
  document.getElementById("count").textContent = `could not load the data: ${error}`;
  throw error;
});
