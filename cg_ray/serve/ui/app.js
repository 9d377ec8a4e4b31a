// cg_ray explorer: a thin client of the /v1 API. The API key stays in this browser (localStorage).
"use strict";

const state = { analysis: null, summary: null, mode: "model", sort: "X_model", order: "asc", offset: 0, limit: 25 };
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const fmt = (x, d = 3) => (x === null || x === undefined ? "—" : Number(x).toFixed(d));
const PLOT = { displaylogo: false, responsive: true };
const LAYOUT = { margin: { l: 50, r: 10, t: 40, b: 40 }, height: 320 };
const T = (text) => ({ text });  // plotly.js 3 wants titles as objects
const ci = (lo, hi, d = 3) => (lo === null || lo === undefined ? "—" : `[${fmt(lo, d)}, ${fmt(hi, d)}]`);
const signed = (x, d = 3) => (x === null || x === undefined ? "—" : (x >= 0 ? "+" : "") + Number(x).toFixed(d));

async function api(path, options = {}) {
  const headers = Object.assign({ "X-API-Key": localStorage.getItem("cg_ray_key") || "" }, options.headers || {});
  const res = await fetch(path, Object.assign({}, options, { headers }));
  const body = res.headers.get("content-type")?.includes("json") ? await res.json() : await res.text();
  if (!res.ok) {
    const detail = body && body.detail !== undefined ? body.detail : body;
    throw new Error(typeof detail === "string" ? detail : detail.error || JSON.stringify(detail));
  }
  return body;
}

async function loadAnalyses(select) {
  try {
    const list = await api("/v1/analyses");
    $("auth-status").textContent = "key OK";
    $("analysis").innerHTML = list
      .map((a) => `<option value="${esc(a.id)}" ${a.status !== "succeeded" ? "disabled" : ""}>${esc(a.id)}${a.mode === MODELS_MODE ? " (diff-models)" : ""} — ${esc(a.status)}</option>`)
      .join("");
    const done = list.filter((a) => a.status === "succeeded");
    state.finished = done.filter((a) => a.mode !== MODELS_MODE).map((a) => a.id);
    state.modelRuns = done.filter((a) => a.mode === MODELS_MODE).map((a) => a.id);
    const pick = select || state.finished[0] || state.modelRuns[0];
    if (pick) { $("analysis").value = pick; await showAnalysis(pick); }
    else $("analysis-status").textContent = list.length ? "no finished analysis yet" : "no analyses yet: upload a benchmark below";
  } catch (e) {
    $("auth-status").innerHTML = `<span class="err">${esc(e.message)}</span>`;
  }
}

async function showAnalysis(id) {
  fillModelRuns();
  if ((state.modelRuns || []).includes(id)) return showModelsAnalysis(id);
  state.analysis = id;
  state.offset = 0;
  $("compare-analyses").hidden = false;
  // Unhide first: plotly sizes a plot from its container, and a hidden one has no width.
  for (const section of ["overview", "beyond", "profile", "concepts", "compare", "relations"]) $(section).hidden = false;
  $("compare-with").innerHTML = (state.finished || []).map((a) => `<option value="${esc(a)}">${esc(a)}</option>`).join("");
  $("diff-detail").innerHTML = "";
  document.querySelector("#diff-table tbody").innerHTML = "";
  const summary = (state.summary = await api(`/v1/analyses/${id}/summary`));
  const dist = (state.dist = await api(`/v1/analyses/${id}/distributions`));
  const s = summary.suite;
  const kpis = [
    [summary.n_rows.toLocaleString(), "rows"], [s.n_benchmarks, "benchmarks"], [summary.d_sae.toLocaleString(), "concepts"],
    [`${s.missing_pct.toFixed(1)}%`, "missing"], [fmt(s.median_X_model), "median X_model"], [s.n_model_gaps, "model gaps"],
  ];
  $("kpis").innerHTML = kpis.map(([v, l]) => `<div class="kpi"><div class="v">${esc(v)}</div><div class="l">${esc(l)}</div></div>`).join("");
  Plotly.newPlot("hist-coverage", [{ type: "histogram", x: dist.X_bench, nbinsx: 60, marker: { color: "#4c78a8" } }],
    Object.assign({}, LAYOUT, { title: T("X_bench (present concepts)"), yaxis: { type: "log", title: T("concepts") } }), PLOT);
  Plotly.newPlot("hist-performance", [{ type: "histogram", x: dist.X_model, nbinsx: 40, marker: { color: "#54a24b" } }],
    Object.assign({}, LAYOUT, { title: T(`X_model (median ${fmt(s.median_X_model)})`),
      shapes: s.median_X_model === null ? [] : [{ type: "line", x0: s.median_X_model, x1: s.median_X_model, y0: 0, y1: 1, yref: "paper", line: { color: "crimson", dash: "dash" } }] }), PLOT);
  const names = summary.jaccard.benchmarks;
  $("filter-benchmark").innerHTML = `<option value="">all benchmarks</option>` + names.map((b) => `<option>${esc(b)}</option>`).join("");
  $("subset").innerHTML = names.map((b) => `<label><input type="checkbox" value="${esc(b)}" checked> ${esc(b)}</label>`).join(" ");
  heatmap("jaccard", summary.jaccard.matrix, names, "Jaccard overlap of active concepts", 0, 1, "Blues");
  heatmap("correlation", summary.correlation.matrix, names, "Correlation of χ_model", -1, 1, "RdBu");
  Plotly.newPlot("per-benchmark", names.map((b) => ({ type: "box", name: b, y: dist.per_benchmark_chi_model[b] || [], boxpoints: false })),
    Object.assign({}, LAYOUT, { title: T("χ_model per benchmark"), showlegend: false }), PLOT);
  $("analysis-status").textContent = "";
  await loadBeyond();
  await loadProfile();
  await loadConcepts();
  await loadThemes();
}

// A snippet of `text` around the first of `terms`, escaped, each term in <mark>.
function marked(text, terms) {
  const words = (terms || []).filter((t) => t.trim()).sort((a, b) => b.length - a.length);
  if (!text) return "";
  // As cg_ray.profile.terms.term_pattern: whole words only, a 2-gram's words across any non-word characters.
  const one = (w) => (/^\w/.test(w) ? "(?<!\\w)" : "") + w.split(/\s+/).map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("\\W+") + (/\w$/.test(w) ? "(?!\\w)" : "");
  const re = words.length ? new RegExp(words.map(one).join("|"), "gi") : null;
  const first = re ? text.search(re) : -1;
  const start = Math.max(0, first - 60);
  const snippet = (start ? "…" : "") + text.slice(start, start + 220) + (start + 220 < text.length ? "…" : "");
  if (!re) return esc(snippet);
  let out = "", last = 0;
  for (const m of snippet.matchAll(re)) {
    out += esc(snippet.slice(last, m.index)) + `<mark>${esc(m[0])}</mark>`;
    last = m.index + m[0].length;
  }
  return out + esc(snippet.slice(last));
}

// Findings judged held out (issue #31): chosen on K-1 folds of grouped rows, measured on the held-out one;
// confirmed (q ≤ the FDR) first, the other candidates apart, collapsed and greyed — the report's words.
const ordinal = (n) => `${n}${n % 100 >= 10 && n % 100 <= 20 ? "th" : { 1: "st", 2: "nd", 3: "rd" }[n % 10] || "th"}`;
const qText = (q) => (q === null || q === undefined ? "q —" : q < 0.001 ? "q<0.001" : `q=${q.toFixed(3)}`);
const pct = (x) => `${Math.round(x * 100)}%`;

function judgedText(cf) {
  if (!cf) return "";
  const g = cf.groups || {};
  const grouped = g.rule && g.n_groups !== undefined ? ` (${g.rule}, ${g.n_groups.toLocaleString()} groups)` : "";
  const fdr = `${+(cf.fdr * 100).toPrecision(3)}%`;
  if (cf.skipped) return cf.skipped;
  if (cf.folds === 2) return `chosen on one half of the rows${grouped} and measured on the other, both ways; confirmed when both halves confirm at FDR ${fdr}`;
  return `chosen on ${cf.folds - 1} of ${cf.folds} folds of grouped rows${grouped}, measured on the ${ordinal(cf.folds)}; confirmed when the median fold confirms at FDR ${fdr}`;
}

// Under a held-out figure: its q-value and what it was measured on.
function verdictCell(e, folds) {
  if (e.confirmed === null || e.confirmed === undefined) return "";
  const groups = e.n_clusters === null || e.n_clusters === undefined ? "" : ` (${e.n_clusters.toLocaleString()} groups)`;
  const measured = e.n_heldout === null || e.n_heldout === undefined ? ""
    : `<div class="muted">measured held out on ${e.n_heldout.toLocaleString()} rows${groups} in ${e.folds_selected}${folds ? ` of ${folds}` : ""} folds</div>`;
  return `<div class="muted">${qText(e.q_value)}</div>${measured}`;
}

// "“draw” in 62% of its rows vs 8% of the same cells; “pawn” 40% vs 3%"
function sharesText(m) {
  const shares = m.term_shares || [], background = m.background_shares || [];
  if (!shares.length || !background.length) return "";
  return m.terms.slice(0, shares.length).map((t, i) => (i === 0
    ? `“${t}” in ${pct(shares[i])} of its rows vs ${pct(background[i])} of the same cells`
    : `“${t}” ${pct(shares[i])} vs ${pct(background[i])}`)).join("; ");
}

// Confirmed entries into `${id}-table`, candidates into the collapsed `${id}-candidates`; `nothing`: the row
// said when none is confirmed. A run made before held-out checks (confirmed null) keeps one table.
function fillJudged(id, p, row, cols, nothing) {
  const judged = p.items.length && p.items[0].confirmed !== null && p.items[0].confirmed !== undefined;
  const confirmed = judged ? p.items.filter((e) => e.confirmed) : p.items;
  const candidates = judged ? p.items.filter((e) => !e.confirmed) : [];
  document.querySelector(`#${id}-table tbody`).innerHTML = confirmed.map(row).join("")
    || (judged ? `<tr class="none"><td colspan="${cols}"><b>${esc(nothing)}</b></td></tr>` : "");
  $(`${id}-candidates`).hidden = !candidates.length;
  const more = p.total - (p.n_confirmed || 0) - candidates.length;
  const fdr = p.crossfit ? ` (q > ${p.crossfit.fdr}, or an interval reaching no difference)` : "";
  $(`${id}-candidates-count`).textContent = `${(p.total - (p.n_confirmed || 0)).toLocaleString()}${fdr}${more > 0 ? `, the first ${candidates.length} shown` : ""}`;
  document.querySelector(`#${id}-candidates-table tbody`).innerHTML = candidates.map(row).join("");
}

// What the metadata does not explain (failure modes), then what it does (the weakest slices).
async function loadBeyond() {
  const base = `/v1/analyses/${state.analysis}/weaknesses?limit=10&kind=`;
  let modes, slices;
  try {
    [modes, slices] = await Promise.all([api(base + "failure_modes"), api(base + "slices")]);
  } catch (e) {
    $("modes-note").innerHTML = `<span class="err">${esc(e.message)}</span>`;
    return;
  }
  const cf = modes.crossfit, folds = cf ? cf.folds : null;
  const tried = (kind, p) => {
    const n = (cf && cf.candidates && cf.candidates[kind]) ?? p.total;
    return `${n.toLocaleString()} candidate${n === 1 ? "" : "s"} tried`;
  };
  $("beyond-judged").textContent = cf ? `Findings ${judgedText(cf)}.` : "";
  const adjusted = (modes.adjusted_for || []).join(", ") || "nothing: the suite mean";
  $("modes-note").textContent = modes.total
    ? `concepts that fire on the same rows, whose rows score below their own metadata cell (adjusted for ${adjusted}), measured held out; examples: a random draw of the mode's rows that score below their cell`
    : `no group of concepts scores confidently below its cells (adjusted for ${adjusted})`;
  const modeRow = (m) => {
    const shares = sharesText(m);
    return `
    <tr class="mode"><td class="num">${m.rank}</td><td><b>${esc(m.description)}</b>${shares ? `<div class="muted">${esc(shares)}</div>` : ""}${(m.examples || []).slice(0, 2).map((x) => `<div class="muted">${esc(x.benchmark)}/${esc(x.row_id)} (score ${fmt(x.score, 2)}): ${marked(x.text, m.terms)}</div>`).join("")}</td>
    <td class="num">${signed(m.residual)} <span class="muted">[${signed(m.residual_low)}, ${signed(m.residual_high)}]</span>${verdictCell(m, folds)}</td>
    <td class="num">${fmt(m.mean_score)} vs ${fmt(m.expected_score)}${m.residual_in_sample === null || m.residual_in_sample === undefined ? "" : `<div class="muted">residual ${signed(m.residual_in_sample)}</div>`}</td><td class="num">${m.n_rows.toLocaleString()}</td>
    <td>${esc(m.concept_ids.slice(0, 6).join(", "))}</td></tr>`;
  };
  fillJudged("modes", modes, modeRow, 6, `no failure mode confirmed held out (${tried("failure_modes", modes)})`);
  $("slices-note").textContent = slices.total
    ? "conjunctions of metadata values (and benchmark) whose mean score is low, measured held out against the other rows of the same fold"
    : "no metadata field or second benchmark to slice by";
  const sliceRow = (s) => `
    <tr class="slice"><td class="num">${s.rank}</td><td>${esc(s.slice)}</td>
    <td class="num">${fmt(s.mean_score)} <span class="muted">${ci(s.low, s.high)}</span>${s.suite_mean === null || s.suite_mean === undefined ? "" : `<div class="muted">other rows ${fmt(s.suite_mean)}</div>`}${verdictCell(s, folds)}</td>
    <td class="num">${fmt(s.mean_in_sample)}</td><td class="num">${s.n_rows.toLocaleString()}</td></tr>`;
  fillJudged("slices", slices, sliceRow, 5, `no slice confirmed held out (${tried("slices", slices)})`);
}

// A concept's held-out residual and verdict (only concepts that were candidates have one).
function heldoutCell(e) {
  if (e.residual_heldout === null || e.residual_heldout === undefined) return "—";
  const verdict = e.confirmed ? `<span class="ok">✓ confirmed</span> ${qText(e.q_value)}` : `candidate, ${qText(e.q_value)}`;
  return `${signed(e.residual_heldout)} <span class="muted">[${signed(e.residual_heldout_low)}, ${signed(e.residual_heldout_high)}]</span><div class="muted">${verdict}</div>`;
}

async function loadProfile() {
  const table = $("profile-table");
  table.setAttribute("aria-busy", "true");
  const kind = $("profile-kind").value;
  let p;
  try {
    p = await api(`/v1/analyses/${state.analysis}/weaknesses?kind=${kind}&limit=25`);
  } catch (e) {
    $("profile-note").innerHTML = `<span class="err">${esc(e.message)}</span>`;
    document.querySelector("#profile-table tbody").innerHTML = "";
    table.setAttribute("aria-busy", "false");
    return;
  }
  const order = { upper_bound: "the upper end of X_model's 95% interval", adjusted_gap: "the adjusted gap's interval", x_model: "X_model" }[p.rank_by] || p.rank_by;
  const cfg = state.summary.config;
  $("profile-note").textContent = p.total
    ? `${p.total} entries · ranked by ${order} · near-duplicates (Jaccard ≥ ${p.duplicate_jaccard}) merged` +
      (p.n_confirmed === null || p.n_confirmed === undefined ? "" : ` · ${p.n_confirmed} confirmed held out`)
    : `no concept is active in ≥ ${cfg.min_rows} rows and ≥ ${cfg.min_benchmarks} benchmark(s) (the profile's filters)`;
  document.querySelector("#profile-table tbody").innerHTML = p.items.map((e) => `
    <tr data-id="${e.concept_id}"><td class="num">${e.rank}</td><td class="num">${e.concept_id}</td>
    <td>${esc(e.description || e.label || "(no label)")}${e.metadata_enrichment.map((m) => `<div class="muted">${esc(m)}</div>`).join("")}</td>
    <td class="num">${fmt(e.X_model)} <span class="muted">${ci(e.X_model_low, e.X_model_high)}</span></td>
    <td class="num">${signed(e.adjusted_gap)} <span class="muted">[${signed(e.adjusted_gap_low)}, ${signed(e.adjusted_gap_high)}]</span></td>
    <td class="num">${heldoutCell(e)}</td><td class="num">${e.n_rows.toLocaleString()}</td><td class="num">${fmt(e.n_eff, 1)}</td><td class="num">${e.n_benchmarks}</td>
    <td>${esc(e.members.filter((m) => m !== e.concept_id).join(", ") || "—")}</td></tr>`).join("");
  table.setAttribute("aria-busy", "false");
}

function heatmap(div, matrix, names, title, zmin, zmax, scale) {
  const text = matrix.map((r) => r.map((v) => (v === null ? "—" : v.toFixed(2))));
  Plotly.newPlot(div, [{ type: "heatmap", z: matrix, x: names, y: names, zmin, zmax, colorscale: scale, text, texttemplate: "%{text}" }],
    Object.assign({}, LAYOUT, { title: T(title), yaxis: { autorange: "reversed" } }), PLOT);
}

async function loadConcepts() {
  const table = $("concept-table");
  table.setAttribute("aria-busy", "true");  // tests and screen readers wait for "false"
  const seq = (state.seq = (state.seq || 0) + 1);
  const params = new URLSearchParams({ sort: state.sort, order: state.order, limit: state.limit, offset: state.offset });
  if (state.mode === "model") params.set("scored_only", "true");
  if ($("search").value) params.set("q", $("search").value);
  if ($("filter-class").value) params.set("class", $("filter-class").value);
  if ($("filter-benchmark").value) params.set("benchmark", $("filter-benchmark").value);
  const page = await api(`/v1/analyses/${state.analysis}/concepts?${params}`);
  if (seq !== state.seq) return;  // a newer request (typing, sorting) superseded this one
  $("concept-count").textContent = `${page.total.toLocaleString()} concepts`;
  $("page").textContent = `${page.total ? page.offset + 1 : 0}–${Math.min(page.offset + page.limit, page.total)} of ${page.total}`;
  document.querySelector("#concept-table tbody").innerHTML = page.items.map((c) => `
    <tr data-id="${c.concept_id}"><td class="num">${c.concept_id}</td><td>${esc(c.description || c.label || "(no label)")}${c.description && c.label ? `<div class="muted">label: ${esc(c.label)}</div>` : ""}</td>
    <td class="num">${fmt(c.X_model)}</td><td class="num">${fmt(c.X_bench)}</td><td class="num">${c.n_benchmarks_active}</td>
    <td class="num">${c.n_active_rows.toLocaleString()}</td><td class="cls-${c.coverage_class}">${c.coverage_class}</td>
    <td class="num muted">${ci(c.X_model_low, c.X_model_high)}</td><td class="num">${fmt(c.n_eff, 1)}</td>
    <td class="num">${signed(c.adjusted_gap)}</td></tr>`).join("");
  $("prev").disabled = page.offset === 0;
  $("next").disabled = page.offset + page.limit >= page.total;
  table.setAttribute("aria-busy", "false");
}

function examplesHtml(list) {
  if (!list.length) return `<div class="muted">none</div>`;
  return list.map((e) => `<div class="example"><div class="meta">${esc(e.benchmark)}/${esc(e.row_id)} · score ${fmt(e.score, 2)} · s̃ ${Number(e.activation).toPrecision(3)}</div>${esc((e.text || "").slice(0, 600))}</div>`).join("");
}

async function showConcept(id) {
  $("detail").hidden = false;
  const c = await api(`/v1/analyses/${state.analysis}/concepts/${id}`);
  $("detail-title").textContent = `Concept ${c.concept_id}: ${c.label || "(no label)"}`;
  $("detail-body").innerHTML = `X_model <b>${fmt(c.X_model)}</b> ${ci(c.X_model_low, c.X_model_high)} ·
    adjusted gap <b>${signed(c.adjusted_gap)}</b> [${signed(c.adjusted_gap_low)}, ${signed(c.adjusted_gap_high)}] ·
    n_eff ${fmt(c.n_eff, 1)} · X_bench <b>${fmt(c.X_bench)}</b> · ${esc(c.coverage_class)} ·
    active in ${c.n_benchmarks_active} benchmark(s), ${c.n_active_rows} rows${c.is_model_gap ? " · <b class='err'>model gap</b>" : ""}`;
  const b = c.benchmarks;
  Plotly.newPlot("detail-plot", [
    { type: "bar", name: "χ_model", x: b.map((r) => r.benchmark), y: b.map((r) => r.chi_model), marker: { color: "#54a24b" } },
    { type: "bar", name: "χ_bench", x: b.map((r) => r.benchmark), y: b.map((r) => r.chi_bench), yaxis: "y2", marker: { color: "#4c78a8" } },
  ], Object.assign({}, LAYOUT, { title: T("Per benchmark"), barmode: "group", yaxis: { title: T("χ_model"), range: [0, 1] },
    yaxis2: { title: T("χ_bench"), overlaying: "y", side: "right" } }), PLOT);
  $("detail-readable").innerHTML = readableHtml(c.readable);
  $("best").innerHTML = examplesHtml(c.best_examples);
  $("worst").innerHTML = examplesHtml(c.worst_examples);
  $("detail").scrollIntoView({ behavior: "smooth" });
}

async function compareSubset() {
  const chosen = [...document.querySelectorAll("#subset input:checked")].map((i) => i.value);
  const params = new URLSearchParams();
  chosen.forEach((b) => params.append("benchmarks", b));
  const r = await api(`/v1/analyses/${state.analysis}/coverage?${params}`);
  $("subset-result").textContent = `${r.n_missing.toLocaleString()} concepts missing (${r.missing_pct.toFixed(1)}%) from ${chosen.join(", ")}`;
  Plotly.newPlot("subset-plot", [{ type: "histogram", x: r.X_bench_present, nbinsx: 60, marker: { color: "#72b7b2" } }],
    Object.assign({}, LAYOUT, { title: T("X_bench of the subset"), yaxis: { type: "log" } }), PLOT);
}

async function uploadAndAnalyse(event) {
  event.preventDefault();
  const form = new FormData();
  form.append("file", $("upload-file").files[0]);
  if ($("upload-benchmark").value) form.append("benchmark", $("upload-benchmark").value);
  const status = $("upload-status");
  try {
    status.textContent = "uploading…";
    const up = await api("/v1/uploads", { method: "POST", body: form });
    status.textContent = `uploaded ${up.n_rows} rows (${up.benchmarks.join(", ")}); analysing…`;
    let a = await api("/v1/analyses", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ upload_ids: [up.id], text: $("upload-text").value }) });
    while (a.status === "queued" || a.status === "running") {
      await new Promise((r) => setTimeout(r, 500));
      a = await api(`/v1/analyses/${a.id}`);
      status.textContent = `${a.status}: ${a.message} (${Math.round(a.progress * 100)}%)`;
    }
    if (a.status !== "succeeded") throw new Error(a.error || "analysis failed");
    status.textContent = `analysis ${a.id} done`;
    await loadAnalyses(a.id);
  } catch (e) {
    status.innerHTML = `<span class="err">${esc(e.message)}</span>`;
  }
}

function setMode(mode) {
  state.mode = mode;
  state.sort = mode === "model" ? "X_model" : "X_bench";
  state.order = "asc";
  state.offset = 0;
  $("mode-model").classList.toggle("on", mode === "model");
  $("mode-bench").classList.toggle("on", mode === "bench");
  loadConcepts();
}

window.addEventListener("DOMContentLoaded", () => {
  $("apikey").value = localStorage.getItem("cg_ray_key") || "";
  $("save-key").onclick = () => { localStorage.setItem("cg_ray_key", $("apikey").value.trim()); loadAnalyses(); };
  $("refresh").onclick = () => loadAnalyses();
  $("analysis").onchange = (e) => showAnalysis(e.target.value);
  $("upload-form").onsubmit = uploadAndAnalyse;
  $("mode-model").onclick = () => setMode("model");
  $("mode-bench").onclick = () => setMode("bench");
  let timer;
  $("search").oninput = () => { clearTimeout(timer); timer = setTimeout(() => { state.offset = 0; loadConcepts(); }, 250); };
  $("filter-class").onchange = $("filter-benchmark").onchange = () => { state.offset = 0; loadConcepts(); };
  $("prev").onclick = () => { state.offset = Math.max(0, state.offset - state.limit); loadConcepts(); };
  $("next").onclick = () => { state.offset += state.limit; loadConcepts(); };
  document.querySelectorAll("th[data-sort]").forEach((th) => (th.onclick = () => {
    state.order = state.sort === th.dataset.sort && state.order === "asc" ? "desc" : "asc";
    state.sort = th.dataset.sort;
    loadConcepts();
  }));
  document.querySelector("#concept-table tbody").onclick = (e) => {
    const tr = e.target.closest("tr");
    if (tr) showConcept(tr.dataset.id);
  };
  $("subset-go").onclick = compareSubset;
  $("compare-go").onclick = compareAnalyses;
  document.querySelector("#diff-table tbody").onclick = (e) => {
    const tr = e.target.closest("tr");
    if (tr) showDiffConcept(Number(tr.dataset.id));
  };
  $("profile-kind").onchange = loadProfile;
  document.querySelector("#profile-table tbody").onclick = (e) => {
    const tr = e.target.closest("tr");
    if (tr) showConcept(tr.dataset.id);
  };
  if (localStorage.getItem("cg_ray_key")) loadAnalyses();
});

// Readable gaps (`cg-ray describe`): the themes panel and a described concept's sentence, enrichment and
// highlighted example. Analyses without descriptions show a short note instead.
function highlighted(e) {
  const t = e.snippet || "";
  if (e.span_start === null || e.span_start === undefined) return esc(t);
  return esc(t.slice(0, e.span_start)) + "<mark>" + esc(t.slice(e.span_start, e.span_end)) + "</mark>" + esc(t.slice(e.span_end));
}

function readableHtml(r) {
  if (!r) return "";
  const ex = (r.examples || [])[0];
  const score = r.detection_score === null || r.detection_score === undefined ? "" : ` · detection ${fmt(r.detection_score, 2)}`;
  return `<div class="readable"><p><b>${esc(r.description)}</b> <span class="muted">(${esc(r.source)}${score})</span></p>` +
    (r.metadata_enrichment.length ? `<p class="muted">over-represented: ${r.metadata_enrichment.map(esc).join("; ")}</p>` : "") +
    (ex ? `<div class="example"><div class="meta">${esc(ex.benchmark)}/${esc(ex.row_id)} · score ${fmt(ex.score, 2)}</div>${highlighted(ex)}</div>` : "") +
    `</div>`;
}

async function loadThemes() {
  $("themes").hidden = false;
  const body = $("themes-body");
  try {
    const t = await api(`/v1/analyses/${state.analysis}/themes`);
    body.innerHTML = t.themes.length ? t.themes.map((th) => `<div class="theme"><b>${esc(th.name)}</b>
      <span class="muted">${th.support.toLocaleString()} rows · mean score ${fmt(th.mean_score)}</span>
      <ul>${th.concepts.map((c) => `<li><a href="#" data-concept="${c.concept_id}">${c.concept_id}</a>: ${esc(c.description)}</li>`).join("")}</ul></div>`).join("")
      : "No themes: the described concepts rarely fire on the same rows.";
    body.querySelectorAll("a[data-concept]").forEach((a) => a.addEventListener("click", (ev) => { ev.preventDefault(); showConcept(a.dataset.concept); }));
  } catch (e) {
    body.textContent = e.message;
  }
}

// Compare (`cg-ray diff` over two analyses, GET /v1/diff): the confident changes from this analysis (A) to
// another (B) with their intervals; a row opens the concept's per-benchmark changes and the rows that flipped.
async function compareAnalyses() {
  const table = $("diff-table");
  table.setAttribute("aria-busy", "true");
  const params = new URLSearchParams({ a: state.analysis, b: $("compare-with").value, rank_by: $("compare-rank").value });
  try {
    const d = (state.diff = await api(`/v1/diff?${params}`));
    const c = d.counts;
    $("compare-note").textContent = `${c.paired.toLocaleString()} paired rows (${c.only_a} only in A, ${c.only_b} only in B, ` +
      `${c.shared_unscored} unscored in one: skipped) · mean score ${fmt(d.runs.a.mean_score_paired)} → ${fmt(d.runs.b.mean_score_paired)} · ` +
      `${c.confident_regressed} regressed, ${c.confident_improved} improved confidently (≈${c.expected_by_chance_per_direction} per direction by chance)`;
    const rows = d.top_regressed.map((e) => ["regressed", e]).concat(d.top_improved.map((e) => ["improved", e]));
    document.querySelector("#diff-table tbody").innerHTML = rows.map(([kind, e]) => `
      <tr class="${kind}" data-id="${e.concept_id}"><td class="num">${e.concept_id}</td><td>${esc(e.description || e.label || "(no label)")}</td>
      <td class="num">${signed(e.delta_X_model)} <span class="muted">[${signed(e.low)}, ${signed(e.high)}]</span></td>
      <td class="num">${signed(e.relative.delta)} <span class="muted">[${signed(e.relative.low)}, ${signed(e.relative.high)}]</span></td>
      <td class="num">${fmt(e.X_model_a)} → ${fmt(e.X_model_b)}</td><td class="num">${e.n_paired_active}</td></tr>`).join("")
      || `<tr><td colspan="6" class="muted">no concept changed confidently</td></tr>`;
  } catch (e) {
    $("compare-note").innerHTML = `<span class="err">${esc(e.message)}</span>`;
    document.querySelector("#diff-table tbody").innerHTML = "";
  }
  table.setAttribute("aria-busy", "false");
}

function flippedHtml(list) {
  if (!list.length) return `<div class="muted">none</div>`;
  return list.map((r) => `<div class="example"><div class="meta">${esc(r.benchmark)}/${esc(r.row_id)} · score ${fmt(r.score_a, 2)} → ${fmt(r.score_b, 2)} · s̃ ${Number(r.s_tilde_a).toPrecision(3)} / ${Number(r.s_tilde_b).toPrecision(3)}</div>` +
    [["", r.prompt], ["A: ", r.response_a], ["B: ", r.response_b]].filter(([, t]) => t).map(([who, t]) => `<div>${who}${esc(t.slice(0, 400))}</div>`).join("") + `</div>`).join("");
}

function showDiffConcept(id) {
  const e = [...state.diff.top_regressed, ...state.diff.top_improved].find((x) => x.concept_id === id);
  if (!e) return;
  const bench = e.per_benchmark.map((b) => `${esc(b.benchmark)}: Δχ ${signed(b.delta_chi_model)} [${signed(b.low)}, ${signed(b.high)}], ${b.n_paired_active} rows`).join(" · ");
  $("diff-detail").innerHTML = `<h3>Concept ${e.concept_id}: ${esc(e.description || e.label || "(no label)")}</h3><p class="muted">${bench}</p>
    <div class="grid"><div><h3>Right in A, wrong in B</h3>${flippedHtml(e.examples.right_in_a_wrong_in_b || [])}</div>
    <div><h3>Wrong in A, right in B</h3>${flippedHtml(e.examples.wrong_in_a_right_in_b || [])}</div></div>`;
}
