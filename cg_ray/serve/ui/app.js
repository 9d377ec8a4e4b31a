// cg_ray explorer: a thin client of the /v1 API. The API key stays in this browser (localStorage).
"use strict";

const state = { analysis: null, finished: [], modelRuns: [], arenas: [] };

async function api(path, options = {}) {
  const headers = Object.assign({ "X-API-Key": localStorage.getItem("cg_ray_key") || "" }, options.headers || {});
  const res = await fetch(path, Object.assign({}, options, { headers }));
  const body = res.headers.get("content-type")?.includes("json") ? await res.json() : await res.text();
  if (!res.ok) {
    const detail = body && body.detail !== undefined ? body.detail : body;
    const err = new Error(typeof detail === "string" ? detail : detail.error || JSON.stringify(detail));
    err.status = res.status;
    throw err;
  }
  return body;
}

async function loadAnalyses(select) {
  try {
    const list = await api("/v1/analyses");
    $("auth-status").textContent = "key OK";
    $("analysis").innerHTML = list
      .map(
        (a) =>
          `<option value="${esc(a.id)}" ${a.status !== "succeeded" ? "disabled" : ""}>${esc(a.id)}${a.mode === MODELS_MODE ? " (diff-models)" : a.mode === "arena" ? " (arena)" : ""} — ${esc(a.status)}</option>`,
      )
      .join("");
    const done = list.filter((a) => a.status === "succeeded");
    state.finished = done.filter((a) => a.mode !== MODELS_MODE && a.mode !== "arena").map((a) => a.id);
    state.modelRuns = done.filter((a) => a.mode === MODELS_MODE).map((a) => a.id);
    state.arenas = done.filter((a) => a.mode === "arena").map((a) => a.id);
    const pick = select || state.finished[0] || state.modelRuns[0] || state.arenas[0];
    if (pick) {
      $("analysis").value = pick;
      await showAnalysis(pick);
    } else
      $("analysis-status").textContent = list.length
        ? "no finished analysis yet"
        : "no analyses yet: upload a benchmark below";
  } catch (e) {
    $("auth-status").innerHTML = `<span class="err">${esc(e.message)}</span>`;
  }
}

// One analysis: its documents (GET …/view, the same documents a report embeds) drawn by view.js; a concept
// outside the view's ranked ones is asked of the API.
async function showAnalysis(id) {
  fillModelRuns();
  if ((state.modelRuns || []).includes(id)) return showModelsAnalysis(id);
  if ((state.arenas || []).includes(id)) return showArenaAnalysis(id);
  state.analysis = id;
  showOnly([]);
  $("compare-analyses").hidden = false;
  $("compare").hidden = false;
  $("compare-with").innerHTML = (state.finished || [])
    .map((a) => `<option value="${esc(a)}">${esc(a)}</option>`)
    .join("");
  for (const box of ["diff-kpis", "diff-suites", "diff-method", "diff-detail", "compare-note"]) $(box).innerHTML = "";
  $("diff-plot").hidden = true;
  document.querySelector("#diff-table tbody").innerHTML = "";
  $("analysis-status").textContent = "loading…";
  const doc = await api(`/v1/analyses/${id}/view`);
  const names = doc.summary.jaccard.benchmarks;
  $("subset").innerHTML = names
    .map((b) => `<label><input type="checkbox" value="${esc(b)}" checked> ${esc(b)}</label>`)
    .join(" ");
  drawView(doc, (cid) =>
    doc.details[cid] ? Promise.resolve(doc.details[cid]) : api(`/v1/analyses/${id}/concepts/${cid}`),
  );
  $("analysis-status").textContent = "";
}

// Only these sections (and the service's controls); a run's view shows its own sections as it draws them.
function showOnly(ids) {
  document.querySelectorAll("main > section").forEach((s) => (s.hidden = !(s.id === "start" || ids.includes(s.id))));
}

// An arena analysis (GET …/arena, the document an arena's report.html embeds): its ratings and head-to-head;
// each model's own analysis opens from its row.
async function showArenaAnalysis(id) {
  showOnly(["arena"]);
  $("analysis-status").textContent = "loading…";
  const doc = await api(`/v1/analyses/${id}/arena`);
  drawArena(doc, (model) => {
    const child = doc.model_analyses[model];
    return child && `<a href="#" data-analysis="${esc(child)}">analysis ${esc(child)}</a>`;
  });
  $("analysis-status").textContent = "";
}

// A page: the view registered for its kind (EMBEDDED.<kind>, each in its own file) draws its document.
function drawEmbedded(kind, doc) {
  document.body.classList.add("report");
  if (!EMBEDDED[kind]) throw new Error(`this app draws no "${kind}" view`);
  showOnly([]);
  if (kind !== "run") $("subtitle").textContent = doc.name;
  EMBEDDED[kind](doc);
}

async function compareSubset() {
  const chosen = [...document.querySelectorAll("#subset input:checked")].map((i) => i.value);
  const params = new URLSearchParams();
  chosen.forEach((b) => params.append("benchmarks", b));
  const r = await api(`/v1/analyses/${state.analysis}/coverage?${params}`);
  $("subset-result").textContent =
    `${r.n_missing.toLocaleString()} concepts missing (${r.missing_pct.toFixed(1)}%) from ${chosen.join(", ")}`;
  Charts.histogram("subset-plot", r.X_bench_present, {
    bins: 60,
    log: true,
    color: "#72b7b2",
    title: "X_bench of the subset",
    xTitle: "X_bench",
    yTitle: "concepts (log)",
  });
}

async function uploadAndAnalyse(event) {
  event.preventDefault();
  const form = new FormData();
  form.append("file", $("upload-file").files[0]);
  if ($("upload-benchmark").value) form.append("benchmark", $("upload-benchmark").value);
  if ($("upload-scorer").value) form.append("scorer_name", $("upload-scorer").value); // inspect_ai logs only
  const status = $("upload-status");
  try {
    status.textContent = "uploading…";
    const up = await api("/v1/uploads", { method: "POST", body: form });
    status.textContent = `uploaded ${up.n_rows} rows (${up.benchmarks.join(", ")}); analysing…`;
    let a = await api("/v1/analyses", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ upload_ids: [up.id], text: $("upload-text").value }),
    });
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

window.addEventListener("DOMContentLoaded", () => {
  // A page (report.html, diff.html, diff_models.html): the documents are in it; no API, no key, nothing fetched.
  const embedded = $("cg-ray-run");
  if (embedded) return drawEmbedded(embedded.dataset.view || "run", JSON.parse(embedded.textContent));
  $("apikey").value = localStorage.getItem("cg_ray_key") || "";
  $("save-key").onclick = () => {
    localStorage.setItem("cg_ray_key", $("apikey").value.trim());
    loadAnalyses();
  };
  $("refresh").onclick = () => loadAnalyses();
  $("analysis").onchange = (e) => showAnalysis(e.target.value);
  $("upload-form").onsubmit = uploadAndAnalyse;
  $("subset-go").onclick = compareSubset;
  $("compare-go").onclick = compareAnalyses;
  $("arena").onclick = (e) => {
    const a = e.target.closest("a[data-analysis]");
    if (!a) return;
    e.preventDefault();
    $("analysis").value = a.dataset.analysis;
    showAnalysis(a.dataset.analysis);
  };
  if (localStorage.getItem("cg_ray_key")) loadAnalyses();
});

// Compare (`cg-ray diff` over two analyses, GET /v1/diff): drawn by diff.js from the diff's document.
async function compareAnalyses() {
  const table = $("diff-table");
  table.setAttribute("aria-busy", "true");
  const params = new URLSearchParams({
    a: state.analysis,
    b: $("compare-with").value,
    rank_by: $("compare-rank").value,
  });
  try {
    $("compare-note").textContent = "";
    drawDiff(await api(`/v1/diff?${params}`));
  } catch (e) {
    $("compare-note").innerHTML = `<span class="err">${esc(e.message)}</span>`;
    document.querySelector("#diff-table tbody").innerHTML = "";
  }
  table.setAttribute("aria-busy", "false");
}
