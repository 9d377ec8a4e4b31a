// The skills pages: report.html of `cg-ray skills` (the latent skills of a models × tasks matrix: loadings,
// model profiles, redundancy, profiling a new model from k tasks, stability) and of `cg-ray estimate --lomo`
// (active estimation against random sampling, leave-one-model-out), drawn from their documents
// (cg_ray.report.skills: skills_view, estimate_view). Uses view.js' helpers ($, esc, fmt, none, show) and charts.js.
"use strict";

const SKILL_COLOURS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#9d755d"];
const skillColour = (i) => SKILL_COLOURS[i % SKILL_COLOURS.length];

// A document's table ({title, columns: [{name, digits}], rows}): a float column to its digits, null as "—".
function skillsTableHtml(t) {
  const cell = (v, c) => {
    if (none(v)) return `<td class="num">—</td>`;
    if (typeof v !== "number") return `<td>${esc(v)}</td>`;
    return `<td class="num">${none(c.digits) ? esc(v) : fmt(v, c.digits)}</td>`;
  };
  const head = t.columns.map((c) => `<th>${esc(c.name)}</th>`).join("");
  const rows = t.rows.map((r) => `<tr>${r.map((v, i) => cell(v, t.columns[i])).join("")}</tr>`).join("");
  return (t.title ? `<h3>${esc(t.title)}</h3>` : "") + `<table class="skills-table"><thead><tr>${head}</tr></thead><tbody>${rows}</tbody></table>`;
}

// The parts both pages share: title, note, warnings, one element per figure, the tables.
function skillsFrame(doc, note, figures) {
  show("skills", true);
  $("skills-title").textContent = doc.title;
  $("skills-note").innerHTML = note;
  $("skills-warnings").innerHTML = (doc.warnings || []).map((w) => `<p class="skills-warning">${esc(w)}</p>`).join("");
  $("skills-figures").innerHTML = figures.map((id) => `<div id="${id}" class="plot"></div>`).join("");
  $("skills-tables").innerHTML = doc.tables.map(skillsTableHtml).join("");
}

function drawSkills(doc) {
  const f = doc.factors;
  skillsFrame(
    doc,
    `${doc.n_models} models × ${doc.n_tasks} tasks from ${esc(doc.source)}; <b>${f.n_factors}</b> factor(s) ` +
      `(${esc(f.source)}; criteria: ${esc(f.criteria)}; Ledermann bound ${esc(f.ledermann_bound)}).`,
    ["skills-loadings", "skills-profiles"],
  );
  const l = doc.loadings_figure;
  Charts.matrix("skills-loadings", l.z, l.rows, l.columns, { title: l.title, zmin: -1, zmax: 1 });
  // at its own size: a few skills' columns stretched to the page's width would make a long task list tall
  const matrix = document.querySelector("#skills-loadings svg");
  matrix.setAttribute("width", matrix.viewBox.baseVal.width);
  const p = doc.profiles_figure;
  const series = p.series.map((s, i) => ({ name: s.name, values: s.values, color: skillColour(i) }));
  Charts.hbars("skills-profiles", p.labels, series, { title: p.title, w: 720 });
}

function drawLomo(doc) {
  skillsFrame(doc, esc(doc.description), ["lomo-rmse"]);
  const f = doc.figure;
  // the span floor is a reference, not an estimator: grey and dotted
  const series = f.series.map((s, i) => ({
    name: s.name,
    points: s.points,
    color: s.reference ? "grey" : skillColour(i),
    dash: s.reference ? "2 3" : null,
  }));
  Charts.lines("lomo-rmse", series, {
    title: f.title,
    xTitle: f.x_title,
    yTitle: f.y_title,
    w: 720,
    xLog: true,
    xTicks: f.budgets.map((b) => ({ x: b, label: `${Number(b.toPrecision(6))}%` })),
    hline: { y: f.target, label: `target ${f.target}` },
  });
}

EMBEDDED.skills = drawSkills;
EMBEDDED.lomo = drawLomo;
