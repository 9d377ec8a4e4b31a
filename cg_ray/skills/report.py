"""Self-contained HTML pages for `cg-ray skills` and `cg-ray estimate --lomo` (plotly bundled: offline)."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from cg_ray.skills.analysis import SkillsSummary

LAYOUT: dict[str, Any] = {
    "template": "plotly_white",
    "margin": {"l": 140, "r": 20, "t": 50, "b": 60},
    "font": {"size": 12},
}
CSS = (
    "body{font-family:system-ui,sans-serif;margin:24px;max-width:1200px;color:#111}"
    "table{border-collapse:collapse;font-size:13px}th,td{border-bottom:1px solid #eee;padding:4px 8px;text-align:left}"
    "th{background:#f3f4f6}td.num{text-align:right;font-variant-numeric:tabular-nums}.warn{color:#b45309}"
)


def _figure(fig: Any) -> str:
    return str(fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False, "responsive": True}))


def _page(title: str, body: list[str]) -> str:
    from plotly.offline import get_plotlyjs

    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
        f"<h1>{html.escape(title)}</h1>{''.join(body)}</body></html>"
    )


def _table(frame: pd.DataFrame, digits: int = 3) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in [frame.index.name or "", *frame.columns])
    rows = []
    for idx, row in frame.iterrows():
        cells = [f"<td>{html.escape(str(idx))}</td>"]
        for v in row:
            if isinstance(v, float):
                cells.append(f"<td class='num'>{v:.{digits}f}</td>")
            else:
                cells.append(f"<td>{html.escape(str(v))}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def loadings_heatmap(loadings: pd.DataFrame, skills: list[str]) -> go.Figure:
    import plotly.graph_objects as go

    order = loadings.sort_values(["main_skill", "main_loading"], ascending=[True, False])
    # concept tasks carry their SAE label: "c314 · 'world' | 'global'" reads better than "c314"
    labels = order["label"] if "label" in order else pd.Series("", index=order.index)
    names = [f"{t} · {str(lab)[:40]}" if lab else str(t) for t, lab in zip(order.index, labels, strict=True)]
    fig = go.Figure(
        go.Heatmap(z=order[skills].to_numpy(), x=skills, y=names, colorscale="RdBu", zmid=0, zmin=-1, zmax=1)
    )
    fig.update_layout(
        title="Loadings (varimax), tasks grouped by main skill", height=max(300, 22 * len(order) + 120), **LAYOUT
    )
    return fig


def profiles_figure(profiles: pd.DataFrame, skills: list[str], top: int = 40) -> go.Figure:
    import plotly.graph_objects as go

    shown = profiles.sort_values("mean_score", ascending=False).head(top)
    fig = go.Figure([go.Bar(name=s, y=list(shown.index), x=shown[s], orientation="h") for s in skills])
    fig.update_layout(
        title=f"Model skill profiles (regression factor scores; top {len(shown)} by mean score)",
        barmode="group",
        height=max(320, 18 * len(shown) * max(1, len(skills)) // 2 + 120),
        yaxis={"autorange": "reversed"},
        **LAYOUT,
    )
    return fig


def skills_page(
    summary: SkillsSummary, loadings: pd.DataFrame, profiles: pd.DataFrame, redundancy: pd.DataFrame
) -> str:
    skills = [s["skill"] for s in summary["skills"]]
    choice = summary["n_factors"]
    notes = summary["input"]
    body = [
        f"<p>{summary['n_models']} models × {summary['n_tasks']} tasks from {html.escape(str(summary['source']))}; "
        f"<b>{choice['n_factors']}</b> factor(s) ({choice['source']}; criteria: "
        + ", ".join(f"{k} {v}" for k, v in choice["criteria"].items())
        + f"; Ledermann bound {choice['ledermann_bound']}).</p>",
        *[f"<p class='warn'>{html.escape(w)}</p>" for w in notes["warnings"]],
    ]
    if notes["dropped_constant_tasks"]:
        body.append(
            f"<p class='warn'>Constant tasks dropped: {html.escape(', '.join(notes['dropped_constant_tasks']))}</p>"
        )
    if notes["imputed_cells"]:
        body.append(f"<p class='warn'>{len(notes['imputed_cells'])} missing cell(s) imputed with the task mean.</p>")
    body += [_figure(loadings_heatmap(loadings, skills)), _figure(profiles_figure(profiles, skills))]
    body += ["<h2>Loadings</h2>", _table(loadings), "<h2>Redundancy (IQ-test paper §7.1)</h2>", _table(redundancy)]
    body += [
        "<h2>Profile a new model from k tasks (leave-one-model-out)</h2>",
        _table(pd.DataFrame(summary["profile_from_k"]).set_index("k")),
    ]
    if "stability" in summary:
        stab = {k: v for k, v in summary["stability"].items() if not isinstance(v, dict)}
        body += [
            "<h2>Bootstrap stability over models</h2>",
            _table(pd.Series(stab, name="value").astype(str).to_frame()),
        ]
    return _page("Latent skills", body)


def lomo_figure(table: pd.DataFrame) -> go.Figure:
    import plotly.graph_objects as go

    fig = go.Figure()
    for method, g in table.groupby("method"):
        g = g.sort_values("budget")
        fig.add_trace(
            go.Scatter(
                x=g["budget"] * 100,
                y=g["rmse"],
                mode="lines+markers",
                name=str(method),
                # the span floor is a reference line, not an estimator
                line={"dash": "dot", "color": "grey"} if method == "span_floor" else {},
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": g["rmse_hi"] - g["rmse"],
                    "arrayminus": g["rmse"] - g["rmse_lo"],
                },
            )
        )
    fig.add_hline(y=0.01, line_dash="dash", line_color="crimson", annotation_text="target 0.01")
    fig.update_layout(
        title="Overall-score RMSE vs exhaustive, leave-one-model-out (95% bootstrap over models)",
        xaxis_title="budget (% of rows)",
        yaxis_title="RMSE",
        xaxis_type="log",
        # ticks at the budgets measured, not plotly's log-axis minor ticks
        xaxis={"tickvals": sorted(set(table["budget"] * 100)), "ticksuffix": "%"},
        height=420,
        **LAYOUT,
    )
    return fig


def estimate_page(table: pd.DataFrame, meta: Mapping[str, object]) -> str:
    body = [
        f"<p>{html.escape(str(meta.get('description', '')))}</p>",
        _figure(lomo_figure(table)),
        _table(table.set_index("budget"), digits=4),
    ]
    return _page("Active estimation vs random sampling", body)
