"""The held-out findings of a run as the REST API returns them: the verdict every failure mode, slice and
concept carries (cg_ray.profile.decision: the one decision rule), the `judgement` summary of how they were
judged, and the three profile responses of GET /v1/analyses/{id}/weaknesses. Apart from api_types so each
stays one job: these mirror failure_modes.parquet, slices.parquet and the profiles.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, Field

from cg_ray.serve.api_types import Example, _Open


class Verdict(BaseModel):
    """How a finding fared held out (docs/findings.md): a rule chosen on one half of each of R repeated grouped
    splits and tested, as the same rule, on the other half; one decision rule, `confirmed` ⇔ q_value ≤ the
    run's fdr. Null throughout for a run made before these checks."""

    p_value: float | None = Field(None, description="held-out p-value: the splits' aggregated (twice their median)")
    q_value: float | None = Field(
        None, description="the splits' within-split Benjamini-Hochberg q-values aggregated (twice their median)"
    )
    confirmed: bool | None = Field(
        None,
        description="q_value ≤ the run's fdr (the one decision rule; measured: realised FDR ≤ 2.5% at fdr 10% "
        "over 400 simulated suites per setting); false: a candidate, see mde",
    )
    splits_selected: int | None = Field(None, description="how many of the R splits chose it")
    n_heldout: int | None = Field(None, description="held-out scored rows it was tested on (the median split)")
    n_clusters: int | None = Field(None, description="row groups among them (the interval's clusters)")
    mde: float | None = Field(
        None,
        description="minimum detectable effect at 80% power: the effect it would be confirmed at, in the units "
        "of its estimate (failure modes: a residual; slices and concepts: the contrast); null when no split "
        "could test it",
    )
    measured: str | None = Field(
        None, description="in words: 'tested on 412 held-out rows (380 groups), chosen by 9 of 10 splits'"
    )
    power: str | None = Field(
        None, description="in words, for a candidate: the smallest effect this run could confirm ('' if confirmed)"
    )
    other_readers: str | None = Field(
        None,
        description="where `cg-ray sensitivity` compared it with other SAEs reading the same rows, scores and "
        "splits (robustness to the reader, not replication): each reader and whether it finds the same, "
        "'l20-seed7 ✓, l13 ~, l20-w2304 ✗' (✓ found, ~ partly, ✗ not found); null when the run has no "
        "sensitivity/ or this finding was not compared (slices: metadata rules every reader finds)",
    )


class ProfileEntry(Verdict):
    """One entry of a weakness profile (see docs/usage.md, run directory: weaknesses.parquet)."""

    rank: int
    concept_id: int
    label: str | None
    description: str | None
    X_model: float | None
    X_model_low: float | None
    X_model_high: float | None
    adjusted_gap: float | None
    adjusted_gap_low: float | None
    adjusted_gap_high: float | None
    n_rows: int
    n_eff: float | None
    n_benchmarks: int
    group: int
    members: list[int]
    metadata_enrichment: list[str]
    example_row_ids: list[str]
    in_sample_residual: float | None = Field(
        None, description="in sample: mean score − cell mean over every row of the concept (s̃-weighted)"
    )
    in_sample_residual_low: float | None = None
    in_sample_residual_high: float | None = None
    adjusted_for: list[str] | None = Field(None, description="the row fields whose cell means were subtracted")
    terms: list[str] | None = Field(None, description="distinctive terms of its rows against the suite")
    heldout_residual: float | None = Field(
        None, description="cross-fitted residual (only concepts that were candidates)"
    )
    heldout_residual_low: float | None = None
    heldout_residual_high: float | None = None


class SliceEntry(Verdict):
    """One row of slices.parquet: a conjunction of metadata values whose mean score is low; confirmed ones
    first. mean_score / low / high are held out."""

    rank: int
    slice: str
    conditions: dict[str, str]
    n_rows: int
    mean_score: float | None
    low: float | None
    high: float | None
    mean_in_sample: float | None = Field(None, description="mean score over every scored row of the slice")
    suite_mean: float | None = Field(
        None, description="what the held-out mean is compared with: the same split's held-out rows outside the slice"
    )
    example_row_ids: list[str]


class FailureModeEntry(Verdict):
    """One row of failure_modes.parquet: concepts firing on the same rows that score below their cells;
    confirmed ones first. heldout_residual (+ _low / _high) is held out; in_sample_residual is over every row."""

    rank: int
    description: str
    terms: list[str]
    term_shares: list[float] = Field([], description="share of the mode's rows holding each term")
    background_shares: list[float] = Field([], description="the same over its cells' rows where the mode is off")
    concept_ids: list[int]
    n_rows: int
    n_scored: int
    mean_score: float | None = Field(description="in sample: over every scored row of the mode")
    expected_score: float | None = Field(description="in sample: the mean of those rows' cell means")
    heldout_residual: float | None
    heldout_residual_low: float | None
    heldout_residual_high: float | None
    in_sample_residual: float | None = None
    adjusted_for: list[str]
    example_row_ids: list[str] = Field(description="a seeded random draw of its rows that score below their cell")
    examples: list[Example] = Field([], description="the example rows with benchmark, score and text")
    description_source: str | None = Field(None, description="terms, or llm after `cg-ray explain` won")
    detection_score: float | None = None


class MdeAtSize(BaseModel):
    n_rows: int = Field(description="a failure mode of this many rows")
    mde: float | None = Field(description="the residual it needs to be confirmed 80% of the time (a magnitude)")


class JudgementSummary(_Open):
    """summary.json's profile.beyond.judgement (`crossfit` before format 3): how findings were judged held out,
    and how many passed."""

    splits: int | None = Field(
        None,
        description="R: repeated grouped splits, each choosing findings on one half and testing them on the other "
        "(null: a run made before them, judged over `folds`)",
    )
    parts: int | None = Field(None, description="parts of grouped rows the splits are drawn from")
    fdr: float
    seed: int | None = None
    groups: dict[str, Any] = Field({}, description="how rows were grouped: rule, n_groups")
    decision: str | None = Field(None, description="the decision rule, in a sentence")
    interval: str | None = Field(None, description="what the intervals shown are, in a sentence")
    candidates: dict[str, int] = Field({}, description="family sizes: candidates tried, per kind")
    confirmed: dict[str, int] = Field(
        {}, description="confirmed, per kind (failure_modes, slices, slices_beyond_adjusted, concepts)"
    )
    mde_by_size: list[MdeAtSize] = Field([], description="the minimum detectable residual of a mode, by its size")
    skipped: str | None = Field(None, description="why nothing was judged (too few groups)")


class _ProfileBase(BaseModel):
    adjusted_for: list[str] | None = None
    rank_by: str | None
    duplicate_jaccard: float | None
    confidence: float | None
    total: int
    n_confirmed: int | None = Field(None, description="entries of the whole file confirmed held out")
    judged: str | None = Field(None, description="how findings were judged, in words ('' before held-out checks)")
    tried: str | None = Field(None, description="'61 candidates tried': the family's size, in words")
    judgement: JudgementSummary | None = Field(None, description="null: a run made before held-out checks")


class ProfileResponse(_ProfileBase):
    kind: Literal["weaknesses", "strengths", "coverage_gaps"]
    items: list[ProfileEntry]


class SlicesResponse(_ProfileBase):
    kind: Literal["slices"]
    items: list[SliceEntry]


class FailureModesResponse(_ProfileBase):
    kind: Literal["failure_modes"]
    items: list[FailureModeEntry]
    probe_gap: str = Field(
        "",
        description="the next step where rows cannot settle a mode: the first one to test on new items with "
        "matched controls (POST /v1/analyses/{id}/probe with gaps [it]); '' when every candidate is settled",
    )


ProfileView: TypeAlias = ProfileResponse | SlicesResponse | FailureModesResponse
"""GET /v1/analyses/{id}/weaknesses: one profile, by its `kind`."""
