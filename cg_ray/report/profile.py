"""The report's weakness-profile section and, when there is a validate.json, the held-out validation figure."""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from cg_ray import schemas as S
from cg_ray.artifacts.contract import ValidateReport, read_mapping
from cg_ray.artifacts.layout import RunDir
from cg_ray.report.beyond import q_text
from cg_ray.report.figures import LAYOUT

SERIES = (
    ("new", "weakness profile", "#d62728"),
    ("paper", "paper's X_model ranking", "#1f77b4"),
    ("random", "random concepts", "#7f7f7f"),
)


def _fmt(value: float | None, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return "—"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _interval(value: float | None, low: float | None, high: float | None, signed: bool = False) -> str:
    if value is None:
        return "—"
    bounds = f"[{_fmt(low, signed=signed)}, {_fmt(high, signed=signed)}]"
    return f"{_fmt(value, signed=signed)} <span class='ci'>{bounds}</span>"


def load_profile(run: Path, name: str = S.WEAKNESSES_FILE) -> list[dict[str, Any]]:
    table = RunDir(run).read_table(name)
    return table.to_pylist() if table is not None else []


def _heldout(e: dict[str, Any]) -> str:
    """The concept's cross-fitted residual and verdict: only concepts that were candidates have one."""
    value = e.get("residual_heldout")
    if value is None:
        return "—"
    figure = _interval(value, e.get("residual_heldout_low"), e.get("residual_heldout_high"), True)
    q = q_text(e.get("q_value"))
    verdict = f"<span class='ok'>✓ confirmed</span> {q}" if e.get("confirmed") else f"candidate, {q}"
    return f"{figure}<div class='ex'>{verdict}</div>"


def profile_table(entries: list[dict[str, Any]], examples_html: Callable[[int], str]) -> str:
    head = (
        "<tr><th>rank</th><th>concept</th><th>description</th><th>X_model [95% CI]</th>"
        "<th>adjusted gap [95% CI]</th><th>held-out residual [95% CI]</th><th>rows</th><th>n_eff</th>"
        "<th>benchmarks</th><th>merged</th></tr>"
    )
    body = []
    for e in entries:
        others = [m for m in e["members"] if m != e["concept_id"]]
        enrichment = "".join(f"<div class='ex'>{html.escape(m)}</div>" for m in e["metadata_enrichment"])
        label = e["label"] if e["label"] and e["label"] != e["description"] else ""
        body.append(
            f"<tr><td class='num'>{e['rank']}</td><td class='num'>{e['concept_id']}</td>"
            f"<td>{html.escape(e['description'] or '(no label)')}"
            + (f"<div class='ex'>label: {html.escape(label)}</div>" if label else "")
            + f"{enrichment}{examples_html(e['concept_id'])}</td>"
            f"<td class='num'>{_interval(e['X_model'], e['X_model_low'], e['X_model_high'])}</td>"
            f"<td class='num'>{_interval(e['adjusted_gap'], e['adjusted_gap_low'], e['adjusted_gap_high'], True)}</td>"
            f"<td class='num'>{_heldout(e)}</td>"
            f"<td class='num'>{e['n_rows']:,}</td><td class='num'>{_fmt(e['n_eff'], 1)}</td>"
            f"<td class='num'>{e['n_benchmarks']}</td><td>{', '.join(map(str, others)) or '—'}</td></tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


def weakness_section(run: Path, summary: dict[str, Any], top: int, examples_html: Callable[[int], str]) -> str:
    entries = load_profile(run)[:top]
    if not entries:
        return ""
    profile = summary.get("profile", {})
    cfg = summary["config"]
    order = {
        "upper_bound": "the upper end of X_model's 95% interval (most confidently weak first)",
        "adjusted_gap": "the upper end of the difficulty-adjusted gap's 95% interval",
        "x_model": "X_model (the paper's ranking)",
    }.get(profile.get("rank_by", "upper_bound"), "")
    note = (
        f"<p>Concepts the model is weak on, ranked by {order}; ties by effective support. Eligible: active in ≥ "
        f"{cfg['min_benchmarks']} benchmark(s) and ≥ {cfg['min_rows']} rows (a row exhibits a concept when "
        f"s̃ > 0). Concepts whose active-row sets have Jaccard ≥ {profile.get('duplicate_jaccard', 0.8):g} are "
        "merged into one entry (the best-supported shown; the others under <i>merged</i>). The adjusted gap is "
        "how much lower the concept's rows score than their benchmarks' mean (negative: worse than the "
        "benchmark's difficulty predicts). Held-out residual: for concepts that were candidates, the residual of "
        "their rows measured on folds they were not chosen on; <span class='ok'>✓ confirmed</span> when its q-value "
        "passes the run's FDR.</p>"
    )
    return f"<section><h2>Weakness profile</h2>{note}{profile_table(entries, examples_html)}</section>"


def strengths_section(run: Path, top: int, examples_html: Callable[[int], str]) -> str:
    entries = load_profile(run, S.STRENGTHS_FILE)[:top]
    if not entries:
        return ""
    return (
        f"<section><h2>Strengths (most confidently strong first)</h2>{profile_table(entries, examples_html)}</section>"
    )


def validate_figure(report: dict[str, Any]) -> go.Figure:
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=(
            "Held-out lift of the top-k concepts (mean score − benchmark mean)",
            "Low-performance curve (lower is better)",
        ),
    )
    curves = {
        "new": (report["lift"], report["low_performance"]["by_size"]),
        "paper": (report["baselines"]["paper"]["lift"], report["baselines"]["paper"]["low_performance"]["by_size"]),
        "random": (report["baselines"]["random"]["lift"], report["baselines"]["random"]["low_performance"]["by_size"]),
    }
    for key, name, color in SERIES:
        lift, by_size = curves[key]
        for col, points, xkey, ykey in ((1, lift, "k", "lift"), (2, by_size, "M", "value")):
            pts = [p for p in points if p.get(ykey, p.get("value")) is not None]
            y = [p.get(ykey, p.get("value")) for p in pts]
            fig.add_trace(
                go.Scatter(
                    x=[p[xkey] for p in pts],
                    y=y,
                    name=name,
                    legendgroup=key,
                    showlegend=col == 1,
                    line={"color": color},
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": [
                            (p["high"] - v) if p.get("high") is not None else 0 for p, v in zip(pts, y, strict=True)
                        ],
                        "arrayminus": [
                            (v - p["low"]) if p.get("low") is not None else 0 for p, v in zip(pts, y, strict=True)
                        ],
                        "thickness": 1,
                    },
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="k (top concepts)", row=1, col=1)
    fig.update_xaxes(title_text="profile size M'", row=1, col=2)
    fig.update_yaxes(title_text="lift", row=1, col=1)
    fig.update_yaxes(title_text="min mean held-out score", row=1, col=2)
    fig.update_layout(**{**LAYOUT, "height": 400})
    return fig


def validate_section(path: Path | None, figure_html: Callable[[Any], str]) -> str:
    if path is None or not path.is_file():
        return ""
    report = read_mapping(path, ValidateReport)  # refuses a newer format, naming the file
    split = report["split"]
    rows = []
    for key, name, _ in SERIES:
        lift = report["lift"] if key == "new" else report["baselines"][key]["lift"]
        lp = report["low_performance"] if key == "new" else report["baselines"][key]["low_performance"]
        cells = []
        for k in (1, 5, 10, 20):
            p = next((e for e in lift if e["k"] == k), None)
            v = None if p is None else p.get("lift", p.get("value"))
            cells.append(_interval(v, p and p.get("low"), p and p.get("high"), True) if p else "—")
        for n in (50, 100, 200, 500):
            p = next((e for e in lp["by_rows"] if e["N"] == n), None)
            cells.append(_interval(p["value"], p.get("low"), p.get("high")) if p else "—")
        rows.append(f"<tr><td>{name}</td>" + "".join(f"<td class='num'>{c}</td>" for c in cells) + "</tr>")
    head = (
        "<tr><th>ranking</th><th>lift@1</th><th>lift@5</th><th>lift@10</th><th>lift@20</th>"
        "<th>low-perf N'≥50</th><th>N'≥100</th><th>N'≥200</th><th>N'≥500</th></tr>"
    )
    note = (
        f"<p>Profile built on {split['n_fit']:,} rows, measured on {split['n_test']:,} held-out rows (stratified "
        f"by benchmark, seed {split['seed']}). Lift: mean held-out score of the rows exhibiting any of the top-k "
        "concepts minus those rows' benchmark means (negative: the profile finds rows the model fails). "
        "Intervals: 95% bootstrap over held-out rows; for random concepts, the 2.5–97.5 percentiles over draws.</p>"
    )
    return (
        f"<section><h2>Held-out validation</h2>{note}{figure_html(validate_figure(report))}"
        f"<table>{head}{''.join(rows)}</table>{null_check_html(report.get('null_check'))}</section>"
    )


def null_check_text(check: dict[str, Any] | None) -> str:
    """'Null check: scores permuted within task cells, 3 seeds: 0, 0, 0 confirmed findings' ('' without one).
    Counted: failure modes and concepts, as `cg-ray validate` prints it; slices on the permuted-within fields
    keep their real means, so confirming them there is no false discovery."""
    if not check or not check.get("confirmed"):
        return ""
    within = " × ".join(check.get("permuted_within") or [])
    where = f"within {within} cells" if within else "across the suite"
    counts = ", ".join(str(int(c.get("failure_modes", 0)) + int(c.get("concepts", 0))) for c in check["confirmed"])
    return f"Null check: scores permuted {where}, {len(check['confirmed'])} seeds: {counts} confirmed findings"


def null_check_html(check: dict[str, Any] | None) -> str:
    text = null_check_text(check)
    if not text:
        return ""
    return (
        f"<p><b>{html.escape(text)}</b> <span class='ex'>(failure modes and concepts found by the same "
        "cross-fitting on scores shuffled within those cells, where there is nothing beyond the metadata to find: "
        "each is a false discovery, so expect 0)</span></p>"
    )
