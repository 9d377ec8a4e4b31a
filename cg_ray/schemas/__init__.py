"""Column names and Arrow schemas of every artifact: the one place that defines the contracts."""

from __future__ import annotations

from typing import Final, Literal

import pyarrow as pa

from cg_ray.schemas.fields import LABEL_FIELD as LABEL_FIELD
from cg_ray.schemas.fields import floats as floats

# rows.parquet: one row per scored item.
ROW_ID: Final = "row_id"
BENCHMARK: Final = "benchmark"
MODEL: Final = "model"
SCORE: Final = "score"
N_TOKENS: Final = "n_tokens"
CONCEPT_IDS: Final = "concept_ids"
CONCEPT_ACTS: Final = "concept_acts"

# Parquet schema metadata key holding the SAE width (number of concepts).
D_SAE_METADATA_KEY: Final = b"cg_ray.d_sae"

ROWS_SCHEMA: Final = pa.schema(
    [
        pa.field(ROW_ID, pa.string(), nullable=False),
        pa.field(BENCHMARK, pa.string(), nullable=False),
        pa.field(MODEL, pa.string(), nullable=True),
        pa.field(SCORE, pa.float64(), nullable=True),
        pa.field(N_TOKENS, pa.int32(), nullable=False),
        pa.field(CONCEPT_IDS, pa.list_(pa.int32()), nullable=False),
        pa.field(CONCEPT_ACTS, pa.list_(pa.float32()), nullable=False),
    ]
)
REQUIRED_ROW_COLUMNS: Final = (ROW_ID, BENCHMARK, SCORE, CONCEPT_IDS, CONCEPT_ACTS)
# Read and validated when present; the metrics do not need them.
OPTIONAL_ROW_COLUMNS: Final = (MODEL, N_TOKENS)


# Optional rows.parquet column: the row's metadata as a JSON object string (flat string / number / bool values
# are analysed by `cg-ray describe`; nested values are kept but skipped there). Null when the row has none.
METADATA: Final = "metadata"
METADATA_FIELD: Final = pa.field(METADATA, pa.string(), nullable=True)


def rows_schema_with_d_sae(d_sae: int) -> pa.Schema:
    return ROWS_SCHEMA.with_metadata({D_SAE_METADATA_KEY: str(d_sae).encode()})


# Coverage classes, in order from least to most covered.
CoverageClass = Literal["missing", "under", "normal", "over"]
COVERAGE_CLASSES: Final[tuple[CoverageClass, ...]] = ("missing", "under", "normal", "over")


# Column groups of one type: the schemas below state a type and its nullability once per group, in column order.
def counts(*names: str) -> list[pa.Field]:
    """Non-null int64 columns: counts of rows."""
    return [pa.field(name, pa.int64(), nullable=False) for name in names]


def string_lists(*names: str, nullable: bool = False) -> list[pa.Field]:
    return [pa.field(name, pa.list_(pa.string()), nullable=nullable) for name in names]


def with_interval(name: str) -> list[pa.Field]:
    """An estimate and its 95% interval: `name`, `name_low`, `name_high`."""
    return floats(name, f"{name}_low", f"{name}_high")


# The columns most tables share: which concept, as read (label) and as described.
CONCEPT_ID_FIELD: Final = pa.field("concept_id", pa.int32(), nullable=False)
DESCRIPTION_FIELD: Final = pa.field("description", pa.string(), nullable=True)

# The 95% intervals of X_model and of the difficulty-adjusted gap (cg_ray.metrics.uncertainty, whose
# `Uncertainty` has an array of each name), beside the paper's columns in concepts.parquet and the profiles.
INTERVAL_COLUMNS: Final = ("X_model_low", "X_model_high", "adjusted_gap", "adjusted_gap_low", "adjusted_gap_high")
INTERVAL_FIELDS: Final = floats(*INTERVAL_COLUMNS)

# The in-sample residual (metadata-adjusted) gap over every row (cg_ray.profile.residual) and the fields it was
# adjusted for, beside the intervals in concepts.parquet and the profiles; null where undefined or when no
# analysis ran. Held-out residuals are `heldout_residual` (+ _low / _high) wherever they appear.
RESIDUAL_COLUMNS: Final = ("in_sample_residual", "in_sample_residual_low", "in_sample_residual_high")
RESIDUAL_FIELDS: Final = [*floats(*RESIDUAL_COLUMNS), *string_lists("adjusted_for", nullable=True)]

# concepts.parquet
CONCEPTS_SCHEMA: Final = pa.schema(
    [
        CONCEPT_ID_FIELD,
        LABEL_FIELD,
        pa.field("X_bench", pa.float64(), nullable=False),
        *floats("X_model"),
        pa.field("n_benchmarks_active", pa.int32(), nullable=False),
        *counts("n_active_rows"),
        pa.field("coverage_class", pa.string(), nullable=False),
        pa.field("is_model_gap", pa.bool_(), nullable=False),
        # Added beside the paper's columns (cg_ray.metrics.uncertainty): support and 95% intervals.
        *floats("n_eff"),
        *INTERVAL_FIELDS,
        *RESIDUAL_FIELDS,
    ]
)

# benchmark_concepts.parquet: only pairs with a positive activation sum.
BENCHMARK_CONCEPTS_SCHEMA: Final = pa.schema(
    [
        pa.field("benchmark", pa.string(), nullable=False),
        CONCEPT_ID_FIELD,
        pa.field("chi_bench", pa.float64(), nullable=False),
        *floats("chi_model"),
        *counts("n_active_rows"),
        pa.field("coverage_class", pa.string(), nullable=False),
        # Added beside the paper's columns: effective support and the 95% interval of chi_model.
        *floats("n_eff", "chi_model_low", "chi_model_high"),
    ]
)

# Held-out figures of a finding (cg_ray.profile.decision, docs/findings.md): chosen on one half of each of R
# grouped splits and tested, as the same rule, on the other; p_value / q_value are the splits' held-out
# p-values / within-split Benjamini-Hochberg q-values aggregated (twice the median split's), `confirmed` =
# q_value <= the run's fdr. `splits_selected`: how many splits chose it; n_heldout / n_clusters: the scored
# rows and row groups it was tested on (median split); `mde`: the effect it would be confirmed at with 80%
# power (the units of its estimate), null when no split could test it.
VERDICT_FIELDS: Final = [
    *floats("p_value", "q_value"),
    pa.field("confirmed", pa.bool_(), nullable=False),
    pa.field("splits_selected", pa.int32(), nullable=False),
    *counts("n_heldout", "n_clusters"),
    *floats("mde"),
]

# weaknesses.parquet, strengths.parquet, coverage_gaps.parquet: one row per reported concept, in rank order
# (cg_ray.profile). `members` are the near-duplicate concepts merged into the entry (itself included). The
# heldout_residual columns: the concept's cross-fitted residual (null unless it was a candidate in some fold).
PROFILE_SCHEMA: Final = pa.schema(
    [
        pa.field("rank", pa.int32(), nullable=False),
        CONCEPT_ID_FIELD,
        LABEL_FIELD,
        DESCRIPTION_FIELD,
        *floats("X_model"),
        *INTERVAL_FIELDS,
        *counts("n_rows"),
        *floats("n_eff"),
        *floats("firing_threshold"),  # where it fires (metrics.firing): the rule a probe's reader check applies
        pa.field("n_benchmarks", pa.int32(), nullable=False),
        pa.field("group", pa.int32(), nullable=False),
        pa.field("members", pa.list_(pa.int32()), nullable=False),
        *string_lists("metadata_enrichment", "example_row_ids"),
        *RESIDUAL_FIELDS,
        *string_lists("terms", nullable=True),  # distinctive terms of its rows
        *with_interval("heldout_residual"),
        *VERDICT_FIELDS,
    ]
)
# slices.parquet (cg_ray.profile.slices): the weakest conjunctions of metadata values, confirmed ones first.
# mean_score / low / high are held out; mean_in_sample is the mean over every scored row of the slice.
SLICES_SCHEMA: Final = pa.schema(
    [
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("slice", pa.string(), nullable=False),  # readable: "type=Geometry & level=Level 5"
        pa.field("conditions", pa.string(), nullable=False),  # JSON object field → value
        *counts("n_rows"),  # scored rows
        *floats("mean_score", "low", "high"),
        pa.field("mean_in_sample", pa.float64(), nullable=False),
        *floats("suite_mean"),  # what the held-out mean is compared with
        *with_interval("contrast"),  # held out: the slice's test-half mean − the half's other rows' (the verdict's)
        *VERDICT_FIELDS,
        *string_lists("example_row_ids"),
    ]
)
# failure_modes.parquet (cg_ray.profile.modes): groups of concepts whose rows score below their cells,
# confirmed ones first. heldout_residual (+ _low / _high) is held out; mean_score, expected_score and
# in_sample_residual describe every scored row of the mode. term_shares: the share of the mode's rows holding
# each term (unweighted); background_shares: the same over rows of the same metadata cells where it is off.
FAILURE_MODES_SCHEMA: Final = pa.schema(
    [
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("description", pa.string(), nullable=False),
        *string_lists("terms"),
        pa.field("term_shares", pa.list_(pa.float64()), nullable=False),
        pa.field("background_shares", pa.list_(pa.float64()), nullable=False),
        pa.field("concept_ids", pa.list_(pa.int32()), nullable=False),
        # The mode's rule: a row is the mode's when some member's activation reaches its threshold here
        # (a share of the concept's own high activations: weak tails do not count; metrics/firing.py).
        pa.field("firing_thresholds", pa.list_(pa.float64()), nullable=True),
        *counts("n_rows", "n_scored"),  # n_rows: rows where the rule holds
        *floats("mean_score", "expected_score"),  # expected: the mean of the rows' cell means
        *with_interval("heldout_residual"),
        *floats("in_sample_residual"),
        *VERDICT_FIELDS,
        *string_lists("adjusted_for", "example_row_ids"),  # the examples: a seeded draw of its failing rows
    ]
)
# The columns of descriptions.parquet the weakness profile reads (cg_ray.profile.descriptions): a table
# from elsewhere needs only these.
DESCRIPTIONS_READ_SCHEMA: Final = pa.schema(
    [CONCEPT_ID_FIELD, DESCRIPTION_FIELD, *string_lists("metadata_enrichment", nullable=True)]
)

# descriptions.parquet as `cg-ray describe` / `explain` write it (cg_ray.describe).
DESCRIPTIONS_SCHEMA: Final = pa.schema(
    [
        CONCEPT_ID_FIELD,
        pa.field("description", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),  # llm | label | enrichment | ngrams | none
        *string_lists("metadata_enrichment", "top_ngrams", "top_tokens"),  # ngrams: activating spans in this suite
        *floats("detection_score"),
        LABEL_FIELD,
        *string_lists("reasons"),  # why the concept was described
        *floats("X_model", "X_bench"),
        *counts("n_active_rows"),
        *floats("mean_score_active"),
        # JSON list: {row_id, benchmark, score, s_tilde, snippet, span_start, span_end} (span offsets in snippet)
        pa.field("examples", pa.string(), nullable=False),
    ]
)

# One row per (concept, candidate description) scored by detection.
EXPLANATIONS_SCHEMA: Final = pa.schema(
    [
        CONCEPT_ID_FIELD,
        pa.field("source", pa.string(), nullable=False),
        pa.field("description", pa.string(), nullable=False),
        *floats("detection_score", "fuzzing_score"),  # fuzzing: activating span vs other words marked
        # the chosen candidate's scores on the held-out half of the rows (the others: null); the two above are
        # on the half the candidates were compared on
        *floats("heldout_detection_score", "heldout_fuzzing_score"),
        # judgements: detection's positive / negative examples, fuzzing's (right + wrong markings), unparsed
        *(pa.field(name, pa.int32(), nullable=False) for name in ("n_positive", "n_negative", "n_fuzz", "n_unparsed")),
        pa.field("parse", pa.string(), nullable=False),  # json | text | failed (how the explanation was read)
        pa.field("raw_explanation", pa.string(), nullable=True),  # the model's answer (llm rows)
        pa.field("first_judgement", pa.string(), nullable=True),  # its first detection answer, as written
        pa.field("model", pa.string(), nullable=False),
        pa.field("seed", pa.int64(), nullable=False),
    ]
)

# diff.parquet (`cg-ray diff A B`): one row per concept active in either run; Δ = B − A on the paired rows.
DIFF_SCHEMA: Final = pa.schema(
    [
        CONCEPT_ID_FIELD,
        LABEL_FIELD,
        DESCRIPTION_FIELD,
        *counts("n_paired_active", "n_active_a", "n_active_b"),  # paired rows active in A or B, in A, in B
        *floats("X_model_a", "X_model_b"),  # on the paired rows
        *with_interval("delta_X_model"),
        # ΔX_model beyond the benchmarks' mean-score change (cg_ray.compare.bootstrap, "Relative change")
        *floats("relative_delta", "relative_low", "relative_high"),
        pa.field("direction", pa.string(), nullable=True),  # regressed | improved (confident, rank_by), else null
        pa.field("rank", pa.int32(), nullable=True),  # among the confident ones of its direction, 1 = first
        *floats("X_bench_a", "X_bench_b", "delta_X_bench"),  # each run's own suite (concepts.parquet)
    ]
)
# diff_benchmarks.parquet: Δχ_model per (benchmark, concept) over the paired rows where the concept is active.
DIFF_BENCHMARKS_SCHEMA: Final = pa.schema(
    [
        pa.field("benchmark", pa.string(), nullable=False),
        CONCEPT_ID_FIELD,
        *counts("n_paired_active"),
        *floats("chi_model_a", "chi_model_b"),
        *with_interval("delta_chi_model"),
    ]
)

# Run-directory file names.
ROWS_FILE: Final = "rows.parquet"
CONCEPTS_FILE: Final = "concepts.parquet"
BENCHMARK_CONCEPTS_FILE: Final = "benchmark_concepts.parquet"
SUMMARY_FILE: Final = "summary.json"
WEAKNESSES_FILE: Final = "weaknesses.parquet"
STRENGTHS_FILE: Final = "strengths.parquet"
COVERAGE_GAPS_FILE: Final = "coverage_gaps.parquet"
PROFILE_FILES: Final = (WEAKNESSES_FILE, STRENGTHS_FILE, COVERAGE_GAPS_FILE)
DESCRIPTIONS_FILE: Final = "descriptions.parquet"
THEMES_FILE: Final = "themes.json"  # `cg-ray describe`
EXPLANATIONS_FILE: Final = "explanations.parquet"  # `cg-ray explain`
MODE_EXPLANATIONS_FILE: Final = "mode_explanations.parquet"  # `cg-ray explain`: the failure modes' candidates
SLICES_FILE: Final = "slices.parquet"
FAILURE_MODES_FILE: Final = "failure_modes.parquet"
MANIFEST_FILE: Final = "manifest.json"
REPORT_FILE: Final = "report.html"
ROBUSTNESS_DIR: Final = "robustness"
# `cg-ray probe`: new items for each gap (cg_ray.probe). items: every item with its checks, answer and score;
# results: one row per gap probed with its verdict on the new items; export/: the verified items for other
# harnesses (items.jsonl, an lm-eval task group, an inspect_ai task).
PROBE_DIR: Final = "probe"
PROBE_ITEMS_FILE: Final = "items.parquet"
PROBE_RESULTS_FILE: Final = "results.parquet"
PROBE_SUMMARY_FILE: Final = "summary.json"
PROBE_EXPORT_DIR: Final = "export"
PROBE_EXPORT_NAME: Final = "cg_ray_probe"  # the exported task's name
PROBE_EXPORT_FILES: Final = {
    "items": "items.jsonl",
    "lm_eval": f"{PROBE_EXPORT_NAME}.yaml",
    "lm_eval_docs": f"{PROBE_EXPORT_NAME}_lmeval.py",
    "inspect": f"{PROBE_EXPORT_NAME}_inspect.py",
}
# `cg-ray scope` (cg_ray.scope): gaps: one row per (benchmark, reference, concept) compared, both firing shares
# with intervals and the verdicts (a new scope replaces the pairs it compares, keeps the others); coverage: per
# benchmark its rows and missing shares (χ_bench < ε as the paper counts it, no firing row, among live concepts).
SCOPE_DIR, SCOPE_GAPS_FILE, SCOPE_COVERAGE_FILE = "scope", "gaps.parquet", "coverage.parquet"
SCOPE_SUMMARY_FILE: Final = "summary.json"
# `cg-ray sensitivity` (cg_ray.sensitivity; its tables' schemas: cg_ray.sensitivity.tables): each other reader's
# run in readers/NAME/, findings: per (finding of the run, other reader) its status; pairs: per reader pair.
SENSITIVITY_DIR, SENSITIVITY_FINDINGS_FILE, SENSITIVITY_PAIRS_FILE = "sensitivity", "findings.parquet", "pairs.parquet"
SENSITIVITY_READERS_DIR: Final = "readers"
FOUND, PARTLY, NOT_FOUND = "found", "partly", "not found"  # on the same rows: not replication (format 1: replicates)
READER_STATUSES: Final = (FOUND, PARTLY, NOT_FOUND)
SCOPE_ROWS_FILE: Final = "rows.parquet"  # scope/rows.parquet: each reference row's density ratio and theme
# `cg-ray augment` (cg_ray.augment): every item written with its checks; per targeted concept, before → after the
# kept items; export/: the kept items in the benchmark's normalized format, as harness rows, and harness tasks.
AUGMENT_DIR, AUGMENT_EXPORT_DIR, AUGMENT_EXPORT_NAME = "augment", "export", "cg_ray_augment"
AUGMENT_ITEMS_FILE, AUGMENT_COVERAGE_FILE, AUGMENT_SUMMARY_FILE = "items.parquet", "coverage.parquet", "summary.json"
AUGMENT_EXPORT_FILES: Final = {
    "items": "items.jsonl", "harness": "harness.jsonl", "lm_eval": f"{AUGMENT_EXPORT_NAME}.yaml",
    "lm_eval_docs": f"{AUGMENT_EXPORT_NAME}_lmeval.py", "inspect": f"{AUGMENT_EXPORT_NAME}_inspect.py",
}  # fmt: skip
AUGMENT_ITEMS_SCHEMA: Final = pa.schema(
    [
        *(pa.field(n, pa.string(), nullable=False) for n in ("item_id", "benchmark")),
        pa.field("concept_id", pa.int64(), nullable=False),  # the in-scope gap the item was written for
        LABEL_FIELD,
        *(pa.field(n, pa.string(), nullable=False) for n in ("generator", "request_id")),
        pa.field("seed", pa.int64(), nullable=False),
        pa.field("prompt", pa.string(), nullable=False),
        pa.field("reference", pa.list_(pa.string()), nullable=False),
        pa.field("choices", pa.list_(pa.string()), nullable=True),
        pa.field("scorer", pa.string(), nullable=False),
        pa.field("reference_ok", pa.bool_(), nullable=True),  # null: not checked (format failed, or no check)
        pa.field("near_copy", pa.string(), nullable=True),  # what it copies
        pa.field("strength", pa.float64(), nullable=True),  # the concept's s̃ / its firing threshold (≥ 1: fires)
        pa.field("dropped", pa.string(), nullable=True),  # format | wrong_reference | near_copy | reader; null: kept
    ]
)
AUGMENT_COVERAGE_SCHEMA: Final = pa.schema(
    [
        pa.field("benchmark", pa.string(), nullable=False),
        pa.field("concept_id", pa.int64(), nullable=False),
        LABEL_FIELD,
        *counts("items_written", "items_kept", "items_firing"),
        *counts("bench_rows_before", "bench_rows_after", "bench_n_before", "bench_n_after"),
        *floats("bench_share_before", "bench_share_after", "reference_share"),
        *floats("ratio_before", "ratio_after", "q_value_before", "q_value_after"),
        # state: missing | gap | covered (scope's verdicts); class: χ_bench's coverage class in the benchmark
        *(pa.field(n, pa.string(), nullable=False) for n in ("state_before", "state_after")),
        *floats("chi_bench_before", "chi_bench_after"),
        *(pa.field(n, pa.string(), nullable=False) for n in ("class_before", "class_after")),
    ]
)
ROBUSTNESS_FILE: Final = "robustness.json"
ROBUSTNESS_CONCEPTS_FILE: Final = "robustness_concepts.parquet"
# An arena run: its own summary, the ratings, the head-to-head tables, and one run directory per model.
ARENA_FILE: Final = "arena.json"
RATINGS_DIR, RATINGS_JSON, RATINGS_PARQUET = "ratings", "ratings.json", "ratings.parquet"
PAIRWISE_FILE, HEAD_TO_HEAD_FILE, HEAD_TO_HEAD_JSON = "pairwise.parquet", "head_to_head.parquet", "head_to_head.json"
MODEL_CONCEPTS_FILE: Final = "model_concepts.parquet"
ARENA_MODELS_DIR: Final = "models"
VALIDATE_FILE: Final = "validate.json"
# The output directory of `cg-ray diff`.
DIFF_FILE, DIFF_BENCHMARKS_FILE = "diff.parquet", "diff_benchmarks.parquet"
DIFF_JSON, DIFF_HTML = "diff.json", "diff.html"
# Drop-in names of the official CG code's outputs.
OFFICIAL_COVERAGE_CSV: Final = "concept_cg_coverage_summary.csv"
OFFICIAL_SALIENCY_CSV: Final = "concept_saliency_details.csv"
OFFICIAL_SCORES_CSV: Final = "concept_scores.csv"

# The scope's table schemas live in their own module (this one stays under 400 lines).
from cg_ray.schemas import scope as _scope  # noqa: E402

SCOPE_GAPS_SCHEMA: Final = _scope.SCOPE_GAPS_SCHEMA
SCOPE_ROWS_SCHEMA: Final = _scope.SCOPE_ROWS_SCHEMA
SCOPE_COVERAGE_SCHEMA: Final = _scope.SCOPE_COVERAGE_SCHEMA
