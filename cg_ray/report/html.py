"""Assemble report.html: figures, tables and examples from a run directory, self-contained and offline."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.artifacts.layout import ROBUSTNESS_JSON, RunDir
from cg_ray.artifacts.rows import open_rows
from cg_ray.describe.config import REPORT_TOP
from cg_ray.describe.outputs import read_sentences
from cg_ray.report import figures
from cg_ray.report.beyond import crossfit_of, failure_modes_section, slices_section
from cg_ray.report.examples import ExampleRow, salient_rows
from cg_ray.report.profile import load_profile, strengths_section, validate_section, weakness_section
from cg_ray.report.readable import readable_html

REPORT_FILE = S.REPORT_FILE
SNIPPET_CHARS = 220

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2937;color:#fff;padding:18px 32px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#cbd5e1}main{padding:8px 32px 48px;max-width:1200px}
section{background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:12px 20px;margin:18px 0}
h2{font-size:18px;margin:8px 0 12px}.grid{display:grid;grid-template-columns:1fr 1fr;gap:12px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #eee;padding:5px 8px;
text-align:left;vertical-align:top}th{background:#f3f4f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
.ex{color:#555;font-size:12px}.ex b{color:#111}
.shares{color:#444;font-size:12px;margin:2px 0}.kpis{display:flex;gap:24px;flex-wrap:wrap}
.kpi{min-width:140px}.kpi .v{font-size:22px;font-weight:600}.kpi .l{color:#666;font-size:12px}
details summary{cursor:pointer}mark{background:#fde68a;padding:0 1px}.ci{color:#666;font-size:11px}
h3{font-size:15px;margin:10px 0 6px}details.candidates summary h3{display:inline}
details.candidates table{opacity:.6}.none{color:#444}.ok{color:#15803d;font-weight:600}
"""


def _fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _esc(text: object) -> str:
    return html.escape(str(text))


def _figure_html(fig: Any) -> str:
    return str(fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False, "responsive": True}))


def _examples_html(examples: list[ExampleRow]) -> str:
    if not examples:
        return ""
    items = []
    for ex in examples:
        snippet = ""
        if ex.text:
            text = ex.text if len(ex.text) <= SNIPPET_CHARS else ex.text[:SNIPPET_CHARS] + "…"
            snippet = f" — {_esc(text)}"
        items.append(
            f"<div class='ex'><b>{_esc(ex.benchmark)}/{_esc(ex.row_id)}</b> score {_fmt(ex.score, 2)}, "
            f"s̃ {ex.activation:.3g}{snippet}</div>"
        )
    return "<details><summary>examples</summary>" + "".join(items) + "</details>"


def _concept_name(entry: dict[str, Any], described: dict[int, str]) -> str:
    """The `cg-ray describe` sentence when there is one (the raw label below it), else the label."""
    label = _esc(entry["label"] or "(no label)")
    sentence = described.get(int(entry["concept_id"]))
    return label if sentence is None else f"{_esc(sentence)}<div class='ex'>label: {label}</div>"


def _concept_table(
    entries: list[dict[str, Any]], examples: dict[int, list[ExampleRow]], described: dict[int, str]
) -> str:
    head = (
        "<tr><th>concept</th><th>description</th><th>X_model</th><th>X_bench</th><th>benchmarks</th><th>rows</th></tr>"
    )
    body = "".join(
        f"<tr><td class='num'>{e['concept_id']}</td><td>{_concept_name(e, described)}"
        f"{_examples_html(examples.get(e['concept_id'], []))}</td>"
        f"<td class='num'>{_fmt(e['X_model'])}</td><td class='num'>{_fmt(e['X_bench'])}</td>"
        f"<td class='num'>{e['n_benchmarks_active']}</td><td class='num'>{e['n_active_rows']:,}</td></tr>"
        for e in entries
    )
    return f"<table>{head}{body}</table>"


def _benchmark_table(summary: dict[str, Any]) -> str:
    head = (
        "<tr><th>benchmark</th><th>rows</th><th>scored</th><th>mean score</th><th>active concepts</th>"
        "<th>missing %</th><th>median χ_model</th></tr>"
    )
    body = "".join(
        f"<tr><td>{_esc(b['benchmark'])}</td><td class='num'>{b['n_rows']:,}</td>"
        f"<td class='num'>{b['n_scored_rows']:,}</td><td class='num'>{_fmt(b['mean_score'])}</td>"
        f"<td class='num'>{b['n_active_concepts']:,}</td><td class='num'>{b['missing_pct']:.1f}</td>"
        f"<td class='num'>{_fmt(b['median_chi_model'])}</td></tr>"
        for b in summary["benchmarks"]
    )
    return f"<table>{head}{body}</table>"


def _pair(left: Any, right: Any) -> str:
    return f'<div class="grid"><div>{_figure_html(left)}</div><div>{_figure_html(right)}</div></div>'


def _robustness_html(run_dir: Path) -> str:
    rob = RunDir(run_dir).read_json_if_present(ROBUSTNESS_JSON)  # refuses a newer format, naming the file
    if rob is None:
        return ""
    sub, abl = rob["subsampling"], rob["adversarial_ablation"]
    rc = abl["random_control"]
    return (
        "<section><h2>Robustness</h2>"
        f"<p>Subsampling ({sub['repeats']}× dropping {sub['drop_fraction']:.0%} of each benchmark): "
        f"mean per-concept std of X_model <b>{_fmt(sub['X_model_std_mean'], 4)}</b>, "
        f"of X_bench <b>{_fmt(sub['X_bench_std_mean'], 4)}</b>."
        f"</p><p>Ablation (baseline median X_model {abl['baseline_median_X_model']:.4f}): removing the "
        f"{abl['remove_best']['rows_removed']} rows most salient for the best concepts moves it "
        f"<b>{abl['remove_best']['median_shift']:+.4f}</b>, "
        f"for the worst <b>{abl['remove_worst']['median_shift']:+.4f}</b>; "
        f"random removals {rc['median_shift_mean']:+.4f} ± {rc['median_shift_std']:.4f}.</p></section>"
    )


def _headline(summary: dict[str, Any]) -> tuple[str, str]:
    """The key numbers (as KPI tiles) and the subtitle line of the report."""
    suite = summary["suite"]
    cfg = summary["config"]
    kpis = [
        (f"{summary['n_rows']:,}", "rows"),
        (str(suite["n_benchmarks"]), "benchmarks"),
        (f"{summary['d_sae']:,}", "concepts (d_sae)"),
        (f"{suite['missing_pct']:.1f}%", "missing from the suite"),
        (_fmt(suite["median_X_model"]), "median X_model"),
        (f"{suite['n_model_gaps']:,}", "model gaps"),
    ]
    kpi_html = "".join(f'<div class="kpi"><div class="v">{v}</div><div class="l">{lab}</div></div>' for v, lab in kpis)
    subtitle = (
        f"model {_esc(summary.get('evaluated_model') or '(from rows)')} · ε = {cfg['epsilon']:g} · classes at the "
        f"{cfg['low_percentile']:g}th / {cfg['high_percentile']:g}th percentiles · "
        f"cg_ray {_esc(summary['cg_ray_version'])}"
    )
    return kpi_html, subtitle


def _figures(summary: dict[str, Any], concepts: pa.Table, pairs: pa.Table) -> dict[str, Any]:
    names = summary["jaccard"]["benchmarks"]
    return {
        "coverage": figures.coverage_histogram(concepts, summary["config"]["epsilon"]),
        "performance": figures.performance_histogram(concepts),
        "per_benchmark": figures.per_benchmark_histograms(pairs, names),
        "missing": figures.missing_bar(summary),
        "jaccard": figures.heatmap(summary["jaccard"]["matrix"], names, "Jaccard overlap of active concepts", 0, 1),
        "correlation": figures.heatmap(
            summary["correlation"]["matrix"], names, "Correlation of χ_model across benchmarks", -1, 1
        ),
    }


def build_report(
    run_dir: str | Path, examples_per_concept: int = 3, top: int = REPORT_TOP, validate: str | Path | None = None
) -> Path:
    """RUN/report.html (a post-publish step of the run); shows RUN/validate.json (or the `validate` file
    given) when there is one."""
    run_files = RunDir(run_dir)
    run = run_files.path
    run_files.require(S.SUMMARY_FILE, S.CONCEPTS_FILE, S.BENCHMARK_CONCEPTS_FILE, S.ROWS_FILE)
    summary = run_files.read_summary()
    concepts = pq.read_table(run_files.file(S.CONCEPTS_FILE))
    pairs = pq.read_table(run_files.file(S.BENCHMARK_CONCEPTS_FILE))
    rankings = {k: v[:top] for k, v in summary["rankings"].items() if isinstance(v, list)}
    profiles = [
        e["concept_id"] for name in (S.WEAKNESSES_FILE, S.STRENGTHS_FILE) for e in load_profile(run, name)[:top]
    ]
    wanted = sorted({e["concept_id"] for entries in rankings.values() for e in entries} | set(profiles))
    described = read_sentences(run)
    examples = salient_rows(open_rows(run_files.rows), wanted, examples_per_concept, summary.get("model_filter"))

    cfg = summary["config"]
    filters = f"active in ≥ {cfg['min_benchmarks']} benchmark(s) and ≥ {cfg['min_rows']} rows"
    kpi_html, subtitle = _headline(summary)
    figs = _figures(summary, concepts, pairs)
    tables = [
        ("worst_model", f"Worst concepts by plain X_model (the paper's ranking; {filters})"),
        ("best_model", "Best concepts by plain X_model"),
        ("least_covered", "Least covered concepts (lowest non-missing X_bench)"),
        ("most_covered", "Most covered concepts"),
    ]
    crossfit = crossfit_of(summary)  # how the findings were judged held out (None: an older run)
    validate_path = Path(validate) if validate is not None else run_files.file(S.VALIDATE_FILE)

    def examples_of(concept: int) -> str:
        return _examples_html(examples.get(concept, []))

    sections = [
        f'<section><div class="kpis">{kpi_html}</div></section>',
        failure_modes_section(run, top, crossfit),  # what the metadata does not explain, first
        slices_section(run, top, crossfit),  # then what it does
        weakness_section(run, summary, top, examples_of),
        readable_html(run),  # `cg-ray describe`: the described concepts, right under the profile
        validate_section(validate_path, _figure_html),
        f"<section><h2>Benchmarks</h2>{_benchmark_table(summary)}</section>",
        "<section><h2>Benchmark gaps</h2>" + _pair(figs["coverage"], figs["missing"]) + "</section>",
        "<section><h2>Model gaps</h2>"
        + _figure_html(figs["performance"])
        + _figure_html(figs["per_benchmark"])
        + "</section>",
        strengths_section(run, top, examples_of),
        *(
            f"<section><h2>{title}</h2>{_concept_table(rankings[key], examples, described)}</section>"
            for key, title in tables
        ),
        "<section><h2>How the benchmarks relate</h2>" + _pair(figs["jaccard"], figs["correlation"]) + "</section>",
        _robustness_html(run),
    ]
    from plotly.offline import get_plotlyjs  # bundled with the plotly package: works offline

    page = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>cg_ray report — {_esc(run.name)}</title>'
        f'<style>{CSS}</style><script type="text/javascript">{get_plotlyjs()}</script></head><body>'
        f"<header><h1>Competency gaps — {_esc(run.name)}</h1><p>{subtitle}</p></header>"
        f"<main>{''.join(sections)}</main></body></html>"
    )
    run_files.update("report", {REPORT_FILE: page}, rebuild=False)
    return run_files.report
