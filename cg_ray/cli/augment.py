"""`cg-ray augment RUN_DIR --benchmark B`: new items in B's format for its in-scope gaps (docs/augment.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cg_ray.cli.options import add_command, item_writer_settings
from cg_ray.errors import ConfigError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(subparsers, "augment", _augment)
    p.add_argument("run", type=Path, help="a run directory on which `cg-ray scope` has run")
    p.add_argument("--benchmark", help="the benchmark to augment (one that scope compared to its reference)")
    p.add_argument("--reference", help="the reference scope compared it with (needed where scope used several)")
    p.add_argument("--gap", action="append", default=[], help="an in-scope gap of it, concept:ID; repeatable")
    p.add_argument(
        "--theme",
        action="append",
        type=int,
        default=[],
        help="a theme of uncovered rows, N as `cg-ray scope` numbers them (its concept targeted, the writer shown "
        "its reference rows); repeatable",
    )
    p.add_argument("--top", type=int, help="gaps targeted when none are named: the most confident first (default 5)")
    p.add_argument(
        "--items", type=int, help="items wanted per gap, before the near-copy and reader checks (default 20)"
    )
    p.add_argument("--seed", type=int)
    p.add_argument("--writer-endpoint", help="OpenAI-compatible base URL of the model that writes items")
    p.add_argument(
        "--writer-model",
        help="the writer's model: the name --writer-endpoint serves, or alone one --writer-backend runs",
    )
    p.add_argument("--writer-backend", choices=("vllm", "hf"), help="without --writer-endpoint (default vllm, on Ray)")
    p.add_argument("--writer-api-key-env", help="environment variable holding the writer endpoint's key")
    p.add_argument("--reference-check", choices=("answer", "executed", "none"), help="default answer")
    p.add_argument("--no-reader-check", action="store_true", help="keep items on which the concept does not fire")
    p.add_argument("--reader-factory", help="import path of the reader factory (default: the project's reader)")
    p.add_argument("--config", type=Path, help="a YAML file of augment settings (cg_ray.augment.config); flags win")
    p.add_argument("--dry-run", action="store_true", help="print the plan (gaps, items, requests) and stop")
    p.add_argument("--fresh", action="store_true", help="discard an unfinished augment of this run, not resume it")


def augment_config(args: argparse.Namespace) -> Any:
    """The AugmentConfig of the flags over --config's file, validated once; a bad value names its field."""
    from cg_ray.augment.config import AugmentConfig

    flags = {"benchmark": args.benchmark, "reference": args.reference, "top": args.top, "items": args.items,
             "seed": args.seed, "reference_check": args.reference_check,
             "reader_factory": args.reader_factory}  # fmt: skip
    data: dict[str, Any] = item_writer_settings(args, flags)
    if args.theme:
        data["themes"] = args.theme
    if not data.get("benchmark"):
        raise ConfigError("name the benchmark to augment: --benchmark B (one of those `cg-ray scope` compared)")
    try:
        return AugmentConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"augment setting {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _augment(args: argparse.Namespace) -> int:
    """Write new items in a benchmark's format for its in-scope gaps, checked, with its coverage before → after

    For each in-scope gap of --benchmark (the concepts `cg-ray scope` found a reference of real use confidently
    uses and the benchmark tests less; --gap concept:ID to name them, --theme N for the concept carrying the N-th
    theme of uncovered rows (the writer is shown that theme's reference rows), else the --top most confident), a writer
    (--writer-endpoint / --writer-model) writes --items items in the benchmark's own format. Items of the wrong
    format or with a wrong reference, near copies of the run's rows or of each other, and items on which the
    reader does not see the concept fire are dropped, each counted. The kept items are added to the
    benchmark's firing counts and compared to the same reference again: each gap's state before → after, the
    benchmark's in-scope coverage, and concepts pushed into over-representation. Writes RUN_DIR/augment/
    (items.parquet, coverage.parquet, summary.json, export/items.jsonl in the benchmark's normalized format, and
    harness tasks); the benchmark's own file is never edited. Resumable: rerun the same command."""
    from cg_ray.augment.plan import make_plan, plan_text
    from cg_ray.augment.run import run_augment, summary_lines

    plan = make_plan(args.run, augment_config(args))
    if args.dry_run:
        print(plan_text(plan))
        return 0
    summary = run_augment(plan, fresh=args.fresh, say=print)
    print()
    for line in summary_lines(summary):
        print(line)
    print(f"wrote {args.run / 'augment'} (items.parquet, coverage.parquet, summary.json, export/)")
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.report.refresh import refresh_report

    if (report := refresh_report(RunDir(args.run))) is not None:  # its scope section shows the items' coverage
        print(f"updated {report}")
    return 0
