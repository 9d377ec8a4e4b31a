"""`cg-ray validate --rows rows.parquet --out DIR`: held-out validation of the weakness profile."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cg_ray.cli.options import add_command, ensure_output_free
from cg_ray.errors import ConfigError


def _seeds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--null-seeds must be a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"--null-seeds must be 0 (off) or more, got {value}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--test-fraction must be a number, got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"--test-fraction must be strictly between 0 and 1, got {value}")
    return value


def _fmt(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "—"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def _cmd_validate(args: argparse.Namespace) -> int:
    """held-out validation of the weakness profile (lift and low-performance curves vs baselines)

    Split rows into fit / test parts (stratified by benchmark, seeded, row groups kept whole), build the
    weakness profile on the fit part, and measure on the test part how low the profiled concepts' rows score:
    the new ranking, the paper's plain X_model ranking and random concepts side by side. The findings beyond
    the metadata are the run's own judgement of the same rows (the same groups, splits and rule as `cg-ray
    metrics`), and the null check reruns it on whole groups' scores permuted within the adjusted cells."""
    from cg_ray.artifacts.layout import RobustnessDir, RunDir
    from cg_ray.artifacts.publish import atomic_directory
    from cg_ray.artifacts.rows import load_row_table, open_rows
    from cg_ray.cli.metrics import metrics_config_from_args
    from cg_ray.profile.findings import ResidualPass
    from cg_ray.profile.groups import RowGroups
    from cg_ray.profile.judgement import judge, measure
    from cg_ray.profile.nullcheck import null_check
    from cg_ray.profile.validate import ValidateConfig, check_rows, validate
    from cg_ray.profile.validate_findings import beyond_block, recorded_block
    from cg_ray.report.refresh import refresh_report
    from cg_ray.schemas import VALIDATE_FILE

    if not 0.0 < args.test_fraction < 1.0:  # also checked by argparse; kept for programmatic callers
        raise ConfigError(f"--test-fraction must be strictly between 0 and 1, got {args.test_fraction}")
    run = RunDir.published(args.out)  # into a published run: a post-publish step of it
    ensure_output_free(run.file(VALIDATE_FILE) if run else args.out, args.overwrite)
    cfg = ValidateConfig(
        test_fraction=args.test_fraction,
        seed=args.seed,
        max_k=args.max_k,
        n_bootstrap=args.bootstrap,
        n_random=args.random,
        metrics=metrics_config_from_args(args),
    )
    rows = open_rows(args.rows, args.d_sae)
    table = load_row_table(rows, model=args.model)
    residuals = ResidualPass(rows, args.model, cfg.metrics)  # the run's groups and splits, from light columns
    plan = residuals.plan
    groups = RowGroups(plan.clusters, plan.rule, plan.n_groups)
    check_rows(table, cfg, groups)  # before the long part
    # The run's own judgement: read from the run it validates into when that run judged these rows with these
    # settings, else made the same way (its groups, splits and rule).
    beyond = recorded_block(run) if run is not None and _judged_these(run, args, cfg.metrics) else None
    if beyond is None:
        gathered = measure(rows, args.model, cfg.metrics, residuals=residuals).gathered
        beyond = beyond_block(judge(rows, args.model, gathered, cfg.metrics))
    report = validate(table, table.benchmark_codes, cfg, groups, beyond)
    if args.null_seeds:  # the whole judgement on scores with nothing left beyond the metadata
        report["null_check"] = null_check(rows, cfg.metrics, args.model, range(args.null_seeds), real=residuals)
    report["rows_file"] = str(args.rows)
    report["model"] = args.model
    if run is not None:
        run.update("validate", {VALIDATE_FILE: report}, {"rows_file": str(args.rows)})
        refresh_report(run)
    else:
        with atomic_directory(args.out, overwrite=args.overwrite) as tmp:
            RobustnessDir(tmp).write(VALIDATE_FILE, report)
    _print(report, RobustnessDir(args.out).file(VALIDATE_FILE))
    return 0


def _judged_these(run: Any, args: argparse.Namespace, metrics: Any) -> bool:
    """Whether the published `run` judged the rows validated here, with these metric settings."""
    from cg_ray.config import MetricsConfig

    summary = run.read_summary()
    same_rows = Path(args.rows).resolve() == run.rows.resolve()
    same_model = args.model == summary.get("model_filter")  # the model whose rows the run judged (None: all)
    return bool(same_rows and same_model and MetricsConfig.model_validate(summary.get("config") or {}) == metrics)


def _at(curve: list[dict[str, Any]], key: str, value: int) -> dict[str, Any] | None:
    return next((e for e in curve if e.get(key) == value), None)


def _print(report: dict[str, Any], path: Path) -> None:
    split = report["split"]
    print(f"fit {split['n_fit']:,} rows, test {split['n_test']:,} rows (seed {split['seed']}); -> {path}")
    series = {
        "new": (report["lift"], report["low_performance"]),
        "paper": (report["baselines"]["paper"]["lift"], report["baselines"]["paper"]["low_performance"]),
        "random": (report["baselines"]["random"]["lift"], report["baselines"]["random"]["low_performance"]),
    }
    print(f"{'ranking':<8} {'lift@5':>24} {'lift@20':>24} {'low-perf M>=10':>24}")
    for name, (lift, lp) in series.items():
        cells = []
        for i, entry in enumerate((_at(lift, "k", 5), _at(lift, "k", 20), _at(lp["by_size"], "M", 10))):
            if entry is None:
                cells.append("—")
                continue
            v = entry.get("lift", entry.get("value"))
            sign = i < 2
            cells.append(f"{_fmt(v, sign)} [{_fmt(entry.get('low'), sign)}, {_fmt(entry.get('high'), sign)}]")
        print(f"{name:<8} {cells[0]:>24} {cells[1]:>24} {cells[2]:>24}")
    beyond = report.get("beyond")
    if beyond:
        for line in beyond_lines(beyond):
            print(line)
    check = report.get("null_check")
    if check:
        print(null_check_line(check))


def beyond_lines(beyond: dict[str, Any]) -> list[str]:
    """The run's confirmed findings as validate.json's `beyond` block holds them."""
    from cg_ray.artifacts.renamed import judgement_in
    from cg_ray.report.findings import judged_text, q_text

    judged = judgement_in(beyond) or {}
    confirmed = judged.get("confirmed") or {}
    adjusted = ", ".join(beyond["adjusted_for"]) or "nothing"
    splits = judged.get("splits", "—")
    out = [
        f"beyond the metadata (the run's judgement, adjusted for {adjusted}): {judged_text(judged)}",
        f"confirmed: {confirmed.get('failure_modes', 0)} failure modes, {confirmed.get('slices', 0)} slices "
        f"({confirmed.get('slices_beyond_adjusted', 0)} beyond the adjusted fields), "
        f"{confirmed.get('concepts', 0)} concepts",
    ]

    def figures(entry: dict[str, Any], value: str, low: str, high: str) -> str:
        return (
            f"{_fmt(entry.get(value), True)} [{_fmt(entry.get(low), True)}, {_fmt(entry.get(high), True)}], "
            f"{q_text(entry.get('q_value'))}, chosen by {entry.get('splits_selected')} of {splits} splits"
        )

    held = ("heldout_residual", "heldout_residual_low", "heldout_residual_high")
    for m in beyond.get("failure_modes") or []:
        out.append(f"  mode {m['concept_ids']} {m['description']}: residual {figures(m, *held)}")
    for sl in beyond.get("slices") or []:
        out.append(f"  slice {sl['slice']}: vs the rest {figures(sl, 'contrast', 'contrast_low', 'contrast_high')}")
    for c in beyond.get("concepts") or []:
        side = "below" if c["direction"] == "less" else "above"
        out.append(f"  concept {c['concept']} ({side} its cells): {figures(c, *held)}")
    return out


def null_check_line(check: dict[str, Any]) -> str:
    """'null check: whole groups' scores permuted within type × level cells (identical prompts, 1,000 groups),
    3 seeds: 0, 0, 0 false findings (confirmed failure modes, concepts and slices on other fields; should be 0;
    slices on type, level alone stay real)'."""
    fields = check["permuted_within"]
    where = f"within {' × '.join(fields)} cells" if fields else "across the suite"
    groups = check.get("groups") or {}
    grouped = f" ({groups['rule']}, {groups['n_groups']:,} groups)" if groups.get("rule") else ""
    per_seed = ", ".join(str(r["false_findings"]) for r in check["confirmed"])
    kept = f"slices on {', '.join(fields)} alone stay real" if fields else ""
    return (
        f"null check: whole groups' scores permuted {where}{grouped}, {len(check['seeds'])} seeds: "
        f"{per_seed} false findings (confirmed failure modes, concepts and slices on other fields; should be 0"
        f"{'; ' + kept if kept else ''})"
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    from cg_ray.cli.metrics import add_metrics_options, add_rows_options

    p = add_command(subparsers, "validate", _cmd_validate)
    add_rows_options(
        p,
        "rows.parquet with a score on every row",
        "output directory for validate.json (atomic); a run directory gets it as a post-publish step",
    )
    p.add_argument("--test-fraction", type=_fraction, default=0.2, help="held-out fraction per benchmark (0.2)")
    p.add_argument("--seed", type=int, default=0, help="split, bootstrap and random-baseline seed (0)")
    p.add_argument("--max-k", type=int, default=20, help="lift for the top 1..K weaknesses (20)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for intervals (1000)")
    p.add_argument("--random", type=int, default=200, help="random concept profiles drawn as baseline (200)")
    p.add_argument(
        "--null-seeds",
        type=_seeds,
        default=3,
        help=(
            "null check: rerun the findings on whole groups' scores permuted within the adjusted cells this many "
            "times (3; 0: off)"
        ),
    )
    add_metrics_options(p)
