"""`cg-ray sensitivity RUN_DIR --reader NAME ...`: do the run's findings hold under other readers?"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cg_ray.cli.options import add_command
from cg_ray.errors import ConfigError


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
    """re-read a run's rows with other readers (SAEs) and say which findings each finds again

    Each other reader re-reads the run's rows (scores, metadata and splits are the run's), its findings are
    judged again with the run's settings and seeds, and each confirmed finding of the run is marked
    found / partly / not found under each reader, beside the overlap chance gives and the reader's best q for
    rows like these: robustness to the reader on the same rows, not replication, which takes fresh rows
    (cg-ray probe; docs/sensitivity.md). Writes RUN/sensitivity/."""
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
    from cg_ray.artifacts.layout import SENSITIVITY_PAIRS
    from cg_ray.report.sensitivity import sensitivity_view

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
    view = sensitivity_view(run)
    if view is None or not (view["findings"] or view["slices"]):
        print("  the run confirmed no finding: nothing to compare")
        return
    if view["findings"]:
        print(f"  failure modes and concepts under each reader ({view['marks']}; not replication):")
    for f in view["findings"]:
        under = "; ".join(_under(r) for r in f["readers"])
        print(f"    {f['finding']:<14} {f['n_rows']:>6} rows  {under}  {f['description'][:60]}")
    if view["total"] > len(view["findings"]):
        print(f"    … the first {len(view['findings'])} of {view['total']} (all: sensitivity/findings.parquet)")
    for r in view["readers"]:
        print(f"  {r['name']}: failure modes and concepts {r['statuses_text']}; slices {r['slices_text']} (metadata)")
    print(f"  replication: {view['fresh']}")


def _under(r: dict[str, Any]) -> str:
    """'l13 ✓ J 0.62 (0.04 by chance)' / 'l13 ✗ best q 0.081 (concept:12)' / 'l13 ✗ no candidate'."""
    if r.get("match") is not None and r["status"] != "not found":
        chance = "" if r.get("jaccard_by_chance") is None else f" ({_num(r['jaccard_by_chance'])} by chance)"
        return f"{r['reader']} {r['mark']} J {_num(r.get('jaccard'))}{chance}"
    if r.get("best_q") is None:
        return f"{r['reader']} {r['mark']} no candidate for these rows"
    return f"{r['reader']} {r['mark']} best q {r['best_q']:.3f} ({r['best_q_finding']})"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"
