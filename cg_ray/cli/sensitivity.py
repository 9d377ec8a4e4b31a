"""`cg-ray sensitivity RUN_DIR --reader NAME ...`: do the run's findings hold under other readers?"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cg_ray.cli.options import add_command
from cg_ray.errors import ConfigError

MARKS = {"replicates": "✓", "partly": "~", "not found": "✗"}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(subparsers, "sensitivity", _sensitivity)
    p.add_argument("run", type=Path, help="a run directory (cg-ray run / cg-ray metrics) with rows.parquet")
    p.add_argument("--reader", action="append", default=[], required=True, help="another reader by name; repeatable")
    p.add_argument("--dry-run", action="store_true", help="say rows × readers and the time it will take; read nothing")
    p.add_argument("--fresh", action="store_true", help="read again the readers whose run is already there")
    p.add_argument("--ray-address", help="join this Ray cluster (default: RAY_ADDRESS, else a local one)")
    p.add_argument("--reader-factory", help="module:attr building the reader (tests: a stand-in)")
    p.add_argument("--batch-size", type=int, default=32, help="rows per reader batch")
    p.add_argument("--max-actors", type=int, default=1, help="reader actors at most (one per GPU on a cluster)")
    p.add_argument("--num-gpus", type=float, default=0.0, help="GPUs per reader actor")


def _config(args: argparse.Namespace) -> Any:
    from cg_ray.generation.config import StageResources
    from cg_ray.sensitivity.config import SensitivityConfig

    fields: dict[str, Any] = {
        "run": args.run,
        "readers": tuple(args.reader),
        "ray_address": args.ray_address,
        "fresh": args.fresh,
        "resources": StageResources(
            num_cpus=0.25,
            num_gpus=args.num_gpus,
            max_actors=args.max_actors,
            batch_size=args.batch_size,
            memory_gib=1.5,
        ),
    }
    if args.reader_factory:
        fields["reader_factory"] = args.reader_factory
    try:
        return SensitivityConfig(**fields)
    except ValidationError as exc:
        raise ConfigError(f"cg-ray sensitivity: {exc.errors()[0]['msg']}") from None


def _sensitivity(args: argparse.Namespace) -> int:
    """re-read a run's rows with other readers (SAEs) and say which findings replicate

    Each other reader re-reads the run's rows (scores, metadata and splits are the run's), its findings are
    judged again with the run's settings and seeds, and each confirmed finding of the run is marked
    replicates / partly / not found under each reader (docs/sensitivity.md). Writes RUN/sensitivity/."""
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.report.refresh import refresh_report
    from cg_ray.sensitivity.run import plan_sensitivity, run_sensitivity

    config = _config(args)
    if args.dry_run:
        print(f"cg-ray sensitivity (dry run): {plan_sensitivity(config).describe()}")
        return 0
    summary = run_sensitivity(config)
    _print(RunDir(args.run), summary)
    if (report := refresh_report(RunDir(args.run))) is not None:
        print(f"report: {report}")
    return 0


def _print(run: Any, summary: dict[str, Any]) -> None:
    from cg_ray.artifacts.layout import SENSITIVITY_FINDINGS, SENSITIVITY_PAIRS

    own = summary["reader"]["name"]
    print(f"sensitivity of {summary['run']} (read by {own}) in {summary['seconds']:.1f} s")
    print(f"  rule: {summary['rule']}")
    for pair in run.read_table(SENSITIVITY_PAIRS).to_pylist():
        rho = pair["spearman_X_model"]
        print(
            f"  {own} vs {pair['reader_b']}: {_pct(pair['shared_05'])} of latents matched at >= 0.5 "
            f"({pair['method']}), X_model rank correlation {_num(rho)} over {pair['n_matched']:,} matched concepts, "
            f"weakest concepts' rows overlap {_num(pair['top_rows_jaccard'])}"
        )
    findings = run.read_table(SENSITIVITY_FINDINGS).to_pylist()
    if not findings:
        print("  the run confirmed no finding: nothing to replicate")
        return
    by_key: dict[str, list[dict[str, Any]]] = {}
    for f in findings:
        by_key.setdefault(f["finding"], []).append(f)
    print("  confirmed findings, held under each reader (✓ replicates, ~ partly, ✗ not found):")
    for key, rows in by_key.items():
        marks = ", ".join(f"{r['reader']} {MARKS[r['status']]}" for r in rows)
        first = rows[0]
        print(f"    {key:<14} {first['n_rows']:>6} rows  holds under: {marks}  {first['description'][:70]}")


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"
