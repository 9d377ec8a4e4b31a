"""A rows.parquet as `cg-ray run` writes it, built without vLLM: the embedded probe suite (its metadata holds
the nested `facts`), answers that are wrong on two kinds, concepts read by the hashing fake, written with the
pipeline's own output schema; and the exports a user makes of it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

KINDS = ["arithmetic", "letter_count", "palindrome", "ordering", "logic"]
WEAK_KINDS = ("arithmetic", "ordering")  # every answer wrong: the slices find `kind`, never `facts`
PER_KIND = 24
D_SAE = 64


def write_product_rows(path: Path) -> pa.Table:
    from cg_ray.activations.packing import pack_concepts
    from cg_ray.benchmarks.probes import load_probes
    from cg_ray.benchmarks.sources import ProbesSource
    from cg_ray.pipeline.runner import output_schema
    from cg_ray.testing.fakes import HashingReader

    source = ProbesSource.model_validate({"kind": "probes", "per_kind": PER_KIND, "seed": 0, "kinds": KINDS})
    rows = list(load_probes(source))
    responses, scores, status = [], [], []
    for i, row in enumerate(rows):
        kind = json.loads(row["metadata"])["kind"]
        right = kind not in WEAK_KINDS and i % 5 != 0
        responses.append(row["reference"][0] if right else "I am not sure.")
        unscored = i % 17 == 0  # a judge failure: kept for coverage, no score
        scores.append(None if unscored else float(right))
        status.append("judge_failed" if unscored else "scored")
    texts = [f"{r['prompt']}\n\n{a}" for r, a in zip(rows, responses, strict=True)]
    packed = pack_concepts(HashingReader(d_sae=D_SAE).read(texts))
    table = pa.Table.from_arrays(
        [
            pa.array([r["row_id"] for r in rows], pa.string()),
            pa.array([r["benchmark"] for r in rows], pa.string()),
            pa.array(["smollm2-135m-instruct"] * len(rows), pa.string()),
            pa.array(scores, pa.float64()),
            packed.n_tokens,
            packed.concept_ids,
            packed.concept_acts,
            pa.array([r["prompt"] for r in rows], pa.string()),
            pa.array(responses, pa.string()),
            pa.array(status, pa.string()),
            pa.array([r["metadata"] for r in rows], pa.string()),
        ],
        schema=output_schema(D_SAE),
    )
    pq.write_table(table, path)
    return table


def jsonl_export(rows: Path) -> bytes:
    """`pandas.read_parquet(rows).to_json(orient="records", lines=True)`: every column, metadata as JSON text."""
    import pandas as pd

    return str(pd.read_parquet(rows).to_json(orient="records", lines=True)).encode()


def jsonl_export_with_objects(rows: Path) -> bytes:
    """The same rows with the metadata decoded into objects (as a script or `jq` writes them)."""
    records = pq.read_table(rows).to_pylist()
    return "".join(json.dumps({**r, "metadata": json.loads(r["metadata"])}) + "\n" for r in records).encode()


def csv_export(rows: Path) -> bytes:
    import pandas as pd

    return str(pd.read_parquet(rows).to_csv(index=False)).encode()
