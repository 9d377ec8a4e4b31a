"""The tables of `cg-ray sensitivity` (sensitivity/ of a run; names in cg_ray.schemas).

findings.parquet: one row per (finding of the run, other reader): is there a confirmed finding of the other
reader whose flagged rows overlap it (Jaccard, beside the Jaccard a random set of that size would have, and
the share of the run's rows it covers), the other reader's best q among its candidates flagging rows like
these, and the run's own estimate of its rows. Format 2 (summary.json's format_version): format 1 said
`replicates` for `found` and held `effect` (+ _low / _high / _confirmed), the run's rows re-tested on the
halves that chose them; `cg_ray.artifacts.renamed.sensitivity_findings` reads it under the new names.
pairs.parquet: one row per (the run's reader, other reader): latents shared, rank correlations of the matched
concepts' X_model / X_bench, and the overlap of the rows where each reader's weakest concepts fire.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa

from cg_ray.schemas import counts, floats

FINDINGS_SCHEMA: Final = pa.schema(
    [
        pa.field("kind", pa.string(), nullable=False),  # failure_mode | slice | concept
        pa.field("finding", pa.string(), nullable=False),  # mode:RANK | slice:RANK | concept:ID (as `--gap` takes)
        pa.field("description", pa.string(), nullable=False),
        pa.field("n_rows", pa.int64(), nullable=False),  # rows the run's rule flags
        pa.field("reader", pa.string(), nullable=False),  # the other reader
        pa.field("status", pa.string(), nullable=False),  # found | partly | not found (schemas.READER_STATUSES)
        pa.field("match", pa.string(), nullable=True),  # the other reader's confirmed finding overlapping it most
        pa.field("match_description", pa.string(), nullable=True),
        # jaccard_by_chance: the Jaccard a random set of the match's size would have (hypergeometric expectation)
        *floats("jaccard", "jaccard_by_chance", "covered"),  # covered: the share of the run's rows the match flags
        # the smallest q of the other reader's candidates (confirmed or not) flagging rows like these (Jaccard or
        # coverage >= 0.5), and which: a near miss of a finding not found
        *floats("best_q"),
        pa.field("best_q_finding", pa.string(), nullable=True),
        # the run's own estimate of its rows (its splits' test halves, which chose the finding): not a verdict
        *floats("own_estimate"),
    ]
)
PAIRS_SCHEMA: Final = pa.schema(
    [
        pa.field("reader_a", pa.string(), nullable=False),  # the run's reader
        pa.field("reader_b", pa.string(), nullable=False),
        pa.field("method", pa.string(), nullable=False),  # decoder cosine (same layer) | activation correlation
        *counts("layer_a", "layer_b", "d_sae_a", "d_sae_b"),
        # share of A's live latents whose Hungarian match in B reaches 0.5 / 0.7 / 0.9, and the median match
        *floats("shared_05", "shared_07", "shared_09", "median_similarity"),
        *counts("n_matched"),  # matched pairs at >= 0.5 with X_model defined under both
        *floats("spearman_X_model", "spearman_X_bench"),
        *floats("top_rows_jaccard"),  # rows where the 10 weakest concepts fire, reader A vs reader B
        *counts("confirmed_a", "confirmed_b"),  # confirmed findings (failure modes, slices, concepts)
    ]
)
