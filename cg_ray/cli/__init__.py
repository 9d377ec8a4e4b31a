"""`cg-ray ...` entry points. Each subsystem registers its own subcommands (`register(subparsers)`);
heavy imports (torch, ray, vllm) happen inside the handlers, never at import time."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from cg_ray import __version__
from cg_ray.errors import CgRayError

# Modules exposing `register(subparsers)`; order is the order in `cg-ray --help`.
COMMAND_MODULES: tuple[str, ...] = (
    "cg_ray.cli.activations",
    "cg_ray.cli.preparation",
    "cg_ray.cli.metrics",
    "cg_ray.cli.pipeline",
    "cg_ray.cli.arena",
    "cg_ray.cli.arena_job",
    "cg_ray.cli.profile",
    "cg_ray.cli.diff",
    "cg_ray.cli.diff_models",
    "cg_ray.cli.report",
    "cg_ray.cli.describe",
    "cg_ray.cli.probe",
    "cg_ray.cli.scope",
    "cg_ray.cli.sensitivity",
    "cg_ray.cli.augment",
    "cg_ray.cli.skills",
    "cg_ray.cli.serve",
    "cg_ray.cli.example",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cg-ray",
        description="Competency gaps of language models and their benchmarks, from SAE concepts.",
    )
    parser.add_argument("--version", action="version", version=f"cg-ray {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


# Ray Data logs every operator's progress (about 40 lines) every 10 s where stdout is not a terminal: 384 of
# the demo's 440 lines. Once a minute keeps a long job's pulse; -v (or the variable, set) keeps Ray's pace.
RAY_PROGRESS_INTERVAL_ENV = "RAY_DATA_NON_TTY_PROGRESS_LOG_INTERVAL"
QUIET_RAY_PROGRESS_S = 60


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.verbose:  # read when Ray Data is imported, which no command has done yet
        os.environ.setdefault(RAY_PROGRESS_INTERVAL_ENV, str(QUIET_RAY_PROGRESS_S))
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    try:
        return int(args.handler(args) or 0)
    except CgRayError as exc:
        print(f"cg-ray {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"cg-ray {args.command}: interrupted", file=sys.stderr)
        return 130
