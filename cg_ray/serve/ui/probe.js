// The run's probe (`cg-ray probe`, docs/probe.md), when it has one: each gap tested on new target items and
// their matched controls, drawn from the view's `probe` document (cg_ray.report.probe.probe_view). Uses
// view.js' helpers.
"use strict";

const VERDICT_CLASS = { confirmed: "ok", reversed: "err", refuted: "muted" };

// The model's answer to one item of a pair, and its score.
function probeItemHtml(role, item) {
  const score = none(item.score) ? "unscored" : `score ${fmt(item.score, 2)}`;
  return (
    `<div class="example"><div class="meta"><b>${esc(role)}</b> · ${esc(score)}</div>${esc(item.prompt)}` +
    `<div class="meta">the model: ${esc(item.response ?? "—")}</div></div>`
  );
}

// What to run to settle an unsettled gap: the CLI in a report, the REST call in the service.
function probeNextHtml(g) {
  const n = g.next_step;
  if (!n) return "";
  const inReport = document.body.classList.contains("report");
  const body = JSON.stringify({ gaps: [g.gap_id], pairs: n.pairs, seed: n.seed });
  const how = inReport ? n.command : `POST /v1/analyses/${view.doc.name}/probe ${body}`;
  return `<div class="power">next: ${esc(n.text)}: <code>${esc(how)}</code></div>`;
}

function probeRowHtml(g) {
  const verdict = `<b class="${VERDICT_CLASS[g.verdict] || ""}">${esc(g.verdict)}</b>`;
  const examples = (g.examples || [])
    .map((p) => `<div class="probe-pair">${probeItemHtml("target", p.target)}${probeItemHtml("control", p.control)}</div>`)
    .join("");
  return (
    `<tr class="probe-gap"><td><b>${esc(g.gap_id)}</b> ${esc(g.description)}</td>` +
    `<td class="muted">${esc(g.run_said)}</td>` +
    `<td>${verdict}${g.measured ? `<div>${esc(g.measured)}</div>` : ""}<div class="muted">${esc(g.note)}</div>` +
    `${probeNextHtml(g)}</td>` +
    `<td class="num">${(g.n_pairs || 0).toLocaleString()} / ${(g.pairs_written || 0).toLocaleString()}</td>` +
    `<td class="muted">${esc(g.checks)}${g.writer_note ? `<div>${esc(g.writer_note)}</div>` : ""}</td></tr>` +
    (examples
      ? `<tr class="probe-examples"><td colspan="5"><details><summary>${g.examples.length} example pairs of ` +
        `${esc(g.gap_id)} (the first written that were answered)</summary>${examples}</details></td></tr>`
      : "")
  );
}

function drawProbe(p) {
  show("probe", Boolean(p));
  if (!p) return;
  // Probes kept from earlier may have asked for other counts than the latest: then each gap's own probe says.
  const asked = (p.pairs || []).map((n) => n.toLocaleString());
  const written = asked.length > 1 ? `${asked.join(" or ")} pairs (as its probe asked)` : `${asked[0] ?? "—"} pairs`;
  $("probe-note").textContent =
    `For each gap, ${written} were written: a target item that exhibits it and a matched control ` +
    "without it. Near copies of the suite and pairs the reader does not see as the gap were dropped before the " +
    "model answered; the verdict compares the target's score with its control's on the pairs kept.";
  $("probe-rule").textContent = p.decision ? `Decision: ${p.decision}.` : "";
  document.querySelector("#probe-table tbody").innerHTML = p.gaps.map(probeRowHtml).join("");
}
