// cg_ray explorer: a thin client of the /v1 API. The API key stays in this browser (localStorage).
"use strict";

const state = { analysis: null, finished: [], modelRuns: [] };

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
          `<option value="${esc(a.id)}" ${a.status !== "succeeded" ? "disabled" : ""}>${esc(a.id)}${a.mode === MODELS_MODE ? " (diff-models)" : ""} — ${esc(a.status)}</option>`,
      )
      .join("");
    const done = list.filter((a) => a.status === "succeeded");
    state.finished = done.filter((a) => a.mode !== MODELS_MODE).map((a) => a.id);
    state.modelRuns = done.filter((a) => a.mode === MODELS_MODE).map((a) => a.id);
    const pick = select || state.finished[0] || state.modelRuns[0];
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
  state.analysis = id;
  $("compare-analyses").hidden = false;
  $("compare").hidden = false;
  $("compare-with").innerHTML = (state.finished || [])
    .map((a) => `<option value="${esc(a)}">${esc(a)}</option>`)
    .join("");
  $("diff-detail").innerHTML = "";
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
  // A report: the run's documents are in the page; no API, no key, nothing fetched.
  const embedded = $("cg-ray-run");
  if (embedded) {
    document.body.classList.add("report");
    const doc = JSON.parse(embedded.textContent);
    return drawView(doc, async (cid) => doc.details[cid] || view.rows.find((c) => c.concept_id === cid));
  }
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
  document.querySelector("#diff-table tbody").onclick = (e) => {
    const tr = e.target.closest("tr");
    if (tr) showDiffConcept(Number(tr.dataset.id));
  };
  if (localStorage.getItem("cg_ray_key")) loadAnalyses();
});

// Compare (`cg-ray diff` over two analyses, GET /v1/diff): the confident changes from this analysis (A) to
// another (B) with their intervals; a row opens the concept's per-benchmark changes and the rows that flipped.
async function compareAnalyses() {
  const table = $("diff-table");
  table.setAttribute("aria-busy", "true");
  const params = new URLSearchParams({
    a: state.analysis,
    b: $("compare-with").value,
    rank_by: $("compare-rank").value,
  });
  try {
    const d = (state.diff = await api(`/v1/diff?${params}`));
    const c = d.counts;
    $("compare-note").textContent =
      `${c.paired.toLocaleString()} paired rows (${c.only_a} only in A, ${c.only_b} only in B, ` +
      `${c.shared_unscored} unscored in one: skipped) · mean score ${fmt(d.runs.a.mean_score_paired)} → ${fmt(d.runs.b.mean_score_paired)} · ` +
      `${c.confident_regressed} regressed, ${c.confident_improved} improved confidently (≈${c.expected_by_chance_per_direction} per direction by chance)`;
    const rows = d.top_regressed.map((e) => ["regressed", e]).concat(d.top_improved.map((e) => ["improved", e]));
    document.querySelector("#diff-table tbody").innerHTML =
      rows
        .map(
          ([kind, e]) => `
      <tr class="${kind}" data-id="${e.concept_id}"><td class="num">${e.concept_id}</td><td>${esc(e.description || e.label || "(no label)")}</td>
      <td class="num">${signed(e.delta_X_model)} <span class="muted">[${signed(e.low)}, ${signed(e.high)}]</span></td>
      <td class="num">${signed(e.relative.delta)} <span class="muted">[${signed(e.relative.low)}, ${signed(e.relative.high)}]</span></td>
      <td class="num">${fmt(e.X_model_a)} → ${fmt(e.X_model_b)}</td><td class="num">${e.n_paired_active}</td></tr>`,
        )
        .join("") || `<tr><td colspan="6" class="muted">no concept changed confidently</td></tr>`;
  } catch (e) {
    $("compare-note").innerHTML = `<span class="err">${esc(e.message)}</span>`;
    document.querySelector("#diff-table tbody").innerHTML = "";
  }
  table.setAttribute("aria-busy", "false");
}

function flippedHtml(list) {
  if (!list.length) return `<div class="muted">none</div>`;
  return list
    .map(
      (r) =>
        `<div class="example"><div class="meta">${esc(r.benchmark)}/${esc(r.row_id)} · score ${fmt(r.score_a, 2)} → ${fmt(r.score_b, 2)} · s̃ ${Number(r.s_tilde_a).toPrecision(3)} / ${Number(r.s_tilde_b).toPrecision(3)}</div>` +
        [
          ["", r.prompt],
          ["A: ", r.response_a],
          ["B: ", r.response_b],
        ]
          .filter(([, t]) => t)
          .map(([who, t]) => `<div>${who}${esc(t.slice(0, 400))}</div>`)
          .join("") +
        `</div>`,
    )
    .join("");
}

function showDiffConcept(id) {
  const e = [...state.diff.top_regressed, ...state.diff.top_improved].find((x) => x.concept_id === id);
  if (!e) return;
  const bench = e.per_benchmark
    .map(
      (b) =>
        `${esc(b.benchmark)}: Δχ ${signed(b.delta_chi_model)} [${signed(b.low)}, ${signed(b.high)}], ${b.n_paired_active} rows`,
    )
    .join(" · ");
  $("diff-detail").innerHTML =
    `<h3>Concept ${e.concept_id}: ${esc(e.description || e.label || "(no label)")}</h3><p class="muted">${bench}</p>
    <div class="grid"><div><h3>Right in A, wrong in B</h3>${flippedHtml(e.examples.right_in_a_wrong_in_b || [])}</div>
    <div><h3>Wrong in A, right in B</h3>${flippedHtml(e.examples.wrong_in_a_right_in_b || [])}</div></div>`;
}
