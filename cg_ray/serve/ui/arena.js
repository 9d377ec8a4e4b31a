// An arena run (`cg-ray arena`): Bradley–Terry and Elo ratings with their bootstrap intervals, every pair that
// met (observed score share against the BT prediction) and the concepts each model wins and loses on. Drawn
// from one document (cg_ray.report.comparisons.arena_view) — in the explorer from GET /v1/analyses/{id}/arena,
// in the arena's report.html from the page itself. Uses view.js' helpers ($, esc, fmt, signed, none).
"use strict";

const rating = (v, lo, hi) =>
  `${fmt(v, 1)} <span class="muted">${none(lo) ? "" : `[${fmt(lo, 1)}, ${fmt(hi, 1)}]`}</span>`;

// `runCell(model)`: HTML that opens the model's own run (its analysis, or its report beside the page).
function drawArena(doc, runCell) {
  show("arena", true);
  const cfg = doc.config;
  $("arena-note").textContent =
    `${doc.n_battles.toLocaleString()} battles, ${doc.n_counted.toLocaleString()} counted. Bradley–Terry ratings on the ` +
    `${cfg.scale}·log${cfg.base} odds scale, ${cfg.anchor_model ? `${cfg.anchor_model} fixed` : "the mean"} at ${cfg.anchor_rating}; ` +
    (cfg.bootstrap
      ? `intervals: ${Math.round(100 * cfg.confidence)}% percentile bootstrap over the battles, ${cfg.bootstrap.toLocaleString()} resamples (seed ${cfg.seed}).`
      : "no bootstrap, so no intervals.");
  document.querySelector("#arena-table tbody").innerHTML = doc.ratings
    .map(
      (m, i) => `<tr data-model="${esc(m.model)}"><td class="num">${i + 1}</td><td>${esc(m.model)}</td>
      <td class="num bt">${rating(m.bt, m.bt_lower, m.bt_upper)}</td><td class="num elo">${rating(m.elo, m.elo_lower, m.elo_upper)}</td>
      <td class="num">${m.battles.toLocaleString()}</td><td class="num">${m.wins.toLocaleString()}</td>
      <td class="num">${m.losses.toLocaleString()}</td><td class="num">${(m.ties + (m.bothbad || 0)).toLocaleString()}</td>
      <td>${runCell(m.model) || '<span class="muted">—</span>'}</td></tr>`,
    )
    .join("");
  const rated = doc.ratings.filter((m) => !none(m.bt));
  $("arena-plot").hidden = !rated.length;
  if (rated.length)
    Charts.forest(
      "arena-plot",
      rated.map((m) => ({ label: m.model, x: m.bt, low: m.bt_lower, high: m.bt_upper, color: "#4c78a8" })),
      { title: "Bradley–Terry rating with its interval", ref: cfg.anchor_rating },
    );
  drawHeadToHead(doc);
  drawArenaConcepts(doc.model_concepts);
}

// Each pair once (as the head-to-head lists it): battles, those counted, A's observed score share and BT's.
function drawHeadToHead(doc) {
  const predicted = new Map(doc.pairwise.map((p) => [`${p.model_a}\u0000${p.model_b}`, p]));
  document.querySelector("#arena-pairs tbody").innerHTML =
    doc.pairs
      .map((p) => {
        const bt = predicted.get(`${p.model_a}\u0000${p.model_b}`);
        return `<tr><td>${esc(p.model_a)}</td><td>${esc(p.model_b)}</td><td class="num">${p.n_battles.toLocaleString()}</td>
        <td class="num">${p.n_counted.toLocaleString()}</td><td class="num">${fmt(p.win_rate)}</td>
        <td class="num">${bt ? fmt(bt.score_a) : "—"}</td><td class="num">${bt ? fmt(bt.bt_predicted) : "—"}</td></tr>`;
      })
      .join("") || `<tr><td colspan="7" class="muted">no pair of models of interest met</td></tr>`;
}

// Each model's strengths ("wins on") and weaknesses ("loses on") as its own run judged them: confirmed held
// out first, each with its held-out residual, interval and verdict (view.js' heldoutCell), X_model beside.
function drawArenaConcepts(rows) {
  const byModel = new Map();
  for (const r of rows) {
    if (!byModel.has(r.model)) byModel.set(r.model, { wins: [], losses: [] });
    byModel.get(r.model)[r.kind].push(r);
  }
  const profile = { wins: "strengths", losses: "weaknesses" };
  // Those a split tested (confirmed first); the ones no split chose are counted, not listed: their X_model is
  // in-sample only.
  const list = (items, kind) =>
    items
      .filter((r) => !none(r.heldout_residual))
      .slice(0, 10)
      .map(
        (r) => `<li class="${r.confirmed ? "confirmed" : "candidate"}">${r.concept_id} ${esc(r.description || r.label || "(no label)")}
          <span class="muted">X_model ${fmt(r.X_model)}, ${r.n_active_rows} rows</span><div class="heldout">held out ${heldoutCell(r, profile[kind])}</div></li>`,
      )
      .join("");
  const column = (k, kind, title) => {
    const n = k[kind].filter((r) => r.confirmed).length,
      untested = k[kind].filter((r) => none(r.heldout_residual)).length;
    const rest = untested ? `<div class="muted untested">${untested} more of its profile no split chose (not tested)</div>` : "";
    const items = list(k[kind], kind);
    const shown = items ? `<ol>${items}</ol>` : `<p class="muted none">none tested held out</p>`;
    return `<div><b>${title}</b> <span class="muted">${n} confirmed</span>${shown}${rest}</div>`;
  };
  $("arena-concepts").innerHTML =
    [...byModel]
      .map(
        ([model, k]) =>
          `<div class="arena-model"><h3>${esc(model)}</h3><div class="grid">${column(k, "wins", "wins on")}` +
          `${column(k, "losses", "loses on")}</div></div>`,
      )
      .join("") || `<p class="muted">No model of interest was read.</p>`;
}

// An arena's report.html (cg-ray arena): each model's run beside the page, with its own report.
EMBEDDED.arena = (doc) =>
  drawArena(doc, (model) => {
    const folder = doc.model_runs[model];
    return folder && `<a href="models/${encodeURIComponent(folder)}/report.html">its report</a>`;
  });
