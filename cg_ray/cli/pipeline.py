"""`cg-ray run CONFIG [--resume]`: the main job (locally, or under `ray job submit`)."""

from __future__ import annotations

import argparse
from pathlib import Path


def _cmd_run(args: argparse.Namespace) -> int:
    from cg_ray.pipeline.config import load_run_config
    from cg_ray.pipeline.runner import RunOptions, run

    config = load_run_config(args.config)
    if args.output_dir is not None:
        config = config.model_copy(update={"output_dir": str(args.output_dir)})
    options = RunOptions(
        resume=args.resume, overwrite=args.overwrite, shard_rows=args.shard_rows, report=not args.no_report
    )
    run(config, options, config_source=str(args.config))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run",
        help="run a whole CG suite (generate, score, read, aggregate, report) as a Ray Data job",
        description="Run the suite described by CONFIG (see jobs/). Finished shards are kept in "
        "OUTPUT.partial/; after an interruption, --resume continues from them.",
    )
    p.add_argument("config", type=Path, help="run configuration (YAML), e.g. jobs/default.yaml")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run from its finished shards")
    p.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    p.add_argument("--output-dir", type=Path, default=None, help="override the config's output_dir")
    p.add_argument("--shard-rows", type=int, default=64, help="rows per resumable shard")
    p.add_argument("--no-report", action="store_true", help="skip report.html")
    p.set_defaults(handler=_cmd_run)
