"""The paper's figures as plotly figures, built from a run directory's artifacts."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
import pyarrow as pa
import pyarrow.compute as pc
from plotly.subplots import make_subplots

LAYOUT: dict[str, Any] = {
    "template": "plotly_white",
    "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
    "height": 360,
    "font": {"size": 12},
}


def _median_line(fig: go.Figure, median: float | None, **where: Any) -> None:
    if median is not None:
        fig.add_vline(x=median, line_color="crimson", line_dash="dash", annotation_text=f"median {median:.3f}", **where)


def coverage_histogram(concepts: pa.Table, epsilon: float) -> go.Figure:
    """Distribution of X_bench over the concepts that are present (log y, as in the paper)."""
    x = concepts["X_bench"].to_numpy()
    present = x[x >= epsilon]
    fig = go.Figure(go.Histogram(x=present, nbinsx=80, marker_color="#4c78a8"))
    missing = int((x < epsilon).sum())
    fig.update_layout(
        title=f"Benchmark coverage X_bench ({present.size:,} present, {missing:,} missing)",
        xaxis_title="X_bench",
        yaxis_title="concepts",
        yaxis_type="log",
        **LAYOUT,
    )
    return fig


def performance_histogram(concepts: pa.Table) -> go.Figure:
    x = concepts["X_model"].drop_null().to_numpy()
    fig = go.Figure(go.Histogram(x=x, nbinsx=50, marker_color="#54a24b"))
    _median_line(fig, float(np.median(x)) if x.size else None)
    fig.update_layout(
        title=f"Model performance X_model ({x.size:,} concepts with a score)",
        xaxis_title="X_model",
        yaxis_title="concepts",
        **LAYOUT,
    )
    return fig


def per_benchmark_histograms(pairs: pa.Table, benchmarks: list[str]) -> go.Figure:
    """χ_model per benchmark, small multiples with the median in red (paper Figs. 11 / 15)."""
    cols = min(3, max(1, len(benchmarks)))
    rows = -(-len(benchmarks) // cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=benchmarks, vertical_spacing=0.12 / max(1, rows - 1) * 2)
    for k, name in enumerate(benchmarks):
        sel = pairs.filter(pc.equal(pairs["benchmark"], name))
        x = sel["chi_model"].drop_null().to_numpy()
        r, c = k // cols + 1, k % cols + 1
        fig.add_trace(go.Histogram(x=x, nbinsx=30, marker_color="#72b7b2", showlegend=False), row=r, col=c)
        if x.size:
            fig.add_vline(x=float(np.median(x)), line_color="crimson", line_dash="dash", row=r, col=c)
    fig.update_layout(title="χ_model per benchmark (red: median)", **{**LAYOUT, "height": 260 * rows + 60})
    return fig


def missing_bar(summary: dict[str, Any]) -> go.Figure:
    names = [b["benchmark"] for b in summary["benchmarks"]]
    pct = [b["missing_pct"] for b in summary["benchmarks"]]
    fig = go.Figure(go.Bar(x=names, y=pct, marker_color="#e45756", text=[f"{p:.1f}%" for p in pct]))
    fig.update_layout(title="Concepts missing per benchmark", yaxis_title="% of concepts", **LAYOUT)
    return fig


def heatmap(matrix: list[list[float | None]], names: list[str], title: str, zmin: float, zmax: float) -> go.Figure:
    z = np.array([[np.nan if v is None else v for v in row] for row in matrix], dtype=float)
    text = [["—" if np.isnan(v) else f"{v:.2f}" for v in row] for row in z]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=names,
            y=names,
            zmin=zmin,
            zmax=zmax,
            colorscale="RdBu_r" if zmin < 0 else "Blues",
            text=text,
            texttemplate="%{text}",
            hovertemplate="%{y} × %{x}: %{text}<extra></extra>",
        )
    )
    fig.update_layout(title=title, **{**LAYOUT, "height": max(360, 40 * len(names) + 140)})
    fig.update_yaxes(autorange="reversed")
    return fig
