"""The analyses a published run may hold beside its metrics, each read as a frozen object (`Run.probe`,
`Run.scope`, `Run.augment`, `Run.sensitivity`, `Run.robustness`): its summary through its
`cg_ray.artifacts.contract` model and its tables as DataFrames. An analysis is there when its summary is; its
tables are then required."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import pandas as pd
import pyarrow as pa

from cg_ray.artifacts import contract as C
from cg_ray.artifacts import layout as L
from cg_ray.artifacts.probe import read_probe_items, read_probe_results_table
from cg_ray.artifacts.renamed import sensitivity_findings
from cg_ray.errors import InputError

Doc = TypeVar("Doc", bound=C.Versioned)


@dataclass(frozen=True)
class Probe:
    """probe/ of `cg-ray probe` (docs/probe.md): every figure is measured on new items written for each gap,
    not on the run's rows, except `results`' run_effect / run_confirmed / run_rows, which repeat what the run
    reported."""

    summary: C.ProbeSummary
    # One row per gap per probe of it (`probe`: which attempt; `standing`: the gap's verdict over its attempts,
    # confirmed once any attempt confirmed it): gap_id, kind, description, concept_ids; on that probe's new
    # items n_pairs, target_mean, control_mean, difference with ci_low / ci_high, p_value, q_value, fdr_share,
    # verdict (confirmed / reversed / refuted / unsettled), mde and pairs_needed.
    results: pd.DataFrame
    # Every item written, dropped ones included with why (`dropped`): gap_id, pair_id, role (target /
    # control), prompt, reference, response, score.
    items: pd.DataFrame


@dataclass(frozen=True)
class Scope:
    """scope/ of `cg-ray scope` (docs/method.md, "Benchmark gaps in scope"): the suite's own rows against a
    reference; no held-out split is involved (each share is counted over all rows, with its exact interval)."""

    summary: C.ScopeSummary
    # One row per (benchmark, reference, concept) compared: bench_share and reference_share with their
    # intervals, ratio, p_value, q_value, and the verdicts `gap` / `missing` (columns: schemas.SCOPE_GAPS_SCHEMA).
    gaps: pd.DataFrame
    # Per benchmark and reference: rows and the missing shares (schemas.SCOPE_COVERAGE_SCHEMA).
    coverage: pd.DataFrame


@dataclass(frozen=True)
class Augment:
    """augment/ of `cg-ray augment` (docs/augment.md): items written for a benchmark's in-scope gaps and its
    coverage before → after the kept ones."""

    summary: C.AugmentSummary
    items: pd.DataFrame  # every item written; `dropped` null = kept (schemas.AUGMENT_ITEMS_SCHEMA)
    coverage: pd.DataFrame  # per targeted concept, *_before → *_after (schemas.AUGMENT_COVERAGE_SCHEMA)


@dataclass(frozen=True)
class Sensitivity:
    """sensitivity/ of `cg-ray sensitivity` (issues #51, #59): the run's rows re-read by other SAEs ("readers")
    and judged again with the run's scores and splits, so a finding that only one SAE's latents make shows as
    such (robustness to the reader, not replication: that takes fresh rows, `Run.probe`). Each reader's own run
    directory is under sensitivity/readers/NAME (`read_run` opens it)."""

    summary: C.SensitivitySummary  # the run's reader, per other reader its counts, the rule in words
    # One row per (finding of the run, other reader): kind, finding (mode:RANK / slice:RANK / concept:ID),
    # description, n_rows, reader, status (found / partly / not found), match (the other reader's confirmed
    # finding overlapping its rows most) with match_description, jaccard, jaccard_by_chance (a random set of the
    # match's size), covered, best_q / best_q_finding (the other reader's best candidate for rows like these),
    # own_estimate (the run's own estimate of its rows; not a verdict). A format 1 table reads under these names.
    findings: pd.DataFrame
    # One row per (the run's reader, other reader): method, layer_a/b, d_sae_a/b, shared_05/07/09 (share of A's
    # latents matched in B at that similarity), median_similarity, n_matched, spearman_X_model, spearman_X_bench,
    # top_rows_jaccard, confirmed_a, confirmed_b.
    pairs: pd.DataFrame


@dataclass(frozen=True)
class Robustness:
    """robustness/ of `cg-ray robustness --out RUN/robustness`: subsampling stds and the adversarial
    ablation's shifts (paper §4.2.3); in sample, over the run's own rows."""

    summary: C.RobustnessReport
    concepts: pd.DataFrame  # per concept: X_model_std, X_bench_std over the subsamples


def read_probe(run: L.RunDir) -> Probe | None:
    if not run.has(L.PROBE_SUMMARY):
        return None
    results = _frame(run, L.PROBE_RESULTS, read_probe_results_table(run))  # the probe's reader: columns checked
    items = _frame(run, L.PROBE_ITEMS, read_probe_items(run))
    return Probe(_doc(run, L.PROBE_SUMMARY, C.ProbeSummary), results, items)


def read_scope(run: L.RunDir) -> Scope | None:
    if not run.has(L.SCOPE_SUMMARY):
        return None
    return Scope(_doc(run, L.SCOPE_SUMMARY, C.ScopeSummary), _table(run, L.SCOPE_GAPS), _table(run, L.SCOPE_COVERAGE))


def read_augment(run: L.RunDir) -> Augment | None:
    if not run.has(L.AUGMENT_SUMMARY):
        return None
    summary = _doc(run, L.AUGMENT_SUMMARY, C.AugmentSummary)
    return Augment(summary, _table(run, L.AUGMENT_ITEMS), _table(run, L.AUGMENT_COVERAGE))


def read_sensitivity(run: L.RunDir) -> Sensitivity | None:
    if not run.has(L.SENSITIVITY_SUMMARY):
        return None
    summary = _doc(run, L.SENSITIVITY_SUMMARY, C.SensitivitySummary)
    findings = run.read_table(L.SENSITIVITY_FINDINGS)
    findings = None if findings is None else sensitivity_findings(findings)  # format 1 under the new names
    return Sensitivity(summary, _frame(run, L.SENSITIVITY_FINDINGS, findings), _table(run, L.SENSITIVITY_PAIRS))


def read_robustness(run: L.RunDir) -> Robustness | None:
    if not run.has(L.ROBUSTNESS_JSON):
        return None
    summary = _doc(run, L.ROBUSTNESS_JSON, C.RobustnessReport)
    return Robustness(summary, _table(run, L.ROBUSTNESS_CONCEPTS))


def read_optional(run: L.RunDir, name: str, model: type[Doc]) -> Doc | None:
    """JSON artifact `name` through `model`, None when the run has none (a newer format_version is refused)."""
    return _doc(run, name, model) if run.has(name) else None


def _doc(run: L.RunDir, name: str, model: type[Doc]) -> Doc:
    return C.read_document(run.file(name), model)


def _table(run: L.RunDir, name: str) -> pd.DataFrame:
    return _frame(run, name, run.read_table(name))


def _frame(run: L.RunDir, name: str, table: pa.Table | None) -> pd.DataFrame:
    if table is None:
        raise InputError(f"{name} is missing beside its analysis' summary.json", path=str(run.path))
    frame: pd.DataFrame = table.to_pandas()
    return frame
