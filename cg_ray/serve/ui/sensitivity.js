// Whether other readers find the run's findings again on the same rows (`cg-ray sensitivity`, issues #51, #59),
// when the run has sensitivity/: how alike the readers are (latents shared, rank correlations, top rows), then
// per failure mode and concept its status under each other reader beside the overlap chance gives and the
// reader's best q for rows like these, the slices apart, and which findings were confirmed on fresh rows
// (cg-ray probe), drawn from the view's `sensitivity` document (cg_ray.report.sensitivity.sensitivity_view).
// The findings tables' "other readers" column (`holdsCell`, `holdsColumns`) is there only then. Uses view.js'
// helpers.
"use strict";

// A finding's "other readers" cell ("l20-seed7 ✓, l13 ✗"; "—" where it was not compared), only in the view of
// a run with sensitivity/: a run without it keeps its tables as they were. Slices get none (metadata rules).
const HOLDS_TITLE = "cg-ray sensitivity, the same rows read by other SAEs: ✓ found, ~ partly, ✗ not found (not replication)";
const holdsCell = (e) =>
  view.doc && view.doc.sensitivity
    ? `<td class="holds" title="${HOLDS_TITLE}">${none(e.other_readers) ? "—" : esc(e.other_readers)}</td>`
    : "";
// The findings tables whose rows end with holdsCell; a candidates table keeps its MDE column last.
const HOLDS_TABLES = ["modes-table", "profile-table"];
const HOLDS_BEFORE_LAST = ["modes-candidates-table"];

function holdsColumns(on) {
  document.querySelectorAll("th.holds").forEach((th) => th.remove());
  if (!on) return;
  const th = () =>
    Object.assign(document.createElement("th"), {
      className: "holds",
      title: HOLDS_TITLE,
      textContent: "other readers (same rows)",
    });
  for (const id of HOLDS_TABLES) document.querySelector(`#${id} thead tr`)?.append(th());
  for (const id of HOLDS_BEFORE_LAST) document.querySelector(`#${id} thead tr`)?.lastElementChild?.before(th());
}

function sensitivityPairHtml(p) {
  return (
    `<tr><td><b>${esc(p.reader_b)}</b></td><td class="muted">${esc(p.method)}</td><td class="num">${esc(p.layers)}</td>` +
    `<td class="num">${esc(p.widths)}</td><td class="num">${esc(p.shared)}</td><td class="num">${fmt(p.median_similarity, 2)}</td>` +
    `<td class="num">${p.n_matched.toLocaleString()}</td><td class="num">${fmt(p.spearman_X_model, 2)}</td>` +
    `<td class="num">${fmt(p.spearman_X_bench, 2)}</td><td class="num">${fmt(p.top_rows_jaccard, 2)}</td>` +
    `<td class="num">${esc(p.confirmed)}</td></tr>`
  );
}

function sensitivityFindingHtml(f, readers) {
  const by = Object.fromEntries(f.readers.map((r) => [r.reader, r]));
  const cells = readers
    .map((name) => {
      const r = by[name];
      if (!r) return `<td class="muted">not compared</td>`;
      const near = r.near ? `<div class="muted">${esc(r.near)}</div>` : "";
      return (
        `<td class="replication ${r.status.replace(" ", "-")}"><b>${esc(r.mark)} ${esc(r.status)}</b>` +
        `<div class="muted">${esc(r.overlap)}</div>${near}</td>`
      );
    })
    .join("");
  const fresh = f.kind === "slice" ? "" : `<div><b>${esc(f.fresh_text || "")}</b></div>`;
  return (
    `<tr><td><b>${esc(f.finding)}</b> <span class="muted">${esc(f.kind.replace("_", " "))}</span>` +
    `<div>${esc(f.description)}</div><div class="muted">${f.n_rows.toLocaleString()} rows</div>` +
    `<div class="muted">${esc(f.estimate_text || "")}</div>${fresh}</td>${cells}</tr>`
  );
}

function sensitivityTable(id, findings, names, head) {
  $(id).innerHTML = findings.length
    ? `<thead><tr><th>finding</th>${head}</tr></thead>` +
      `<tbody>${findings.map((f) => sensitivityFindingHtml(f, names)).join("")}</tbody>`
    : "";
}

function drawSensitivity(s) {
  holdsColumns(Boolean(s));
  show("sensitivity", Boolean(s));
  if (!s) return;
  const r = s.reader || {};
  const names = s.readers.map((o) => o.name);
  const rows = (o) => (none(o.rows) ? "" : ` (${o.rows.toLocaleString()} rows)`);
  const counts = s.readers
    .map((o) => `${o.name}${rows(o)}: ${o.statuses_text} of the failure modes and concepts; slices ${o.slices_text}`)
    .join("; ");
  $("sensitivity-note").textContent =
    `This run's findings were made by ${r.name || "its reader"}` +
    (none(r.layer) ? "" : ` (layer ${r.layer}, ${none(r.d_sae) ? "?" : r.d_sae.toLocaleString()} latents)`) +
    `; the same rows, scores and splits were read again by ${names.join(", ")} and judged again ` +
    `(robustness to the reader, not replication). ${counts}.`;
  $("sensitivity-rule").textContent = s.rule ? `Rule: ${s.rule}` : "";
  $("sensitivity-fresh").textContent = s.fresh ? `Replication: ${s.fresh}.` : "";
  document.querySelector("#sensitivity-pairs tbody").innerHTML = s.pairs.map(sensitivityPairHtml).join("");
  const what =
    "found / partly / not found on the same rows; that reader's confirmed finding overlapping its rows most, " +
    "its Jaccard beside chance's; its best candidate (q) for rows like these";
  const head = names.map((n) => `<th title="${esc(what)}">under ${esc(n)}</th>`).join("");
  sensitivityTable("sensitivity-findings", s.findings, names, head);
  sensitivityTable("sensitivity-slices", s.slices || [], names, head);
  const more = s.total > s.findings.length;
  $("sensitivity-more").textContent = more
    ? `The first ${s.findings.length} of ${s.total} findings compared are shown (all: sensitivity/findings.parquet).`
    : "";
}
