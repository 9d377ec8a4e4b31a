"""`cg-ray run CONFIG [--resume]`: the main job (locally, or under `ray job submit`)."""

from __future__ import annotations

import argparse

from cg_ray.cli.options import add_command, add_job_options, job_config


def _cmd_run(args: argparse.Namespace) -> int:
    """run a whole CG suite (generate, score, read, aggregate, report) as a Ray Data job

    Run the suite described by CONFIG (see jobs/). Finished shards are kept in OUTPUT.partial/; after an
    interruption, --resume continues from them."""
    from cg_ray.pipeline.config import load_run_config
    from cg_ray.pipeline.runner import RunOptions, run

    config = job_config(load_run_config(args.config), args)
    options = RunOptions(
        resume=args.resume, overwrite=args.overwrite, shard_rows=args.shard_rows, report=not args.no_report
    )
    run(config, options, config_source=str(args.config))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "run", _cmd_run)
    add_job_options(p, "run configuration", "jobs/default.yaml")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run from its finished shards")
    p.add_argument("--shard-rows", type=int, default=64, help="rows per resumable shard")
    p.add_argument("--no-report", action="store_true", help="skip report.html")
