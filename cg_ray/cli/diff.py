"""`cg-ray diff RUN_A RUN_B --out DIR`: what changed, concept by concept, between two runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cg_ray.cli.options import add_command, add_model_flags, ensure_output_free, from_args


def _print(out: Path, doc: dict[str, Any]) -> None:
    c, runs = doc["counts"], doc["runs"]
    print(
        f"{c['paired']:,} paired rows ({c['only_a']:,} only in A, {c['only_b']:,} only in B, "
        f"{c['shared_unscored']:,} shared but unscored in one run: skipped); mean score "
        f"{runs['a']['mean_score_paired']:.3f} -> {runs['b']['mean_score_paired']:.3f}; "
        f"{c['confident_regressed']} concepts confidently regressed, {c['confident_improved']} improved -> {out}"
    )
    _print_heldout(doc["heldout"])
    relative = doc["config"]["rank_by"] == "relative"
    what = "change beyond the benchmarks' mean-score change" if relative else "ΔX_model"
    for key, title in (("top_regressed", "regressed"), ("top_improved", "improved")):
        if doc[key]:
            print(f"{title}, per-concept intervals on all paired rows ({what} [interval], X_model A -> B, rows):")
        for e in doc[key][:5]:
            name = e["description"] or e["label"] or "(no label)"
            v = e["relative"] if relative else {"delta": e["delta_X_model"], "low": e["low"], "high": e["high"]}
            print(
                f"  {e['concept_id']:>6}  {v['delta']:+.3f} [{v['low']:+.3f}, {v['high']:+.3f}]  "
                f"{e['X_model_a']:.3f} -> {e['X_model_b']:.3f}  {e['n_paired_active']:>5} rows  {name[:60]}"
            )


def _print_heldout(h: dict[str, Any]) -> None:
    """The findings first: changes beyond their benchmark, confirmed on rows that did not choose them."""
    n, effects = h["n_confirmed"], h.get("n_effects") or h["n_confirmed"]  # a diff.json before n_effects

    def counted(d: str) -> str:  # '3 concepts regressed (2 effects: concepts on the same rows count once)'
        same = "" if effects[d] == n[d] else f" ({effects[d]} effect{'' if effects[d] == 1 else 's'})"
        return f"{n[d]} concept{'' if n[d] == 1 else 's'}{same} {d}"

    print(
        f"held out ({h['splits']} splits, confirmed when q ≤ {h['fdr']:g}): {counted('regressed')} and "
        f"{counted('improved')} beyond their benchmark (change of their rows vs the benchmark's other rows; "
        "concepts on the same rows are one effect)"
    )
    for direction in ("regressed", "improved"):
        # a candidate fewer than half the splits chose has no interval: counted, not listed
        shown = [e for e in h[direction] if e["heldout"]["low"] is not None or e["heldout"]["high"] is not None]
        for e in shown[:5]:
            v = e["heldout"]
            verdict = "confirmed" if v["confirmed"] else f"candidate, MDE {v['mde']:.3f}" if v["mde"] else "candidate"
            name = e["description"] or e["label"] or "(no label)"
            if v.get("same_rows_as") is not None:
                name = f"(same rows as {v['same_rows_as']}) {name}"
            bounds = "[" + ", ".join("—" if x is None else f"{x:+.3f}" for x in (v["low"], v["high"])) + "]"
            print(
                f"  {direction:<9} {e['concept_id']:>6}  {v['estimate']:+.3f} {bounds:<17} "
                f"q={v['q_value']:.3f} {verdict:<22} {v['n_heldout']:>5} held-out rows  {name[:50]}"
            )
        untested = h["n_tried"][direction] - h["n_with_interval"][direction]
        if untested:
            print(f"  ({untested} more {direction} candidates: chosen by fewer than half the splits, no interval)")


def _cmd_diff(args: argparse.Namespace) -> int:
    """Concept-level diff of two runs (paired by row_id, bootstrap intervals).

    First the findings: concepts whose rows changed beyond their benchmark, chosen on one half of each of
    --splits splits of the paired rows and confirmed on the other (q ≤ --fdr). Then, per concept, ΔX_model
    and Δχ_model (B − A) on the rows both runs share, with paired bootstrap intervals, ΔX_bench between the
    suites, and the concepts that regressed and improved most confidently with the rows that flipped. Both
    runs must be read with the same reader and SAE."""
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.compare.config import DiffConfig
    from cg_ray.compare.diff import compute_diff
    from cg_ray.compare.outputs import write_diff

    config = from_args(DiffConfig, args)
    ensure_output_free(args.out, args.overwrite)
    result = compute_diff(RunDir(args.run_a), RunDir(args.run_b), config)
    _print(args.out, write_diff(result, args.out, overwrite=args.overwrite))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    from cg_ray.compare.config import DiffConfig

    p = add_command(subparsers, "diff", _cmd_diff)
    p.add_argument("run_a", type=Path, help="run directory A (the baseline)")
    p.add_argument("run_b", type=Path, help="run directory B (compared with A)")
    p.add_argument("--out", required=True, type=Path, help="output directory (published atomically)")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    g = p.add_argument_group("diff options")
    add_model_flags(
        g,
        DiffConfig,
        (
            ("resamples", int),
            ("seed", int),
            ("confidence", float),
            ("top", int),
            ("examples", int),
            ("min_rows", int),
            ("right_threshold", float),
            ("rank_by", str),
            ("splits", int),
            ("fdr", float),
            ("tested_per_split", int),
            ("assume_same_reader", bool),
        ),
    )
