"""What an augment will do, decided before its first request: the benchmark's scope as `cg-ray scope` left it
(scope/gaps.parquet and its rule), the gaps targeted, the benchmark's own prompts shown to the writer, its
scorer, and the requests that will take (`cg-ray augment --dry-run` prints only this)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cg_ray import schemas as S
from cg_ray.activations.config import ReaderConfig
from cg_ray.artifacts.layout import SCOPE_GAPS, SCOPE_SUMMARY, RunDir
from cg_ray.augment.config import AugmentConfig
from cg_ray.errors import ConfigError, InputError
from cg_ray.probe.gaps import DEFAULT_SCORER, run_scorers
from cg_ray.probe.generators import USABLE_SCORERS
from cg_ray.probe.plan import run_reader
from cg_ray.scope.reference import ScopeRule

_GAP_ID = re.compile(r"concept:(\d+)")


@dataclass(frozen=True)
class Target:
    """One in-scope gap of the benchmark, as the writer and the reader check need it."""

    concept_id: int
    label: str | None
    examples: tuple[str, ...]  # reference rows where it fires most (scope/gaps.parquet)
    firing_threshold: float  # the s̃ at which it fires: the reader check's rule and the coverage's
    reference_share: float
    bench_rows: int
    bench_n: int
    missing: bool

    @property
    def gap_id(self) -> str:
        return f"concept:{self.concept_id}"

    def name(self) -> str:
        return self.label or f"concept {self.concept_id} (no label)"


@dataclass(frozen=True)
class AugmentPlan:
    run: Path
    config: AugmentConfig
    reference: str
    rule: ScopeRule
    scope: pd.DataFrame  # the benchmark's rows of scope/gaps.parquet: every concept in the reference's use or missing
    targets: list[Target]
    shown: list[str]  # the benchmark's own prompts shown to the writer (its format)
    scorer: str
    reader: ReaderConfig
    scope_entry: dict[str, Any] | None = None  # the comparison's entry of scope/summary.json (row view, references)

    @property
    def benchmark(self) -> str:
        return self.config.benchmark

    @property
    def needs_reference(self) -> bool:
        return self.scorer in USABLE_SCORERS

    def estimate(self) -> dict[str, int]:
        """Requests at most (before the checks drop anything)."""
        writer = len(self.targets) * math.ceil(self.config.items * self.config.overdraw)
        checked = self.needs_reference and self.config.reference_check == "answer"
        return {"writer_requests": writer, "checker_requests": writer if checked else 0, "reader_texts": writer}


def read_scope(run: Path, benchmark: str, reference: str | None = None) -> tuple[pd.DataFrame, str, ScopeRule]:
    """The benchmark's rows of scope/gaps.parquet, its reference and the rule they were decided by."""
    scope, ref, rule, _ = read_scoped(run, benchmark, reference)
    return scope, ref, rule


def read_scoped(
    run: Path, benchmark: str, reference: str | None = None
) -> tuple[pd.DataFrame, str, ScopeRule, dict[str, Any] | None]:
    """`read_scope` and the comparison's entry of scope/summary.json (its `row_view`, the references read)."""
    rd = RunDir(run)
    rd.require(S.SUMMARY_FILE)
    if not rd.has(SCOPE_GAPS) or not rd.has(SCOPE_SUMMARY):
        raise InputError(
            "the run has no scope/: run `cg-ray scope RUN_DIR --reference-rows REAL_USE.rows.parquet` (or "
            "--reference SIBLING) first; augment writes items for the gaps it finds",
            path=str(run),
        )
    table = pq.read_table(rd.file(SCOPE_GAPS))
    scoped = sorted(set(table.column("benchmark").to_pylist()))
    if benchmark not in scoped:
        in_run = set(pq.read_table(rd.rows, columns=["benchmark"]).column("benchmark").unique().to_pylist())
        why = "it is in the run but was not scoped (a reference?)" if benchmark in in_run else "no such benchmark"
        raise InputError(f"no benchmark {benchmark!r} in the run's scope ({why}); scope/ holds {scoped}", path=str(run))
    mine = table.filter(pc.equal(table["benchmark"], benchmark)).to_pandas()
    refs = sorted(set(mine["reference"]))
    if reference is not None and reference not in refs:
        raise ConfigError(f"--reference {reference!r}: scope compared {benchmark} with {refs}")
    if reference is None and len(refs) > 1:
        raise ConfigError(f"scope compared {benchmark} with several references {refs}: name one with --reference")
    mine = mine[mine["reference"] == (reference or refs[0])]
    summary = rd.read_json(SCOPE_SUMMARY)
    rule = ScopeRule.model_validate(summary["rule"])
    ref = str(mine["reference"].iloc[0])
    entry: dict[str, Any] = next(
        (b for b in summary["benchmarks"] if (b["benchmark"], b["reference"]) == (benchmark, ref)), {}
    )
    return mine.sort_values("concept_id").reset_index(drop=True), ref, rule, entry or None


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def not_a_gap(concept: int, scope: pd.DataFrame, benchmark: str, reference: str) -> str:
    """Why `concept:ID` is not an in-scope gap of the benchmark: its scope verdict, in words."""
    head = f"concept:{concept} is not an in-scope gap of {benchmark}"
    found = scope[scope["concept_id"] == concept]
    if found.empty:
        return (
            f"{head}: scope found it neither in the reference's use ({reference}) nor missing from {benchmark} "
            "(only those are kept in scope/gaps.parquet)"
        )
    r = found.iloc[0]
    ref = f"{reference} uses it on {r.reference_rows} of {r.reference_n} rows ({_pct(r.reference_share)})"
    bench = f"{benchmark} on {r.bench_rows} of {r.bench_n} ({_pct(r.bench_share)})"
    if not r.in_reference:
        return f"{head}: not in the reference's use ({ref}: not confidently the share scope asks); {bench}"
    return f"{head}: in the reference's use ({ref}) and not confidently tested less: {bench}, q={r.q_value:.2g}"


def theme_targets(
    scope: pd.DataFrame, config: AugmentConfig, reference: str, row_view: dict[str, Any] | None
) -> list[Target]:
    """The carrying concepts of the themes named (`--theme N`: the N-th confirmed theme of the benchmark's
    row view, as `cg-ray scope` prints them), each shown to the writer with the theme's reference rows."""
    if not config.themes:
        return []
    themes = [t for t in (row_view or {}).get("themes", []) if t.get("confirmed")]
    if not themes:
        why = "its scope has no row view (rerun `cg-ray scope`)" if row_view is None else "no theme was confirmed"
        raise ConfigError(f"--theme: {config.benchmark} against {reference} has no theme of uncovered rows: {why}")
    out = []
    for rank in dict.fromkeys(config.themes):
        if not 1 <= rank <= len(themes):
            raise ConfigError(f"--theme {rank}: {config.benchmark} against {reference} has {len(themes)} themes")
        theme = themes[rank - 1]
        found = scope[scope["concept_id"] == theme["concept"]]
        if found.empty:
            raise ConfigError(
                f"--theme {rank}: its concept {theme['concept']} is neither in use nor missing in scope/gaps.parquet"
            )
        target = _target(next(found.itertuples()))
        out.append(replace(target, examples=tuple(theme.get("examples") or target.examples)))
    return out


def select_targets(scope: pd.DataFrame, config: AugmentConfig, reference: str) -> list[Target]:
    """The gaps named (in that order), or the `top` most confident themes' representatives (smallest q, then
    the largest reference share) that scope's judge, where one was asked, did not call out of scope; a name
    that is no gap of the benchmark is an error that gives its verdict."""
    gaps = scope[scope["gap"]].sort_values(["q_value", "reference_share"], ascending=[True, False])
    if config.themes and not config.gaps:
        return []  # the themes name every target
    if gaps.empty:
        raise ConfigError(f"{config.benchmark} has no in-scope gap against {reference}: nothing to augment")
    if config.gaps:
        wanted = []
        for g in dict.fromkeys(config.gaps):
            m = _GAP_ID.fullmatch(g.strip())
            if m is None:
                raise ConfigError(f"--gap {g!r}: expected concept:ID (an in-scope gap of scope/gaps.parquet)")
            c = int(m.group(1))
            if c not in set(gaps["concept_id"]):
                raise ConfigError(not_a_gap(c, scope, config.benchmark, reference))
            wanted.append(c)
        gaps = gaps.set_index("concept_id", drop=False).loc[wanted]
    else:  # a gap scope's judge (`cg-ray scope --judge-model`) called out of the benchmark's scope is left out
        gaps = gaps[gaps["in_scope_judge"].map(lambda v: v is not False)]
        if "theme" in gaps.columns:  # one gap per theme (its representative): co-firing gaps are one omission
            gaps = gaps[gaps["theme"].isna() | (gaps["theme"] == gaps["concept_id"])]
        gaps = gaps.head(config.top)
    return [_target(r) for r in gaps.itertuples()]


def _target(r: Any) -> Target:
    return Target(
        concept_id=int(r.concept_id),
        label=r.label if isinstance(r.label, str) else None,  # an all-null column reads as NaN
        examples=tuple(r.examples) if isinstance(r.examples, list | tuple | np.ndarray) else (),
        firing_threshold=float(r.firing_threshold),
        reference_share=float(r.reference_share),
        bench_rows=int(r.bench_rows),
        bench_n=int(r.bench_n),
        missing=bool(r.missing),
    )


def benchmark_prompts(run: Path, benchmark: str) -> list[str]:
    """The benchmark's prompts in rows.parquet (none when the rows were stored without them)."""
    rows = RunDir(run).rows
    if "prompt" not in pq.ParquetFile(rows).schema_arrow.names:
        return []
    t = pq.read_table(rows, columns=["benchmark", "prompt"])
    return [p for p in t.filter(pc.equal(t["benchmark"], benchmark)).column("prompt").to_pylist() if p]


def make_plan(run: Path, config: AugmentConfig) -> AugmentPlan:
    scope, reference, rule, entry = read_scoped(run, config.benchmark, config.reference)
    row_view = (entry or {}).get("row_view")
    targets = list(
        {
            t.concept_id: t
            for t in [*theme_targets(scope, config, reference, row_view), *select_targets(scope, config, reference)]
        }.values()
    )
    prompts = list(dict.fromkeys(benchmark_prompts(run, config.benchmark)))
    step = max(1, len(prompts) // max(config.shown_rows, 1))
    return AugmentPlan(
        run=run,
        config=config,
        reference=reference,
        rule=rule,
        scope=scope,
        targets=targets,
        shown=prompts[::step][: config.shown_rows],  # spread over the benchmark, not its first rows only
        scorer=run_scorers(RunDir(run)).get(config.benchmark, DEFAULT_SCORER),
        reader=run_reader(run, config.reader),
        scope_entry=entry,
    )


def plan_text(plan: AugmentPlan) -> str:
    cfg, est = plan.config, plan.estimate()
    writer = f"{cfg.writer.model} at {cfg.writer.endpoint or cfg.writer.backend}" if cfg.writer else "none named"
    in_use = int(plan.scope["in_reference"].sum())
    lines = [
        f"augment {plan.benchmark} of {plan.run} against {plan.reference}: {len(plan.targets)} of its "
        f"{int(plan.scope['gap'].sum())} in-scope gaps ({in_use} concepts in the reference's use) × {cfg.items} "
        f"items, seed {cfg.seed}",
        f"  writer: {writer}; reference check: {cfg.reference_check if plan.needs_reference else 'none'} "
        f"(scorer {plan.scorer}); {len(plan.shown)} of the benchmark's prompts shown as its format",
        f"  reader check: {'on' if cfg.reader_check else 'off'} ({plan.reader.model}, SAE {plan.reader.sae}); "
        f"near copies at {cfg.near_copy:.0%} of an item's 5-grams",
    ]
    for t in plan.targets:
        share = f"{t.bench_rows} of {t.bench_n} rows" + (" (missing)" if t.missing else "")
        lines.append(
            f"  {t.gap_id:<14} reference {_pct(t.reference_share)} vs {share}; fires at s̃ ≥ "
            f"{t.firing_threshold:.3g}; {t.name()[:70]}"
        )
    lines.append(
        "  at most: writer requests {writer_requests}, checker requests {checker_requests}, "
        "texts read {reader_texts}".format(**est)
    )
    return "\n".join(lines)
