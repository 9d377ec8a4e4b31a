"""`cg-ray metrics` and `cg-ray robustness`: recompute everything from rows.parquet, no model needed."""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cg_ray import schemas as S
from cg_ray.cli.options import add_command, add_labels_options, add_model_flags, ensure_output_free, from_args
from cg_ray.config import MetricsConfig, RobustnessConfig

if TYPE_CHECKING:
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.report.sensitivity import Sensitivity

log = logging.getLogger(__name__)


def metrics_config_from_args(args: argparse.Namespace) -> MetricsConfig:
    return from_args(MetricsConfig, args)


def add_metrics_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("metric options (defaults follow the paper)")
    add_model_flags(
        g,
        MetricsConfig,
        (
            ("epsilon", float),
            ("low_percentile", float),
            ("high_percentile", float),
            ("model_gap_epsilon", float),
            ("min_benchmarks", int),
            ("min_rows", int),
            ("top_k", int),
            ("coverage_mean", str),
            ("rank_by", str),
            ("duplicate_jaccard", float),
            ("adjust_for", str),
            ("slice_order", int),
            ("slice_min_rows", int),
            ("mode_jaccard", float),
            ("splits", int),
            ("fdr", float),
            ("split_seed", int),
        ),
    )


def add_rows_options(
    p: argparse.ArgumentParser,
    rows: str = "rows.parquet (see docs/usage.md: run directory)",
    out: str = "output directory (published atomically)",
) -> None:
    """The input rows.parquet (one evaluated model of it) and the output directory."""
    p.add_argument("--rows", required=True, type=Path, help=rows)
    p.add_argument("--out", required=True, type=Path, help=out)
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    p.add_argument("--d-sae", type=int, default=None, help="SAE width, if the file's metadata lacks it")
    p.add_argument("--model", default=None, help="evaluated model to keep, when the file holds several")


def _cmd_metrics(args: argparse.Namespace) -> int:
    """compute all CG metrics and artifacts from rows.parquet

    Compute χ/X coverage and performance, classes, rankings, overlap and the official CSVs from rows.parquet,
    into a run directory published atomically."""
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.artifacts.publish import atomic_directory
    from cg_ray.artifacts.rows import open_rows
    from cg_ray.run_outputs import publish_metrics

    config = metrics_config_from_args(args)
    started = time.perf_counter()
    rows = open_rows(args.rows, args.d_sae)
    labels = _labels(args, rows.d_sae)
    ensure_output_free(args.out, args.overwrite)
    extra = {"rows_file": str(args.rows), "model_filter": args.model, "evaluated_model": args.model}
    with atomic_directory(args.out, overwrite=args.overwrite) as tmp:
        building = RunDir(tmp)
        building.link(S.ROWS_FILE, args.rows)
        published = publish_metrics(building, config, labels, extra, model=args.model, rows=rows, record_timing=True)
    _print_summary(args.out, published.summary, time.perf_counter() - started)
    print_findings(RunDir(args.out))
    return 0


def _labels(args: argparse.Namespace, d_sae: int) -> Any:
    """--labels when given; else the labels shipped with the reader that the rows' extract manifest or run
    manifest names, if its SAE's weights still have the recorded fingerprint. One line says which, or why none."""
    from cg_ray.activations.saes.labels import labels_for_rows
    from cg_ray.labels import load_labels

    if args.labels:
        return load_labels(args.labels, args.labels_source, d_sae)
    labels, reason = labels_for_rows(args.rows, d_sae)
    print(f"labels: {reason}" if labels is not None else f"no labels: {reason}; name a file with --labels")
    return labels


def print_findings(run: RunDir) -> None:
    """The run's findings judged held out (failure modes, slices, the weakness profile) and the next step where
    the rows cannot settle one; `cg-ray metrics` and `cg-ray run` end with it."""
    import pyarrow.parquet as pq

    from cg_ray.artifacts.renamed import judgement_of
    from cg_ray.report.findings import judged_text, probe_command
    from cg_ray.report.sensitivity import read_sensitivity

    judged = judgement_of(run.read_json_if_present(S.SUMMARY_FILE))
    holds = _holds(read_sensitivity(run))  # where `cg-ray sensitivity` ran: each finding under the other readers
    if judged:
        print(f"findings (failure modes, slices, concepts) {judged_text(judged)}")
        print(f"  confirmed: {_confirmed_counts(judged)}")
        if power := _power_line(judged):
            print(f"  {power}")
    modes = run.file(S.FAILURE_MODES_FILE)
    if modes.is_file() and (entries := pq.read_table(modes).to_pylist()):
        adjusted = ", ".join(entries[0]["adjusted_for"]) or "nothing: the suite mean"
        print(
            f"failure modes beyond the metadata (adjusted for {adjusted}; held-out residual [interval: below 0 "
            "whenever confirmed], rows):"
        )
        what = ("failure mode", "failure_modes", S.FAILURE_MODES_FILE)
        _print_judged(entries, what, judged, _mode_line, holds("failure_modes"))
        if command := probe_command(str(run.path), entries):
            print(
                f"  next: test it on new items with matched controls: {command}  (--dry-run: the plan; docs/probe.md)"
            )
    slices = run.file(S.SLICES_FILE)
    if slices.is_file() and (entries := pq.read_table(slices).to_pylist()):
        print("weakest slices (held-out mean score [interval of the rule] vs the other held-out rows', scored rows):")
        _print_judged(entries, ("slice", "slices", S.SLICES_FILE), judged, _slice_line, holds("slices"))
    path = run.file(S.WEAKNESSES_FILE)
    if not path.is_file():
        return
    entries = pq.read_table(path).slice(0, 5).to_pylist()
    print("weakness profile (the profile's order; X_model [95% interval], support):")
    for e in entries:
        merged = f" +{len(e['members']) - 1} merged" if len(e["members"]) > 1 else ""
        label = e["description"] or "(no label)"
        heldout = ""
        if e.get("heldout_residual") is not None:  # a candidate concept: its held-out residual and verdict
            verdict = "confirmed" if e.get("confirmed") else "candidate"
            heldout = f"  held out {e['heldout_residual']:+.3f} ({verdict})"
        print(
            f"  {e['rank']:>3}. {e['concept_id']:>6}  X_model {_fmt(e['X_model'])} "
            f"[{_fmt(e['X_model_low'])}, {_fmt(e['X_model_high'])}]  {e['n_rows']:>6} rows  "
            f"n_eff {e['n_eff'] or 0:.1f}{merged}{heldout}  {label[:60]}{holds('weaknesses')(e)}"
        )


def _holds(sensitivity: Sensitivity | None) -> Callable[[str], Callable[[dict[str, Any]], str]]:
    """Per profile kind, what ends an entry's line: '  other readers: l20-seed7 ✓, l13 ✗' where the finding was
    compared with other readers on the same rows (`cg-ray sensitivity`), '' elsewhere, so a run without it
    prints as before."""
    from cg_ray.report.sensitivity import finding_key, other_readers

    def of(kind: str) -> Callable[[dict[str, Any]], str]:
        def suffix(entry: dict[str, Any]) -> str:
            said = other_readers(sensitivity, finding_key(kind, entry))
            return f"  other readers: {said}" if said else ""

        return suffix

    return of


def _mode_line(m: dict[str, Any]) -> str:
    from cg_ray.report.findings import q_text

    return (
        f"residual {_signed(m['heldout_residual'])} [{_signed(m['heldout_residual_low'])}, "
        f"{_signed(m['heldout_residual_high'])}]"
        f"  {m['n_rows']:>6} rows  {q_text(m.get('q_value')):<9}  {_mde(m)}{m['description'][:90]}"
    )


def _mde(entry: dict[str, Any]) -> str:
    """'MDE 0.172  ' for a candidate (the effect it would be confirmed at with 80% power), '' when confirmed."""
    if entry.get("confirmed") or entry.get("mde") is None:
        return ""
    return f"MDE {entry['mde']:.3f}  "


def _slice_line(s: dict[str, Any]) -> str:
    from cg_ray.report.findings import q_text

    suite = f" vs {_fmt(s['suite_mean'])}" if s.get("suite_mean") is not None else ""
    return (
        f"{_fmt(s['mean_score'])} [{_fmt(s['low'])}, {_fmt(s['high'])}]{suite}  {s['n_rows']:>6}  "
        f"{q_text(s.get('q_value')):<9}  {_mde(s)}{s['slice']}"
    )


def _power_line(judged: dict[str, Any]) -> str:
    """'power: a failure mode of 100 rows needs a residual of -0.211 to be confirmed 80% of the time; 400 rows:
    -0.104; …' from summary.json's mde_by_size ('' for a run without it)."""
    sizes = [e for e in judged.get("mde_by_size") or [] if e.get("mde") is not None]
    if not sizes:
        return ""
    first, *rest = sizes
    more = "".join(f"; {e['n_rows']:,} rows: -{e['mde']:.3f}" for e in rest)
    return (
        f"power: a failure mode of {first['n_rows']:,} rows needs a residual of -{first['mde']:.3f} to be confirmed "
        f"80% of the time{more}"
    )


def _confirmed_counts(judged: dict[str, Any]) -> str:
    """'2 of 61 failure modes, 3 of 240 slices, 5 of 400 concepts' (from summary.json)."""
    confirmed, tried = judged.get("confirmed") or {}, judged.get("candidates") or {}
    names = (("failure_modes", "failure modes"), ("slices", "slices"), ("concepts", "concepts"))
    return ", ".join(f"{confirmed[k]:,} of {tried.get(k, 0):,} {name}" for k, name in names if k in confirmed)


def _print_judged(
    entries: list[dict[str, Any]],
    what: tuple[str, str, str],
    judged: dict[str, Any] | None,
    line: Callable[[dict[str, Any]], str],
    holds: Callable[[dict[str, Any]], str],
) -> None:
    """The confirmed entries (at most 5), then one line on the candidates and at most 3 of them, marked.
    `what`: (noun, the kind's key in summary.json, its file); `holds`: what ends an entry's line (`_holds`)."""
    from cg_ray.report.findings import split_verdicts, tried

    noun, kind, file = what

    split = split_verdicts(entries)
    if split is None:  # a run made before held-out checks: its first entries, as they were
        for e in entries[:5]:
            print(f"  {e['rank']:>3}. {line(e)}{holds(e)}")
        return
    confirmed, candidates = split
    if not confirmed:
        print(f"  no {noun} confirmed held out ({tried(judged, kind, entries)})")
    for e in confirmed[:5]:
        print(f"  {e['rank']:>3}. {line(e)}{holds(e)}")
    if len(confirmed) > 5:
        print(f"  … {len(confirmed) - 5} more confirmed: see {file}")
    if candidates:
        fdr = f" (q > {judged['fdr']:g}; MDE: the effect each would be confirmed at, 80% power)" if judged else ""
        n = len(candidates)
        print(f"  {n:,} candidate{'s' if n != 1 else ''} not confirmed{fdr}: see {file}")
        for e in candidates[:3]:
            print(f"     candidate {e['rank']:>3}. {line(e)}{_candidate_note(e, kind, judged)}{holds(e)}")


def _candidate_note(entry: dict[str, Any], kind: str, judged: dict[str, Any] | None) -> str:
    """Why an unconfirmed candidate has the figures it has: a whole held-out interval on the far side (as the
    report and the explorer say it), or no interval because fewer than half the splits chose it."""
    from cg_ray.report.findings import heldout_interval, lies_other_way

    if lies_other_way(entry, kind):
        return "  (held out the other way, its whole interval too)"
    chosen, splits = entry.get("splits_selected"), (judged or {}).get("splits")
    if heldout_interval(entry, kind) == (None, None) and chosen is not None and splits and 2 * chosen < splits:
        return f"  (chosen by {chosen} of {splits} splits: no interval, its residual from those alone)"
    return ""


def _signed(x: float | None) -> str:
    return "—" if x is None else f"{x:+.3f}"


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def _print_summary(out: Path, summary: dict[str, Any], seconds: float) -> None:
    suite = summary["suite"]
    counts = suite["class_counts"]
    print(
        f"{summary['n_rows']:,} rows, {suite['n_benchmarks']} benchmarks, d_sae {summary['d_sae']:,} "
        f"-> {out} ({seconds:.1f} s)"
    )
    print(
        f"coverage: {counts['missing']} missing ({suite['missing_pct']:.1f}%), {counts['under']} under, "
        f"{counts['normal']} normal, {counts['over']} over; median X_model {_fmt(suite['median_X_model'])}; "
        f"{suite['n_model_gaps']} model gaps (X_model < ε in sample, untested: the findings below are judged held out)"
    )
    for key, title in (("worst_model", "worst concepts"), ("best_model", "best concepts")):
        print(f"{title} by X_model (the paper's ranking, in sample, untested):")
        for entry in summary["rankings"][key][:5]:
            label = entry["label"] or "(no label)"
            print(
                f"  {entry['concept_id']:>6}  X_model {_fmt(entry['X_model'])}  X_bench {_fmt(entry['X_bench'])}  "
                f"{entry['n_active_rows']:>6} rows  {label[:70]}"
            )


def _cmd_robustness(args: argparse.Namespace) -> int:
    """subsampling and adversarial-ablation robustness of the CG scores

    Re-run the metrics on random 80% subsets and after removing the most salient rows of the best/worst
    concepts (paper §4.2.3)."""
    import numpy as np
    import pyarrow as pa

    from cg_ray.artifacts.layout import ROBUSTNESS_CONCEPTS, ROBUSTNESS_JSON, RobustnessDir, RunDir
    from cg_ray.artifacts.publish import atomic_directory
    from cg_ray.artifacts.rows import load_row_table, open_rows
    from cg_ray.metrics.robustness import adversarial_ablation, subsampling
    from cg_ray.report.refresh import refresh_report

    config = metrics_config_from_args(args)
    robust = from_args(RobustnessConfig, args)
    # RUN/robustness of a published run: a post-publish step of the run; else a directory of its own
    run = RunDir.published(args.out.parent) if args.out.name == S.ROBUSTNESS_DIR else None
    ensure_output_free(run.file(ROBUSTNESS_JSON) if run else args.out, args.overwrite)
    rows = open_rows(args.rows, args.d_sae)
    table = load_row_table(rows, model=args.model)
    full = table.accumulate()
    report, per_concept = subsampling(table, full, config, robust)
    ablation = adversarial_ablation(table, full, config, robust)
    result = {"rows_file": str(args.rows), "config": config.model_dump(), "robustness": robust.model_dump()}
    result |= {"subsampling": report, "adversarial_ablation": ablation}
    stds = pa.table(
        {
            "concept_id": pa.array(np.arange(rows.d_sae, dtype=np.int32)),
            "X_model_std": pa.array(per_concept["X_model_std"], pa.float64(), from_pandas=True),
            "X_bench_std": pa.array(per_concept["X_bench_std"], pa.float64()),
        }
    )
    if run is not None:
        run.update("robustness", {ROBUSTNESS_JSON: result, ROBUSTNESS_CONCEPTS: stds}, {"rows_file": str(args.rows)})
        refresh_report(run)
    else:
        with atomic_directory(args.out, overwrite=args.overwrite) as tmp:
            RobustnessDir(tmp).write(S.ROBUSTNESS_FILE, result)
            RobustnessDir(tmp).write(S.ROBUSTNESS_CONCEPTS_FILE, stds)
    print(
        f"subsampling ({report['repeats']}× dropping {report['drop_fraction']:.0%} per benchmark): "
        f"mean std X_model {_fmt(report['X_model_std_mean'])}, X_bench {_fmt(report['X_bench_std_mean'])}"
    )
    print(
        f"ablation (median X_model {ablation['baseline_median_X_model']:.4f}): removing rows salient for the "
        f"best concepts shifts it {ablation['remove_best']['median_shift']:+.4f}, for the worst "
        f"{ablation['remove_worst']['median_shift']:+.4f}; random control "
        f"{ablation['random_control']['median_shift_mean']:+.4f} ± {ablation['random_control']['median_shift_std']:.4f}"
    )
    print(f"-> {args.out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "metrics", _cmd_metrics)
    add_rows_options(p)
    add_labels_options(
        p,
        "concept labels (Neuronpedia export, JSONL or CSV); default: those shipped with the reader that the "
        "rows' extract manifest or manifest.json names, when its SAE's weights fingerprint still matches",
    )
    add_metrics_options(p)

    r = add_command(subparsers, "robustness", _cmd_robustness)
    add_rows_options(r)
    add_model_flags(
        r.add_argument_group("robustness options"),
        RobustnessConfig,
        (
            ("repeats", int),
            ("drop_fraction", float),
            ("seed", int),
            ("ablation_concepts", int),
            ("ablation_rows", int),
            ("ablation_control_repeats", int),
        ),
    )
    add_metrics_options(r)
