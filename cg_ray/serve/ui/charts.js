// Small SVG charts for the explorer and the report (no plotting library: the report stays one small file that
// opens offline). Each draws into an element by id; a <title> on each mark gives its value on hover.
"use strict";

const Charts = (() => {
  const W = 560,
    H = 300,
    M = { l: 56, r: 14, t: 30, b: 42 };
  const NS = "http://www.w3.org/2000/svg";
  const e = (s) =>
    String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  const n = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 1 ? x.toFixed(1) : x.toFixed(2));

  // The chart's markup is gathered, then written once (one parse, one layout).
  function frame(el, title, w = W, h = H) {
    const box = typeof el === "string" ? document.getElementById(el) : el;
    return {
      box,
      parts: [
        `<svg xmlns="${NS}" class="chart" viewBox="0 0 ${w} ${h}" width="100%" role="img" aria-label="${e(title)}">` +
          `<text x="${w / 2}" y="16" text-anchor="middle" class="ct">${e(title)}</text>`,
      ],
    };
  }
  const add = (svg, html) => {
    svg.parts.push(html);
  };
  const done = (svg) => {
    svg.box.innerHTML = svg.parts.join("") + "</svg>";
  };
  const scale = (d0, d1, r0, r1) => (v) => (d1 === d0 ? (r0 + r1) / 2 : r0 + ((v - d0) / (d1 - d0)) * (r1 - r0));

  function axes(svg, x, y, xd, yd, o) {
    const { w = W, h = H, xTitle = "", yTitle = "", log = false, xTicks = null } = o;
    add(
      svg,
      `<line x1="${M.l}" y1="${h - M.b}" x2="${w - M.r}" y2="${h - M.b}" class="ax"/><line x1="${M.l}" y1="${M.t}" x2="${M.l}" y2="${h - M.b}" class="ax"/>`,
    );
    for (let i = 0; i <= 4; i++) {
      const xv = xd[0] + ((xd[1] - xd[0]) * i) / 4;
      if (xd[1] > xd[0] && !xTicks)
        add(svg, `<text x="${x(xv)}" y="${h - M.b + 14}" text-anchor="middle" class="tk">${n(xv)}</text>`);
      const yv = log ? Math.pow(10, yd[0] + ((yd[1] - yd[0]) * i) / 4) : yd[0] + ((yd[1] - yd[0]) * i) / 4;
      add(
        svg,
        `<text x="${M.l - 4}" y="${y(log ? Math.log10(yv) : yv) + 4}" text-anchor="end" class="tk">${n(yv)}</text>`,
      );
    }
    // ticks where the values are (`xTicks`: [{at, label}], at in pixels), not at even steps
    for (const t of xTicks || [])
      add(svg, `<text x="${t.at}" y="${h - M.b + 14}" text-anchor="middle" class="tk">${e(t.label)}</text>`);
    add(
      svg,
      `<text x="${(M.l + w - M.r) / 2}" y="${h - 6}" text-anchor="middle" class="tk">${e(xTitle)}</text>` +
        `<text transform="translate(12 ${(M.t + h - M.b) / 2}) rotate(-90)" text-anchor="middle" class="tk">${e(yTitle)}</text>`,
    );
  }

  // Counts of `values` in `bins` equal bins; `log`: a log y axis; `median`: a dashed red line there.
  function histogram(el, values, o = {}) {
    const { bins = 40, color = "#4c78a8", title = "", log = false, median = null, w = W, h = H } = o;
    const svg = frame(el, title, w, h);
    const vs = values.filter((v) => v !== null && Number.isFinite(v));
    if (!vs.length)
      return done(svg, add(svg, `<text x="${w / 2}" y="${h / 2}" text-anchor="middle" class="tk">no values</text>`));
    let lo = Infinity,
      hi = -Infinity;
    for (const v of vs) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    if (hi === lo) {
      lo -= 0.5;
      hi += 0.5;
    }
    const counts = new Array(bins).fill(0);
    for (const v of vs) counts[Math.min(bins - 1, Math.floor(((v - lo) / (hi - lo)) * bins))]++;
    const t = (c) => (log ? Math.log10(c + 1) : c);
    const top = Math.max(...counts.map(t)) || 1;
    const x = scale(lo, hi, M.l, w - M.r),
      y = scale(0, top, h - M.b, M.t);
    axes(svg, x, y, [lo, hi], [0, top], { ...o, w, h, log });
    const bw = (w - M.l - M.r) / bins;
    add(
      svg,
      counts
        .map((c, i) =>
          c
            ? `<rect x="${M.l + i * bw}" y="${y(t(c))}" width="${Math.max(bw - 1, 1)}" height="${h - M.b - y(t(c))}" fill="${color}"><title>${n(lo + (i * (hi - lo)) / bins)}–${n(lo + ((i + 1) * (hi - lo)) / bins)}: ${c}</title></rect>`
            : "",
        )
        .join(""),
    );
    if (median !== null && median !== undefined)
      add(
        svg,
        `<line x1="${x(median)}" x2="${x(median)}" y1="${M.t}" y2="${h - M.b}" class="med"><title>median ${median.toFixed(3)}</title></line>`,
      );
    done(svg);
  }

  // Bars per category, one colour per series ({name, values, color}); grouped side by side.
  function bars(el, labels, series, o = {}) {
    const { title = "", w = W, h = H, yMax = null } = o;
    const svg = frame(el, title, w, h);
    const top = yMax ?? Math.max(1e-9, ...series.flatMap((s) => s.values.filter((v) => v !== null)));
    const y = scale(0, top, h - M.b, M.t);
    axes(svg, () => 0, y, [0, 0], [0, top], { ...o, w, h });
    const gw = (w - M.l - M.r) / Math.max(1, labels.length),
      bw = (gw - 6) / series.length;
    labels.forEach((label, i) => {
      series.forEach((s, j) => {
        const v = s.values[i];
        if (v === null || v === undefined) return;
        add(
          svg,
          `<rect x="${M.l + i * gw + 3 + j * bw}" y="${y(v)}" width="${Math.max(bw - 1, 1)}" height="${h - M.b - y(v)}" fill="${s.color}"><title>${e(label)} · ${e(s.name)}: ${n(v)}</title></rect>`,
        );
      });
      add(
        svg,
        `<text x="${M.l + (i + 0.5) * gw}" y="${h - M.b + 14}" text-anchor="middle" class="tk">${e(String(label).slice(0, 14))}</text>`,
      );
    });
    if (series.length > 1)
      add(
        svg,
        series
          .map(
            (s, j) =>
              `<text x="${w - M.r - 4}" y="${M.t + 12 + 13 * j}" text-anchor="end" class="tk" style="fill:${s.color}">■ ${e(s.name)}</text>`,
          )
          .join(""),
      );
    done(svg);
  }

  // A cell's colour: blue to white to red when the scale crosses 0, white to blue otherwise (null: grey).
  function fill(v, zmin, zmax) {
    if (v === null) return "#f3f4f6";
    const t = Math.max(0, Math.min(1, (v - zmin) / (zmax - zmin)));
    if (zmin < 0)
      return t < 0.5
        ? `rgb(${Math.round(33 + 2 * t * 222)},${Math.round(102 + 2 * t * 153)},255)`
        : `rgb(255,${Math.round(255 - (t - 0.5) * 2 * 200)},${Math.round(255 - (t - 0.5) * 2 * 200)})`;
    return `rgb(${Math.round(247 - t * 214)},${Math.round(251 - t * 138)},${Math.round(255 - t * 75)})`;
  }

  // A names × names matrix, each cell coloured and labelled (null: "—").
  function heatmap(el, matrix, names, o = {}) {
    const { title = "", zmin = 0, zmax = 1 } = o;
    const k = names.length,
      cell = Math.max(22, Math.min(60, 420 / Math.max(1, k))),
      left = 130;
    const w = left + cell * k + 10,
      h = 34 + cell * k + 90;
    const svg = frame(el, title, w, h);
    const colour = (v) => fill(v, zmin, zmax);
    matrix.forEach((row, i) =>
      row.forEach((v, j) =>
        add(
          svg,
          `<rect x="${left + j * cell}" y="${34 + i * cell}" width="${cell - 1}" height="${cell - 1}" fill="${colour(v)}"><title>${e(names[i])} × ${e(names[j])}: ${v === null ? "—" : v.toFixed(2)}</title></rect>` +
            (cell >= 26
              ? `<text x="${left + (j + 0.5) * cell}" y="${34 + (i + 0.5) * cell + 4}" text-anchor="middle" class="tk">${v === null ? "—" : v.toFixed(2)}</text>`
              : ""),
        ),
      ),
    );
    names.forEach((name, i) =>
      add(
        svg,
        `<text x="${left - 4}" y="${34 + (i + 0.5) * cell + 4}" text-anchor="end" class="tk">${e(String(name).slice(0, 20))}</text>` +
          `<text transform="translate(${left + (i + 0.5) * cell} ${34 + k * cell + 6}) rotate(45)" class="tk">${e(String(name).slice(0, 16))}</text>`,
      ),
    );
    done(svg);
  }

  // Lines with error bars: series of {name, color, points: [{x, y, low, high}], dash}. `xLog`: a log x axis;
  // `xTicks`: [{x, label}] ticked instead of even steps; `hline`: {y, label}, a dashed red line (a target).
  function lines(el, series, o = {}) {
    const { title = "", w = W, h = H, xLog = false, hline = null } = o;
    const svg = frame(el, title, w, h);
    const pts = series.flatMap((s) => s.points).filter((p) => p.y !== null && p.y !== undefined);
    if (!pts.length) return done(svg);
    const tx = xLog ? Math.log10 : (v) => v;
    const xs = pts.map((p) => tx(p.x)),
      ys = pts.flatMap((p) => [p.y, p.low ?? p.y, p.high ?? p.y]).concat(hline ? [hline.y] : []);
    const xd = [Math.min(...xs), Math.max(...xs)],
      yd = [Math.min(...ys), Math.max(...ys)];
    const px = scale(xd[0], xd[1], M.l + 8, w - M.r - 8),
      x = (v) => px(tx(v)),
      y = scale(yd[0], yd[1] === yd[0] ? yd[0] + 1 : yd[1], h - M.b, M.t);
    const xTicks = o.xTicks && o.xTicks.map((t) => ({ at: x(t.x), label: t.label }));
    axes(svg, px, y, xd, yd, { ...o, w, h, xTicks });
    if (hline)
      add(
        svg,
        `<line x1="${M.l}" x2="${w - M.r}" y1="${y(hline.y)}" y2="${y(hline.y)}" class="med"><title>${e(hline.label)}</title></line>` +
          `<text x="${M.l + 4}" y="${y(hline.y) - 4}" class="tk" style="fill:crimson">${e(hline.label)}</text>`,
      );
    series.forEach((s, j) => {
      const ok = s.points.filter((p) => p.y !== null && p.y !== undefined);
      const dash = s.dash ? ` stroke-dasharray="${s.dash}"` : "";
      add(
        svg,
        `<polyline fill="none" stroke="${s.color}" stroke-width="1.5"${dash} points="${ok.map((p) => `${x(p.x)},${y(p.y)}`).join(" ")}"/>` +
          ok
            .map(
              (p) =>
                (p.low === null || p.low === undefined
                  ? ""
                  : `<line x1="${x(p.x)}" x2="${x(p.x)}" y1="${y(p.low)}" y2="${y(p.high)}" stroke="${s.color}"/>`) +
                `<circle cx="${x(p.x)}" cy="${y(p.y)}" r="2.5" fill="${s.color}"><title>${e(s.name)} ${p.x}: ${p.y.toFixed(3)}</title></circle>`,
            )
            .join("") +
          `<text x="${w - M.r - 4}" y="${M.t + 12 + 13 * j}" text-anchor="end" class="tk" style="fill:${s.color}">■ ${e(s.name)}</text>`,
      );
    });
    done(svg);
  }

  // A rows × columns matrix (loadings: tasks × skills), each cell coloured, its value on hover and, where the
  // cells are large enough, in the cell (null: "—"); the rows' names on the left, the columns' above.
  function matrix(el, z, rows, columns, o = {}) {
    const { title = "", zmin = -1, zmax = 1 } = o;
    const cw = Math.max(40, Math.min(90, 420 / Math.max(1, columns.length))),
      ch = 18,
      left = 240,
      top = 50;
    const w = left + cw * columns.length + 10,
      h = top + ch * rows.length + 10;
    const svg = frame(el, title, w, h);
    const text = (v) => (v === null ? "—" : v.toFixed(2));
    columns.forEach((c, j) =>
      add(svg, `<text x="${left + (j + 0.5) * cw}" y="${top - 6}" text-anchor="middle" class="tk">${e(c)}</text>`),
    );
    z.forEach((row, i) => {
      add(svg, `<text x="${left - 4}" y="${top + (i + 0.5) * ch + 4}" text-anchor="end" class="tk">${e(String(rows[i]).slice(0, 44))}</text>`);
      row.forEach((v, j) =>
        add(
          svg,
          `<rect x="${left + j * cw}" y="${top + i * ch}" width="${cw - 1}" height="${ch - 1}" fill="${fill(v, zmin, zmax)}"><title>${e(rows[i])} × ${e(columns[j])}: ${text(v)}</title></rect>` +
            `<text x="${left + (j + 0.5) * cw}" y="${top + (i + 0.5) * ch + 4}" text-anchor="middle" class="tk">${text(v)}</text>`,
        ),
      );
    });
    done(svg);
  }

  // Horizontal bars, grouped per label (one colour per series {name, values, color}), from a line at 0.
  function hbars(el, labels, series, o = {}) {
    const { title = "", w = W } = o,
      left = 180,
      bh = 8,
      gh = bh * series.length + 6,
      pb = M.t + gh * labels.length, // the bars' bottom: the ticks, then the legend, below it
      h = pb + 24 + 13 * series.length;
    const svg = frame(el, title, w, h);
    const vs = series.flatMap((s) => s.values).filter((v) => v !== null && v !== undefined);
    const x = scale(Math.min(0, ...vs), Math.max(0, ...vs, 1e-9), left, w - M.r);
    add(svg, `<line x1="${x(0)}" x2="${x(0)}" y1="${M.t}" y2="${pb}" class="ax"/>`);
    labels.forEach((label, i) => {
      const gy = M.t + i * gh;
      add(svg, `<text x="${left - 6}" y="${gy + gh / 2 + 3}" text-anchor="end" class="tk">${e(String(label).slice(0, 30))}</text>`);
      series.forEach((s, j) => {
        const v = s.values[i];
        if (v === null || v === undefined) return;
        add(
          svg,
          `<rect x="${Math.min(x(0), x(v))}" y="${gy + 3 + j * bh}" width="${Math.max(Math.abs(x(v) - x(0)), 1)}" height="${bh - 1}" fill="${s.color}"><title>${e(label)} · ${e(s.name)}: ${n(v)}</title></rect>`,
        );
      });
    });
    const ends = [...new Set([Math.min(0, ...vs), 0, Math.max(0, ...vs)])];
    add(svg, ends.map((v) => `<text x="${x(v)}" y="${pb + 14}" text-anchor="middle" class="tk">${n(v)}</text>`).join(""));
    add(
      svg,
      series
        .map((s, j) => `<text x="${w - M.r - 4}" y="${pb + 30 + 13 * j}" text-anchor="end" class="tk" style="fill:${s.color}">■ ${e(s.name)}</text>`)
        .join(""),
    );
    done(svg);
  }

  // A forest plot: one row per item {label, x, low, high, color} (an item without an interval: its point only),
  // a dotted line at `ref` (0: no change; an arena's ratings: their anchor).
  function forest(el, items, o = {}) {
    const { title = "", w = 760, ref = 0 } = o,
      left = 300,
      rowH = 20,
      h = M.t + rowH * items.length + M.b;
    const svg = frame(el, title, w, h);
    const has = (v) => v !== null && v !== undefined && Number.isFinite(v);
    const vs = items
      .flatMap((i) => [i.low, i.high, i.x])
      .concat([ref])
      .filter(has);
    const lo = Math.min(...vs),
      hi = Math.max(...vs);
    const x = scale(lo, hi, left, w - M.r);
    add(svg, `<line x1="${x(ref)}" x2="${x(ref)}" y1="${M.t}" y2="${h - M.b}" stroke="#888" stroke-dasharray="3 3"/>`);
    items.forEach((it, i) => {
      const cy = M.t + rowH * (i + 0.5),
        ci = has(it.low) && has(it.high);
      const value = has(it.x) ? it.x.toFixed(3) : "—";
      add(
        svg,
        `<text x="${left - 6}" y="${cy + 4}" text-anchor="end" class="tk">${e(it.label)}</text>` +
          (ci ? `<line x1="${x(it.low)}" x2="${x(it.high)}" y1="${cy}" y2="${cy}" stroke="${it.color}"/>` : "") +
          (has(it.x)
            ? `<circle cx="${x(it.x)}" cy="${cy}" r="4" fill="${it.color}"><title>${e(it.label)}: ${value}${ci ? ` [${it.low.toFixed(3)}, ${it.high.toFixed(3)}]` : ""}</title></circle>`
            : ""),
      );
    });
    add(
      svg,
      [...new Set([lo, ref, hi])]
        .map((v) => `<text x="${x(v)}" y="${h - M.b + 14}" text-anchor="middle" class="tk">${n(v)}</text>`)
        .join(""),
    );
    done(svg);
  }

  return { histogram, bars, heatmap, lines, forest, matrix, hbars };
})();
