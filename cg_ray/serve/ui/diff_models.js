// diff-models in the explorer (GET /v1/diff-models/{id}): two models' answers to the same prompts. Per
// concept, the share of A's and of B's answers where it is active and Δ = B − A with its interval (a table
// sortable by Δ, and a forest plot of the page); a row opens the concept's paired examples: the prompt and
// both answers, the answer that holds the concept marked. Uses app.js' helpers ($, api, esc, fmt, signed).
"use strict";

const MODELS_MODE = "diff-models";
const models = { id: null, sort: "abs_delta", order: "desc", offset: 0, limit: 25, page: null };

function fillModelRuns() {
  const runs = state.modelRuns || [];
  const keep = $("models-analysis").value;
  $("models-analysis").innerHTML =
    runs.map((a) => `<option value="${esc(a)}">${esc(a)}</option>`).join("") ||
    `<option value="" disabled>no diff-models analysis yet (POST /v1/diff-models)</option>`;
  if (runs.includes(keep)) $("models-analysis").value = keep;
}

async function showModelsAnalysis(id) {
  // A diff-models analysis has no CG panels: only the compare area, on its models.
  for (const section of [
    "overview",
    "beyond",
    "profile",
    "readable",
    "validation",
    "benchmarks",
    "concepts",
    "themes",
    "detail",
    "relations",
    "robustness",
  ])
    $(section).hidden = true;
  $("compare").hidden = false;
  $("compare-analyses").hidden = true;
  $("models-analysis").value = id;
  $("analysis-status").textContent = "";
  await loadModels(true);
}

function modelsNote(d) {
  const c = d.counts,
    r = d.replication;
  const skips = Object.entries(c)
    .filter(([k, v]) => typeof v === "number" && v && /^(only|empty|no_|beyond)/.test(k))
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  return (
    `A = ${d.models.a}, B = ${d.models.b}: ${c.compared.toLocaleString()} prompts compared (skipped: ${skips || "none"}) · ` +
    `${c.concepts_active.toLocaleString()} concepts active · hypotheses formed on ${r.discovery_prompts} prompts, ` +
    `${r.replicated_total} of ${r.formed_total} replicate on the other ${r.held_out_prompts} (≈${fmt(r.expected_by_chance_if_null, 1)} by chance)`
  );
}

function modelsRow(e) {
  const kind = { a_more: "a-more", b_more: "b-more" }[e.hypothesis] || "";
  const rep = e.replicated === null || e.replicated === undefined ? "—" : e.replicated ? "yes" : "no";
  return `<tr class="${kind}" data-id="${e.concept_id}"><td class="num">${e.concept_id}</td>
    <td>${esc(e.description || e.label || "(no label)")}</td>
    <td class="num">${fmt(e.frac_a)}</td><td class="num">${fmt(e.frac_b)}</td>
    <td class="num">${signed(e.delta)} <span class="muted">[${signed(e.delta_low)}, ${signed(e.delta_high)}]</span></td>
    <td>${esc({ a_more: "more in A", b_more: "more in B" }[e.hypothesis] || "—")}</td><td>${rep}</td></tr>`;
}

function modelsPlot(d) {
  const items = d.items;
  const name = (e) => `${e.concept_id} ${(e.description || e.label || "").slice(0, 40)}`;
  $("models-plot").hidden = !items.length;
  if (!items.length) return;
  Charts.forest(
    "models-plot",
    d.items.map((e) => ({
      label: name(e),
      x: e.delta,
      low: e.delta_low,
      high: e.delta_high,
      color: e.delta < 0 ? "#1f77b4" : e.delta > 0 ? "#ff7f0e" : "#9ca3af",
    })),
    { title: `Δ = ${d.models.b} − ${d.models.a}, share of answers [${Math.round(100 * d.config.confidence)}% CI]` },
  );
}

async function loadModels(reset = false) {
  const id = $("models-analysis").value;
  if (!id) return;
  if (reset || id !== models.id) {
    models.offset = 0;
    $("models-detail").innerHTML = "";
  }
  models.id = id;
  const table = $("models-table");
  table.setAttribute("aria-busy", "true");
  const params = new URLSearchParams({
    sort: models.sort,
    order: models.order,
    limit: models.limit,
    offset: models.offset,
  });
  if ($("models-hypotheses").checked) params.set("hypotheses_only", "true");
  try {
    const d = (models.page = await api(`/v1/diff-models/${id}?${params}`));
    $("models-note").textContent = modelsNote(d);
    document.querySelector("#models-table tbody").innerHTML =
      d.items.map(modelsRow).join("") || `<tr><td colspan="7" class="muted">no concept</td></tr>`;
    $("models-page").textContent =
      `${d.total ? d.offset + 1 : 0}–${Math.min(d.offset + d.limit, d.total)} of ${d.total}`;
    $("models-prev").disabled = d.offset === 0;
    $("models-next").disabled = d.offset + d.limit >= d.total;
    modelsPlot(d);
  } catch (e) {
    $("models-note").innerHTML = `<span class="err">${esc(e.message)}</span>`;
    document.querySelector("#models-table tbody").innerHTML = "";
  }
  table.setAttribute("aria-busy", "false");
}

function pairedHtml(list, names) {
  if (!list.length) return `<div class="muted">none</div>`;
  const answer = (who, text, has) =>
    `<div class="answer${has ? " has-concept" : ""}"><b>${esc(who)}:</b> ${esc(text)}</div>`;
  return list
    .map(
      (e) =>
        `<div class="example"><div class="meta">${esc(e.id)} · s̃ ${esc(names.a)} ${Number(e.s_tilde_a).toPrecision(3)} / ${esc(names.b)} ${Number(e.s_tilde_b).toPrecision(3)}</div>` +
        `<div class="prompt">${esc(e.prompt)}</div>` +
        answer(`A (${names.a})`, e.response_a, e.s_tilde_a > 0) +
        answer(`B (${names.b})`, e.response_b, e.s_tilde_b > 0) +
        `</div>`,
    )
    .join("");
}

async function showModelsConcept(conceptId) {
  const names = models.page.models;
  const box = $("models-detail");
  try {
    const c = await api(`/v1/diff-models/${models.id}/concepts/${conceptId}`);
    box.innerHTML = `<h3>Concept ${c.concept_id}: ${esc(c.description || c.label || "(no label)")}</h3>
      <p class="muted">active in ${c.n_active_a} of A's answers and ${c.n_active_b} of B's (${c.n_active_both} both) · share ${fmt(c.frac_a)} → ${fmt(c.frac_b)} ·
      Δ ${signed(c.delta)} [${signed(c.delta_low)}, ${signed(c.delta_high)}] · the marked answer holds the concept (pooled s̃ &gt; threshold)</p>
      <div class="grid"><div><h3>In A's answer, not B's</h3>${pairedHtml(c.examples.a_more, names)}</div>
      <div><h3>In B's answer, not A's</h3>${pairedHtml(c.examples.b_more, names)}</div></div>`;
  } catch (e) {
    box.innerHTML = `<span class="err">${esc(e.message)}</span>`;
  }
  box.scrollIntoView({ behavior: "smooth" });
}

window.addEventListener("DOMContentLoaded", () => {
  $("models-go").onclick = () => loadModels(true);
  $("models-hypotheses").onchange = () => loadModels(true);
  $("models-prev").onclick = () => {
    models.offset = Math.max(0, models.offset - models.limit);
    loadModels();
  };
  $("models-next").onclick = () => {
    models.offset += models.limit;
    loadModels();
  };
  document.querySelectorAll("th[data-msort]").forEach(
    (th) =>
      (th.onclick = () => {
        models.order = models.sort === th.dataset.msort && models.order === "desc" ? "asc" : "desc";
        models.sort = th.dataset.msort;
        models.offset = 0;
        loadModels();
      }),
  );
  document.querySelector("#models-table tbody").onclick = (e) => {
    const tr = e.target.closest("tr[data-id]");
    if (tr) showModelsConcept(Number(tr.dataset.id));
  };
});
