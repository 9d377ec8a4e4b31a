"""`cg-ray example`: a seeded synthetic suite (cg_ray.synthetic) to try the metrics on in seconds."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from cg_ray.cli.options import add_command
from cg_ray.synthetic import SyntheticSpec, write_synthetic_labels, write_synthetic_rows

log = logging.getLogger(__name__)


def _cmd_example(args: argparse.Namespace) -> int:
    """write a seeded synthetic rows.parquet (demo input for `cg-ray metrics`)

    Write a seeded synthetic rows.parquet with known concept structure."""
    spec = SyntheticSpec(rows_per_benchmark=args.rows_per_benchmark, d_sae=args.d_sae, nnz=args.nnz, seed=args.seed)
    path = write_synthetic_rows(args.out, spec)
    if args.labels_out:
        write_synthetic_labels(args.labels_out, spec)
    log.info(
        "wrote %s: %d benchmarks × %d rows, d_sae %d, seed %d",
        path,
        len(spec.benchmarks),
        spec.rows_per_benchmark,
        spec.d_sae,
        spec.seed,
    )
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "example", _cmd_example)
    p.add_argument("--out", required=True, type=Path, help="rows.parquet to write")
    p.add_argument("--labels-out", type=Path, default=None, help="also write labels stating the planted truth")
    p.add_argument("--rows-per-benchmark", type=_positive, default=1500)
    p.add_argument("--d-sae", type=_positive, default=4608)
    p.add_argument("--nnz", type=_positive, default=32, help="concepts drawn per row")
    p.add_argument("--seed", type=int, default=0)
