"""`cg-ray scope RUN_DIR`: what each benchmark leaves out of its own scope, against a reference (docs/method.md,
"Benchmark gaps in scope")."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cg_ray.cli.options import add_command
from cg_ray.errors import ConfigError

SHOWN = 8  # gaps printed per benchmark (all are in scope/gaps.parquet)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(subparsers, "scope", _scope)
    p.add_argument("run", type=Path, help="a run directory (cg-ray run / cg-ray metrics) with rows.parquet")
    p.add_argument("--benchmark", action="append", default=[], help="a benchmark to scope (default: all); repeatable")
    p.add_argument(
        "--reference", action="append", default=[], help="a sibling benchmark of the run, pooled as reference"
    )
    p.add_argument(
        "--reference-rows",
        action="append",
        default=[],
        type=Path,
        help="rows.parquet of real use read by the same reader (cg-ray extract); repeatable",
    )
    p.add_argument("--min-share", type=float, default=0.02, help="reference share (interval's low end) in use")
    p.add_argument(
        "--ratio", type=float, default=0.5, help="a gap: the benchmark's share below RATIO × the reference's"
    )
    p.add_argument("--fdr", type=float, default=0.10, help="Benjamini–Hochberg level over the concepts tested")
    p.add_argument("--show", type=int, default=SHOWN, help="gaps printed per benchmark")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%" if x >= 0.001 or x == 0 else f"{100 * x:.2f}%"


def gap_line(rank: int, row: Any, n_bench: int, label: str | None) -> str:
    """One gap in words: both shares with their intervals, the ratio, q, and what the concept is."""
    bench = (
        f"0 of {n_bench:,} rows (< {_pct(row.bench_high)})"
        if row.missing
        else f"{_pct(row.bench_share)} [{_pct(row.bench_low)}, {_pct(row.bench_high)}]"
    )
    return (
        f"  {rank:>2}. concept {row.concept:<5} reference {_pct(row.reference_share)} "
        f"[{_pct(row.reference_low)}, {_pct(row.reference_high)}] vs benchmark {bench}; "
        f"×{row.ratio:.2f} [{row.ratio_low:.2f}, {row.ratio_high:.2f}], q={row.q_value:.2g}"
        f"\n      {label or '(no label)'}"
    )


def _scope(args: argparse.Namespace) -> int:
    """What each benchmark leaves out of its scope: concepts a reference uses that it confidently tests less

    Counts, per concept, the rows of each benchmark and of a reference (sibling benchmarks of the run with
    --reference, or rows of real use with --reference-rows, read by the same reader) on which it fires, under
    one firing rule. A concept is in the reference's use when its share there is confidently at least
    --min-share; a gap when the benchmark's share is confidently below --ratio × the reference's
    (Benjamini–Hochberg at --fdr). Also the paper's coverage figures: missing shares per benchmark and for
    the suite. Writes RUN_DIR/scope/ (gaps.parquet, coverage.parquet, summary.json)."""
    from cg_ray.scope.reference import ScopeRule
    from cg_ray.scope.run import ScopeRequest, run_scope

    try:
        rule = ScopeRule(min_share=args.min_share, ratio=args.ratio, fdr=args.fdr)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}") from None
    req = ScopeRequest(
        run=args.run,
        benchmarks=tuple(args.benchmark),
        references=tuple(args.reference),
        reference_rows=tuple(args.reference_rows),
        rule=rule,
    )
    result, doc = run_scope(req)
    suite = doc["suite"]
    print(
        f"suite ({len(suite['benchmarks'])} benchmarks): {_pct(suite['missing_share'])} of the {suite['d_sae']:,} "
        f"concepts missing (X_bench < ε; {suite['live_concepts']:,} live in the rows read)"
    )
    print(f"rule: {doc['decision']}")
    for cmp, b in zip(result.comparisons, doc["benchmarks"], strict=True):
        print(
            f"\n{b['benchmark']} ({b['rows']:,} rows) against {b['reference']} ({b['reference_rows']:,} rows): "
            f"missing {_pct(b['missing_share'])} (χ_bench < ε), no firing row {_pct(b['never_fires_share'])}; "
            f"a concept on 0 rows is below {_pct(b['missing_bound'])} of them (95%)"
        )
        print(
            f"  {b['in_reference_use']} concepts in the reference's use; {b['gaps']} confidently tested less "
            f"({b['gaps_missing']} on no row at all)"
        )
        for rank, row in enumerate(cmp.gaps.head(args.show).itertuples(), start=1):
            print(gap_line(rank, row, cmp.n_bench, result.labels.get(int(row.concept))))
            for ex in result.examples.get(int(row.concept), [])[:1]:
                print(f"      e.g. “{ex[:120]}”")
    print(f"\nwrote {args.run}/scope/ (gaps.parquet, coverage.parquet, summary.json)")
    return 0
