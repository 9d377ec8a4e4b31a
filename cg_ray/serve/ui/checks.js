// The run's checks, when it has them: held-out validation (`cg-ray validate`) and robustness
// (`cg-ray robustness`). Uses view.js' helpers.
"use strict";

const SERIES = [
  ["new", "weakness profile", "#d62728"],
  ["paper", "paper's X_model ranking", "#1f77b4"],
  ["random", "random concepts", "#7f7f7f"],
];

function drawValidation(v) {
  show("validation", Boolean(v));
  if (!v) return;
  const sp = v.split;
  $("validation-note").textContent =
    `Profile built on ${sp.n_fit.toLocaleString()} rows, measured on ${sp.n_test.toLocaleString()} held-out rows ` +
    `(stratified by benchmark, seed ${sp.seed}). Lift: mean held-out score of the rows exhibiting any of the top-k concepts minus those rows' ` +
    "benchmark means (negative: the profile finds rows the model fails). Intervals: 95% bootstrap over held-out rows; for random concepts, " +
    "the 2.5–97.5 percentiles over draws.";
  const of = (key) => (key === "new" ? v : v.baselines[key]);
  const liftOf = (p) => (none(p.lift) ? p.value : p.lift);
  const cell = (p, text) => `<td class="num">${p ? text : "—"}</td>`;
  document.querySelector("#validation-table tbody").innerHTML = SERIES.map(([key, name]) => {
    const lift = of(key).lift,
      lp = of(key).low_performance.by_rows;
    return (
      `<tr><td>${esc(name)}</td>` +
      [1, 5, 10, 20]
        .map((k) => {
          const p = lift.find((e) => e.k === k);
          return cell(
            p,
            p &&
              `${signed(liftOf(p))} <span class="muted">${none(p.low) ? "" : `[${signed(p.low)}, ${signed(p.high)}]`}</span>`,
          );
        })
        .join("") +
      [50, 100, 200, 500]
        .map((n) => {
          const p = lp.find((e) => e.N === n);
          return cell(p, p && `${fmt(p.value)} <span class="muted">${none(p.low) ? "" : ci(p.low, p.high)}</span>`);
        })
        .join("") +
      "</tr>"
    );
  }).join("");
  const series = (pick) => SERIES.map(([key, name, color]) => ({ name, color, points: pick(of(key)) }));
  Charts.lines(
    "validation-lift",
    series((r) => r.lift.map((p) => ({ x: p.k, y: liftOf(p), low: p.low, high: p.high }))),
    { title: "Held-out lift of the top-k concepts", xTitle: "k (top concepts)", yTitle: "lift" },
  );
  Charts.lines(
    "validation-low",
    series((r) => r.low_performance.by_size.map((p) => ({ x: p.M, y: p.value, low: p.low, high: p.high }))),
    { title: "Low-performance curve (lower is better)", xTitle: "profile size M'", yTitle: "min mean held-out score" },
  );
  $("null-check").innerHTML = v.null_check_text
    ? `<b>${esc(v.null_check_text)}</b> <span class="muted">(failure modes, concepts and slices off those fields, ` +
      "confirmed by the same splits and decision rule on whole groups' scores shuffled within those cells, where there is nothing beyond the metadata to find: each is a false discovery, so expect 0)</span>"
    : "";
}

function drawRobustness(r) {
  show("robustness", Boolean(r));
  if (!r) return;
  const sub = r.subsampling,
    abl = r.adversarial_ablation,
    rc = abl.random_control;
  $("robustness-body").innerHTML =
    `<p>Subsampling (${sub.repeats}× dropping ${Math.round(sub.drop_fraction * 100)}% of each benchmark): ` +
    `mean per-concept std of X_model <b>${fmt(sub.X_model_std_mean, 4)}</b>, of X_bench <b>${fmt(sub.X_bench_std_mean, 4)}</b>.</p>` +
    `<p>Ablation (baseline median X_model ${fmt(abl.baseline_median_X_model, 4)}): removing the ${abl.remove_best.rows_removed} rows most salient for ` +
    `the best concepts moves it <b>${signed(abl.remove_best.median_shift, 4)}</b>, for the worst <b>${signed(abl.remove_worst.median_shift, 4)}</b>; ` +
    `random removals ${signed(rc.median_shift_mean, 4)} ± ${fmt(rc.median_shift_std, 4)}.</p>`;
}
