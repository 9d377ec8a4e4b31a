// One run's view, drawn from its documents (cg_ray.report.documents.run_view): the same code in the explorer
// (documents from GET /v1/analyses/{id}/view) and in report.html (documents embedded in the page).
"use strict";

const $ = (id) => document.getElementById(id);
const esc = (s) =>
  String(s ?? "").replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c],
  );
const none = (x) => x === null || x === undefined;
const fmt = (x, d = 3) => (none(x) ? "—" : Number(x).toFixed(d));
const ci = (lo, hi, d = 3) => (none(lo) ? "—" : `[${fmt(lo, d)}, ${fmt(hi, d)}]`);
const signed = (x, d = 3) => (none(x) ? "—" : (x >= 0 ? "+" : "") + Number(x).toFixed(d));
const qText = (q) => (none(q) ? "q —" : q < 0.001 ? "q<0.001" : `q=${q.toFixed(3)}`);
const show = (id, on) => {
  $(id).hidden = !on;
};
const TOP = 20; // entries of each table (the CLI's `--top`)

// The views a page can hold, by kind (report.html of a run: "run"; each other view registers itself).
const EMBEDDED = {
  run: (doc) => drawView(doc, async (cid) => doc.details[cid] || view.rows.find((c) => c.concept_id === cid)),
};

const view = { doc: null, rows: [], mode: "model", sort: "X_model", order: "asc", offset: 0, limit: 25, detail: null };

// The whole view; `detail(id)`: a concept's details (the service asks the API for concepts not in the view).
function drawView(doc, detail) {
  view.doc = doc;
  view.detail = detail;
  const s = doc.summary,
    cfg = s.config,
    suite = s.suite;
  $("subtitle").textContent =
    `${doc.name} · model ${s.evaluated_model || "(from rows)"} · ε = ${cfg.epsilon} · classes at the ` +
    `${cfg.low_percentile}th / ${cfg.high_percentile}th percentiles · cg_ray ${s.cg_ray_version}`;
  // The findings judged held out lead; the paper's model-gap count (X_model < ε over every row, no test) is
  // labelled as what it is: on a small suite it counts concepts seen on a few failed rows.
  const judged = ((s.profile || {}).beyond || {}).judgement || ((s.profile || {}).beyond || {}).crossfit,
    counts = (judged && judged.confirmed) || null;
  const kpis = [
    [s.n_rows.toLocaleString(), "rows"],
    [suite.n_benchmarks, "benchmarks"],
    ...(counts
      ? [
          [
            `${counts.failure_modes} · ${counts.slices} · ${counts.concepts}`,
            "confirmed held out: failure modes · slices · concepts",
          ],
        ]
      : []),
    [s.d_sae.toLocaleString(), "concepts (d_sae)"],
    [`${suite.missing_pct.toFixed(1)}%`, "missing from the suite"],
    [fmt(suite.median_X_model), "median X_model"],
    [suite.n_model_gaps.toLocaleString(), "model gaps (X_model < ε, in sample)"],
  ];
  $("kpis").innerHTML = kpis
    .map(([v, l]) => `<div class="kpi"><div class="v">${esc(v)}</div><div class="l">${esc(l)}</div></div>`)
    .join("");
  for (const id of ["overview", "profile", "benchmarks", "concepts", "relations"]) show(id, true);
  const dist = doc.distributions,
    names = s.jaccard.benchmarks;
  Charts.histogram("hist-coverage", dist.X_bench, {
    bins: 60,
    log: true,
    title: `Benchmark coverage X_bench (${dist.X_bench.length.toLocaleString()} present)`,
    xTitle: "X_bench",
    yTitle: "concepts (log)",
  });
  Charts.histogram("hist-performance", dist.X_model, {
    color: "#54a24b",
    median: suite.median_X_model,
    title: `Model performance X_model (median ${fmt(suite.median_X_model)})`,
    xTitle: "X_model",
    yTitle: "concepts",
  });
  Charts.heatmap("jaccard", s.jaccard.matrix, names, { title: "Jaccard overlap of active concepts", zmin: 0, zmax: 1 });
  Charts.heatmap("correlation", s.correlation.matrix, names, {
    title: "Correlation of χ_model across benchmarks",
    zmin: -1,
    zmax: 1,
  });
  $("per-benchmark").innerHTML = names.map((_, i) => `<div id="per-benchmark-${i}" class="small"></div>`).join("");
  names.forEach((b, i) =>
    Charts.histogram(`per-benchmark-${i}`, dist.per_benchmark_chi_model[b] || [], {
      bins: 30,
      color: "#72b7b2",
      w: 360,
      h: 220,
      title: `χ_model · ${b}`,
      median: median(dist.per_benchmark_chi_model[b] || []),
    }),
  );
  drawBenchmarks(s);
  drawBeyond(doc.profiles);
  drawProfile();
  drawReadable(doc.descriptions, doc.themes);
  drawValidation(doc.validation);
  drawRobustness(doc.robustness);
  drawProbe(doc.probe);
  drawScope(doc.scope);
  drawSensitivity(doc.sensitivity);
  drawThemes(doc.themes);
  const cols = doc.concepts,
    keys = Object.keys(cols);
  view.rows = cols.concept_id.map((_, i) => Object.fromEntries(keys.map((k) => [k, cols[k][i]])));
  $("filter-benchmark").innerHTML =
    `<option value="">all benchmarks</option>` + names.map((b) => `<option>${esc(b)}</option>`).join("");
  view.offset = 0;
  drawConcepts();
}

function median(xs) {
  if (!xs.length) return null;
  const s = xs.slice().sort((a, b) => a - b),
    m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function drawBenchmarks(s) {
  document.querySelector("#benchmarks-table tbody").innerHTML = s.benchmarks
    .map(
      (b) => `<tr><td>${esc(b.benchmark)}</td>
    <td class="num">${b.n_rows.toLocaleString()}</td><td class="num">${b.n_scored_rows.toLocaleString()}</td><td class="num">${fmt(b.mean_score)}</td>
    <td class="num">${b.n_active_concepts.toLocaleString()}</td><td class="num">${b.missing_pct.toFixed(1)}</td><td class="num">${fmt(b.median_chi_model)}</td></tr>`,
    )
    .join("");
  Charts.bars(
    "missing-bar",
    s.benchmarks.map((b) => b.benchmark),
    [{ name: "missing %", values: s.benchmarks.map((b) => b.missing_pct), color: "#e45756" }],
    { title: "Concepts missing per benchmark", yTitle: "% of concepts" },
  );
}

// A text with [start, end) spans in <mark> (spans found in Python by the term pattern the CLI uses).
function markedHtml(text, marks) {
  let out = "",
    last = 0;
  for (const [a, b] of marks || []) {
    out += esc(text.slice(last, a)) + `<mark>${esc(text.slice(a, b))}</mark>`;
    last = b;
  }
  return out + esc(text.slice(last));
}

// A candidate's minimum detectable effect at 80% power (a magnitude): the effect it would be confirmed at,
// below its cells ("-") or, for strengths, above ("+"); "—" when no split could test it.
const mdeText = (mde, sign = "-") => (none(mde) ? "—" : `${sign}${Number(mde).toFixed(3)}`);

// Under a held-out figure: its q-value, what it was tested on and, for a candidate, the power it had, in the
// words the run's documents carry (report/findings.power_text: "too few rows to settle …", or "held out it lies
// the other way …" when its whole interval does).
const verdictCell = (e) =>
  none(e.confirmed)
    ? ""
    : `<div class="muted">${qText(e.q_value)}</div>` +
      (e.measured ? `<div class="muted">${esc(e.measured)}</div>` : "") +
      (e.power ? `<div class="muted power">${esc(e.power)}</div>` : "");
const mdeCell = (e) =>
  `<td class="num mde" title="${none(e.mde) ? "no split could test it" : "the effect it would be confirmed at, 80% power"}">${mdeText(e.mde)}</td>`;

// The markup of a block of findings judged held out (a `.judged` element of index.html, its title and columns
// in data-title / data-columns): title, note, what the run could detect (${id}-power), the confirmed table, and
// the candidates apart with the same columns and their MDE, collapsed and greyed; fillJudged fills it.
function judgedBlock(block) {
  const id = block.id;
  const columns = block.dataset.columns.split("|").map((c) => `<th>${esc(c)}</th>`);
  const table = (name, extra = []) =>
    `<table id="${name}"><thead><tr>${columns.concat(extra).join("")}</tr></thead><tbody></tbody></table>`;
  block.innerHTML =
    `<h2>${esc(block.dataset.title)}</h2><p id="${id}-note" class="muted"></p><div id="${id}-power" class="power" hidden></div>` +
    `<h3 id="${id}-confirmed"></h3>${table(`${id}-table`)}` +
    `<details id="${id}-candidates" class="candidates" hidden><summary><b>Candidates — not confirmed: each with the ` +
    `smallest effect this run could confirm (MDE, 80% power)</b> <span id="${id}-candidates-count" class="muted"></span></summary>` +
    `${table(`${id}-candidates-table`, [`<th title="minimum detectable effect at 80% power">MDE (80% power)</th>`])}` +
    `<p id="${id}-next" class="next" hidden></p></details>`;
}
document.querySelectorAll(".judged").forEach(judgedBlock);

// Findings judged held out (docs/findings.md): confirmed ones (q ≤ the FDR) into `${id}-table`, the other
// candidates apart, into the collapsed, greyed `${id}-candidates`, each with its MDE (`row(e, cells)` puts the
// extra cells at the end of its row); `nothing` said when none is confirmed. A run made before held-out checks
// (confirmed null) keeps one table, said so; an empty file of a judged run is judged (its n_confirmed is 0).
function fillJudged(id, p, row, cols, nothing) {
  const judged = !none(p.n_confirmed) || (p.items.length > 0 && !none(p.items[0].confirmed));
  const confirmed = (judged ? p.items.filter((e) => e.confirmed) : p.items).slice(0, TOP);
  const candidates = judged ? p.items.filter((e) => !e.confirmed).slice(0, TOP) : [];
  $(`${id}-confirmed`).textContent =
    judged && confirmed.length
      ? `Confirmed held out (${p.n_confirmed})`
      : judged
        ? ""
        : "This run was made before findings were checked held out.";
  document.querySelector(`#${id}-table tbody`).innerHTML =
    confirmed.map((e) => row(e)).join("") ||
    (judged || !p.items.length ? `<tr class="none"><td colspan="${cols}"><b>${esc(nothing)}</b></td></tr>` : "");
  show(`${id}-candidates`, candidates.length > 0);
  const rest = p.total - (p.n_confirmed || 0);
  const fdr = p.judgement ? ` (q > ${p.judgement.fdr})` : "";
  $(`${id}-candidates-count`).textContent =
    `${rest.toLocaleString()}${fdr}${rest > candidates.length ? `, the first ${candidates.length} shown` : ""}`;
  document.querySelector(`#${id}-candidates-table tbody`).innerHTML = candidates
    .map((e) => row(e, mdeCell(e)))
    .join("");
  // The next step where rows could not settle a candidate (report/findings.probe_gap): new items for it, by
  // the CLI in a report and by the REST route in the service (as probe.js says a probe's own next step).
  const inReport = document.body.classList.contains("report");
  show(`${id}-next`, Boolean(p.probe_gap));
  $(`${id}-next`).innerHTML = !p.probe_gap
    ? ""
    : inReport
      ? `Next: test it on new items with matched controls — <code>${esc(p.probe_command)}</code> ` +
        `(<code>--dry-run</code> prints the plan first; docs/probe.md).`
      : `Next: test it on new items with matched controls — ` +
        `<code>POST /v1/analyses/${esc(view.doc.name)}/probe ${esc(JSON.stringify({ gaps: [p.probe_gap] }))}</code> (docs/probe.md).`;
}

// The run's decision rule and what its intervals are, in its own sentences (summary.json's judgement).
function drawRule(judged) {
  const said = [
    judged && judged.decision ? `Decision: ${judged.decision}.` : "",
    judged && judged.interval ? `Intervals: ${judged.interval}.` : "",
  ].filter(Boolean);
  $("beyond-rule").innerHTML = said.map((t) => `<span>${esc(t)}</span>`).join(" ");
  show("beyond-rule", said.length > 0);
}

// What a failure mode of typical sizes needs to be confirmed 80% of the time (judgement.mde_by_size).
function drawPower(id, judged) {
  const sizes = ((judged && judged.mde_by_size) || []).filter((s) => !none(s.mde));
  show(`${id}-power`, sizes.length > 0);
  if (!sizes.length) return;
  const mid = sizes[Math.min(1, sizes.length - 1)];
  $(`${id}-power`).innerHTML =
    `<p class="muted">What this run can detect: a failure mode of ${mid.n_rows.toLocaleString()} rows needs a residual of ` +
    `${mdeText(mid.mde)} to be confirmed 80% of the time (its minimum detectable effect); smaller modes need more.</p>` +
    `<table class="compact"><tbody><tr><th>mode rows</th>${sizes.map((s) => `<td class="num">${s.n_rows.toLocaleString()}</td>`).join("")}</tr>` +
    `<tr><th>residual needed (80% power)</th>${sizes.map((s) => `<td class="num">${mdeText(s.mde)}</td>`).join("")}</tr></tbody></table>`;
}

// What the metadata does not explain (failure modes), then what it does (the weakest slices).
function drawBeyond(profiles) {
  const modes = profiles.failure_modes,
    slices = profiles.slices;
  show("beyond", Boolean(modes || slices));
  if (!modes && !slices) return;
  const judged = (modes || slices).judged;
  $("beyond-judged").textContent = judged ? `Findings ${judged}.` : "";
  drawRule((modes || slices).judgement);
  show("modes", Boolean(modes));
  if (modes) {
    const adjusted = (modes.adjusted_for || []).join(", ") || "nothing (the suite mean)";
    $("modes-note").textContent =
      `Groups of concepts that fire on the same rows whose rows score below what their own metadata cell predicts ` +
      `(adjusted for ${adjusted}). Residual = mean of (score − the row's cell mean) over the mode's scored rows, measured on rows the mode was ` +
      `not chosen on; confirmed ones first, by the upper end of that interval, then the candidates by q-value. Each mode is described by the ` +
      `terms its rows share and the rest of its cells do not (marked in the examples). Examples are a random draw of the mode's rows that ` +
      `score below their cell, not its most activating rows.`;
    const modeRow = (m, extra = "") =>
      `<tr class="mode"><td class="num">${m.rank}</td><td><b>${esc(m.description)}</b>` +
      (m.shares_text ? `<div class="muted">${esc(m.shares_text)}</div>` : "") +
      (m.examples || [])
        .slice(0, 3)
        .map(
          (x) =>
            `<div class="ex"><b>${esc(x.benchmark)}/${esc(x.row_id)}</b> ${none(x.score) ? "unscored" : `score ${fmt(x.score, 2)}`} — ${markedHtml(x.snippet, x.marks)}</div>`,
        )
        .join("") +
      `</td><td class="num heldout">${signed(m.heldout_residual)} <span class="muted">[${signed(m.heldout_residual_low)}, ${signed(m.heldout_residual_high)}]</span>${verdictCell(m)}</td>
      <td class="num">${fmt(m.mean_score)} vs ${fmt(m.expected_score)}${none(m.in_sample_residual) ? "" : `<div class="muted">residual ${signed(m.in_sample_residual)}</div>`}</td>
      <td class="num">${m.n_rows.toLocaleString()}</td><td>${esc(m.concept_ids.slice(0, 6).join(", "))}${m.concept_ids.length > 6 ? " …" : ""}</td>${holdsCell(m)}${extra}</tr>`;
    drawPower("modes", modes.judgement);
    fillJudged("modes", modes, modeRow, 6, `No failure mode confirmed held out (${modes.tried}).`);
  }
  show("slices", Boolean(slices));
  if (slices) {
    const fields = [...new Set(slices.items.flatMap((s) => Object.keys(s.conditions)))].sort().join(", ");
    $("slices-note").textContent =
      `Conjunctions of metadata values (fields: ${fields || "none found"}) whose mean score is low, measured on rows the slice was not ` +
      "chosen on and compared with the other held-out rows of the same split; confirmed ones first, by the upper end of the held-out interval, then the " +
      "candidates by q-value. What the metadata already says — the failure modes above are what it does not.";
    const sliceRow = (s, extra = "") => `<tr class="slice"><td class="num">${s.rank}</td><td>${esc(s.slice)}</td>
      <td class="num heldout">${fmt(s.mean_score)} <span class="muted">${ci(s.low, s.high)}</span>${none(s.suite_mean) ? "" : `<div class="muted">other rows ${fmt(s.suite_mean)}</div>`}${verdictCell(s)}</td>
      <td class="num">${fmt(s.mean_in_sample)}</td><td class="num">${s.n_rows.toLocaleString()}</td><td class="muted">${esc(s.example_row_ids.join(", "))}</td>${extra}</tr>`;
    fillJudged("slices", slices, sliceRow, 6, `No slice confirmed held out (${slices.tried}).`);
  }
}

// A concept's held-out residual and verdict (only concepts that were candidates have one); a candidate with
// its MDE, the residual it would be confirmed at (above its cells for a strength).
function heldoutCell(e, kind) {
  if (none(e.heldout_residual)) return "—";
  const mde = none(e.mde) ? "" : `<div class="muted mde">MDE ${mdeText(e.mde, kind === "strengths" ? "+" : "-")}</div>`;
  const verdict = e.confirmed
    ? `<span class="ok">✓ confirmed</span> ${qText(e.q_value)}`
    : `candidate, ${qText(e.q_value)}${mde}`;
  return `${signed(e.heldout_residual)} <span class="muted">[${signed(e.heldout_residual_low)}, ${signed(e.heldout_residual_high)}]</span><div class="muted">${verdict}</div>`;
}

function drawProfile() {
  const kind = $("profile-kind").value,
    p = view.doc.profiles[kind],
    cfg = view.doc.summary.config;
  const items = p ? p.items.slice(0, TOP) : [];
  const order = {
    upper_bound: "the upper end of X_model's 95% interval (most confidently weak first)",
    adjusted_gap: "the upper end of the difficulty-adjusted gap's 95% interval",
    x_model: "X_model (the paper's ranking)",
  };
  $("profile-note").textContent = !p
    ? `this run has no ${kind} profile (made by an older version)`
    : p.total
      ? `${p.total} entries · ranked by ${order[p.rank_by] || p.rank_by}; ties by effective support · eligible: active in ≥ ${cfg.min_benchmarks} benchmark(s) and ≥ ${cfg.min_rows} rows · ` +
        `near-duplicates (Jaccard ≥ ${p.duplicate_jaccard}) merged` +
        (none(p.n_confirmed) ? "" : ` · ${p.n_confirmed} confirmed held out`)
      : `no concept is active in ≥ ${cfg.min_rows} rows and ≥ ${cfg.min_benchmarks} benchmark(s) (the profile's filters)`;
  document.querySelector("#profile-table tbody").innerHTML = items
    .map((e) => {
      const label = e.label && e.label !== e.description ? `<div class="muted">label: ${esc(e.label)}</div>` : "";
      return `<tr data-id="${e.concept_id}"><td class="num">${e.rank}</td><td class="num">${e.concept_id}</td>
    <td>${esc(e.description || e.label || "(no label)")}${label}${e.metadata_enrichment.map((m) => `<div class="muted">${esc(m)}</div>`).join("")}</td>
    <td class="num xmodel">${fmt(e.X_model)} <span class="muted">${ci(e.X_model_low, e.X_model_high)}</span></td>
    <td class="num">${signed(e.adjusted_gap)} <span class="muted">[${signed(e.adjusted_gap_low)}, ${signed(e.adjusted_gap_high)}]</span></td>
    <td class="num">${heldoutCell(e, kind)}</td><td class="num">${e.n_rows.toLocaleString()}</td><td class="num">${fmt(e.n_eff, 1)}</td><td class="num">${e.n_benchmarks}</td>
    <td>${esc(e.members.filter((m) => m !== e.concept_id).join(", ") || "—")}</td>${holdsCell(e)}</tr>`;
    })
    .join("");
  $("profile-table").setAttribute("aria-busy", "false");
}

// The concept table: sorted, filtered and paged here, over the view's concept columns.
function drawConcepts() {
  const q = $("search").value.toLowerCase(),
    cls = $("filter-class").value,
    bench = $("filter-benchmark").value;
  const active = bench ? new Set(view.doc.active_by_benchmark[bench] || []) : null;
  let rows = view.rows.filter(
    (c) =>
      (view.mode !== "model" || !none(c.X_model)) &&
      (!cls || c.coverage_class === cls) &&
      (!active || active.has(c.concept_id)) &&
      (!q || (c.label || "").toLowerCase().includes(q) || (c.description || "").toLowerCase().includes(q)),
  );
  const k = view.sort,
    dir = view.order === "asc" ? 1 : -1; // nulls last whatever the order, ties by concept
  rows.sort((a, b) => {
    const x = a[k],
      y = b[k];
    if (x === null || y === null) return (x === null) - (y === null) || a.concept_id - b.concept_id;
    return (x - y) * dir || a.concept_id - b.concept_id;
  });
  const page = rows.slice(view.offset, view.offset + view.limit);
  $("concept-count").textContent = `${rows.length.toLocaleString()} concepts`;
  $("page").textContent =
    `${rows.length ? view.offset + 1 : 0}–${Math.min(view.offset + view.limit, rows.length)} of ${rows.length}`;
  document.querySelector("#concept-table tbody").innerHTML = page
    .map(
      (c) => `
    <tr data-id="${c.concept_id}"><td class="num">${c.concept_id}</td><td>${esc(c.description || c.label || "(no label)")}${c.description && c.label ? `<div class="muted">label: ${esc(c.label)}</div>` : ""}</td>
    <td class="num">${fmt(c.X_model)}</td><td class="num">${fmt(c.X_bench)}</td><td class="num">${c.n_benchmarks_active}</td>
    <td class="num">${c.n_active_rows.toLocaleString()}</td><td class="cls-${c.coverage_class}">${c.coverage_class}</td>
    <td class="num muted">${ci(c.X_model_low, c.X_model_high)}</td><td class="num">${fmt(c.n_eff, 1)}</td>
    <td class="num">${signed(c.adjusted_gap)}</td></tr>`,
    )
    .join("");
  $("prev").disabled = view.offset === 0;
  $("next").disabled = view.offset + view.limit >= rows.length;
  $("concept-table").setAttribute("aria-busy", "false");
}

function examplesHtml(list) {
  if (!list.length) return `<div class="muted">none</div>`;
  return list
    .map(
      (e) =>
        `<div class="example"><div class="meta">${esc(e.benchmark)}/${esc(e.row_id)} · score ${fmt(e.score, 2)} · s̃ ${Number(e.activation).toPrecision(3)}</div>${esc((e.text || "").slice(0, 600))}</div>`,
    )
    .join("");
}

async function showConcept(id) {
  show("detail", true);
  const c = await view.detail(Number(id));
  $("detail-title").textContent = `Concept ${c.concept_id}: ${c.label || "(no label)"}`;
  $("detail-body").innerHTML =
    `X_model <b>${fmt(c.X_model)}</b> ${ci(c.X_model_low, c.X_model_high)} ·
    adjusted gap <b>${signed(c.adjusted_gap)}</b> ${none(c.adjusted_gap_low) ? "" : `[${signed(c.adjusted_gap_low)}, ${signed(c.adjusted_gap_high)}]`} ·
    n_eff ${fmt(c.n_eff, 1)} · X_bench <b>${fmt(c.X_bench)}</b> · ${esc(c.coverage_class)} ·
    active in ${c.n_benchmarks_active} benchmark(s), ${c.n_active_rows} rows${c.is_model_gap ? " · <b class='err'>model gap</b>" : ""}` +
    (c.benchmarks
      ? ""
      : `<p class="muted">Its examples and per-benchmark figures: the report carries them for the ranked concepts; the explorer (cg-ray serve) for every concept.</p>`);
  const b = c.benchmarks || [];
  Charts.bars(
    "detail-plot",
    b.map((r) => r.benchmark),
    [
      { name: "χ_model", values: b.map((r) => r.chi_model), color: "#54a24b" },
      { name: "χ_bench", values: b.map((r) => r.chi_bench), color: "#4c78a8" },
    ],
    { title: "Per benchmark" },
  );
  $("detail-readable").innerHTML = readableHtml(c.readable);
  $("best").innerHTML = examplesHtml(c.best_examples || []);
  $("worst").innerHTML = examplesHtml(c.worst_examples || []);
  $("detail").scrollIntoView({ behavior: "smooth" });
}

// Readable gaps (`cg-ray describe`): the described concepts, a concept's sentence, enrichment and example.
function highlighted(e) {
  const t = e.snippet || "";
  return none(e.span_start) ? esc(t) : markedHtml(t, [[e.span_start, e.span_end]]);
}

function readableHtml(r) {
  if (!r) return "";
  const ex = (r.examples || [])[0];
  const score = none(r.detection_score) ? "" : ` · detection ${fmt(r.detection_score, 2)}`;
  return (
    `<div class="readable"><p><b>${esc(r.description)}</b> <span class="muted">(${esc(r.source)}${score})</span></p>` +
    (r.metadata_enrichment.length
      ? `<p class="muted">over-represented: ${r.metadata_enrichment.map(esc).join("; ")}</p>`
      : "") +
    (ex
      ? `<div class="example"><div class="meta">${esc(ex.benchmark)}/${esc(ex.row_id)} · score ${fmt(ex.score, 2)}</div>${highlighted(ex)}</div>`
      : "") +
    `</div>`
  );
}

function drawReadable(descriptions, themes) {
  show("readable", Boolean(descriptions && descriptions.length));
  if (!descriptions) return;
  document.querySelector("#readable-table tbody").innerHTML = descriptions
    .map((d) => {
      const ex = (d.examples || [])[0];
      return `<tr data-id="${d.concept_id}"><td class="num">${d.concept_id}</td><td>${esc(d.description)}</td>
    <td>${esc(d.source)}${none(d.detection_score) ? "" : ` (detection ${d.detection_score.toFixed(2)})`}</td><td class="num">${fmt(d.X_model)}</td>
    <td class="num">${d.n_active_rows}</td><td>${d.metadata_enrichment.map(esc).join("<br>")}</td>
    <td>${ex ? `<span class="ex">${highlighted(ex)} <b>(${fmt(ex.score, 2)})</b></span>` : ""}</td></tr>`;
    })
    .join("");
  const skipped = ((themes || {}).summary || {}).metadata_fields?.skipped || {};
  $("readable-note").textContent = Object.keys(skipped).length
    ? "Metadata fields not analysed: " +
      Object.entries(skipped)
        .map(([k, v]) => `${k} (${v})`)
        .join("; ")
    : "";
}

function drawThemes(t) {
  show("themes", true);
  const body = $("themes-body");
  if (!t) {
    body.textContent = "No themes: cg-ray describe has not run on this analysis.";
    return;
  }
  body.innerHTML = t.themes.length
    ? t.themes
        .map(
          (th) => `<div class="theme"><b>${esc(th.name)}</b>
    <span class="muted">${th.support.toLocaleString()} rows · mean score ${fmt(th.mean_score)}</span>
    <ul>${th.concepts.map((c) => `<li><a href="#" data-concept="${c.concept_id}">${c.concept_id}</a>: ${esc(c.description)}</li>`).join("")}</ul></div>`,
        )
        .join("")
    : "No themes: the described concepts rarely fire on the same rows.";
  body.querySelectorAll("a[data-concept]").forEach((a) =>
    a.addEventListener("click", (ev) => {
      ev.preventDefault();
      showConcept(a.dataset.concept);
    }),
  );
}

// A paged table's buttons: `state` holds offset and limit; `draw` redraws the page.
function wirePager(prevId, nextId, state, draw) {
  $(prevId).onclick = () => {
    state.offset = Math.max(0, state.offset - state.limit);
    draw();
  };
  $(nextId).onclick = () => {
    state.offset += state.limit;
    draw();
  };
}

// Sortable headers (th[data-<attr>]): a new column sorts in `first` order, the same column again flips it.
function wireSort(attr, state, first, draw) {
  const other = first === "asc" ? "desc" : "asc";
  document.querySelectorAll(`th[data-${attr}]`).forEach(
    (th) =>
      (th.onclick = () => {
        const key = th.dataset[attr];
        state.order = state.sort === key && state.order === first ? other : first;
        state.sort = key;
        draw();
      }),
  );
}

// A click on a row (tr[data-id]) of any of `tables` opens that id.
function onRowClick(tables, open) {
  for (const table of tables)
    document.querySelector(`${table} tbody`).onclick = (e) => {
      const tr = e.target.closest("tr[data-id]");
      if (tr) open(tr.dataset.id);
    };
}

function setMode(mode) {
  view.mode = mode;
  view.sort = mode === "model" ? "X_model" : "X_bench";
  view.order = "asc";
  view.offset = 0;
  $("mode-model").classList.toggle("on", mode === "model");
  $("mode-bench").classList.toggle("on", mode === "bench");
  drawConcepts();
}

window.addEventListener("DOMContentLoaded", () => {
  const redraw = () => {
    view.offset = 0;
    drawConcepts();
  };
  $("mode-model").onclick = () => setMode("model");
  $("mode-bench").onclick = () => setMode("bench");
  $("search").oninput = redraw;
  $("filter-class").onchange = $("filter-benchmark").onchange = redraw;
  wirePager("prev", "next", view, drawConcepts);
  wireSort("sort", view, "asc", drawConcepts);
  $("profile-kind").onchange = drawProfile;
  onRowClick(["#concept-table", "#profile-table", "#readable-table"], (id) => showConcept(id));
});
