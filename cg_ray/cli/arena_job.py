"""`cg-ray arena CONFIG`: the arena job end to end (cg_ray.arena.job)."""

from __future__ import annotations

import argparse
from pathlib import Path


def _cmd_arena(args: argparse.Namespace) -> int:
    from cg_ray.arena.job import load_arena_config, run_arena

    config = load_arena_config(args.config)
    if args.output_dir is not None:
        config = config.model_copy(update={"output_dir": str(args.output_dir)})
    out = run_arena(config, overwrite=args.overwrite)
    print(f"-> {out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "arena",
        help="the arena variant end to end: ratings, a CG run per model, head-to-head concepts",
        description="Run jobs/arena.yaml-style configs locally or under `ray job submit`.",
    )
    p.add_argument("config", type=Path, help="arena job configuration (YAML), e.g. jobs/arena.yaml")
    p.add_argument("--overwrite", action="store_true", help="replace an existing run directory")
    p.add_argument("--output-dir", type=Path, default=None, help="override the config's output_dir")
    p.set_defaults(handler=_cmd_arena)
