"""The tables of `cg-ray sensitivity` (sensitivity/ of a run; names in cg_ray.schemas).

findings.parquet: one row per (finding of the run, other reader): is there a confirmed finding of the other
reader whose flagged rows overlap it (Jaccard, and the share of the run's rows it covers), and the held-out
effect of the run's own rows under the other reader's splits. pairs.parquet: one row per (the run's reader,
other reader): latents shared, rank correlations of the matched concepts' X_model / X_bench, and the overlap
of the rows where each reader's weakest concepts fire.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa

from cg_ray.schemas import counts, floats, with_interval

FINDINGS_SCHEMA: Final = pa.schema(
    [
        pa.field("kind", pa.string(), nullable=False),  # failure_mode | slice | concept
        pa.field("finding", pa.string(), nullable=False),  # mode:RANK | slice:RANK | concept:ID (as `--gap` takes)
        pa.field("description", pa.string(), nullable=False),
        pa.field("n_rows", pa.int64(), nullable=False),  # rows the run's rule flags
        pa.field("reader", pa.string(), nullable=False),  # the other reader
        pa.field("status", pa.string(), nullable=False),  # replicates | partly | not found
        pa.field("match", pa.string(), nullable=True),  # the other reader's confirmed finding overlapping it most
        pa.field("match_description", pa.string(), nullable=True),
        *floats("jaccard", "covered"),  # covered: the share of the run's rows the match flags
        # the held-out effect of the run's own rows under the other reader's splits (as the run judges a mode)
        *with_interval("effect"),
        pa.field("effect_confirmed", pa.bool_(), nullable=False),
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
