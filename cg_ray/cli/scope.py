"""`cg-ray scope RUN_DIR`: what each benchmark leaves out of its own scope, against a reference (docs/method.md,
"Benchmark gaps in scope")."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from cg_ray.cli.options import add_command
from cg_ray.errors import ConfigError, InputError

if TYPE_CHECKING:
    from cg_ray.describe.config import ExplainConfig
    from cg_ray.scope.judge import Completer, ScopeJudge, Verdict

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
    p.add_argument(
        "--method",
        choices=["excess", "ratio"],
        default="excess",
        help="concept gaps: excess (the reference's share above the benchmark's by --margin, by cluster) or "
        "ratio (the rule before: below --ratio × the reference's, rows as independent draws)",
    )
    p.add_argument("--min-share", type=float, default=0.02, help="in use: pooled share (excess) at least this")
    p.add_argument("--margin", type=float, default=0.02, help="excess: a gap when p_R − p_b is confidently above this")
    p.add_argument("--ratio", type=float, default=0.5, help="ratio: a gap when p_b is below RATIO × p_R")
    p.add_argument(
        "--density",
        type=float,
        default=0.25,
        help="rows: a reference row is uncovered where the benchmark's density is at most DENSITY × the reference's",
    )
    p.add_argument("--seed", type=int, default=0, help="rows: seed of the cross-fitting folds and the themes' halves")
    p.add_argument("--fdr", type=float, default=0.10, help="Benjamini–Hochberg level over the concepts tested")
    p.add_argument("--show", type=int, default=SHOWN, help="gaps printed per benchmark")
    p.add_argument(
        "--suite",
        action="store_true",
        help="also the run's benchmarks pooled as one, '(suite)': what the whole suite leaves out of real use",
    )
    j = p.add_argument_group("an LLM judge of scope (the paper's way: is each gap within the benchmark's intent?)")
    j.add_argument(
        "--judge-model",
        help="the judge's model: served at --judge-endpoint, else run on the generation backend "
        "(e.g. smollm2-135m-instruct, offline)",
    )
    j.add_argument(
        "--judge-endpoint", help="OpenAI-compatible base URL serving --judge-model, e.g. http://host:8000/v1"
    )
    j.add_argument("--judge-api-key-env", help="environment variable holding the endpoint's API key (never the key)")
    j.add_argument(
        "--description",
        action="append",
        default=[],
        metavar="BENCH=TEXT",
        help="what benchmark BENCH intends to test, in a paragraph; repeatable (overrides --descriptions)",
    )
    j.add_argument("--descriptions", type=Path, help="YAML mapping: benchmark -> what it intends to test")
    j.add_argument("--judge-batch", type=int, default=5, help="concepts per judge request")
    j.add_argument(
        "--judge-missing",
        action="store_true",
        help="also judge the concepts in the reference's use that a benchmark never fires on (not only its gaps)",
    )
    j.add_argument("--judge-retries", type=int, default=5, help="retries of a failing request (endpoint)")
    j.add_argument("--judge-concurrency", type=int, default=8, help="requests in flight at once (endpoint)")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%" if x >= 0.001 or x == 0 else f"{100 * x:.2f}%"


def _q(q: float) -> str:
    return " < 1e-300" if q == 0 else f"={q:.2g}"  # a q that underflows is shown as a bound, never as 0


def gap_line(rank: int, row: Any, n_bench: int, label: str | None) -> str:
    """One gap in words: both shares with their intervals, the ratio, q, and what the concept is."""
    from cg_ray.scope.reference import missing_bound

    bench = (
        f"0 of {n_bench:,} rows (< {_pct(float(missing_bound(n_bench)))}, 95%)"
        if row.missing
        else f"{_pct(row.bench_share)} [{_pct(row.bench_low)}, {_pct(row.bench_high)}]"
    )
    return (
        f"  {rank:>2}. concept {row.concept:<5} reference {_pct(row.reference_share)} "
        f"[{_pct(row.reference_low)}, {_pct(row.reference_high)}] vs benchmark {bench}; "
        f"×{row.ratio:.2f} [{row.ratio_low:.2f}, {row.ratio_high:.2f}], q{_q(row.q_value)}"
        f"\n      {label or '(no label)'}"
    )


def descriptions_of(pairs: list[str], path: Path | None) -> dict[str, str]:
    """Benchmark -> description from --descriptions FILE (YAML mapping), then --description BENCH=TEXT."""
    out: dict[str, str] = {}
    if path is not None:
        import yaml

        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"cannot read the descriptions: {exc.strerror}", path=str(path)) from None
        except yaml.YAMLError as exc:
            raise InputError(f"not YAML: {exc}", path=str(path)) from None
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise InputError("expected a mapping of benchmark names to descriptions (text)", path=str(path))
        out.update({str(k): v for k, v in data.items()})
    for pair in pairs:
        bench, sep, text = pair.partition("=")
        if not sep or not bench.strip() or not text.strip():
            raise ConfigError(f"--description {pair!r}: expected BENCH=TEXT")
        out[bench.strip()] = text.strip()
    return out


def judge_of(args: argparse.Namespace) -> ScopeJudge | None:
    """The `ScopeJudge` the flags name, or None; judge flags without --judge-model are refused."""
    from cg_ray.scope.judge import ScopeJudge

    given = [
        f
        for f, v in (
            ("--judge-endpoint", args.judge_endpoint),
            ("--judge-api-key-env", args.judge_api_key_env),
            ("--description", args.description),
            ("--descriptions", args.descriptions),
            ("--judge-missing", args.judge_missing),
        )
        if v
    ]
    if args.judge_model is None:
        if given:
            raise ConfigError(f"{', '.join(given)} without a judge: name its model (--judge-model)")
        return None
    try:
        return ScopeJudge(
            model=args.judge_model,
            endpoint=args.judge_endpoint,
            api_key_env=args.judge_api_key_env,
            descriptions=descriptions_of(args.description, args.descriptions),
            batch=args.judge_batch,
            include_missing=args.judge_missing,
            retries=args.judge_retries,
            concurrency=args.judge_concurrency,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = f"--judge-{str(first['loc'][0]).replace('_', '-')}: " if first["loc"] else ""
        raise ConfigError(f"{where}{first['msg'].removeprefix('Value error, ')}") from None


def judge_line(verdict: Verdict) -> str:
    """'judge: in scope — reason' / 'judge: out of scope — reason' / 'judge: unreadable answer'."""
    if verdict.in_scope is None:
        return "      judge: unreadable answer (no verdict)"
    said = "in scope" if verdict.in_scope else "out of scope"
    return f"      judge: {said}" + (f" — {verdict.reason}" if verdict.reason else "")


def row_view_lines(b: dict[str, Any]) -> list[str]:
    """The row-level headline (how much of the reference lies where the benchmark has almost no rows) and its
    themes, most reference rows first: what a builder reads first (the report's words)."""
    from cg_ray.report.scope import row_view_text

    view = row_view_text(b)
    if view is None:
        return []
    lines = [f"  uncovered: {view['headline']} — {view['verdict']}"]
    if view["themes"]:
        lines.append(f"  {len(view['themes'])} themes of uncovered rows:")
    for rank, t in enumerate(view["themes"], start=1):
        kind = " [the reference's own format]" if t["format"] else ""
        more = f" with {t['members'] - 1} more" if t["members"] > 1 else ""
        lines.append(f"  {rank:>2}. {t['evidence']}, q{_q(t['q_value'])}{kind}")
        lines.append(f"      carried by concept {t['concept_id']} {t['label']}{more}")
        if t["example"]:
            lines.append(f"      e.g. “{t['example'][:120]}”")
    return lines + [f"  {line}" if i == 0 else f"    {line}" for i, line in enumerate(view["scores"])]


def print_benchmark(cmp: Any, b: dict[str, Any], result: Any, show: int, judge_missing: bool) -> None:
    """One benchmark: the row-level headline and themes first, then the coverage figures, its judge's counts,
    and its first `show` concept gaps in words."""
    print(f"\n{b['benchmark']} ({b['rows']:,} rows) against {b['reference']} ({b['reference_rows']:,} rows)")
    for line in row_view_lines(b):
        print(line)
    print(
        f"  concepts: missing {_pct(b['missing_share'])} (χ_bench < ε), no firing row "
        f"{_pct(b['never_fires_share'])}; a concept on 0 rows is below {_pct(b['missing_bound'])} of them (95%)"
    )
    print(
        f"  {b['in_reference_use']} concepts in use; {b['gaps']} confidently tested less "
        f"({b['gaps_missing']} on no row at all)"
    )
    judged = result.judgements.get(cmp.benchmark)
    if judged is not None and judged.counts.asked:
        n = judged.counts
        tokens = (
            f", {n.prompt_tokens + n.completion_tokens:,} tokens"
            if n.prompt_tokens is not None and n.completion_tokens is not None
            else ""
        )
        print(
            f"  judge: of {n.asked} concepts asked, {n.in_scope} in scope, {n.out_of_scope} out of scope, "
            f"{n.unreadable} unreadable ({n.requests} requests{tokens})"
        )
    rows = {int(r.concept): r for r in cmp.gaps.itertuples()}
    themes = result.themes.get(cmp.benchmark, [])
    if themes:
        print(f"  {len(themes)} groups of concept gaps (firing on the same reference rows), most confident first:")
    for rank, theme in enumerate(themes[:show], start=1):
        concept = theme.representative
        print(gap_line(rank, rows[concept], cmp.n_bench, result.labels.get(concept)))
        if len(theme.members) > 1:
            others = ", ".join(str(c) for c in theme.members[1:6]) + (", …" if len(theme.members) > 6 else "")
            print(
                f"      with {len(theme.members) - 1} more concepts ({others}): any of them fires on "
                f"{theme.reference_rows:,} of the reference's {cmp.n_reference:,} rows and {theme.bench_rows:,} of "
                f"{cmp.n_bench:,} here"
            )
        for ex in result.examples.get(concept, [])[:1]:
            print(f"      e.g. “{ex[:120]}”")
        if judged is not None and concept in judged.verdicts:
            print(judge_line(judged.verdicts[concept]))
    if judged is not None and judge_missing:
        gaps = set(cmp.gaps["concept"].tolist())
        kept = [c for c, v in judged.verdicts.items() if c not in gaps and v.in_scope]
        if kept:
            print(f"  never fired here, in the reference's use, and in scope by the judge: {len(kept)}")
            for c in kept[:show]:
                print(f"    concept {c:<5} {result.labels.get(c) or '(no label)'}")
                print(judge_line(judged.verdicts[c]))


def _scope(args: argparse.Namespace) -> int:
    """What each benchmark leaves out of its scope: concepts a reference uses that it confidently tests less

    Counts, per concept, the rows of each benchmark and of a reference (sibling benchmarks of the run with
    --reference, or rows of real use with --reference-rows, read by the same reader) on which it fires, under
    one firing rule. A concept is in the reference's use when its share there is confidently at least
    --min-share; a gap when the benchmark's share is confidently below --ratio × the reference's
    (Benjamini–Hochberg at --fdr). Also the paper's coverage figures: missing shares per benchmark and for
    the suite. Writes RUN_DIR/scope/ (gaps.parquet, coverage.parquet, summary.json).

    With --judge-model, an LLM also says of each gap (and with --judge-missing, of each concept in the
    reference's use that the benchmark never fires on) whether it is within what the benchmark intends to
    test, as --description BENCH=TEXT / --descriptions FILE states it for every benchmark scoped: the model
    served at --judge-endpoint (key in the variable --judge-api-key-env names), else run on the generation
    backend. Every request is answered before anything is written; an unreadable answer leaves a null verdict."""
    from cg_ray.artifacts.layout import RunDir
    from cg_ray.report.refresh import refresh_report
    from cg_ray.scope.publish import run_scope
    from cg_ray.scope.reference import ScopeRule
    from cg_ray.scope.run import ScopeRequest

    try:
        rule = ScopeRule(
            method=args.method, min_share=args.min_share, margin=args.margin, ratio=args.ratio, fdr=args.fdr,
            density=args.density, seed=args.seed,
        )  # fmt: skip
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"--{str(first['loc'][0]).replace('_', '-')}: {first['msg']}") from None
    req = ScopeRequest(
        run=args.run,
        benchmarks=tuple(args.benchmark),
        references=tuple(args.reference),
        reference_rows=tuple(args.reference_rows),
        rule=rule,
        judge=judge_of(args),
        suite=args.suite,
    )
    result, doc = run_scope(req, _client)
    suite = doc["suite"]
    print(
        f"suite ({len(suite['benchmarks'])} benchmarks): {_pct(suite['missing_share'])} of the {suite['d_sae']:,} "
        f"concepts missing (X_bench < ε; {suite['live_concepts']:,} live in the rows read)"
    )
    print(f"rule: {doc['decision']}")
    entries = {(b["benchmark"], b["reference"]): b for b in doc["benchmarks"]}  # earlier scopes' pairs too
    for cmp in result.comparisons:
        print_benchmark(cmp, entries[(cmp.benchmark, cmp.reference)], result, args.show, args.judge_missing)
    if result.judge_usage is not None:
        from cg_ray.describe.endpoint import usage_line

        print(f"\n{usage_line(result.judge_usage)}")
    print(f"\nwrote {args.run}/scope/ (gaps.parquet, coverage.parquet, rows.parquet, summary.json)")
    if (report := refresh_report(RunDir(args.run))) is not None:  # the report shows what each benchmark leaves out
        print(f"updated {report}")
    return 0


def _client(config: ExplainConfig) -> Completer:
    """The judge's client as `cg-ray explain` makes it: the endpoint (checked with GET /models) or, without
    one, the generation backend (the model checked to load)."""
    from cg_ray.describe.completers import make_completer

    return make_completer(config, role="scope judge")
