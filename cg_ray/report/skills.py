"""The documents of the skills pages — report.html of `cg-ray skills` (the latent skills of a models × tasks
matrix) and of `cg-ray estimate --lomo` (active estimation against random sampling) — JSON-ready, drawn by the
explorer's app (cg_ray/serve/ui/skills.js) like every other view: the page only embeds them (html.page). The
CLI hands the pages to cg_ray.skills.outputs, which writes them with the tables: the skills analysis and the
report share no code (importlinter's independence contract), so nothing here imports cg_ray.skills."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import pandas as pd

from cg_ray.report.html import page

SKILLS_KIND = "skills"  # the views that draw them (serve/ui: EMBEDDED.skills, EMBEDDED.lomo)
LOMO_KIND = "lomo"
TARGET_RMSE = 0.01  # the estimator's target, the dashed line of the LOMO figure
PROFILES_TOP = 40  # models in the profiles figure, by mean factor score


def _cell(value: object) -> object:
    """A value as JSON holds it: a number stays a number (NaN: null), anything else is its text."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    if pd.api.types.is_bool(value):  # numpy's bool
        return bool(value)
    return None if pd.isna(value) else str(value)  # type: ignore[call-overload]


def table(frame: pd.DataFrame, title: str | None, digits: int = 3) -> dict[str, Any]:
    """A table as the page shows it: the frame's index first (headed by its name), then its columns; the
    values as they are, a float column shown to `digits` places."""
    columns: list[dict[str, object]] = [{"name": str(frame.index.name or ""), "digits": None}]
    for c in frame.columns:
        columns.append({"name": str(c), "digits": digits if pd.api.types.is_float_dtype(frame[c]) else None})
    rows = [[_cell(v) for v in row] for row in frame.itertuples(name=None)]  # the index first
    return {"title": title, "columns": columns, "rows": rows}


def _loadings_figure(loadings: pd.DataFrame, skills: list[str]) -> dict[str, Any]:
    order = loadings.sort_values(["main_skill", "main_loading"], ascending=[True, False])
    # concept tasks carry their SAE label: "c314 · 'world' | 'global'" reads better than "c314"
    labels = order["label"] if "label" in order else pd.Series("", index=order.index)
    names = [f"{t} · {str(lab)[:40]}" if lab else str(t) for t, lab in zip(order.index, labels, strict=True)]
    return {
        "title": "Loadings (varimax), tasks grouped by main skill",
        "rows": names,
        "columns": skills,
        "z": [[_cell(v) for v in row] for row in order[skills].to_numpy()],
    }


def _profiles_figure(profiles: pd.DataFrame, skills: list[str]) -> dict[str, Any]:
    shown = profiles.sort_values("mean_score", ascending=False).head(PROFILES_TOP)
    return {
        "title": f"Model skill profiles (regression factor scores; top {len(shown)} by mean score)",
        "labels": [str(m) for m in shown.index],
        "series": [{"name": s, "values": [_cell(v) for v in shown[s]]} for s in skills],
    }


def _warnings(summary: Mapping[str, Any]) -> list[str]:
    notes = summary["input"]
    out = list(notes["warnings"])
    if notes["dropped_constant_tasks"]:
        out.append(f"Constant tasks dropped: {', '.join(notes['dropped_constant_tasks'])}")
    if notes["imputed_cells"]:
        out.append(f"{len(notes['imputed_cells'])} missing cell(s) imputed with the task mean.")
    return out


def skills_view(
    summary: Mapping[str, Any], loadings: pd.DataFrame, profiles: pd.DataFrame, redundancy: pd.DataFrame, name: str
) -> dict[str, Any]:
    """The document of `cg-ray skills`' report.html: skills.json's counts, factor choice and input warnings,
    the loadings and profiles figures, and the loadings, redundancy, profile-from-k and stability tables."""
    skills = [s["skill"] for s in summary["skills"]]
    choice = summary["n_factors"]
    tables = [
        table(loadings, "Loadings"),
        table(redundancy, "Redundancy (IQ-test paper §7.1)"),
        table(
            pd.DataFrame(summary["profile_from_k"]).set_index("k"),
            "Profile a new model from k tasks (leave-one-model-out)",
        ),
    ]
    if "stability" in summary:
        stab = {k: v for k, v in summary["stability"].items() if not isinstance(v, dict)}
        tables.append(table(pd.Series(stab, name="value").astype(str).to_frame(), "Bootstrap stability over models"))
    return {
        "name": name,
        "title": "Latent skills",
        "n_models": summary["n_models"],
        "n_tasks": summary["n_tasks"],
        "source": str(summary["source"]),
        "factors": {
            "n_factors": choice["n_factors"],
            "source": choice["source"],
            "criteria": ", ".join(f"{k} {v}" for k, v in choice["criteria"].items()),
            "ledermann_bound": choice["ledermann_bound"],
        },
        "warnings": _warnings(summary),
        "loadings_figure": _loadings_figure(loadings, skills),
        "profiles_figure": _profiles_figure(profiles, skills),
        "tables": tables,
    }


def _lomo_figure(summary: pd.DataFrame) -> dict[str, Any]:
    series = []
    for method, g in summary.groupby("method"):
        g = g.sort_values("budget")
        points = [
            {"x": _cell(b * 100), "y": _cell(y), "low": _cell(lo), "high": _cell(hi)}
            for b, y, lo, hi in zip(g["budget"], g["rmse"], g["rmse_lo"], g["rmse_hi"], strict=True)
        ]
        # the span floor is a reference line, not an estimator
        series.append({"name": str(method), "reference": method == "span_floor", "points": points})
    return {
        "title": "Overall-score RMSE vs exhaustive, leave-one-model-out (95% bootstrap over models)",
        "x_title": "budget (% of rows)",
        "y_title": "RMSE",
        "target": TARGET_RMSE,
        # ticks at the budgets measured, on a log axis
        "budgets": [_cell(b) for b in sorted(set(summary["budget"] * 100))],
        "series": series,
    }


def estimate_view(summary: pd.DataFrame, meta: Mapping[str, object], name: str) -> dict[str, Any]:
    """The document of `cg-ray estimate --lomo`'s report.html: estimate.json's description, the RMSE of each
    method by budget with its interval, and lomo_summary.csv by budget."""
    return {
        "name": name,
        "title": "Active estimation vs random sampling",
        "description": str(meta.get("description", "")),
        "figure": _lomo_figure(summary),
        "tables": [table(summary.set_index("budget"), None, digits=4)],
    }


def skills_page(
    summary: Mapping[str, Any], loadings: pd.DataFrame, profiles: pd.DataFrame, redundancy: pd.DataFrame, name: str
) -> str:
    """report.html of `cg-ray skills` (its output folder: `name`)."""
    return page(skills_view(summary, loadings, profiles, redundancy, name), f"cg_ray skills — {name}", SKILLS_KIND)


def estimate_page(summary: pd.DataFrame, meta: Mapping[str, object], name: str) -> str:
    """report.html of `cg-ray estimate --lomo` (its output folder: `name`)."""
    return page(estimate_view(summary, meta, name), f"cg_ray estimate --lomo — {name}", LOMO_KIND)
