"""Publishing a scope: RUN_DIR/scope/'s tables (gaps.parquet, coverage.parquet, rows.parquet) and summary.json
from a computed `ScopeResult`, merged with earlier scopes' other (benchmark, reference) pairs and published
atomically through the run's one writer (`run_scope`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from cg_ray import schemas as S
from cg_ray.artifacts.layout import SCOPE_COVERAGE, SCOPE_GAPS, SCOPE_ROWS, SCOPE_SUMMARY, RunDir
from cg_ray.scope import judge as J
from cg_ray.scope.run import (
    EXAMPLE_CHARS,
    EXAMPLES,
    THEMES_KEPT,
    ScopeRequest,
    ScopeResult,
    compute_scope,
)
from cg_ray.scope.uncovered import RowCoverage, RowTheme


def gaps_table(result: ScopeResult) -> pa.Table:
    parts = []
    for cmp in result.comparisons:
        t = cmp.table.rename(columns={"concept": "concept_id", "reference_rows": "reference_rows"}).copy()
        t = t[t["in_reference"] | t["missing"]]  # the rest says nothing about scope: not stored
        t.insert(0, "benchmark", cmp.benchmark)
        t.insert(1, "reference", cmp.reference)
        t.insert(2, "method", "reference")
        t["label"] = [result.labels.get(int(c)) for c in t["concept_id"]]
        t["firing_threshold"] = result.thresholds[t["concept_id"].to_numpy()]
        t["bench_n"] = cmp.n_bench
        t["reference_n"] = cmp.n_reference
        judged = result.judgements.get(cmp.benchmark)
        verdicts = [judged.verdicts.get(int(c)) if judged else None for c in t["concept_id"]]
        t["in_scope_judge"] = pd.Series([v.in_scope if v else None for v in verdicts], index=t.index, dtype=object)
        t["judge_reason"] = pd.Series([v.reason if v else None for v in verdicts], index=t.index, dtype=object)
        shown = [
            result.examples.get(int(c)) if g or v is not None else None
            for c, g, v in zip(t["concept_id"], t["gap"], verdicts, strict=True)
        ]  # the gaps' examples, and those a judge was shown
        t["examples"] = pd.Series(shown, index=t.index, dtype=object)
        theme_of = {m: th.representative for th in result.themes.get(cmp.benchmark, []) for m in th.members}
        t["theme"] = pd.Series([theme_of.get(int(c)) for c in t["concept_id"]], index=t.index, dtype=object)
        parts.append(t)
    df = pd.concat(parts, ignore_index=True)
    df = df.astype({"in_scope_judge": "object", "judge_reason": "object"})
    return pa.Table.from_pandas(df[S.SCOPE_GAPS_SCHEMA.names], schema=S.SCOPE_GAPS_SCHEMA, preserve_index=False)


def theme_examples(result: ScopeResult, theme: RowTheme, view: RowCoverage) -> list[str]:
    """The theme's reference rows most clearly uncovered (lowest density ratio), distinct texts."""
    rows = sorted(theme.reference_rows, key=lambda r: float(view.density_ratio[r]))
    shown: list[str] = []
    for r in rows:
        t = " ".join(result.texts[r].split())[:EXAMPLE_CHARS] if r < len(result.texts) else ""
        if t and t not in shown:
            shown.append(t)
        if len(shown) == EXAMPLES:
            break
    return shown


def rows_block(result: ScopeResult, benchmark: str) -> dict[str, Any] | None:
    """summary.json's row-level view of one comparison: the uncovered share (the headline), whether the
    region is confirmed held out, and its themes (at most `rule.themes`, confirmed first)."""
    view = result.rows.get(benchmark)
    if view is None:
        return None
    r = view.rule
    return {
        "rule": {"density": r.density, "region_ratio": r.region_ratio, "folds": r.folds, "seed": r.seed},
        "uncovered": view.uncovered.as_dict(),
        "confirmed": view.confirmed,
        "auc": view.fold_auc if np.isfinite(view.fold_auc) else None,
        "concepts_used": view.concepts_used,
        "themes": [
            {
                "concept": t.concept,
                "members": list(t.members),
                "label": result.labels.get(t.concept),
                "kind": t.kind,
                "confirmed": t.confirmed,
                "q_value": t.q_value,
                "measured_on_half": t.contrast.as_dict(),
                "reference_rows": len(t.reference_rows),
                "examples": theme_examples(result, t, view),
            }
            for t in view.themes
        ],
    }


def rows_table(result: ScopeResult) -> pa.Table:
    """scope/rows.parquet: each reference row of each comparison, its density ratio, and its theme."""
    parts: list[pd.DataFrame] = []
    ids = np.asarray(result.row_ids, dtype=object)
    for cmp in result.comparisons:
        view = result.rows.get(cmp.benchmark)
        if view is None:
            continue
        theme = np.full(ids.size, -1, dtype=np.int64)
        for t in reversed(view.themes):  # a row in two themes is shown in the one ranked first
            theme[list(t.reference_rows)] = t.concept
        ref = np.flatnonzero(np.isfinite(view.density_ratio) & view.is_reference)
        parts.append(
            pd.DataFrame(
                {
                    "benchmark": cmp.benchmark,
                    "reference": cmp.reference,
                    "row_id": ids[ref].astype(str),
                    "density_ratio": view.density_ratio[ref],
                    "uncovered": view.density_ratio[ref] <= view.rule.density,
                    "theme": pd.array([int(t) if t >= 0 else None for t in theme[ref]], dtype="Int64"),
                }
            )
        )
    if not parts:
        return S.SCOPE_ROWS_SCHEMA.empty_table()
    df = pd.concat(parts, ignore_index=True)
    return pa.Table.from_pandas(df[S.SCOPE_ROWS_SCHEMA.names], schema=S.SCOPE_ROWS_SCHEMA, preserve_index=False)


def summary_doc(req: ScopeRequest, result: ScopeResult, seconds: float) -> dict[str, Any]:
    cov = {str(r["benchmark"]): r for r in result.coverage.to_dict("records")}
    benches = []
    for cmp in result.comparisons:
        benches.append(
            {
                "benchmark": cmp.benchmark,
                "reference": cmp.reference,
                "rows": cmp.n_bench,
                "reference_rows": cmp.n_reference,
                "in_reference_use": cmp.n_in_reference,
                "gaps": int(cmp.table["gap"].sum()),
                "gaps_missing": int((cmp.table["gap"] & cmp.table["missing"]).sum()),
                "n_themes": len(result.themes.get(cmp.benchmark, [])),
                "themes": [
                    {
                        "representative": t.representative,
                        "members": list(t.members),
                        "label": result.labels.get(t.representative),
                        "reference_rows": t.reference_rows,
                        "bench_rows": t.bench_rows,
                    }
                    for t in result.themes.get(cmp.benchmark, [])[:THEMES_KEPT]
                ],
                "row_view": rows_block(result, cmp.benchmark),
                # each model's score on the reference's mix, where the benchmark has rows to weigh (reweight.py)
                "reweighted": rw.as_dict() if (rw := result.reweighted.get(cmp.benchmark)) else None,
                # what was read as the reference (augment's row view after reads them again: augment/rows_after.py)
                "reference_groups": req.reference_groups,
                "reference_files": [str(Path(p).resolve()) for p in req.reference_rows],
                "missing_share": float(cov[cmp.benchmark]["missing_share"]),
                "never_fires_share": float(cov[cmp.benchmark]["never_fires_share"]),
                "missing_bound": float(cov[cmp.benchmark]["missing_bound"]),
                "rule": req.rule.model_dump(),
            }
        )
        if cmp.benchmark in result.judgements:
            benches[-1]["judge"] = result.judgements[cmp.benchmark].as_dict()
    suite = dict(result.suite)
    suite["over_represented"] = [{**o, "label": result.labels.get(o["concept_id"])} for o in suite["over_represented"]]
    doc = {
        "run": str(req.run),
        "rule": req.rule.model_dump(),
        "decision": req.rule.in_words(),
        # how the rows were grouped for the tests (profile.groups), per rows file: the run's, then each reference's
        "groups": list(result.group_rules),
        "benchmarks": benches,
        "suite": suite,
        "seconds": round(seconds, 2),
    }
    if req.judge is not None:
        doc["judge"] = {**req.judge.who(), "usage": result.judge_usage}
    return doc


def _kept(old: pa.Table | None, keys: set[tuple[str, str]]) -> pa.Table | None:
    """The rows of an earlier scope table whose (benchmark, reference) this scope does not compare again."""
    if old is None:
        return None
    pairs = zip(old.column("benchmark").to_pylist(), old.column("reference").to_pylist(), strict=True)
    return old.filter(pa.array([(b, r) not in keys for b, r in pairs]))


def merged(
    run: RunDir, new_gaps: pa.Table, new_coverage: pa.Table, doc: dict[str, Any], new_rows: pa.Table | None = None
) -> tuple[pa.Table, pa.Table, dict[str, Any], pa.Table]:
    """This scope's tables and summary with the earlier scopes' (benchmark, reference) pairs it does not
    compare again: scoping GSM8K against MATH, then SocialIQA against BBQ, keeps both."""
    keys = {(b["benchmark"], b["reference"]) for b in doc["benchmarks"]}
    new_rows = new_rows if new_rows is not None else S.SCOPE_ROWS_SCHEMA.empty_table()
    earlier = run.read_json_if_present(SCOPE_SUMMARY)
    if earlier is None:
        return new_gaps, new_coverage, doc, new_rows
    tables = []
    # coverage holds every group read with the reference (its counts depend on the rows read): by reference
    references = set(new_coverage.column("reference").to_pylist())
    for name, new in ((SCOPE_GAPS, new_gaps), (SCOPE_COVERAGE, new_coverage), (SCOPE_ROWS, new_rows)):
        old = run.read_table(name) if run.has(name) else None
        if old is not None and name == SCOPE_COVERAGE:
            old = old.filter(pa.array([r not in references for r in old.column("reference").to_pylist()]))
        elif old is not None:
            old = _kept(old, keys)
        fits = old is not None and old.schema.names == new.schema.names
        tables.append(pa.concat_tables([old.cast(new.schema), new]) if fits and old is not None else new)
    kept = [b for b in earlier.get("benchmarks", []) if (b["benchmark"], b["reference"]) not in keys]
    return tables[0], tables[1], {**doc, "benchmarks": kept + doc["benchmarks"]}, tables[2]


def run_scope(req: ScopeRequest, judge_client: J.CompleterFactory | None = None) -> tuple[ScopeResult, dict[str, Any]]:
    """Compute the scope (every judge request answered) and only then publish RUN_DIR/scope/ (every file
    replaced atomically, the step recorded), keeping earlier scopes' other (benchmark, reference) pairs."""
    start = time.perf_counter()
    result = compute_scope(req, judge_client)
    doc = summary_doc(req, result, time.perf_counter() - start)
    reference = result.comparisons[0].reference
    coverage = pa.Table.from_pandas(
        result.coverage.assign(reference=reference)[S.SCOPE_COVERAGE_SCHEMA.names],
        schema=S.SCOPE_COVERAGE_SCHEMA,
        preserve_index=False,
    )
    run = RunDir(req.run)
    gaps, coverage, doc, rows = merged(run, gaps_table(result), coverage, doc, rows_table(result))
    run.update(
        "scope",
        {SCOPE_GAPS: gaps, SCOPE_COVERAGE: coverage, SCOPE_ROWS: rows, SCOPE_SUMMARY: doc},
        {
            "benchmarks": [c.benchmark for c in result.comparisons],
            "reference": reference,
            **({"judge": req.judge.who()} if req.judge is not None else {}),
        },
    )
    return result, doc
