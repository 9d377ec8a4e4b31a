"""`cg-ray report RUN_DIR`."""

from __future__ import annotations

import argparse
from pathlib import Path

from cg_ray.cli.options import add_command
from cg_ray.describe.config import REPORT_TOP


def _cmd_report(args: argparse.Namespace) -> int:
    """Write RUN_DIR/report.html with the paper's figures, tables and example rows.

    Write a self-contained HTML report of a run directory: the explorer's app with the run's documents
    embedded (one file, no network)."""
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.report.html import build_report

    out = build_report(RunDir(args.run_dir), examples_per_concept=args.examples, top=args.top, validate=args.validate)
    print(f"report: {out} ({out.stat().st_size / 2**20:.1f} MiB, self-contained, works offline)")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "report", _cmd_report)
    p.add_argument("run_dir", type=Path, help="a run directory written by `cg-ray metrics` or `cg-ray run`")
    p.add_argument("--top", type=int, default=REPORT_TOP, help="concepts per best/worst table")
    p.add_argument("--examples", type=int, default=3, help="example rows per concept")
    p.add_argument(
        "--validate",
        type=Path,
        default=None,
        help="validate.json of `cg-ray validate` to show (default: RUN_DIR/validate.json when present)",
    )
