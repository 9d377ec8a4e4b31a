"""diff.html: the page of a diff, built from what diff.json holds — counts, a forest plot of the top
confident changes with their intervals (inline SVG, no script), and tables with the rows that flipped."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from cg_ray.report.html import CSS

SNIPPET_CHARS = 220
ROW_H, LABEL_W, PLOT_W, PAD = 22, 330, 520, 12
COLOURS = {"regressed": "#d62728", "improved": "#2ca02c"}


def _esc(text: object) -> str:
    return html.escape(str(text))


def _fmt(value: float | None, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _name(entry: dict[str, Any], limit: int = 60) -> str:
    text = entry.get("description") or entry.get("label") or "(no label)"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def ranked(entry: dict[str, Any], relative: bool) -> tuple[float | None, float | None, float | None]:
    """(value, low, high) of the quantity the concepts were ranked by."""
    if relative:
        r = entry["relative"]
        return r["delta"], r["low"], r["high"]
    return entry["delta_X_model"], entry["low"], entry["high"]


def forest_frame(
    span: float, n_rows: int, aria: str, sizes: tuple[int, int, int, int]
) -> tuple[Callable[[float], float], list[str], int]:
    """The x scale (−span…span onto the plot area), the opening SVG of a forest plot of n_rows rows with
    the dashed zero line, and its height; `sizes` = (row height, label width, plot width, padding)."""
    row_h, label_w, plot_w, pad = sizes
    height = pad * 2 + row_h * n_rows + 24

    def x(v: float) -> float:
        return float(label_w + plot_w * (v + span) / (2 * span))

    return (
        x,
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + plot_w + pad}" height="{height}" '
            f'font-size="12" role="img" aria-label="{aria}">',
            f'<line x1="{x(0):.1f}" y1="{pad}" x2="{x(0):.1f}" y2="{height - 24}" '
            'stroke="#888" stroke-dasharray="4 3"/>',
        ],
        height,
    )


def forest_svg(regressed: list[dict[str, Any]], improved: list[dict[str, Any]], relative: bool = False) -> str:
    """The ranked change with its interval per listed concept, regressions (red) above improvements (green)."""
    rows = [("regressed", e) for e in regressed] + [("improved", e) for e in improved]
    if not rows:
        return "<p>No concept changed confidently (no interval excludes 0).</p>"
    values = [v for _, e in rows for v in ranked(e, relative) if v is not None]
    span = max(0.05, max(abs(v) for v in values)) * 1.1
    x, parts, height = forest_frame(span, len(rows), "forest plot of the top changes", (ROW_H, LABEL_W, PLOT_W, PAD))
    for i, (kind, e) in enumerate(rows):
        y = PAD + ROW_H * i + ROW_H / 2
        colour = COLOURS[kind]
        parts.append(
            f'<text x="{LABEL_W - 8}" y="{y + 4:.1f}" text-anchor="end">'
            f"<title>{_esc(e.get('description') or e.get('label') or '')}</title>"
            f"{e['concept_id']} {_esc(_name(e, 44))}</text>"
        )
        value, low, high = ranked(e, relative)
        if low is not None and high is not None:
            parts.append(
                f'<line x1="{x(low):.1f}" y1="{y:.1f}" x2="{x(high):.1f}" y2="{y:.1f}" '
                f'stroke="{colour}" stroke-width="2"/>'
            )
        if value is not None:
            parts.append(f'<circle cx="{x(value):.1f}" cy="{y:.1f}" r="4" fill="{colour}"/>')
    axis_y = height - 10
    for tick in (-span, -span / 2, 0.0, span / 2, span):
        parts.append(f'<text x="{x(tick):.1f}" y="{axis_y}" text-anchor="middle" fill="#555">{tick:+.2f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _snippet(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "…"


def _examples(entry: dict[str, Any]) -> str:
    blocks = []
    for key, title in (
        ("right_in_a_wrong_in_b", "right in A, wrong in B"),
        ("wrong_in_a_right_in_b", "wrong in A, right in B"),
    ):
        rows = entry.get("examples", {}).get(key, [])
        if not rows:
            continue
        items = []
        for r in rows:
            texts = "".join(
                f"<div class='ex'>{who}{_esc(_snippet(r.get(key)))}</div>"
                for who, key in (("", "prompt"), ("A: ", "response_a"), ("B: ", "response_b"))
                if r.get(key)
            )
            items.append(
                f"<div class='ex'><b>{_esc(r['benchmark'])}/{_esc(r['row_id'])}</b> score {_fmt(r['score_a'], 2)} → "
                f"{_fmt(r['score_b'], 2)}, s̃ {r['s_tilde_a']:.3g} / {r['s_tilde_b']:.3g}</div>{texts}"
            )
        blocks.append(f"<div class='ex'><i>{title}</i></div>{''.join(items)}")
    return f"<details><summary>changed rows</summary>{''.join(blocks)}</details>" if blocks else ""


def _per_benchmark(entry: dict[str, Any]) -> str:
    if len(entry["per_benchmark"]) < 2:
        return ""
    return "".join(
        f"<div class='ex'>{_esc(b['benchmark'])}: Δχ {_fmt(b['delta_chi_model'], signed=True)} "
        f"<span class='ci'>[{_fmt(b['low'], signed=True)}, {_fmt(b['high'], signed=True)}]</span>, "
        f"{b['n_paired_active']} rows</div>"
        for b in entry["per_benchmark"]
    )


def _interval(value: float | None, low: float | None, high: float | None) -> str:
    return f"{_fmt(value, signed=True)} <span class='ci'>[{_fmt(low, signed=True)}, {_fmt(high, signed=True)}]</span>"


def concept_table(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return "<p>None.</p>"
    head = (
        "<tr><th>#</th><th>concept</th><th>description</th><th>ΔX_model [CI]</th><th>beyond Δ mean score [CI]</th>"
        "<th>X_model A → B</th><th>rows</th></tr>"
    )
    body = []
    for i, e in enumerate(entries, 1):
        label = e.get("label") or ""
        described = e.get("description")
        name = _esc(described or label or "(no label)")
        if described and label and label != described:
            name += f"<div class='ex'>label: {_esc(label)}</div>"
        body.append(
            f"<tr><td class='num'>{i}</td><td class='num'>{e['concept_id']}</td><td>{name}{_per_benchmark(e)}"
            f"{_examples(e)}</td><td class='num'>{_fmt(e['delta_X_model'], signed=True)} <span class='ci'>"
            f"[{_fmt(e['low'], signed=True)}, {_fmt(e['high'], signed=True)}]</span></td>"
            f"<td class='num'>{_interval(*ranked(e, True))}</td>"
            f"<td class='num'>{_fmt(e['X_model_a'])} → {_fmt(e['X_model_b'])}</td>"
            f"<td class='num'>{e['n_paired_active']:,}</td></tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


def _kpis(doc: dict[str, Any]) -> str:
    c = doc["counts"]
    runs = doc["runs"]
    items = [
        (f"{c['paired']:,}", "paired rows (shared, scored in both)"),
        (f"{_fmt(runs['a']['mean_score_paired'])} → {_fmt(runs['b']['mean_score_paired'])}", "mean score A → B"),
        (f"{c['confident_regressed']:,}", "confidently regressed concepts"),
        (f"{c['confident_improved']:,}", "confidently improved concepts"),
        (f"{c['only_a']:,} / {c['only_b']:,}", "rows only in A / only in B (skipped)"),
        (f"{c['shared_unscored']:,}", "shared rows unscored in A or B (skipped)"),
    ]
    return "".join(
        f"<div class='kpi'><div class='v'>{v}</div><div class='l'>{_esc(label)}</div></div>" for v, label in items
    )


def diff_page(doc: dict[str, Any]) -> str:
    """The whole page, self-contained (no script, no network)."""
    runs, cfg, counts = doc["runs"], doc["config"], doc["counts"]
    names = {k: runs[k].get("evaluated_model") or runs[k]["path"] for k in ("a", "b")}
    check = doc["reader_check"]
    suites = ""
    if counts["benchmarks_only_a"] or counts["benchmarks_only_b"]:
        suites = (
            f"<p>Benchmarks only in A: {_esc(', '.join(counts['benchmarks_only_a']) or '—')}; only in B: "
            f"{_esc(', '.join(counts['benchmarks_only_b']) or '—')} (ΔX_bench in diff.parquet covers them).</p>"
        )
    level = round(100 * cfg["confidence"])
    relative = cfg["rank_by"] == "relative"
    method = (
        f"<p class='ex'>Δ = B − A on the {counts['paired']:,} paired rows. Intervals: {level}% paired percentile "
        f"bootstrap, {cfg['resamples']:,} resamples (seed {cfg['seed']}), stratified by benchmark. Listed: active in "
        f"≥ {cfg['min_rows']} paired rows ({counts['eligible']:,} concepts) and the interval excludes 0; ranked by "
        f"the bound nearest 0 of {'the change beyond the benchmarks’ mean-score change' if relative else 'ΔX_model'}. "
        f"Intervals are per concept: with no change at all, about {counts['expected_by_chance_per_direction']} "
        f"concepts per direction would exclude 0 by chance. A row is right "
        f"when its score ≥ {cfg['right_threshold']}. Reader check: {_esc(', '.join(check['checked_fields']))}"
        f"{' (assumed the same reader)' if check['assumed_same'] else ''}; text read A: {_esc(check['text_a'])}, "
        f"B: {_esc(check['text_b'])}.</p>"
    )
    sections = [
        f"<section><div class='kpis'>{_kpis(doc)}</div>{suites}{method}</section>",
        f"<section><h2>Top confident changes ({'beyond Δ mean score' if relative else 'ΔX_model'}, {level}% "
        f"interval)</h2>{forest_svg(doc['top_regressed'], doc['top_improved'], relative)}</section>",
        f"<section><h2>Regressed most confidently</h2>{concept_table(doc['top_regressed'])}</section>",
        f"<section><h2>Improved most confidently</h2>{concept_table(doc['top_improved'])}</section>",
    ]
    title = f"{names['a']} → {names['b']}"
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>cg_ray diff — {_esc(title)}</title>'
        f"<style>{CSS}</style></head><body><header><h1>Concept diff — {_esc(title)}</h1>"
        f"<p>A: {_esc(runs['a']['path'])} · B: {_esc(runs['b']['path'])}</p></header>"
        f"<main>{''.join(sections)}</main></body></html>"
    )
