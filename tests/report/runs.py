"""The synthetic run the report tests read: planted rows and labels, `cg-ray metrics` and `robustness`."""

from __future__ import annotations

from pathlib import Path

from cg_ray.cli import main
from cg_ray.synthetic import SyntheticSpec, write_synthetic_labels, write_synthetic_rows


def synthetic_run(tmp: Path) -> Path:
    """TMP/run: metrics (with labels) and robustness over 250 rows a benchmark, 300 concepts."""
    spec = SyntheticSpec(rows_per_benchmark=250, d_sae=300, nnz=16)
    rows = write_synthetic_rows(tmp / "rows.parquet", spec)
    labels = write_synthetic_labels(tmp / "labels.csv", spec)
    out = tmp / "run"
    assert main(["metrics", "--rows", str(rows), "--labels", str(labels), "--out", str(out), "--min-rows", "5"]) == 0
    assert main(["robustness", "--rows", str(rows), "--out", str(out / "robustness"), "--repeats", "3"]) == 0
    return out
