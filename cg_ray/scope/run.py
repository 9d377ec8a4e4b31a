"""`cg-ray scope`: each benchmark of a run against a reference, its in-scope gaps with their evidence, and the
coverage figures the paper reports (missing shares), and the row-level view (uncovered.py), computed (publish.py
writes them to RUN_DIR/scope/).

A reference is either sibling benchmarks of the same run (pooled: benchmarks of the same task, which share
its scope) or rows files read by the same reader (a user's traffic, real-use prompts), each read as one group.

With a judge (`ScopeRequest.judge`, `scope.judge`), an LLM also says of each benchmark's gaps (and, if asked,
of the concepts in the reference's use it never fires on) whether they are within what the benchmark intends
to test; its verdicts fill `in_scope_judge` / `judge_reason`. Every benchmark's description is required
before the first request, and every request is answered before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow.parquet as pq
from scipy import sparse

from cg_ray import schemas as S
from cg_ray.activations.recorded import reader_of_rows, reader_of_run
from cg_ray.artifacts.layout import RunDir
from cg_ray.config import MetricsConfig
from cg_ray.errors import InputError
from cg_ray.metrics.compute import chi_bench
from cg_ray.scope import judge as J
from cg_ray.scope.clustered import grouped_shares
from cg_ray.scope.counts import FiringCounts, SuiteActivations, firing_counts, read_activations
from cg_ray.scope.reference import ReferenceComparison, ScopeRule, compare, missing_bound
from cg_ray.scope.reweight import Reweighting, reweight
from cg_ray.scope.themes import Theme, gap_themes
from cg_ray.scope.uncovered import RowCoverage, UncoveredRule, coverage_of_fired, firing_indicators

EXAMPLES = 3  # reference rows shown (and given to a judge) per gap
EXAMPLE_CHARS = 240
OVER_SHOWN = 10  # the suite's most over-represented concepts in the summary
THEMES_KEPT = 50  # per benchmark in summary.json (every gap's theme is in gaps.parquet)


@dataclass(frozen=True)
class ScopeRequest:
    run: Path
    benchmarks: tuple[str, ...] = ()  # empty: every benchmark of the run that is not a reference
    references: tuple[str, ...] = ()  # sibling benchmarks of the run, pooled into one reference
    reference_rows: tuple[Path, ...] = ()  # rows files of the same reader, each one group (its file stem)
    rule: ScopeRule = field(default_factory=ScopeRule)
    judge: J.ScopeJudge | None = None  # an LLM judge of the gaps' scope (endpoint, model, key variable, descriptions)
    suite: bool = False  # also the run's benchmarks pooled as one (SUITE): what the whole suite leaves out

    @property
    def reference_groups(self) -> list[str]:
        """The groups compared against: the sibling benchmarks, then each reference rows file's (its stem)."""
        return [*self.references, *(reference_group(Path(p)) for p in self.reference_rows)]


@dataclass(frozen=True)
class ScopeResult:
    comparisons: list[ReferenceComparison]
    thresholds: npt.NDArray[np.float64]  # per concept: the firing threshold over every row read
    coverage: pd.DataFrame
    suite: dict[str, Any]
    labels: dict[int, str]
    examples: dict[int, list[str]]
    judgements: dict[str, J.BenchmarkJudgement] = field(default_factory=dict)  # per benchmark, with a judge
    judge_usage: dict[str, Any] | None = None  # the endpoint's requests and tokens over the whole run
    themes: dict[str, list[Theme]] = field(default_factory=dict)  # per benchmark: its gaps grouped (themes.py)
    rows: dict[str, RowCoverage] = field(default_factory=dict)  # per benchmark: the row-level view (uncovered.py)
    reweighted: dict[str, Reweighting] = field(default_factory=dict)  # per benchmark: scores on the reference's mix
    row_ids: list[str] = field(default_factory=list)  # every row read, in the order of `rows`' arrays
    texts: list[str] = field(default_factory=list)  # their prompts ("" where the rows hold none)
    group_rules: tuple[str, ...] = ()  # per rows file read (the run's first): the rule that made its rows' groups

    def comparison(self, benchmark: str) -> ReferenceComparison:
        return next(c for c in self.comparisons if c.benchmark == benchmark)


def reference_group(path: Path) -> str:
    return f"ref:{path.stem.removesuffix('.rows')}"


@dataclass(frozen=True)
class FiredRows:
    """The rows scope reads — the run's, then each reference rows file's as one group (`reference_group`) — with
    the firing thresholds taken over all of them, which rows fire each concept, and each row's cluster (its
    own when the rows carry no grouping)."""

    acts: SuiteActivations
    counts: FiringCounts
    fired: sparse.csr_matrix
    clusters: npt.NDArray[np.generic]


def read_fired(run_rows: Path, reference_rows: Sequence[Path]) -> FiredRows:
    """What scope compares, read once: `compute_scope` and augment's row view after (`augment.rows_after`) read
    it alike, so the view after starts from scope's own."""
    names = [None, *(reference_group(Path(p)) for p in reference_rows)]
    acts = read_activations([run_rows, *reference_rows], rename=names, clusters=True)
    counts = firing_counts(acts)
    clusters = acts.clusters if acts.clusters is not None else np.arange(len(acts.row_ids)).astype(np.str_)
    return FiredRows(acts, counts, firing_indicators(acts.matrix, counts.thresholds), clusters)


SUITE = "(suite)"  # the run's benchmarks (less the references) pooled, as `--suite` compares them


def _plan(req: ScopeRequest, names: Sequence[str]) -> tuple[list[str], list[str]]:
    """(benchmarks to scope, reference groups), refusing unknown names and a benchmark used as both."""
    run_benchmarks = [n for n in names if not n.startswith("ref:")]
    for b in (*req.benchmarks, *req.references):
        if b not in run_benchmarks:
            raise InputError(f"no benchmark {b!r} in the run; it holds {run_benchmarks}", path=str(req.run))
    both = set(req.benchmarks) & set(req.references)
    if both:
        raise InputError(f"{sorted(both)} named as both a benchmark to scope and its reference", path=str(req.run))
    refs = req.reference_groups
    if not refs:
        raise InputError("no reference: name sibling benchmarks (--reference) or rows of real use (--reference-rows)")
    targets = list(req.benchmarks) or [b for b in run_benchmarks if b not in req.references]
    if not targets:
        raise InputError("no benchmark left to scope: every benchmark of the run is a reference", path=str(req.run))
    return targets, refs


@dataclass(frozen=True)
class GroupSums:
    """Σ s̃ per concept of each group's rows (one pass over the matrix), and which concepts are live (active
    on some row read): what the paper's coverage figures need."""

    sums: dict[str, npt.NDArray[np.float64]]
    live: npt.NDArray[np.bool_]

    @classmethod
    def of(cls, acts: SuiteActivations) -> GroupSums:
        m = acts.matrix.tocsr()
        sums = {g: np.asarray(m[acts.groups == g].sum(axis=0), dtype=np.float64).ravel() for g in acts.group_names()}
        return cls(sums, np.diff(acts.matrix.indptr) > 0)

    def pooled(self, groups: Sequence[str]) -> npt.NDArray[np.float64]:
        return np.asarray(np.sum([self.sums[g] for g in groups], axis=0), dtype=np.float64)


def coverage_row(
    name: str, act_sum: npt.NDArray[np.float64], fires: npt.NDArray[np.int64], n: int, live: npt.NDArray[np.bool_],
    config: MetricsConfig,
) -> dict[str, Any]:  # fmt: skip
    """One benchmark's (or the pooled suite's) coverage: the paper's missing share (χ_bench < ε over all d_sae
    concepts), the share firing on no row, and the missing share among concepts live somewhere in the rows
    read, so that a dictionary's dead latents do not count as a benchmark's omissions."""
    missing = chi_bench(act_sum) < config.epsilon
    return {
        "benchmark": name,
        "rows": n,
        "missing_share": float(missing.mean()),
        "never_fires_share": float((fires == 0).mean()),
        "missing_share_of_live": float(missing[live].mean()) if live.any() else float("nan"),
        "missing_bound": float(missing_bound(n)),
    }


def coverage_table(
    sums: GroupSums, counts: FiringCounts, config: MetricsConfig, suite: Sequence[str] = ()
) -> pd.DataFrame:
    """`coverage_row` per group read, and for the `suite`'s benchmarks pooled (SUITE) where given."""
    rows = [
        coverage_row(g, sums.sums[g], counts.fires[i], int(counts.n_rows[i]), sums.live, config)
        for i, g in enumerate(counts.groups)
    ]
    if suite:
        fires, n = counts.pooled(suite)
        rows.append(coverage_row(SUITE, sums.pooled(suite), fires, n, sums.live, config))
    return pd.DataFrame(rows)


def suite_figures(sums: GroupSums, benchmarks: Sequence[str], config: MetricsConfig) -> dict[str, Any]:
    """The run's own suite (references excluded): X_bench's missing share (eq. 3, mean of χ_bench over the
    benchmarks) and its most over-represented concepts."""
    x_bench = chi_bench(np.stack([sums.sums[b] for b in benchmarks])).mean(axis=0)
    order = np.argsort(-x_bench)[:OVER_SHOWN]
    return {
        "benchmarks": list(benchmarks),
        "d_sae": int(x_bench.size),
        "missing_share": float((x_bench < config.epsilon).mean()),
        "missing_concepts": int((x_bench < config.epsilon).sum()),
        "live_concepts": int(sums.live.sum()),
        "over_represented": [{"concept_id": int(c), "x_bench": float(x_bench[c])} for c in order],
    }


def _texts(path: Path, n: int) -> list[str]:
    names = pq.ParquetFile(path).schema_arrow.names
    if "prompt" not in names:
        return [""] * n
    return [t or "" for t in pq.read_table(path, columns=["prompt"]).column("prompt").to_pylist()]


def examples_of(
    acts: SuiteActivations, texts: list[str], concepts: Sequence[int], groups: Sequence[str]
) -> dict[int, list[str]]:
    """Per concept, the reference rows where it is strongest (distinct texts, cut to EXAMPLE_CHARS)."""
    in_ref = np.isin(acts.groups, list(groups))
    out: dict[int, list[str]] = {}
    for c in concepts:
        lo, hi = acts.matrix.indptr[c], acts.matrix.indptr[c + 1]
        rows, vals = acts.matrix.indices[lo:hi], acts.matrix.data[lo:hi]
        keep = in_ref[rows]
        shown: list[str] = []
        for r in rows[keep][np.argsort(-vals[keep])]:
            t = " ".join(texts[r].split())[:EXAMPLE_CHARS]
            if t and t not in shown:
                shown.append(t)
            if len(shown) == EXAMPLES:
                break
        out[int(c)] = shown
    return out


def concept_labels(run: RunDir) -> dict[int, str]:
    """The run's labels (concepts.parquet, as `cg-ray metrics --labels` wrote them), overridden by its
    descriptions where `cg-ray describe` has run."""
    labels: dict[int, str] = {}
    if run.has(S.CONCEPTS_FILE):
        t = pq.read_table(run.file(S.CONCEPTS_FILE))
        if "label" in t.column_names:
            ids = t.column("concept_id").to_pylist()
            labels = {int(c): lab for c, lab in zip(ids, t.column("label").to_pylist(), strict=True) if lab}
    if run.has(S.DESCRIPTIONS_FILE):
        t = pq.read_table(run.file(S.DESCRIPTIONS_FILE), columns=["concept_id", "description"])
        for c, d in zip(t.column("concept_id").to_pylist(), t.column("description").to_pylist(), strict=True):
            if d:
                labels[int(c)] = d
    return labels


def run_scores(run: RunDir, n_read: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.str_]]:
    """Each row read's score and model (the run's rows come first, in file order; the reference files' rows
    are unscored: NaN)."""
    names = pq.ParquetFile(run.rows).schema_arrow.names
    t = pq.read_table(run.rows, columns=[c for c in (S.SCORE, S.MODEL) if c in names])
    scores = np.full(n_read, np.nan)
    models = np.full(n_read, "", dtype=object)
    scores[: t.num_rows] = t.column(S.SCORE).to_numpy(zero_copy_only=False).astype(np.float64)
    named = t.column(S.MODEL).to_pylist() if S.MODEL in names else [None] * t.num_rows
    models[: t.num_rows] = ["(the run's model)" if m is None else m for m in named]
    return scores, models.astype(str)


def weigh_scores(
    run: RunDir,
    acts: SuiteActivations,
    rows: dict[str, RowCoverage],
    sides: dict[str, list[str]],
    clusters: npt.NDArray[np.generic],
    density: float,
) -> dict[str, Reweighting]:
    """Per comparison, each model's score on the reference's mix (reweight.py), where its rows are scored."""
    scores, models = run_scores(run, len(acts.row_ids))
    out = {}
    for name, view in rows.items():
        is_bench = np.isin(acts.groups, sides[name])
        rw = reweight(view.density_ratio, is_bench, view.is_reference, scores, models, clusters, density)
        if rw is not None:
            out[name] = rw
    return out


def compute_scope(req: ScopeRequest, judge_client: J.CompleterFactory | None = None) -> ScopeResult:
    """The comparisons and coverage figures, and the judge's verdicts with `req.judge`: its client is made by
    `judge_client` (default: the endpoint's, `scope.judge.endpoint_completer`) after every benchmark's
    description is found, and checked before the first judge request."""
    run = RunDir(req.run)
    run.require(S.ROWS_FILE)
    for p in req.reference_rows:
        if not Path(p).is_file():
            raise InputError("no such rows file", path=str(p))
    paths = [run.rows, *req.reference_rows]
    refuse_other_readers(run, req.reference_rows)
    read = read_fired(run.rows, req.reference_rows)
    acts, counts, fired, clusters = read.acts, read.counts, read.fired, read.clusters
    targets, refs = _plan(req, acts.group_names())
    if req.judge is not None:
        req.judge.require_descriptions(targets)
    ref_fires, ref_n = counts.pooled(refs)
    ref_name = "+".join(refs)
    config = run_metrics_config(run)
    run_benchmarks = [g for g in counts.groups if not g.startswith("ref:")]
    pooled = [b for b in run_benchmarks if b not in refs]
    sums = GroupSums.of(acts)
    is_ref = np.isin(acts.groups, refs)
    ref_shares = grouped_shares(fired[np.flatnonzero(is_ref)], clusters[is_ref])
    sides = [(b, [b]) for b in targets] + ([(SUITE, pooled)] if req.suite else [])
    comparisons = []
    rows: dict[str, RowCoverage] = {}
    for name, members in sides:
        is_bench = np.isin(acts.groups, members)
        fires, n = counts.pooled(members)
        bench_shares = grouped_shares(fired[np.flatnonzero(is_bench)], clusters[is_bench])
        comparisons.append(
            compare(
                fires, n, ref_fires, ref_n, req.rule, benchmark=name, reference=ref_name,
                bench_shares=bench_shares, ref_shares=ref_shares,
            )
        )  # fmt: skip
        rows[name] = coverage_of_fired(fired, is_bench, is_ref, clusters, UncoveredRule.of(req.rule))
    texts = [t for p in paths for t in _texts(Path(p), pq.ParquetFile(p).metadata.num_rows)]
    include_missing = req.judge is not None and req.judge.include_missing
    themes = {
        c.benchmark: gap_themes(acts, counts.thresholds, c, refs, pooled if c.benchmark == SUITE else None)
        for c in comparisons
    }
    representatives = {b: {t.representative for t in ts} for b, ts in themes.items()}
    shown = sorted(
        {c for cmp in comparisons for c in J.candidates_of(cmp, include_missing)}
    )  # every gap's examples are stored; a judge is asked of each theme's representative
    labels = concept_labels(run)
    examples = examples_of(acts, texts, shown, refs)
    judgements: dict[str, J.BenchmarkJudgement] = {}
    usage = None
    if req.judge is not None:
        client = J.open_judge(req.judge, judge_client)
        try:
            judged = [c for c in comparisons if c.benchmark != SUITE]  # a judge is given each benchmark's intent
            judgements = J.judge_scope(judged, labels, examples, req.judge, client, representatives)
            usage = J.usage_report(client)
        finally:
            J.close(client)
    return ScopeResult(
        comparisons=comparisons,
        thresholds=counts.thresholds,
        coverage=coverage_table(sums, counts, config, pooled if req.suite else ()),
        suite=suite_figures(sums, run_benchmarks, config),
        labels=labels,
        examples=examples,
        judgements=judgements,
        judge_usage=usage,
        themes=themes,
        rows=rows,
        reweighted=weigh_scores(run, acts, rows, dict(sides), clusters, req.rule.density),
        row_ids=list(acts.row_ids),
        texts=texts,
        group_rules=acts.cluster_rules,
    )


def _named(value: object) -> object:
    """A model or SAE named by a catalog name or a local path compares by its last component."""
    return None if value in (None, "", "auto") else Path(str(value)).name


def refuse_other_readers(run: RunDir, reference_rows: Sequence[Path]) -> None:
    """Concept ids of two rows files correspond only when one reader and SAE read both: a reference read by
    another is refused, naming the field that differs (fields only one manifest records are not evidence)."""
    ours = reader_of_run(run.path, (run.read_json_if_present(S.SUMMARY_FILE) or {}).get("rows_file"))
    if not ours.known:
        return
    for path in reference_rows:
        theirs = reader_of_rows(Path(path))
        if not theirs.known:
            continue
        for name, a, b in (
            ("reader model", _named(ours.model), _named(theirs.model)),
            ("layer", ours.layer, theirs.layer),
            ("SAE", _named(ours.sae.spec), _named(theirs.sae.spec)),
            ("SAE weights (sha256)", ours.sae.weights_sha256, theirs.sae.weights_sha256),
            ("reader factory", ours.factory, theirs.factory),
        ):
            if a is not None and b is not None and a != b:
                raise InputError(
                    f"read by another reader than the run: {name} {b!r} (the run's: {a!r}); a scope compares rows "
                    "read by one reader — read the reference with the run's (cg-ray extract --reader-model/--sae)",
                    path=str(path),
                )


def run_metrics_config(run: RunDir) -> MetricsConfig:
    """The metrics settings the run recorded (summary.json's `config`), the defaults where it records none."""
    summary = run.read_json_if_present(S.SUMMARY_FILE)
    recorded = (summary or {}).get("config")
    return MetricsConfig.model_validate(recorded) if isinstance(recorded, dict) else MetricsConfig()
