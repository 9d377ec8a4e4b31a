"""`cg-ray arena CONFIG`: the arena job end to end (cg_ray.arena.job)."""

from __future__ import annotations

import argparse

from cg_ray.cli.options import add_command, add_job_options, job_config


def _cmd_arena(args: argparse.Namespace) -> int:
    """the arena variant end to end: ratings, a CG run per model, head-to-head concepts

    Run jobs/arena.yaml-style configs locally or under `ray job submit`."""
    from cg_ray.arena.job import load_arena_config, run_arena

    out = run_arena(job_config(load_arena_config(args.config), args), overwrite=args.overwrite)
    print(f"-> {out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "arena", _cmd_arena)
    add_job_options(p, "arena job configuration", "jobs/arena.yaml")
