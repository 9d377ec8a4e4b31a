// A diff of two runs (`cg-ray diff`): the confident changes from A to B with their intervals. Drawn from
// diff.json's document (cg_ray.report.comparisons.diff_document) — in the explorer from GET /v1/diff, in
// diff.html from the page itself. A row opens the concept's per-benchmark changes and the rows that flipped.
// Uses view.js' helpers ($, esc, fmt, signed).
"use strict";

const diffState = { doc: null };

// The quantity the concepts were ranked by: ΔX_model, or the change beyond the benchmarks' mean-score change.
const diffRanked = (e, relative) => (relative ? e.relative : { delta: e.delta_X_model, low: e.low, high: e.high });

function drawDiff(d) {
  diffState.doc = d;
  const c = d.counts,
    runs = d.runs,
    cfg = d.config,
    check = d.reader_check;
  const relative = cfg.rank_by === "relative",
    level = Math.round(100 * cfg.confidence);
  const held = d.heldout,
    effects = held && (held.n_effects || held.n_confirmed); // a diff.json before n_effects: its concepts
  const kpis = [
    [c.paired.toLocaleString(), "paired rows (shared, scored in both)"],
    [`${fmt(runs.a.mean_score_paired)} → ${fmt(runs.b.mean_score_paired)}`, "mean score A → B"],
    ...(held
      ? [
          [
            `${effects.regressed} / ${effects.improved}`,
            "regressed / improved, confirmed held out (effects: concepts on the same rows count once)",
          ],
        ]
      : []),
    // per-concept bootstrap intervals on all rows: descriptive, and this many by chance alone
    [
      `${c.confident_regressed.toLocaleString()} / ${c.confident_improved.toLocaleString()}`,
      `regressed / improved concepts by bootstrap interval (descriptive; ≈ ${c.expected_by_chance_per_direction} each by chance)`,
    ],
    [`${c.only_a.toLocaleString()} / ${c.only_b.toLocaleString()}`, "rows only in A / only in B (skipped)"],
    [c.shared_unscored.toLocaleString(), "shared rows unscored in A or B (skipped)"],
  ];
  $("diff-kpis").innerHTML = kpis
    .map(([v, l]) => `<div class="kpi"><div class="v">${esc(v)}</div><div class="l">${esc(l)}</div></div>`)
    .join("");
  const onlyA = c.benchmarks_only_a || [],
    onlyB = c.benchmarks_only_b || [];
  $("diff-suites").textContent =
    onlyA.length || onlyB.length
      ? `Benchmarks only in A: ${onlyA.join(", ") || "—"}; only in B: ${onlyB.join(", ") || "—"} (ΔX_bench in diff.parquet covers them).`
      : "";
  $("diff-method").textContent =
    `A = ${d.names.a}, B = ${d.names.b}. Δ = B − A on the ${c.paired.toLocaleString()} paired rows. Intervals: ${level}% paired ` +
    `percentile bootstrap, ${cfg.resamples.toLocaleString()} resamples (seed ${cfg.seed}), stratified by benchmark. ` +
    `Listed: active in ≥ ${cfg.min_rows} paired rows (${c.eligible.toLocaleString()} concepts) and the interval excludes 0; ` +
    `ranked by the bound nearest 0 of ${relative ? "the change beyond the benchmarks’ mean-score change" : "ΔX_model"}. ` +
    `Intervals are per concept: with no change at all, about ${c.expected_by_chance_per_direction} concepts per direction ` +
    `would exclude 0 by chance. A row is right when its score ≥ ${cfg.right_threshold}. Reader check: ` +
    `${check.checked_fields.join(", ")}${check.assumed_same ? " (assumed the same reader)" : ""}; text read A: ${check.text_a}, B: ${check.text_b}.`;
  drawDiffHeldOut(held);
  const rows = d.top_regressed.map((e) => ["regressed", e]).concat(d.top_improved.map((e) => ["improved", e]));
  const label = (e) => `${e.concept_id} ${(e.description || e.label || "(no label)").slice(0, 44)}`;
  $("diff-plot").hidden = !rows.length;
  if (rows.length)
    Charts.forest(
      "diff-plot",
      rows.map(([kind, e]) => {
        const r = diffRanked(e, relative);
        return { label: label(e), x: r.delta, low: r.low, high: r.high, color: DIFF_COLOURS[kind] };
      }),
      { title: `Top confident changes (${relative ? "beyond Δ mean score" : "ΔX_model"}, ${level}% interval)` },
    );
  const group = (kind, title, list) =>
    `<tr class="group"><th colspan="6">${title} (${list.length})</th></tr>` +
    (list.map((e) => diffRow(kind, e)).join("") ||
      `<tr><td colspan="6" class="muted">None: no interval excludes 0.</td></tr>`);
  document.querySelector("#diff-table tbody").innerHTML =
    group("regressed", "Regressed most confidently", d.top_regressed) +
    group("improved", "Improved most confidently", d.top_improved);
  $("diff-detail").innerHTML = "";
}

// The findings: each direction's changes any split chose, confirmed first, with the rule's interval and verdict
// (view.js' heldoutCell says "confirmed" or "candidate" with its MDE). A diff.json without them: an older one.
function drawDiffHeldOut(held) {
  const body = document.querySelector("#diff-heldout tbody");
  $("diff-heldout").hidden = !held;
  if (!held) {
    $("diff-heldout-note").textContent = "This diff was written before held-out findings (re-run cg-ray diff).";
    body.innerHTML = "";
    return;
  }
  $("diff-heldout-note").textContent =
    `A finding: the rows where the concept fires changed (B − A) by more than the other rows of their benchmark. ` +
    `Chosen on one half of each of ${held.splits} splits of the paired rows and tested on the other; ${held.decision}. ` +
    `Interval: ${held.interval}. Each split tests ${held.tested_per_split} per direction.`;
  const row = (kind, e) => {
    const v = e.heldout;
    return `<tr class="${kind} ${v.confirmed ? "confirmed" : "candidate"}" data-id="${e.concept_id}"><td class="num">${e.concept_id}</td>
      <td>${esc(e.description || e.label || "(no label)")}${none(v.same_rows_as) ? "" : `<div class="muted">the same rows as ${v.same_rows_as}: one effect</div>`}</td><td>${kind}</td>
      <td class="num heldout">${heldoutCell({ ...v, heldout_residual: v.estimate, heldout_residual_low: v.low, heldout_residual_high: v.high }, kind === "improved" ? "strengths" : "weaknesses")}</td>
      <td class="num">${v.n_heldout.toLocaleString()}</td></tr>`;
  };
  const listed = [
    ...held.regressed.filter((e) => e.heldout.estimate !== null).map((e) => row("regressed", e)),
    ...held.improved.filter((e) => e.heldout.estimate !== null).map((e) => row("improved", e)),
  ];
  body.innerHTML =
    listed.join("") || `<tr><td colspan="5" class="muted">No split chose a change beyond its benchmark.</td></tr>`;
}

const DIFF_COLOURS = { regressed: "#d62728", improved: "#2ca02c" };

function diffRow(kind, e) {
  const described = e.description,
    label = e.label;
  const also = described && label && label !== described ? `<div class="muted">label: ${esc(label)}</div>` : "";
  return `<tr class="${kind}" data-id="${e.concept_id}"><td class="num">${e.concept_id}</td><td>${esc(described || label || "(no label)")}${also}</td>
      <td class="num">${signed(e.delta_X_model)} <span class="muted">[${signed(e.low)}, ${signed(e.high)}]</span></td>
      <td class="num">${signed(e.relative.delta)} <span class="muted">[${signed(e.relative.low)}, ${signed(e.relative.high)}]</span></td>
      <td class="num">${fmt(e.X_model_a)} → ${fmt(e.X_model_b)}</td><td class="num">${e.n_paired_active.toLocaleString()}</td></tr>`;
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
  const d = diffState.doc;
  const held = d.heldout ? [...d.heldout.regressed, ...d.heldout.improved] : [];
  const e = [...d.top_regressed, ...d.top_improved, ...held].find((x) => x.concept_id === id);
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

window.addEventListener("DOMContentLoaded", () => {
  onRowClick(["#diff-table", "#diff-heldout"], (id) => showDiffConcept(Number(id)));
});

// diff.html (cg-ray diff): this view alone.
EMBEDDED.diff = (doc) => {
  show("compare", true);
  $("compare-models").hidden = true;
  $("compare-title").textContent = "Concept diff of two runs (cg-ray diff)";
  drawDiff(doc);
};
