"""`cg-ray probe RUN_DIR`: new items for each gap of a run, checked, answered and judged (docs/probe.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cg_ray.cli.options import item_writer_settings
from cg_ray.errors import ConfigError
from cg_ray.probe.api import TOO_FEW_AIM, attempt_lines, earlier_text, probe_run, probe_settings, too_few_hint

__all__ = ["TOO_FEW_AIM", "attempt_lines", "earlier_text", "probe_config", "register", "too_few_hint"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "probe",
        help="test a run's gaps on new items: targets and matched controls, read, answered and judged",
        description=(
            "For each gap of RUN_DIR (its failure modes, then its weak concepts; --gap to name them), write target "
            "items that exhibit it and matched controls without it (an OpenAI-compatible --writer-endpoint, or the "
            "programmatic families), drop near copies and pairs the reader does not see as the gap, have the model "
            "answer both (the run's own model, or --model-endpoint), and judge each gap on the new items: confirmed, "
            "refuted or unsettled (with the pairs needed). Writes RUN_DIR/probe/. Resumable: rerun the same command."
        ),
    )
    p.add_argument("run", type=Path, help="a run directory (cg-ray run / cg-ray metrics)")
    p.add_argument("--gap", action="append", default=[], help="a gap id (mode:RANK, concept:ID); repeatable")
    p.add_argument("--top", type=int, help="gaps probed when none are named (default 5)")
    p.add_argument("--pairs", type=int, help="pairs written per gap (default 40)")
    p.add_argument("--seed", type=int)
    p.add_argument(
        "--fdr",
        type=float,
        help="false-discovery rate over all of the run's probes (default 0.05): probe k spends the share 0.8, then "
        "0.2/(k(k-1)), of it (docs/probe.md)",
    )
    p.add_argument("--writer-endpoint", help="OpenAI-compatible base URL of the model that writes items")
    p.add_argument(
        "--writer-model",
        help="the writer's model: the name --writer-endpoint serves, or alone a model run through --writer-backend",
    )
    p.add_argument("--writer-backend", choices=("vllm", "hf"), help="without --writer-endpoint (default vllm, on Ray)")
    p.add_argument("--writer-api-key-env", help="environment variable holding the writer endpoint's key")
    p.add_argument(
        "--families", choices=("fallback", "only", "never"), help="programmatic item families (default fallback)"
    )
    p.add_argument("--reference-check", choices=("answer", "executed", "none"))
    p.add_argument("--no-reader-check", action="store_true", help="keep pairs the reader does not see as the gap")
    p.add_argument(
        "--model-endpoint", help="OpenAI-compatible base URL of the model that answers (default: the run's model)"
    )
    p.add_argument("--model", dest="model_name", help="the answering model's name (with --model-endpoint)")
    p.add_argument("--model-api-key-env", help="environment variable holding the answering endpoint's key")
    p.add_argument(
        "--config", type=Path, help="a YAML file of probe settings (cg_ray.probe.config.ProbeConfig); flags win"
    )
    p.add_argument(
        "--ledger",
        type=Path,
        help="the probe ledger's folder, which numbers each gap's probes across runs, copies and --overwrite "
        "(default $CG_RAY_LEDGER, else ~/.cache/cg_ray/probe_ledger)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan (gaps, writers, requests, tokens) and stop")
    p.add_argument(
        "--fresh", action="store_true", help="discard an unfinished probe of this run instead of resuming it"
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="forget the run's earlier probes' attempts (default: keep every attempt; either way earlier verdicts are "
        "never judged again and the probe numbers, which set each probe's share of --fdr, go on)",
    )
    p.set_defaults(handler=_run)


def probe_config(args: argparse.Namespace) -> Any:
    """The ProbeConfig of the flags over --config's file, validated once; a bad value names its field."""
    flags = {"top": args.top, "pairs": args.pairs, "seed": args.seed, "fdr": args.fdr, "families": args.families,
             "reference_check": args.reference_check}  # fmt: skip
    data: dict[str, Any] = item_writer_settings(args, flags)
    if args.model_endpoint or args.model_name:
        if not (args.model_endpoint and args.model_name):
            raise ConfigError("--model-endpoint and --model go together: the URL and the model it serves")
        endpoint = {"url": args.model_endpoint, "api_key_env": args.model_api_key_env}
        data["model"] = {
            "backend": "endpoint",
            "model": args.model_name,
            "endpoint": endpoint,
            "sampling": {"temperature": 0.0},
        }
    return probe_settings(data)


def _run(args: argparse.Namespace) -> int:
    config = probe_config(args)
    probe_run(
        args.run, config, fresh=args.fresh, replace=args.replace, dry_run=args.dry_run, ledger=args.ledger, say=print
    )
    return 0
