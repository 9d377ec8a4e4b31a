// What each benchmark leaves out of its scope (`cg-ray scope`, docs/method.md), when the run has scope/:
// per benchmark its in-scope gaps in words first, then the evidence, drawn from the view's `scope` document
// (cg_ray.report.scope.scope_view). Uses view.js' helpers.
"use strict";

function scopeGapHtml(g, i) {
  const judge = g.judge ? `<div class="muted">judge: ${esc(g.judge)}</div>` : "";
  const example = g.example ? `<div class="example">${esc(g.example)}</div>` : "";
  const theme = g.theme_rows ? `<div class="muted">${esc(g.theme_rows)}</div>` : "";
  return (
    `<tr><td class="num">${i + 1}</td><td><b>${esc(g.label)}</b> <span class="muted">concept ${g.concept_id}</span>` +
    `${example}</td><td>${esc(g.evidence)}${theme}${judge}</td><td class="num">${g.q_value < 0.001 ? "&lt; 0.001" : fmt(g.q_value, 3)}</td></tr>`
  );
}

// The row-level view first (docs/method.md "Where the benchmark has no rows"): the uncovered share, then its themes.
function scopeRowsHtml(v) {
  if (!v) return "";
  const themes = v.themes
    .map(
      (t, i) =>
        `<tr><td class="num">${i + 1}</td><td><b>${esc(t.label)}</b> <span class="muted">concept ${t.concept_id}` +
        `${t.members > 1 ? ` with ${t.members - 1} more` : ""}${t.format ? " — the reference's own format" : ""}</span>` +
        `${t.example ? `<div class="example">${esc(t.example)}</div>` : ""}</td><td>${esc(t.evidence)}</td>` +
        `<td class="num">${t.q_value < 0.001 ? "&lt; 0.001" : fmt(t.q_value, 3)}</td></tr>`,
    )
    .join("");
  const table = themes
    ? `<table class="scope-rows-table"><thead><tr><th>#</th><th>theme of uncovered rows, and a reference row</th>` +
      `<th>share of rows: reference vs this benchmark</th><th>q</th></tr></thead><tbody>${themes}</tbody></table>`
    : "";
  const scores = (v.scores || []).length
    ? `<p class="scope-scores"><b>Scores on the reference's mix:</b> ${esc(v.scores[0])}.</p><ul>` +
      v.scores.slice(1).map((line) => `<li>${esc(line)}</li>`).join("") + `</ul>`
    : "";
  return `<p><b>Uncovered:</b> ${esc(v.headline)} — ${esc(v.verdict)}.</p>${table}${scores}`;
}

function scopeBenchmarkHtml(b) {
  const head =
    `<h3>${esc(b.benchmark)} <span class="muted">(${b.rows.toLocaleString()} rows) against ${esc(b.reference)} ` +
    `(${b.reference_rows.toLocaleString()} rows)</span></h3>` +
    scopeRowsHtml(b.rows_shown) +
    `<p>Concepts: ${b.gaps.toLocaleString()} of the ${b.in_reference_use.toLocaleString()} concepts in use ` +
    `are tested confidently less here (${b.gaps_missing.toLocaleString()} on no row at all), in ` +
    `${(b.n_themes ?? b.gaps).toLocaleString()} themes of concepts firing on the same reference rows; a concept on 0 of these ` +
    `rows is below ${(100 * b.missing_bound).toFixed(2)}% of them, 95%). Missing (χ_bench &lt; ε): ` +
    `${(100 * b.missing_share).toFixed(1)}%.</p>`;
  if (!b.gaps_shown.length) return head + `<p class="muted">No in-scope gap: nothing the reference uses is tested confidently less.</p>`;
  return (
    head +
    `<table class="scope-table"><thead><tr><th>#</th><th>concept, and where the reference uses it</th>` +
    `<th>evidence: share of rows it fires on, reference vs this benchmark [95%]; ratio; its theme</th><th>q</th></tr></thead>` +
    `<tbody>${b.gaps_shown.map(scopeGapHtml).join("")}</tbody></table>`
  );
}

// `cg-ray augment`'s items for one benchmark's gaps, under that benchmark: coverage before → after.
function augmentHtml(a) {
  const rows = a.gaps
    .map(
      (g) =>
        `<tr><td><b>${esc(g.label)}</b> <span class="muted">${esc(g.gap_id)}</span>` +
        `${g.example ? `<div class="example">${esc(g.example)}</div>` : ""}</td>` +
        `<td>${esc(g.states)}<div class="muted">${esc(g.shares)}</div></td><td class="muted">${esc(g.checks)}</td></tr>`,
    )
    .join("");
  const over = a.over_represented ? ` ${a.over_represented} concepts became over-represented.` : "";
  return (
    `<h4>Items that fill it (cg-ray augment)</h4><p>${esc(a.coverage)}.${esc(over)}</p>` +
    (a.rows ? `<p>${esc(a.rows)}.</p>` : "") +
    `<table class="augment-table"><thead><tr><th>gap, and the first item kept</th><th>state before → after</th>` +
    `<th>checks</th></tr></thead><tbody>${rows}</tbody></table>`
  );
}

function drawScope(s) {
  show("scope", Boolean(s));
  if (!s) return;
  const suite = s.suite;
  $("scope-note").textContent =
    `Across the run's ${suite.benchmarks.length} benchmarks, ${(100 * suite.missing_share).toFixed(1)}% of the ` +
    `${suite.d_sae.toLocaleString()} concepts are missing (X_bench < ε). Rule: ${s.decision}.`;
  const a = s.augment;
  $("scope-body").innerHTML = s.benchmarks
    .map((b) => scopeBenchmarkHtml(b) + (a && a.benchmark === b.benchmark && a.reference === b.reference ? augmentHtml(a) : ""))
    .join("");
}
