"""`cg-ray run CONFIG [--resume]`: the main job (locally, or under `ray job submit`)."""

from __future__ import annotations

import argparse
from typing import Any

from cg_ray.cli.options import add_command, add_job_options, job_config


def _cmd_run(args: argparse.Namespace) -> int:
    """run a whole CG suite (generate, score, read, aggregate, report) as a Ray Data job

    Run the suite described by CONFIG (see jobs/). Finished shards are kept in OUTPUT.partial/; after an
    interruption, --resume continues from them."""
    from cg_ray.pipeline.api import run_suite
    from cg_ray.pipeline.config import load_run_config

    config = job_config(load_run_config(args.config), args)
    if args.dry_run:
        print(_dry_run(config))
        return 0
    out = run_suite(config, resume=args.resume, overwrite=args.overwrite, shard_rows=args.shard_rows,
                    report=not args.no_report, config_source=str(args.config))  # fmt: skip
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.cli.metrics import print_findings

    print_findings(RunDir(out))  # what the run confirmed held out, and the next step: as `cg-ray metrics` ends
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "run", _cmd_run)
    add_job_options(p, "run configuration", "jobs/default.yaml")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run from its finished shards")
    p.add_argument("--shard-rows", type=int, default=64, help="rows per resumable shard")
    p.add_argument("--no-report", action="store_true", help="skip report.html")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="load the suite and print the requests and tokens generation would send (an endpoint backend's "
        "requests in full); sends nothing, starts nothing, writes nothing",
    )


def _dry_run(config: Any) -> str:
    from cg_ray.benchmarks import load_suite

    rows, _ = load_suite(config.benchmarks)
    generation = config.generation
    if generation.backend == "endpoint":
        from cg_ray.generation.endpoint import dry_run

        return dry_run(rows, generation)
    pending = sum(1 for r in rows if r["score"] is None and r["response"] is None)
    return (
        f"dry run: nothing run. {pending:,} of {len(rows):,} rows would be answered by the {generation.backend} "
        f"backend ({generation.model}), at most {pending * generation.sampling.max_tokens:,} output tokens"
    )
