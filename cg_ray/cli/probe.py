"""`cg-ray probe RUN_DIR`: new items for each gap of a run, checked, answered and judged (docs/probe.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cg_ray.cli.options import item_writer_settings
from cg_ray.errors import ConfigError


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
    p.add_argument("--fdr", type=float, help="Benjamini–Hochberg level across the gaps (default 0.05)")
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
    p.add_argument("--dry-run", action="store_true", help="print the plan (gaps, writers, requests, tokens) and stop")
    p.add_argument(
        "--fresh", action="store_true", help="discard an unfinished probe of this run instead of resuming it"
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="forget the run's earlier probes (default: keep the gaps they judged and this probe does not name)",
    )
    p.set_defaults(handler=_run)


def probe_config(args: argparse.Namespace) -> Any:
    """The ProbeConfig of the flags over --config's file, validated once; a bad value names its field."""
    from cg_ray.probe.config import ProbeConfig

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
    try:
        return ProbeConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise ConfigError(f"probe setting {where}: {first['msg']}") from None


TOO_FEW_AIM = 20  # checked pairs to ask for when suggesting --pairs (MIN_PAIRS is the floor, not a good test)


def _run(args: argparse.Namespace) -> int:
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.probe.plan import make_plan, plan_text
    from cg_ray.probe.run import run_probe
    from cg_ray.report.refresh import refresh_report

    plan = make_plan(args.run, probe_config(args))
    if args.dry_run:
        print(plan_text(plan))
        if kept := kept_text(plan, replace=args.replace):
            print(kept)
        return 0
    summary = run_probe(plan, fresh=args.fresh, replace=args.replace, say=print)
    print()
    this = (summary.get("probes") or [{}])[-1].get("probe")
    kept_shown = False
    for g in summary["gaps"]:  # this probe's gaps first, then those kept from earlier ones
        if g.get("probe") != this and not kept_shown:
            print("  kept from earlier probes of the run (judged again with this one):")
            kept_shown = True
        diff = "—" if g["difference"] is None else f"{g['difference']:+.3f}"
        if g["ci_low"] is not None:  # a too_few gap may have a difference but was not tested: no interval
            diff += f" [{g['ci_low']:+.3f}, {g['ci_high']:+.3f}]"
        print(f"  {g['gap_id']:<14} {g['verdict']:<10} target − control {diff} on {g['n_pairs']} pairs; {g['note']}")
        if g["verdict"] == "too_few" and (hint := too_few_hint(g)):
            print(f"  {'':<14} next: {hint}")
    for line in summary.get("changed") or []:
        print(f"  changed: {line}")
    print(f"requests: {json.dumps(summary['requests'])}; seconds: {json.dumps(summary['seconds'])}")
    print(f"wrote {args.run / 'probe'} (items.parquet, results.parquet, summary.json, export/)")
    if (report := refresh_report(RunDir(args.run))) is not None:  # the report shows "Gaps tested on new items"
        print(f"updated {report}")
    return 0


def kept_text(plan: Any, *, replace: bool) -> str:
    """The gaps of the run's earlier probes this one keeps and judges again ('' when none)."""
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.probe.history import read_earlier

    earlier = read_earlier(RunDir(plan.run), {g.gap_id for g in plan.gaps}, replace=replace)
    if not earlier.results:
        return ""
    gaps = ", ".join(f"{r['gap_id']} ({r['verdict']}, probe {r['probe']})" for r in earlier.results)
    return f"  kept from earlier probes and judged again with these (--replace forgets them): {gaps}"


def too_few_hint(gap: dict[str, Any]) -> str:
    """What to do when a gap got too few pairs, from where they were lost: the reader check (the items did not
    carry the gap's concepts) or before it (near copies, malformed, wrong references); '' when unknown."""
    written, checked, passed = (
        gap.get("pairs_written") or 0,
        gap.get("reader_checked") or 0,
        gap.get("reader_passed") or 0,
    )
    if checked and passed < checked / 2:
        more = f"--pairs {-(-TOO_FEW_AIM * written // passed)} aims at about {TOO_FEW_AIM}; " if passed else ""
        return (
            f"the reader saw the gap in {passed} of {checked} checked pairs ({passed / checked:.0%}) written by "
            f"{gap['generator']}: {more}a writer whose items carry it (--writer-endpoint) may do better"
        )
    lost = sum(gap.get(k) or 0 for k in ("near_copies", "malformed", "wrong_reference"))
    if lost:
        return (
            f"{lost} of {written} written pairs were dropped before the reader check (near copies, malformed, "
            "wrong references): raise --pairs"
        )
    return ""
