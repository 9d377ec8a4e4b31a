"""diff_models.html: built from hypotheses.json — the counts, a plot of each hypothesis' difference with its
interval on all prompts and on the held-out half (inline SVG, no script), and the hypotheses with
examples from both models."""

from __future__ import annotations

import html
from typing import Any

from cg_ray.compare.html import forest_frame
from cg_ray.report.html import CSS

ROW_H, LABEL_W, PLOT_W, PAD = 24, 360, 480, 12
COLOURS = {"a_more": "#1f77b4", "b_more": "#ff7f0e"}


def _esc(text: object) -> str:
    return html.escape(str(text))


def _f(x: float | None, signed: bool = True) -> str:
    return "—" if x is None else (f"{x:+.3f}" if signed else f"{x:.3f}")


def _name(h: dict[str, Any], limit: int = 48) -> str:
    text = h.get("description") or h.get("label") or f"concept {h['concept_id']}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plot(hyps: list[dict[str, Any]]) -> str:
    """Δ = B − A per hypothesis: all prompts (thick) and the held-out half (thin, below)."""
    if not hyps:
        return "<p>No hypothesis: no concept's interval excluded 0 on the discovery half.</p>"
    bounds = [abs(v) for h in hyps for k in ("all", "held_out") for v in (h[k]["low"], h[k]["high"]) if v is not None]
    span = max(0.05, *bounds) * 1.1
    aria = "difference in the fraction of answers, with intervals"
    x, parts, height = forest_frame(span, len(hyps), aria, (ROW_H, LABEL_W, PLOT_W, PAD))
    for i, h in enumerate(hyps):
        y = PAD + ROW_H * i + ROW_H / 2 - 3
        colour = COLOURS[h["direction"]]
        mark = "✓" if h["replicated"] else "✗"
        parts.append(
            f'<text x="{LABEL_W - 8}" y="{y + 4:.1f}" text-anchor="end"><title>{_esc(h["statement"])}</title>'
            f"{mark} {h['concept_id']} {_esc(_name(h))}</text>"
        )
        for key, dy, width in (("all", 0, 3), ("held_out", 7, 1)):
            side = h[key]
            if side["low"] is not None and side["high"] is not None:
                parts.append(
                    f'<line x1="{x(side["low"]):.1f}" y1="{y + dy:.1f}" x2="{x(side["high"]):.1f}" '
                    f'y2="{y + dy:.1f}" stroke="{colour}" stroke-width="{width}"/>'
                )
            if side["delta"] is not None:
                parts.append(
                    f'<circle cx="{x(side["delta"]):.1f}" cy="{y + dy:.1f}" r="{3 if dy else 4}" fill="{colour}"/>'
                )
    for tick in (-span, -span / 2, 0.0, span / 2, span):
        parts.append(f'<text x="{x(tick):.1f}" y="{height - 10}" text-anchor="middle" fill="#555">{tick:+.2f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _examples(h: dict[str, Any], names: tuple[str, str]) -> str:
    items = []
    for e in h["examples"]:
        items.append(
            f"<div class='ex'><b>{_esc(e['id'])}</b> s̃ {e['s_tilde_a']:.3g} ({_esc(names[0])}) / "
            f"{e['s_tilde_b']:.3g} ({_esc(names[1])})</div>"
            f"<div class='ex'>prompt: {_esc(e['prompt'])}</div>"
            f"<div class='ex'>{_esc(names[0])}: {_esc(e['response_a'])}</div>"
            f"<div class='ex'>{_esc(names[1])}: {_esc(e['response_b'])}</div>"
        )
    return f"<details><summary>examples</summary>{''.join(items)}</details>" if items else ""


def _row(h: dict[str, Any], names: tuple[str, str]) -> str:
    a, held = h["all"], h["held_out"]
    return (
        f"<tr><td class='num'>{h['concept_id']}</td><td>{_esc(h['statement'])}{_examples(h, names)}</td>"
        f"<td class='num'>{_f(a['frac_a'], False)} → {_f(a['frac_b'], False)}</td>"
        f"<td class='num'>{_f(a['delta'])} <span class='ci'>[{_f(a['low'])}, {_f(a['high'])}]</span></td>"
        f"<td class='num'>{_f(held['delta'])} <span class='ci'>[{_f(held['low'])}, {_f(held['high'])}]</span></td>"
        f"<td>{'yes' if h['replicated'] else 'no'}</td></tr>"
    )


def diff_models_page(doc: dict[str, Any]) -> str:
    names = (doc["models"]["a"], doc["models"]["b"])
    c, rep = doc["counts"], doc["replication"]
    skips = ", ".join(f"{k} {v}" for k, v in c.items() if isinstance(v, int) and v and k not in ("paired", "compared"))
    hyps = doc["hypotheses"]
    head = (
        "<tr><th>concept</th><th>hypothesis</th><th>fraction A → B</th><th>Δ all prompts [CI]</th>"
        "<th>Δ held-out half [CI]</th><th>replicated</th></tr>"
    )
    table = f"<table>{head}{''.join(_row(h, names) for h in hyps)}</table>" if hyps else "<p>None.</p>"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>diff-models: {_esc(names[0])} vs "
        f"{_esc(names[1])}</title><style>{CSS}</style></head><body>"
        f"<h1>{_esc(names[0])} (A) vs {_esc(names[1])} (B)</h1>"
        f"<p>{c['compared']:,} prompts compared ({_esc(skips or 'nothing skipped')}). Δ = B − A, the difference "
        f"in the fraction of answers where a concept is active; intervals are {_esc(doc['config']['confidence'])} "
        "Newcombe intervals for paired proportions.</p>"
        f"<p>Hypotheses formed on {rep['discovery_prompts']} prompts, checked on the other "
        f"{rep['held_out_prompts']}: <b>{rep['replicated_total']} of {rep['formed_total']} replicate</b> "
        f"(same sign, held-out interval excludes 0; about {rep['expected_by_chance_if_null']:.1f} would by "
        "chance if none were real).</p>"
        f"<h2>Differences</h2><p>thick: all prompts; thin: held-out half; ✓ replicated.</p>{plot(hyps)}"
        f"<h2>Hypotheses</h2>{table}</body></html>"
    )
