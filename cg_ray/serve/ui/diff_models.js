// diff-models: two models' answers to the same prompts, drawn from one document
// (cg_ray.report.comparisons.model_diff_view) — in the explorer from GET /v1/diff-models/{id}/view, in
// diff_models.html from the page itself. The hypotheses formed on half of the prompts with their held-out
// check; per concept, the share of A's and of B's answers where it is active and Δ = B − A with its interval
// (a table sorted, filtered and paged here, and a forest plot of the page); a row opens the concept's paired
// examples: the prompt and both answers, the answer that holds the concept marked. Uses view.js' helpers.
"use strict";

const MODELS_MODE = "diff-models";
const models = { id: null, doc: null, rows: [], detail: null, sort: "abs_delta", order: "desc", offset: 0, limit: 25 };
const MODEL_COLOURS = { a_more: "#1f77b4", b_more: "#ff7f0e" };

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
  showOnly(["compare"]);
  $("compare").hidden = false;
  $("compare-analyses").hidden = true;
  $("models-analysis").value = id;
  $("analysis-status").textContent = "";
  await loadModels();
}

function modelsNote(d) {
  const c = d.counts;
  const skips = Object.entries(c)
    .filter(([k, v]) => typeof v === "number" && v && /^(only|empty|no_|beyond)/.test(k))
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  return (
    `A = ${d.models.a}, B = ${d.models.b}: ${c.compared.toLocaleString()} prompts compared (skipped: ${skips || "none"}) · ` +
    `${c.concepts_active.toLocaleString()} concepts active. Δ = B − A, the difference in the share of answers where a ` +
    `concept is active; intervals are ${Math.round(100 * d.config.confidence)}% Newcombe intervals for paired proportions.`
  );
}

function confirmationNote(d) {
  const c = d.confirmation;
  if (!c)
    return "Made by an older cg_ray, which checked its hypotheses on one half-split of the prompts: re-run it to judge them over repeated splits.";
  const formed = c.formed.a_more + c.formed.b_more,
    confirmed = c.confirmed.a_more + c.confirmed.b_more;
  return (
    `Hypotheses formed on one half of each of ${c.splits} splits of the prompts and tested on the other: ` +
    `<b>${confirmed} of ${formed} confirmed</b>. ${esc(c.decision)}. Held-out interval: ${esc(c.interval)}.`
  );
}

// A hypothesis' held-out verdict as an interval cell (the estimate of the median split, the rule's interval).
const heldoutSide = (h) =>
  h.heldout ? { delta: h.heldout.estimate, low: h.heldout.low, high: h.heldout.high } : { delta: null, low: null, high: null };

const interval = (s) => `${signed(s.delta)} <span class="muted">[${signed(s.low)}, ${signed(s.high)}]</span>`;

function hypothesisRow(h) {
  const a = h.all;
  return `<tr class="${h.direction.replace("_", "-")}" data-id="${h.concept_id}"><td class="num">${h.concept_id}</td>
    <td>${esc(h.statement)}</td><td class="num">${fmt(a.frac_a)} → ${fmt(a.frac_b)}</td>
    <td class="num all">${interval(a)}</td><td class="num held">${interval(heldoutSide(h))}</td>
    <td>${!h.heldout ? "—" : h.confirmed ? "✓ confirmed" : "✗ not confirmed"} <span class="muted">${h.heldout ? qText(h.heldout.q_value) : ""}</span></td></tr>`;
}

function drawHypotheses(d) {
  const hyps = d.hypotheses;
  $("models-replication").innerHTML = confirmationNote(d);
  document.querySelector("#models-hyp-table tbody").innerHTML =
    hyps.map(hypothesisRow).join("") ||
    `<tr><td colspan="6" class="muted">No hypothesis: no concept's interval excluded 0 on any split's forming half.</td></tr>`;
  $("models-hyp-plot").hidden = !hyps.length;
  if (!hyps.length) return;
  const name = (h) => `${h.confirmed ? "✓" : "✗"} ${h.concept_id} ${(h.description || h.label || "").slice(0, 36)}`;
  Charts.forest(
    "models-hyp-plot",
    hyps.flatMap((h) =>
      [
        ["all prompts", h.all],
        ["held out", heldoutSide(h)],
      ]
        .filter(([, s]) => !none(s.delta) && !none(s.low) && !none(s.high))
        .map(([what, s]) => ({
        label: `${name(h)} · ${what}`,
        x: s.delta,
        low: s.low,
        high: s.high,
        color: MODEL_COLOURS[h.direction],
      })),
    ),
    { title: `Hypotheses: Δ = ${d.models.b} − ${d.models.a} on all prompts and held out` },
  );
}

function modelsRow(e) {
  const kind = { a_more: "a-more", b_more: "b-more" }[e.hypothesis] || "";
  const rep = none(e.confirmed) ? "—" : e.confirmed ? "yes" : "no";
  return `<tr class="${kind}" data-id="${e.concept_id}"><td class="num">${e.concept_id}</td>
    <td>${esc(e.description || e.label || "(no label)")}</td>
    <td class="num">${fmt(e.frac_a)}</td><td class="num">${fmt(e.frac_b)}</td>
    <td class="num">${signed(e.delta)} <span class="muted">[${signed(e.delta_low)}, ${signed(e.delta_high)}]</span></td>
    <td>${esc({ a_more: "more in A", b_more: "more in B" }[e.hypothesis] || "—")}</td><td>${rep}</td></tr>`;
}

function modelsPlot(d, items) {
  const name = (e) => `${e.concept_id} ${(e.description || e.label || "").slice(0, 40)}`;
  $("models-plot").hidden = !items.length;
  if (!items.length) return;
  Charts.forest(
    "models-plot",
    items.map((e) => ({
      label: name(e),
      x: e.delta,
      low: e.delta_low,
      high: e.delta_high,
      color: e.delta < 0 ? MODEL_COLOURS.a_more : e.delta > 0 ? MODEL_COLOURS.b_more : "#9ca3af",
    })),
    { title: `Δ = ${d.models.b} − ${d.models.a}, share of answers [${Math.round(100 * d.config.confidence)}% CI]` },
  );
}

// The whole view of one diff-models document; `detail(id)`: a concept's row with its paired examples.
function drawModels(doc, detail) {
  models.doc = doc;
  models.detail = detail;
  const cols = doc.concepts,
    keys = Object.keys(cols);
  models.rows = cols.concept_id.map((_, i) => Object.fromEntries(keys.map((k) => [k, cols[k][i]])));
  models.rows.forEach((r) => (r.abs_delta = none(r.delta) ? null : Math.abs(r.delta)));
  models.offset = 0;
  $("models-detail").innerHTML = "";
  $("models-note").textContent = modelsNote(doc);
  drawHypotheses(doc);
  drawModelsPage();
}

// The concept table: filtered (hypotheses only, search), sorted (ties by concept id, nulls last), paged.
function drawModelsPage() {
  const d = models.doc;
  const needle = $("models-search").value.trim().toLowerCase();
  let rows = models.rows;
  if ($("models-hypotheses").checked) rows = rows.filter((r) => !none(r.hypothesis));
  if (needle) rows = rows.filter((r) => `${r.label || ""} ${r.description || ""}`.toLowerCase().includes(needle));
  const k = models.sort,
    sign = models.order === "desc" ? -1 : 1;
  rows = rows.slice().sort((a, b) => {
    if (none(a[k]) !== none(b[k])) return none(a[k]) ? 1 : -1;
    return (a[k] === b[k] ? 0 : a[k] < b[k] ? -sign : sign) || a.concept_id - b.concept_id;
  });
  const total = rows.length,
    items = rows.slice(models.offset, models.offset + models.limit);
  document.querySelector("#models-table tbody").innerHTML =
    items.map(modelsRow).join("") || `<tr><td colspan="7" class="muted">no concept</td></tr>`;
  $("models-page").textContent =
    `${total ? models.offset + 1 : 0}–${Math.min(models.offset + models.limit, total)} of ${total}`;
  $("models-prev").disabled = models.offset === 0;
  $("models-next").disabled = models.offset + models.limit >= total;
  modelsPlot(d, items);
  $("models-table").setAttribute("aria-busy", "false");
}

// In the explorer: the analysis' document, once; a concept's examples are asked of the API.
async function loadModels() {
  const id = $("models-analysis").value;
  if (!id) return;
  models.id = id;
  $("models-table").setAttribute("aria-busy", "true");
  try {
    drawModels(await api(`/v1/diff-models/${id}/view`), (cid) => api(`/v1/diff-models/${id}/concepts/${cid}`));
  } catch (e) {
    $("models-note").innerHTML = `<span class="err">${esc(e.message)}</span>`;
    document.querySelector("#models-table tbody").innerHTML = "";
    $("models-table").setAttribute("aria-busy", "false");
  }
}

// In diff_models.html: a hypothesis' paired examples are in the page (hypotheses.json keeps them); another
// concept has its row only.
function modelsPageDetail(doc, cid) {
  const row = models.rows.find((r) => r.concept_id === cid);
  const h = doc.hypotheses.find((x) => x.concept_id === cid);
  const examples = { a_more: [], b_more: [] };
  if (h) examples[h.direction] = h.examples;
  return { ...row, examples, only_hypotheses: !h };
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
  const names = models.doc.models;
  const box = $("models-detail");
  try {
    const c = await models.detail(conceptId);
    box.innerHTML = `<h3>Concept ${c.concept_id}: ${esc(c.description || c.label || "(no label)")}</h3>
      <p class="muted">active in ${c.n_active_a} of A's answers and ${c.n_active_b} of B's (${c.n_active_both} both) · share ${fmt(c.frac_a)} → ${fmt(c.frac_b)} ·
      Δ ${signed(c.delta)} [${signed(c.delta_low)}, ${signed(c.delta_high)}] · the marked answer holds the concept (pooled s̃ &gt; threshold)</p>
      ${c.only_hypotheses ? `<p class="muted">This page keeps paired examples for the hypotheses only (the service shows any concept's).</p>` : ""}
      <div class="grid"><div><h3>In A's answer, not B's</h3>${pairedHtml(c.examples.a_more, names)}</div>
      <div><h3>In B's answer, not A's</h3>${pairedHtml(c.examples.b_more, names)}</div></div>`;
  } catch (e) {
    box.innerHTML = `<span class="err">${esc(e.message)}</span>`;
  }
  box.scrollIntoView({ behavior: "smooth" });
}

window.addEventListener("DOMContentLoaded", () => {
  $("models-go").onclick = () => loadModels();
  const redraw = () => {
    if (!models.doc) return;
    models.offset = 0;
    drawModelsPage();
  };
  $("models-hypotheses").onchange = redraw;
  $("models-search").oninput = redraw;
  wirePager("models-prev", "models-next", models, drawModelsPage);
  wireSort("msort", models, "desc", redraw);
  onRowClick(["#models-table", "#models-hyp-table"], (id) => showModelsConcept(Number(id)));
});

// diff_models.html (cg-ray diff-models): this view alone, the hypotheses' examples from the page.
EMBEDDED.model_diff = (doc) => {
  show("compare", true);
  $("compare-analyses").hidden = true;
  $("models-title").textContent = "Two models' answers compared (cg-ray diff-models)";
  drawModels(doc, async (cid) => modelsPageDetail(doc, cid));
};
