"""Read a finished analysis' run directory: paginated concept table, concept detail, summary."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.artifacts.layout import ArenaDir, RunDir
from cg_ray.artifacts.renamed import RUN_COLUMNS, read_renamed
from cg_ray.describe.outputs import read_sentences
from cg_ray.report import comparisons, documents
from cg_ray.serve.api_types import (
    ArenaView,
    ConceptDetail,
    ConceptPage,
    Distributions,
    RunView,
    SubsetCoverage,
    SummaryView,
)
from cg_ray.serve.finding_types import FailureModesResponse, ProfileResponse, ProfileView, SlicesResponse

SortKey = Literal[
    "concept_id",
    "X_model",
    "X_bench",
    "n_active_rows",
    "n_benchmarks_active",
    "X_model_low",
    "X_model_high",
    "adjusted_gap",
    "adjusted_gap_high",
    "n_eff",
]
ProfileKind = Literal["weaknesses", "strengths", "coverage_gaps", "slices", "failure_modes"]
PROFILE_FILES = documents.PROFILE_FILES

PROFILE_VIEWS: dict[str, type[ProfileView]] = {"slices": SlicesResponse, "failure_modes": FailureModesResponse}
"""The response model of each profile kind that is not a concept profile (ProfileResponse)."""

DOWNLOADS = {
    "rows.parquet": S.ROWS_FILE,
    "concepts.parquet": S.CONCEPTS_FILE,
    "benchmark_concepts.parquet": S.BENCHMARK_CONCEPTS_FILE,
    "summary.json": S.SUMMARY_FILE,
    "concepts.csv": S.CONCEPTS_FILE,  # converted on request
    "benchmark_concepts.csv": S.BENCHMARK_CONCEPTS_FILE,
    S.OFFICIAL_COVERAGE_CSV: S.OFFICIAL_COVERAGE_CSV,
    S.OFFICIAL_SALIENCY_CSV: S.OFFICIAL_SALIENCY_CSV,
    S.OFFICIAL_SCORES_CSV: S.OFFICIAL_SCORES_CSV,
    S.WEAKNESSES_FILE: S.WEAKNESSES_FILE,
    S.STRENGTHS_FILE: S.STRENGTHS_FILE,
    S.COVERAGE_GAPS_FILE: S.COVERAGE_GAPS_FILE,
    S.SLICES_FILE: S.SLICES_FILE,
    S.FAILURE_MODES_FILE: S.FAILURE_MODES_FILE,
}


def _tables(run: RunDir) -> tuple[pa.Table, pa.Table]:
    return _read_tables(run.file(S.CONCEPTS_FILE), run.file(S.BENCHMARK_CONCEPTS_FILE))


@functools.lru_cache(maxsize=16)
def _read_tables(concepts: Path, pairs: Path) -> tuple[pa.Table, pa.Table]:
    # an older run's concepts.parquet under the new column names, as RunDir.read_table reads it
    return read_renamed(concepts, None, RUN_COLUMNS[S.CONCEPTS_FILE]), pq.read_table(pairs)


def summary(run: RunDir) -> SummaryView:
    return SummaryView.model_validate(documents.summary(run))


def view(run: RunDir, name: str) -> RunView:
    """Everything the explorer draws for the analysis: the documents a report of its run embeds. Cached per run
    and its state: summary.json's time stamp (`cg-ray describe` rewrites it) and manifest.json's (every step
    after publishing, `cg-ray sensitivity` or a scope among them, records itself there)."""
    manifest = run.manifest.stat().st_mtime if run.has(S.MANIFEST_FILE) else 0.0
    return _view(run.path, name, (run.summary.stat().st_mtime, manifest))


@functools.lru_cache(maxsize=8)
def _view(path: Path, name: str, stamp: tuple[float, float]) -> RunView:
    # Keyed by the run's path: a RunDir compares by identity, so each request's would miss the cache.
    return RunView.model_validate(documents.run_view(RunDir(path), name=name))


def concept_table(
    run: RunDir,
    *,
    sort: SortKey = "X_model",
    order: Literal["asc", "desc"] = "asc",
    coverage_class: str | None = None,
    benchmark: str | None = None,
    q: str | None = None,
    model_gaps_only: bool = False,
    scored_only: bool = False,
    limit: int = 50,
    offset: int = 0,
) -> ConceptPage:
    concepts, pairs = _tables(run)
    described = read_sentences(run)
    table = concepts.append_column(
        "description", pa.array([described.get(c) for c in concepts["concept_id"].to_pylist()], pa.string())
    )
    if coverage_class:
        table = table.filter(pc.equal(table["coverage_class"], coverage_class))
    if model_gaps_only:
        table = table.filter(table["is_model_gap"])
    if scored_only:
        table = table.filter(pc.is_valid(table["X_model"]))
    if benchmark:
        active = pairs.filter(pc.equal(pairs["benchmark"], benchmark))["concept_id"]
        table = table.filter(pc.is_in(table["concept_id"], value_set=active))
    if q:
        in_label = pc.fill_null(pc.match_substring(table["label"], q, ignore_case=True), False)
        in_description = pc.fill_null(pc.match_substring(table["description"], q, ignore_case=True), False)
        table = table.filter(pc.or_(in_label, in_description))
    # Nulls (undefined X_model) always sort last, whatever the order.
    table = table.sort_by([(sort, "ascending" if order == "asc" else "descending"), ("concept_id", "ascending")])
    total = table.num_rows
    page = table.slice(offset, limit).to_pylist()
    return ConceptPage.model_validate(
        {
            "total": total,
            "offset": offset,
            "limit": limit,
            "items": documents.clean(page),
        }
    )


def profile(run: RunDir, kind: ProfileKind = "weaknesses", limit: int = 50) -> ProfileView | None:
    """A profile file's entries in rank order, with the run's profile settings; None if the run has none."""
    found = documents.profile(run, kind, limit)
    return None if found is None else PROFILE_VIEWS.get(kind, ProfileResponse).model_validate(found)


def concept_detail(run: RunDir, concept_id: int, examples: int = 5) -> ConceptDetail | None:
    """The concept's row with its per-benchmark rows, best and worst examples and (if described) description."""
    found = documents.concept_details(run, [concept_id], examples).get(concept_id)
    return None if found is None else ConceptDetail.model_validate(found)


def distributions(run: RunDir) -> Distributions:
    """The values behind the explorer's histograms."""
    return Distributions.model_validate(documents.distributions(run))


def subset_coverage(run: RunDir, benchmarks: list[str]) -> SubsetCoverage | None:
    """X_bench (paper eq. 3) recomputed over a subset of the benchmarks, from the stored χ_bench values."""
    concepts, pairs = _tables(run)
    known = set(pc.unique(pairs["benchmark"]).to_pylist())
    unknown = sorted(set(benchmarks) - known)
    if unknown or not benchmarks:
        return None
    eps = run.read_summary()["config"]["epsilon"]
    sel = pairs.filter(pc.is_in(pairs["benchmark"], value_set=pa.array(benchmarks)))
    d_sae = concepts.num_rows
    import numpy as np

    x = np.bincount(sel["concept_id"].to_numpy(), weights=sel["chi_bench"].to_numpy(), minlength=d_sae) / len(
        benchmarks
    )
    missing = x < eps
    return SubsetCoverage(
        benchmarks=benchmarks,
        n_missing=int(missing.sum()),
        missing_pct=100.0 * float(missing.mean()),
        X_bench_present=x[~missing].tolist(),
    )


def arena_view(arena: ArenaDir, model_analyses: dict[str, str]) -> ArenaView:
    """An arena analysis as the explorer draws it — the document the arena's report.html embeds
    (cg_ray.report.comparisons.arena_view) — with each model's own analysis id."""
    return ArenaView.model_validate({**comparisons.arena_view(arena), "model_analyses": model_analyses})
