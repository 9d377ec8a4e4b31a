// Whether the run's findings hold whichever SAE reads the rows (`cg-ray sensitivity`, issue #51), when the run
// has sensitivity/: how alike the readers are (latents shared, rank correlations, top rows), then per finding
// its status under each other reader, drawn from the view's `sensitivity` document
// (cg_ray.report.sensitivity.sensitivity_view). The findings tables' "holds under" column (`holdsCell`,
// `holdsColumns`) is there only then. Uses view.js' helpers.
"use strict";

// A finding's "holds under" cell ("l20-seed7 ✓, l13 ✗"; "—" where it was not compared), only in the view of
// a run with sensitivity/: a run without it keeps its tables as they were.
const HOLDS_TITLE = "cg-ray sensitivity: ✓ replicates, ~ partly, ✗ not found";
const holdsCell = (e) =>
  view.doc && view.doc.sensitivity
    ? `<td class="holds" title="${HOLDS_TITLE}">${none(e.holds_under) ? "—" : esc(e.holds_under)}</td>`
    : "";
// The findings tables whose rows end with holdsCell; a candidates table keeps its MDE column last.
const HOLDS_TABLES = ["modes-table", "slices-table", "profile-table"];
const HOLDS_BEFORE_LAST = ["modes-candidates-table", "slices-candidates-table"];

function holdsColumns(on) {
  document.querySelectorAll("th.holds").forEach((th) => th.remove());
  if (!on) return;
  const th = () =>
    Object.assign(document.createElement("th"), {
      className: "holds",
      title: HOLDS_TITLE,
      textContent: "holds under another reader",
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
      return (
        `<td class="replication ${r.status.replace(" ", "-")}"><b>${esc(r.mark)} ${esc(r.status)}</b>` +
        `<div class="muted">${esc(r.overlap)}</div><div class="muted">${esc(r.effect_text)}</div></td>`
      );
    })
    .join("");
  return (
    `<tr><td><b>${esc(f.finding)}</b> <span class="muted">${esc(f.kind.replace("_", " "))}</span>` +
    `<div>${esc(f.description)}</div><div class="muted">${f.n_rows.toLocaleString()} rows</div></td>${cells}</tr>`
  );
}

function drawSensitivity(s) {
  holdsColumns(Boolean(s));
  show("sensitivity", Boolean(s));
  if (!s) return;
  const r = s.reader || {};
  const names = s.readers.map((o) => o.name);
  const rows = (o) => (none(o.rows) ? "" : ` (${o.rows.toLocaleString()} rows)`);
  const counts = s.readers.map((o) => `${o.name}${rows(o)}: ${o.statuses_text}`).join("; ");
  $("sensitivity-note").textContent =
    `This run's findings were made by ${r.name || "its reader"}` +
    (none(r.layer) ? "" : ` (layer ${r.layer}, ${none(r.d_sae) ? "?" : r.d_sae.toLocaleString()} latents)`) +
    `; the same rows were read again by ${names.join(", ")} and judged again. ${counts}.`;
  $("sensitivity-rule").textContent = s.rule ? `Rule: ${s.rule}` : "";
  document.querySelector("#sensitivity-pairs tbody").innerHTML = s.pairs.map(sensitivityPairHtml).join("");
  const what = "its status; that reader's confirmed finding overlapping its rows most; the held-out effect of its rows [interval]";
  const head = names.map((n) => `<th title="${esc(what)}">under ${esc(n)}</th>`).join("");
  $("sensitivity-findings").innerHTML =
    `<thead><tr><th>finding</th>${head}</tr></thead>` +
    `<tbody>${s.findings.map((f) => sensitivityFindingHtml(f, names)).join("")}</tbody>`;
  const more = s.total > s.findings.length;
  $("sensitivity-more").textContent = more
    ? `The first ${s.findings.length} of ${s.total} findings compared are shown (all: sensitivity/findings.parquet).`
    : "";
}
