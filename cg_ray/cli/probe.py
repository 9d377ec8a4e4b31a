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
        print(earlier_text(plan, replace=args.replace))
        return 0
    summary = run_probe(plan, fresh=args.fresh, replace=args.replace, say=print)
    print()
    for line in attempt_lines(summary):
        print(line)
    print(f"requests: {json.dumps(summary['requests'])}; seconds: {json.dumps(summary['seconds'])}")
    print(f"wrote {args.run / 'probe'} (items.parquet, results.parquet, summary.json, export/)")
    if (report := refresh_report(RunDir(args.run))) is not None:  # the report shows "Gaps tested on new items"
        print(f"updated {report}")
    return 0


def _attempt_text(g: dict[str, Any]) -> str:
    """'unsettled  target − control -0.100 [-0.300, +0.100] on 30 pairs; NOTE'."""
    diff = "—" if g.get("difference") is None else f"{g['difference']:+.3f}"
    if g.get("ci_low") is not None:  # a too_few gap may have a difference but was not tested: no interval
        diff += f" [{g['ci_low']:+.3f}, {g['ci_high']:+.3f}]"
    q = "" if g.get("q_value") is None else f", q={g['q_value']:.3g}"
    note = f"; {g['note']}" if g.get("note") else ""
    return f"{g['verdict']:<10} target − control {diff} on {g['n_pairs']} pairs{q}{note}"


def attempt_lines(summary: dict[str, Any]) -> list[str]:
    """Each gap this probe tested with its verdict, then its earlier attempts and standing verdict where it has
    them; then the gaps only earlier probes tested, at their standing verdict (cg_ray.probe.history)."""
    this = (summary.get("probes") or [{}])[-1].get("probe")
    rows = summary["gaps"]  # this probe's rows first, then every earlier attempt, newest first
    by_gap: dict[str, list[dict[str, Any]]] = {}
    for g in rows:
        by_gap.setdefault(g["gap_id"], []).append(g)
    lines, heading = [], False
    for gap_id, attempts in by_gap.items():
        latest, earlier = attempts[0], attempts[1:]
        if latest.get("probe") != this and not heading:
            lines.append("  gaps of earlier probes only (their verdicts are final):")
            heading = True
        lines.append(f"  {gap_id:<14} {_attempt_text(latest)}")
        if latest["verdict"] == "too_few" and latest.get("probe") == this and (hint := too_few_hint(latest)):
            lines.append(f"  {'':<14} next: {hint}")
        lines += [f"  {'':<14} probe {g.get('probe')}: {_attempt_text(g)}" for g in earlier]
        standing = latest.get("standing") or latest["verdict"]
        if earlier or standing != latest["verdict"]:
            by = next((g.get("probe") for g in reversed(attempts) if g["verdict"] == "confirmed"), latest.get("probe"))
            lines.append(f"  {'':<14} standing: {standing} (probe {by}, of {len(attempts)} attempts)")
    return lines


def earlier_text(plan: Any, *, replace: bool) -> str:
    """What the probe will be among the run's probes: its number, the share of fdr it spends, and the earlier
    probes' gaps (their verdicts final; --replace forgets their attempts, not their numbers)."""
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.probe.history import read_earlier, standing
    from cg_ray.probe.power import share

    earlier = read_earlier(RunDir(plan.run), replace=replace)
    number, fdr = earlier.next_probe(), plan.config.fdr
    text = (
        f"  probe {number} of this run: Benjamini–Hochberg at level {share(number) * fdr:.3g} "
        f"(share {share(number):.3g} of fdr {fdr:g}) over the {len(plan.gaps)} gap{'s' * (len(plan.gaps) != 1)} "
        "above, on their new pairs only"
    )
    if earlier.results:
        held = ", ".join(f"{gap} ({verdict}, probe {k})" for gap, (verdict, k) in standing(earlier.results).items())
        text += f"\n  earlier probes' gaps, verdicts final (--replace forgets their attempts): {held}"
    return text


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
